"""A tiny stdio MCP server for benchmarks: standard library only, so 20 of them start on
2 cores without measuring the interpreter's import time instead of Keen.

Usage: ``python tiny_stdio.py [--delay SECONDS] [--hang] [--name NAME] [--sized]``

- ``--delay``: sleep this long before answering ``initialize`` (a server's own start-up
  work, e.g. ``npx`` resolving a package), so the benchmark can tell parallel from serial.
- ``--hang``: read requests and never answer (a stuck server); exits when stdin closes.
- ``--sized``: list a second tool, ``text_of_size(bytes)``, whose result is a text of that
  many UTF-8 bytes (one line of JSON-RPC as large as the result: ``bench/large_result.py``).

Speaks newline-delimited JSON-RPC 2.0 (MCP stdio transport, 2025-11-25): ``initialize``,
``notifications/initialized``, ``ping``, ``tools/list`` (one tool, ``echo(text)``, and
``text_of_size`` with ``--sized``) and ``tools/call``; anything else with an id gets ``-32601``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

__all__ = ["main"]

HANDSHAKE_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
ECHO = {
    "name": "echo",
    "description": "Return the text unchanged.",
    "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
    "annotations": {"readOnlyHint": True},
}
SIZED = {
    "name": "text_of_size",
    "description": "Return a text of the given number of UTF-8 bytes.",
    "inputSchema": {"type": "object", "properties": {"bytes": {"type": "integer"}}, "required": ["bytes"]},
    "annotations": {"readOnlyHint": True},
}
# Characters of one, two, three and four UTF-8 bytes, so a large result's reads end mid-character.
_PATTERN = "caf\u00e9 \u20ac \U0001d11e ok "


def _text_of_size(size: int) -> str:
    encoded = (_PATTERN * (size // len(_PATTERN.encode()) + 1)).encode()[: max(size, 0)]
    return encoded.decode("utf-8", "ignore")


def _answer(request: dict[str, Any], name: str, delay: float, sized: bool = False) -> dict[str, Any] | None:
    method, params = request.get("method"), request.get("params") or {}
    if "id" not in request:
        return None  # a notification
    if method == "initialize":
        time.sleep(delay)
        asked = params.get("protocolVersion")
        version = asked if asked in HANDSHAKE_VERSIONS else HANDSHAKE_VERSIONS[-1]
        result: dict[str, Any] = {
            "protocolVersion": version,
            "capabilities": {"tools": {}},
            "serverInfo": {"name": name, "version": "1.0.0"},
        }
    elif method == "ping":
        result = {}
    elif method == "tools/list":
        result = {"tools": [ECHO, SIZED] if sized else [ECHO]}
    elif method == "tools/call" and params.get("name") == "echo":
        text = str((params.get("arguments") or {}).get("text", ""))
        result = {"content": [{"type": "text", "text": text}], "isError": False}
    elif method == "tools/call" and sized and params.get("name") == "text_of_size":
        size = int((params.get("arguments") or {}).get("bytes", 0))
        result = {"content": [{"type": "text", "text": _text_of_size(size)}], "isError": False}
    else:
        return {"jsonrpc": "2.0", "id": request["id"], "error": {"code": -32601, "message": f"no {method}"}}
    return {"jsonrpc": "2.0", "id": request["id"], "result": result}


def main() -> None:
    parser = argparse.ArgumentParser(description="A tiny stdio MCP server for benchmarks.")
    parser.add_argument("--delay", type=float, default=0.0)
    parser.add_argument("--hang", action="store_true")
    parser.add_argument("--name", default="tiny")
    parser.add_argument("--sized", action="store_true")
    args = parser.parse_args()
    for line in sys.stdin:
        if args.hang or not line.strip():
            continue
        reply = _answer(json.loads(line), args.name, args.delay, args.sized)
        if reply is not None:
            sys.stdout.buffer.write(json.dumps(reply, ensure_ascii=False).encode() + b"\n")
            sys.stdout.buffer.flush()


if __name__ == "__main__":
    main()
