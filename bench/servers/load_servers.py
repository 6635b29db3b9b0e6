"""Servers for ``bench/serve_load.py``, each on 127.0.0.1 only.

``python load_servers.py upstream PORT``: a FastMCP server with ``echo(text)`` over Streamable HTTP.
``python load_servers.py proxy PORT URL``: FastMCP's ``create_proxy(URL)`` over Streamable HTTP.
"""

from __future__ import annotations

import sys

import uvicorn
from fastmcp import FastMCP
from fastmcp.server import create_proxy


def upstream() -> FastMCP:
    server = FastMCP("load-upstream")

    @server.tool(description="Return the text unchanged.")
    def echo(text: str) -> str:
        return text

    return server


def main() -> None:
    kind, port = sys.argv[1], int(sys.argv[2])
    app = upstream() if kind == "upstream" else create_proxy(sys.argv[3], name="fastmcp-proxy")
    uvicorn.run(app.http_app(path="/mcp"), host="127.0.0.1", port=port, log_level="warning", access_log=False)


if __name__ == "__main__":
    main()
