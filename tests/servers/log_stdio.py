"""An MCP SDK server (stdio) whose one tool logs at four levels during the call.

Usage: ``python log_stdio.py``. ``log_each(word)`` sends ``notifications/message`` at
``debug``, ``info``, ``warning`` and ``error`` (data ``"<level> <word>"``, logger
``"logs"``) before it answers ``logged <word>``. It serves both protocol eras: in the
2026-07-28 era a log message reaches only a request that asked for its level (``_meta``).
``flood(count, size, level)`` sends ``count`` log messages at ``level`` (logger ``"flood"``),
each ``size`` characters of data that start with a bearer token and a right-to-left override,
then answers ``sent <count>``: a bounded loop, however large ``count``.
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


FLOOD_HEAD = "Bearer flood-secret-0123456789 \u202e "
"""How each of ``flood``'s messages starts: a token Keen's redactor blanks, an invisible character."""


@server.tool(description="Send count log messages of size characters each at level, then answer.")
async def flood(count: int, size: int, ctx: Context, level: str = "info") -> str:
    filler = "x" * max(0, size - len(FLOOD_HEAD) - 11)
    for i in range(count):
        await ctx.log(level, f"{FLOOD_HEAD}{i:>10} {filler}", logger_name="flood")  # type: ignore[arg-type]
    return f"sent {count}"


if __name__ == "__main__":
    server.run("stdio")
