"""An MCP SDK server (stdio) whose tool asks the user for their name, in either protocol era.

Usage: ``python ask_stdio.py``. ``greet()`` asks (``elicitation/create``, form mode: a
``name``) and answers ``hello <name>``. In the 2026-07-28 era the SDK's ``Resolve`` asks
through the call's ``InputRequiredResult`` and resumes on the client's retry; in the
2025-11-25 era it sends a server-to-client request mid-call.
"""

from __future__ import annotations

from typing import Annotated

from mcp.server.mcpserver import Elicit, MCPServer, Resolve
from pydantic import BaseModel

server = MCPServer("ask")


class Person(BaseModel):
    name: str


def ask_name() -> Elicit[Person]:
    return Elicit("What is your name?", Person)


@server.tool(description="Ask the user's name and greet them.")
async def greet(person: Annotated[Person, Resolve(ask_name)]) -> str:
    return f"hello {person.name}"


if __name__ == "__main__":
    server.run("stdio")
