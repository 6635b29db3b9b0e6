"""A raw JSON-RPC stdio MCP server that reads its stdin steadily but slowly: 4 KB every
10 ms (about 400 KB/s). Its one tool, ``size``, answers the length of its ``text``.

For the test that a slow reader is not taken for a stalled one: it makes progress on a
message larger than the pipe for longer than its ``timeouts.call_tool``.
"""

from __future__ import annotations

import json
import os
import sys
import time

_TOOL = {
    "name": "size",
    "description": "The length of a text.",
    "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}},
}


def _send(message: dict[str, object]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def _answer(message: dict[str, object]) -> None:
    rid, method = message.get("id"), message.get("method")
    if rid is None:
        return
    params = message.get("params") or {}
    assert isinstance(params, dict)
    if method == "initialize":
        result: dict[str, object] = {
            "protocolVersion": params["protocolVersion"],
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "slow", "version": "1"},
        }
    elif method == "tools/list":
        result = {"tools": [_TOOL]}
    elif method == "tools/call":
        text = (params.get("arguments") or {}).get("text", "")
        result = {"content": [{"type": "text", "text": str(len(text))}]}
    else:
        result = {}
    _send({"jsonrpc": "2.0", "id": rid, "result": result})


def main() -> None:
    pending = b""
    while chunk := os.read(0, 4096):
        time.sleep(0.01)
        pending += chunk
        while b"\n" in pending:
            line, pending = pending.split(b"\n", 1)
            if line.strip():
                _answer(json.loads(line))


if __name__ == "__main__":
    main()
