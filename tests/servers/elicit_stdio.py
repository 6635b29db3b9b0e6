"""A stdio MCP server whose tool asks the user for input mid-call (``elicitation/create``, form mode).

Tool ``book_table(restaurant)``: asks for a party size and a time, with defaults
(``party_size`` 2, ``time`` "19:30", SEP-1034), and answers with what it got:
``booked <restaurant> for <n> at <time>``, ``declined``, ``cancelled``, or
``no elicitation: <error>`` when the client does not support elicitation.
Tool ``sign_in(url)``: asks the user to open ``url`` (URL mode, SEP-1036) and answers with
the action (``accept``, ``decline``, ``cancel``). Tool ``sign_in_and_report(url)``: the same page
(``elicitationId`` "sign-in-3"), then, whatever the answer, reports the out-of-band
interaction finished (``notifications/elicitation/complete``) for an id it never asked
under ("sign-in-0"), and twice for "sign-in-3". Tool ``needs_sign_in(url)``: fails with
``-32042 URL elicitation required`` naming ``url``, as a server does that cannot go on
until the user has been to a page.

It serves the 2025-11-25 handshake era only (``handshake_only.py``): ``ctx.elicit`` sends a
server-to-client request, which the SDK's server refuses in the 2026-07-28 era ("no
back-channel"); there a server asks through an ``InputRequiredResult`` instead, which
Keen answers with the same elicitation callback (``keen.mcp.calls._input``).
"""

from __future__ import annotations

from mcp.server.mcpserver import Context, MCPServer
from mcp.shared.exceptions import UrlElicitationRequiredError
from mcp_types import ElicitRequestURLParams, ToolAnnotations
from pydantic import BaseModel, Field


class Booking(BaseModel):
    party_size: int = Field(default=2, description="How many people")
    time: str = Field(default="19:30", description="When (HH:MM)")


def build() -> MCPServer:
    server = MCPServer("elicit-stdio", version="1.0.0")

    @server.tool(
        description="Book a table at a restaurant (asks the user for the party size and time).",
        annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False),
    )
    async def book_table(restaurant: str, ctx: Context) -> str:
        try:
            answer = await ctx.elicit(f"Booking {restaurant}: how many people, and when?", Booking)
        except Exception as exc:
            return f"no elicitation: {exc}"
        if answer.action == "accept":
            return f"booked {restaurant} for {answer.data.party_size} at {answer.data.time}"
        return answer.action

    @server.tool(description="Connect the user's account (asks the user to open a sign-in page).")
    async def sign_in(url: str, ctx: Context) -> str:
        answer = await ctx.elicit_url("Sign in to Example Cloud to connect your account.", url, "sign-in-1")
        return answer.action

    @server.tool(description="Connect the user's account and report when the sign-in page is done.")
    async def sign_in_and_report(url: str, ctx: Context) -> str:
        answer = await ctx.elicit_url("Sign in to Example Cloud to connect your account.", url, "sign-in-3")
        for elicitation_id in ("sign-in-0", "sign-in-3", "sign-in-3"):
            await ctx.session.send_elicit_complete(elicitation_id, related_request_id=ctx.request_id)
        return answer.action

    @server.tool(description="List the user's files (fails until the user has signed in).")
    async def needs_sign_in(url: str) -> str:
        raise UrlElicitationRequiredError(
            [ElicitRequestURLParams(message="Sign in to Example Cloud first.", url=url, elicitation_id="s-2")]
        )

    return server


if __name__ == "__main__":
    import anyio
    from handshake_only import serve_stdio

    anyio.run(serve_stdio, build())
