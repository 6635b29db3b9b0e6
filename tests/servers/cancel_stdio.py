"""An MCP SDK server (stdio) whose one tool waits until it is cancelled and says so in a file.

Usage: ``python cancel_stdio.py``. ``wait(path)`` writes ``started`` to ``path``, then
waits (a minute at most); when the call is cancelled (the client's
``notifications/cancelled``) it writes ``cancelled`` there before it unwinds.
"""

from __future__ import annotations

from pathlib import Path

import anyio
from mcp.server.mcpserver import MCPServer

server = MCPServer("cancel")


def _mark(path: str, text: str) -> None:
    # A few bytes to a local file: no need to leave the event loop for it.
    Path(path).write_text(text)


@server.tool(description="Wait until cancelled; write started, then cancelled, to the file at path.")
async def wait(path: str) -> str:
    _mark(path, "started")
    try:
        await anyio.sleep(60)
    except anyio.get_cancelled_exc_class():
        _mark(path, "cancelled")
        raise
    return "done"


if __name__ == "__main__":
    server.run("stdio")
