"""Servers for ``bench/serve_load.py``, each on 127.0.0.1 only.

``python load_servers.py upstream PORT``: a FastMCP server over Streamable HTTP with ``echo(text)``
and ``progress_echo(text, steps)``, which sends ``steps`` progress notifications (with the
caller's progress token) before returning ``text``.
``python load_servers.py proxy PORT URL``: FastMCP's ``create_proxy(URL)`` over Streamable HTTP.
"""

from __future__ import annotations

import sys

import uvicorn
from fastmcp import Context, FastMCP
from fastmcp.server import create_proxy


def upstream() -> FastMCP:
    server = FastMCP("load-upstream")

    @server.tool(description="Return the text unchanged.")
    def echo(text: str) -> str:
        return text

    @server.tool(description="Report progress `steps` times, then return the text unchanged.")
    async def progress_echo(text: str, steps: int, ctx: Context) -> str:
        for step in range(1, steps + 1):
            await ctx.report_progress(step, steps, f"step {step}")
        return text

    return server


def main() -> None:
    kind, port = sys.argv[1], int(sys.argv[2])
    app = upstream() if kind == "upstream" else create_proxy(sys.argv[3], name="fastmcp-proxy")
    uvicorn.run(app.http_app(path="/mcp"), host="127.0.0.1", port=port, log_level="warning", access_log=False)


if __name__ == "__main__":
    main()
