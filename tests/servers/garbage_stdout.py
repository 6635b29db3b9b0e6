"""A stdio server that writes lines that are not JSON-RPC on stdout.

Usage: ``python garbage_stdout.py [--then-serve]``

Default: answers every line it reads with ``this is not json <n>`` and never a valid
message, so ``initialize`` never completes. ``--then-serve``: first prints three garbage
lines (like a server that logs to stdout by mistake), then serves a valid MCP server
named ``garbage-then-serve`` with one tool, ``echo(text)``.
"""

from __future__ import annotations

import sys


def _garbage_forever() -> None:
    for count, _line in enumerate(sys.stdin, start=1):
        sys.stdout.write(f"this is not json {count}\n")
        sys.stdout.flush()


def _garbage_then_serve() -> None:
    from mcp.server.mcpserver import MCPServer

    for count in range(1, 4):
        sys.stdout.write(f"startup banner {count}: not json\n")
    sys.stdout.flush()
    server = MCPServer("garbage-then-serve")

    @server.tool(description="Return the text unchanged.")
    def echo(text: str) -> str:
        return text

    server.run("stdio")


if __name__ == "__main__":
    if "--then-serve" in sys.argv:
        _garbage_then_serve()
    else:
        _garbage_forever()
