"""A tiny stdio MCP server for benchmarks: standard library only, so 20 of them start on
2 cores without measuring the interpreter's import time instead of Keen.

Usage: ``python tiny_stdio.py [--delay SECONDS] [--hang] [--name NAME]``

- ``--delay``: sleep this long before answering ``initialize`` (a server's own start-up
  work, e.g. ``npx`` resolving a package), so the benchmark can tell parallel from serial.
- ``--hang``: read requests and never answer (a stuck server); exits when stdin closes.

Speaks newline-delimited JSON-RPC 2.0 (MCP stdio transport, 2025-11-25): ``initialize``,
``notifications/initialized``, ``ping``, ``tools/list`` (one tool, ``echo(text)``) and
``tools/call``; anything else with an id gets ``-32601``.
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


def _answer(request: dict[str, Any], name: str, delay: float) -> dict[str, Any] | None:
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
        result = {"tools": [ECHO]}
    elif method == "tools/call" and params.get("name") == "echo":
        text = str((params.get("arguments") or {}).get("text", ""))
        result = {"content": [{"type": "text", "text": text}], "isError": False}
    else:
        return {"jsonrpc": "2.0", "id": request["id"], "error": {"code": -32601, "message": f"no {method}"}}
    return {"jsonrpc": "2.0", "id": request["id"], "result": result}


def main() -> None:
    parser = argparse.ArgumentParser(description="A tiny stdio MCP server for benchmarks.")
    parser.add_argument("--delay", type=float, default=0.0)
    parser.add_argument("--hang", action="store_true")
    parser.add_argument("--name", default="tiny")
    args = parser.parse_args()
    for line in sys.stdin:
        if args.hang or not line.strip():
            continue
        reply = _answer(json.loads(line), args.name, args.delay)
        if reply is not None:
            sys.stdout.write(json.dumps(reply) + "\n")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
