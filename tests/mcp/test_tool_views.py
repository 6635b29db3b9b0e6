"""``keen.mcp.listing.views.ToolViews``: what ``forget`` clears, on a real server's listing.

The Manager calls ``forget`` when it drops a server (gone from configs.json, or its entry
invalid now); a server of that name that comes back starts from nothing, whatever objects
it hands over.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pytest
from mcp.server.mcpserver import MCPServer

from keen.mcp import Manager, Tool, in_memory_transport
from keen.mcp.config.servers import HttpServerConfig, StdioServerConfig
from keen.mcp.listing.validation import ArgumentValidator
from keen.mcp.listing.views import ToolViews
from keen.trust import PinGuard
from keen.trust.pins import PinStore

pytestmark = pytest.mark.anyio

CONFIG = {"version": 1, "servers": {"docs": {"command": "unused", "pinning": "quarantine"}}}


def _server() -> MCPServer:
    server = MCPServer("docs")

    @server.tool(description="Search the docs.")
    def search(q: str) -> str:
        return q

    return server


@dataclass
class Listed:
    """A server as ToolViews reads it (``keen.mcp.listing.views.ListedServer``): the listing a
    Manager got from the real server, held still so only ``forget`` can move an answer."""

    name: str
    config: HttpServerConfig | StdioServerConfig
    tools: list[Tool]
    tools_by_name: dict[str, Tool] = field(init=False)
    validator: ArgumentValidator = field(init=False)

    def __post_init__(self) -> None:
        self.tools_by_name = {t.name: t for t in self.tools}
        self.validator = ArgumentValidator(self.name)


async def test_forget_makes_every_answer_of_that_server_again(keen_home: Path) -> None:
    async with Manager(config=CONFIG, transports={"docs": in_memory_transport(_server())}, trust=None) as m:
        assert await m.wait_ready(30)
        listed = Listed("docs", m.config.servers["docs"], list(m.live_tools("docs")))
    views = ToolViews(PinGuard(PinStore(keen_home / "mcp" / "pins")))

    live, view, shown = views.live(listed), views.view(listed), views.shown_by_name(listed)
    assert views.check(listed, "search", {"q": "x"}).name == "search"
    assert views.live(listed) is live and views.view(listed) is view and views.shown_by_name(listed) is shown

    views.forget("other")  # another server's forget leaves this one's answers
    assert views.live(listed) is live and views.view(listed) is view and views.shown_by_name(listed) is shown

    views.forget("docs")
    again, shown_again = views.live(listed), views.shown_by_name(listed)
    assert again is not live and again == live
    assert views.view(listed) is not view  # the view is made again, not only its mapping
    assert shown_again is not shown and dict(shown_again) == dict(shown)


async def test_a_pins_folder_that_cannot_be_looked_at_holds_only_servers_that_read_pins(
    keen_home: Path,
) -> None:
    """``$KEEN_HOME/mcp/pins`` is a file: the pinned server's view holds every tool with the
    error, the server with pinning off is listed and called as usual, and once the folder is
    fixed the pinned one is shown again (the held view was not kept)."""
    config = {
        "version": 1,
        "servers": {
            "docs": {"command": "unused", "pinning": "quarantine"},
            "open": {"command": "unused", "pinning": "off"},
        },
    }
    pins = keen_home / "mcp" / "pins"
    pins.parent.mkdir(parents=True, exist_ok=True)
    pins.write_text("not a folder")
    transports = {"docs": in_memory_transport(_server()), "open": in_memory_transport(_server())}
    async with Manager(config=config, transports=transports, trust=PinGuard(PinStore(pins))) as m:
        assert await m.wait_ready(30)
        assert [t.name for t in m.list_tools("open")] == ["search"]
        assert m.view("open").error == ""
        result = await m.call_tool("open", "search", {"q": "found"})
        assert not result.is_error and result.text == "found", result

        held = m.view("docs")
        assert m.list_tools("docs") == [] and "cannot look at pin file" in held.error, held

        pins.unlink()
        pins.mkdir()
        assert [t.name for t in m.list_tools("docs")] == ["search"]
        assert m.view("docs").error == ""
