"""search_tools names identical copies of a hit on other servers (a search shows such a
group once) and makes them callable too, so the model may call any. Against FastMCP
servers in memory: two serving the same tool, one a different tool of the same name."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest
from fastmcp import FastMCP

from keen.capabilities import Catalog
from keen.gateway import Gateway
from keen.harness import Harness
from keen.mcp import Manager, ServerState, in_memory_transport
from keen.trust import PinGuard

pytestmark = pytest.mark.anyio

IN_MEMORY = {"transport": "stdio", "command": "unused-in-memory"}


def notes_server(name: str, description: str) -> FastMCP:
    server = FastMCP(name)

    @server.tool(description=description)
    def add_note(title: str, body: str) -> str:
        return f"{name} saved {title}"

    return server


@pytest.fixture
async def manager(keen_home: Path, write_config: Callable[..., Path]) -> AsyncIterator[Manager]:
    same = "Save a note with a title and a body."
    servers = {
        "notes": notes_server("notes", same),
        "notes-mirror": notes_server("notes-mirror", same),
        "journal": notes_server("journal", "Append an entry to the journal."),
    }
    config = write_config(dict.fromkeys(servers, IN_MEMORY))
    transports = {n: in_memory_transport(s._mcp_server) for n, s in servers.items()}
    async with Manager(config, transports=transports, trust=PinGuard()) as m:
        assert await m.wait_ready(60)
        assert all(s.state is ServerState.CONNECTED for s in m.servers()), [s.last_error for s in m.servers()]
        yield m


async def test_a_hit_names_its_copies_and_each_copy_becomes_callable(
    manager: Manager, tmp_path: Path
) -> None:
    h = Harness(
        lambda: Catalog.from_manager(manager, cache=False),
        Gateway(manager),
        mode="ask",
        approve=lambda _: True,
        workspace=tmp_path,
    )
    h.begin_step()
    found = await h.call("search_tools", {"query": "save a note with a title", "limit": 5})
    lines = [line for line in found.text.splitlines() if "add_note" in line]
    shown = {line.split(" ", 2)[1] for line in lines}
    # One line for the identical pair, one for the journal's different add_note.
    assert len(lines) == 2 and "mcp__journal__add_note" in shown, found.text
    pair = next(line for line in lines if "journal" not in line)
    other = "notes-mirror" if "mcp__notes__add_note" in pair else "notes"
    assert f"callable next step; also on servers {other})" in pair, pair
    assert "also on" not in next(line for line in lines if "journal" in line)
    offered = {t["name"] for t in h.begin_step()}
    assert {"mcp__notes__add_note", "mcp__notes-mirror__add_note"} <= offered
    for server in ("notes", "notes-mirror"):
        done = await h.call(
            "call_mcp_tool", {"server": server, "tool": "add_note", "arguments": {"title": "t", "body": "b"}}
        )
        assert not done.is_error and done.text == f"{server} saved t", done.text
    h.close()
