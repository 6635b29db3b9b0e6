"""A Streamable HTTP MCP server on 127.0.0.1 with ``text_of_size``, for ``bench/large_result.py``.

Usage: ``python sized_http.py PORT_FILE [--json] [--gzip]``: serves on a free loopback port,
writes the port to ``PORT_FILE`` once it listens (connections wait in its backlog until
uvicorn accepts them), and serves until killed.

The MCP SDK's own server (``MCPServer``), in the 2025-11-25 handshake era only: it answers
``server/discover`` with -32601, as the npm reference servers do, so a client falls back to
``initialize`` and each answer comes as a server-sent event; with ``--json``, as one JSON
body (``json_response``), which ``--gzip`` compresses (Starlette's ``GZipMiddleware``).
``text_of_size(bytes)`` answers a text of that many UTF-8 bytes of characters of one to four
bytes, as ``tiny_stdio.py --sized`` does (its result also carries the text again as
``structuredContent``, as the SDK's tools do).
"""

from __future__ import annotations

import argparse
import socket
import sys
from pathlib import Path
from typing import Any

import uvicorn
from mcp.server.mcpserver import MCPServer
from starlette.middleware.gzip import GZipMiddleware

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))
from servers.handshake_only import handshake_only_http

_PATTERN = "caf\u00e9 \u20ac \U0001d11e ok "


def _text_of_size(size: int) -> str:
    encoded = (_PATTERN * (size // len(_PATTERN.encode()) + 1)).encode()[: max(size, 0)]
    return encoded.decode("utf-8", "ignore")


def main() -> None:
    parser = argparse.ArgumentParser(description="A Streamable HTTP MCP server with text_of_size.")
    parser.add_argument("port_file")
    parser.add_argument("--json", action="store_true", help="answer with JSON bodies, not server-sent events")
    parser.add_argument(
        "--gzip", action="store_true", help="compress the answers (Starlette's GZipMiddleware)"
    )
    args = parser.parse_args()
    server = MCPServer("sized-http", log_level="WARNING")

    @server.tool(description="Return a text of the given number of UTF-8 bytes.")
    def text_of_size(bytes: int) -> str:  # the tool's argument, as tiny_stdio.py names it
        return _text_of_size(bytes)

    app: Any = server.streamable_http_app(json_response=args.json)
    if args.gzip:
        app = GZipMiddleware(app, minimum_size=1000)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    # Connections wait in the socket's backlog until uvicorn accepts them: the port can be
    # told before it serves.
    Path(args.port_file).write_text(str(sock.getsockname()[1]))
    config = uvicorn.Config(handshake_only_http(app), log_level="warning", lifespan="on", ws="none")
    uvicorn.Server(config).run(sockets=[sock])


if __name__ == "__main__":
    main()
