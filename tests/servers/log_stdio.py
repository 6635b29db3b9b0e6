"""An MCP SDK server (stdio) whose one tool logs at four levels during the call.

Usage: ``python log_stdio.py``. ``log_each(word)`` sends ``notifications/message`` at
``debug``, ``info``, ``warning`` and ``error`` (data ``"<level> <word>"``, logger
``"logs"``) before it answers ``logged <word>``. It serves both protocol eras: in the
2026-07-28 era a log message reaches only a request that asked for its level (``_meta``).
"""

from __future__ import annotations

import warnings

from mcp.server.mcpserver import Context, MCPServer
from mcp.shared.exceptions import MCPDeprecationWarning

warnings.simplefilter("ignore", MCPDeprecationWarning)

server = MCPServer("logs")


@server.tool(description="Log one message at each of debug, info, warning and error, then answer.")
async def log_each(word: str, ctx: Context) -> str:
    for level in ("debug", "info", "warning", "error"):
        await ctx.log(level, f"{level} {word}", logger_name="logs")
    return f"logged {word}"


if __name__ == "__main__":
    server.run("stdio")
