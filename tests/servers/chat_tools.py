"""A stdio FastMCP server for the ``keen chat`` REPL tests.

Usage: ``python chat_tools.py``

Tools: ``note(text)`` (not read-only, so ask mode asks before each call; returns
``noted: <text>`` and appends the text to ``$CHAT_TOOLS_LOG`` when set), ``slow(seconds)``
(read-only; sleeps, for Ctrl-C tests), ``book_table()`` (read-only; asks the user through
``elicitation/create`` for a form with defaults and returns what came back),
``connect_account()`` (read-only; asks the user to open a sign-in page, URL mode, and
returns the action), ``crash()`` (read-only; the process exits mid-call).

It serves the 2025-11-25 handshake era only (``handshake_only.py``): ``ctx.elicit`` sends a
server-to-client request, which the SDK refuses in the 2026-07-28 era Keen would otherwise
connect in.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from typing import Literal

import anyio
from fastmcp import Context, FastMCP

server = FastMCP("chat-tools")


@dataclass
class Booking:
    name: str = "Ada"
    party: int = 2
    outdoor: bool = False
    time: Literal["18:00", "20:00"] = "20:00"


@server.tool(annotations={"readOnlyHint": False, "destructiveHint": False})
def note(text: str) -> str:
    """Write a note down."""
    log = os.environ.get("CHAT_TOOLS_LOG")
    if log:
        with open(log, "a", encoding="utf-8") as handle:
            handle.write(text + "\n")
    return f"noted: {text}"


@server.tool(annotations={"readOnlyHint": True})
async def slow(seconds: float) -> str:
    """Wait a number of seconds, then say so."""
    await anyio.sleep(seconds)
    return f"slept {seconds:g} s"


@server.tool(annotations={"readOnlyHint": True})
def crash() -> str:
    """Stop the server at once, in the middle of the call."""
    sys.stderr.write("fatal: crash called\n")
    sys.stderr.flush()
    os._exit(1)


@server.tool(annotations={"readOnlyHint": True})
async def book_table(ctx: Context) -> str:
    """Book a table, asking the user for the details."""
    answer = await ctx.elicit("Details for the booking?", response_type=Booking)
    if answer.action != "accept":
        return f"booking {answer.action}"
    data = answer.data
    return f"booked: name={data.name} party={data.party} outdoor={data.outdoor} time={data.time}"


@server.tool(annotations={"readOnlyHint": True})
async def connect_account(ctx: Context) -> str:
    """Connect the user's account, asking them to open a sign-in page."""
    from mcp.server.elicitation import elicit_url

    answer = await elicit_url(
        ctx.session,
        "Sign in to Example Cloud to connect your account.",
        "https://auth.example.com/connect?state=abc123",
        "connect-1",
        related_request_id=ctx.request_id,
    )
    if answer.action == "accept":  # the person finished there (at once, in this test server)
        await ctx.session.send_elicit_complete("connect-1", related_request_id=ctx.request_id)
    return f"connect {answer.action}"


async def _main() -> None:
    from fastmcp.server.context import reset_transport, set_transport
    from handshake_only import serve_stdio
    from mcp.server.lowlevel.server import NotificationOptions

    token = set_transport("stdio")
    try:
        async with server._lifespan_manager():  # pyright: ignore[reportPrivateUsage]
            lowlevel = server._mcp_server  # pyright: ignore[reportPrivateUsage]
            options = lowlevel.create_initialization_options(
                notification_options=NotificationOptions(tools_changed=True)
            )
            await serve_stdio(lowlevel, options=options)
    finally:
        reset_transport(token)


if __name__ == "__main__":
    anyio.run(_main)
