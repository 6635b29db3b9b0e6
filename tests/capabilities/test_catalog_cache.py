"""The harness's catalog is reused while nothing changed and rebuilt at the next turn when
something did: a SKILL.md edited (also within one timestamp tick), a config.json toggle, a
skill added or removed, a server's tool list changed and its generated skill swapped.

Real files in a private KEEN_HOME, a real FastMCP server over the SDK's in-memory transport
(the runtime's live refresh regenerates its skill), and the agent's system prompt, which
reads the same cached discovery. No timing is asserted (``bench/turn_overhead.py`` prints it).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from helpers.changing import wait_until
from helpers.http_servers import make_basic_server, make_echo_server
from helpers.skills import settle, write_skill
from keen.agent import Agent
from keen.agent.providers.scripted import ScriptedModel
from keen.capabilities import Catalog, capability_id
from keen.capabilities.catalog_cache import CatalogCache
from keen.harness import Harness
from keen.mcp import Manager, in_memory_transport
from keen.runtime import Runtime, open_runtime
from keen.skills import SkillsConfig
from keen.trust import PinGuard
from keen.trust.pins import trust

pytestmark = pytest.mark.anyio

IN_MEMORY = {"transport": "stdio", "command": "unused-in-memory"}


def index(harness: Harness) -> str:
    harness.begin_step()
    return harness.skill_index()


@asynccontextmanager
async def session(keen_home: Path, write_config: Callable[[dict[str, Any]], Path]) -> AsyncIterator[Runtime]:
    path = write_config({"basic": IN_MEMORY})
    server = make_basic_server()
    manager = Manager(path, transports={"basic": in_memory_transport(server._mcp_server)}, trust=PinGuard())
    async with open_runtime(manager=manager, wait=30, sync=True) as rt:
        rt.test_server = server  # type: ignore[attr-defined]
        yield rt


async def test_unchanged_turns_reuse_one_catalog_and_one_scan(
    keen_home: Path, write_config: Callable[[dict[str, Any]], Path]
) -> None:
    write_skill(keen_home / "skills" / "notes", "House rules for the docs folder.")
    async with session(keen_home, write_config) as rt:
        harness = rt.harness(mode="auto", workspace=keen_home)
        source = harness.catalog_source
        assert isinstance(source, CatalogCache)
        settle()
        harness.begin_step()
        first, scans = harness.catalog, rt.skills.scans
        for _ in range(3):
            harness.begin_step()
            assert harness.catalog is first
        assert rt.skills.scans == scans and source.reuses >= 3
        assert capability_id("tool", "echo", "basic") in first
        assert "- notes: House rules for the docs folder." in harness.skill_index()
        harness.close()


async def test_skill_edits_toggles_additions_and_removals_show_at_the_next_turn(
    keen_home: Path, write_config: Callable[[dict[str, Any]], Path]
) -> None:
    root = keen_home / "skills"
    notes = write_skill(root / "notes", "House rules for the docs folder.")
    async with session(keen_home, write_config) as rt:
        harness = rt.harness(mode="auto", workspace=keen_home)
        assert "docs folder" in index(harness)
        # Same size, written within the same timestamp tick as the first version: the racy
        # window makes the cache read it again rather than trust an unchanged stat.
        notes.write_text(notes.read_text().replace("docs", "wiki"), encoding="utf-8")
        assert "- notes: House rules for the wiki folder." in index(harness)
        settle()
        assert "wiki folder" in index(harness)
        notes.write_text(notes.read_text().replace("wiki", "blog"), encoding="utf-8")  # same size again
        assert "- notes: House rules for the blog folder." in index(harness)

        # An editor's save: a new file renamed over the old one.
        settle()
        fresh = notes.with_name("SKILL.md.swp")
        fresh.write_text("---\nname: notes\ndescription: Rules for the blog, saved.\n---\n", encoding="utf-8")
        os.replace(fresh, notes)
        assert "- notes: Rules for the blog, saved." in index(harness)

        settle()
        with SkillsConfig.edit(root / "config.json") as config:
            config.set_enabled("notes", False)
        assert "notes" not in index(harness)
        settle()
        with SkillsConfig.edit(root / "config.json") as config:
            config.set_enabled("notes", True)
        assert "notes" in index(harness)

        settle()
        write_skill(root / "review", "How to review a pull request here.")
        assert "- review: How to review a pull request here." in index(harness)
        settle()
        shutil.rmtree(root / "notes")
        shown = index(harness)
        assert "notes" not in shown and "review" in shown
        harness.close()


async def test_a_tool_list_change_and_the_swapped_skill_show_at_the_next_turn(
    keen_home: Path, write_config: Callable[[dict[str, Any]], Path], tmp_path: Path
) -> None:
    script = tmp_path / "script.jsonl"
    script.write_text("")
    async with session(keen_home, write_config) as rt:
        agent = Agent(rt, ScriptedModel(script), mode="auto", workspace=keen_home)
        harness = agent.harness
        link = keen_home / "skills" / "mcp:basic"
        before = link.resolve()
        settle()
        harness.begin_step()
        prompt = agent.system_prompt([])
        assert "(7)." in prompt  # the mcp:basic catalog line counts 7 tools
        catalog = harness.catalog
        assert catalog is not None and capability_id("tool", "weather", "basic") not in catalog
        settle()

        def weather(city: str) -> str:
            return f"sunny in {city}"

        rt.test_server.tool(weather, name="weather", description="Weather for a city.")  # type: ignore[attr-defined]
        await rt.manager.refresh_tools("basic")
        # The tool is in the Manager's list at once: the next turn's catalog has it.
        harness.begin_step()
        assert harness.catalog is not catalog
        assert capability_id("tool", "weather", "basic") in harness.catalog
        # The live refresh swaps the generated skill (a new versioned dir behind the link);
        # the next system prompt reads the new SKILL.md.
        await wait_until(lambda: link.resolve() != before, "the regenerated mcp:basic skill")
        assert "(8)." in agent.system_prompt([])
        agent.close()


@asynccontextmanager
async def _basic_cache(
    write_config: Callable[[dict[str, Any]], Path],
) -> AsyncIterator[tuple[Manager, Any, CatalogCache]]:
    """A Manager over one in-memory basic server (pins kept), that server, and a CatalogCache
    of the Manager without a disk cache or transformer."""
    path = write_config({"basic": IN_MEMORY})
    server = make_basic_server()
    transports = {"basic": in_memory_transport(server._mcp_server)}
    async with Manager(path, transports=transports, trust=PinGuard()) as manager:
        await manager.wait_ready(30)
        yield manager, server, CatalogCache(manager, cache=False, dense=False)


async def _add_weather(manager: Manager, server: Any) -> None:
    """The server gains a ``weather`` tool and the Manager lists it again."""

    def weather(city: str) -> str:
        return f"sunny in {city}"

    server.tool(weather, name="weather", description="Weather for a city.")
    await manager.refresh_tools("basic")


async def test_a_servers_new_tool_list_replaces_its_part_of_the_last_catalog(
    keen_home: Path, write_config: Callable[[dict[str, Any]], Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    from keen.capabilities import Catalog

    derived: list[set[str]] = []
    with_servers = Catalog.with_servers

    def spy(self: Catalog, changed: Any) -> Catalog:
        derived.append(set(changed))
        return with_servers(self, changed)

    monkeypatch.setattr(Catalog, "with_servers", spy)
    async with _basic_cache(write_config) as (manager, server, source):
        first = source()
        assert capability_id("tool", "weather", "basic") not in first
        await _add_weather(manager, server)
        catalog = source()
        # The last catalog with the refreshed server's part replaced, equal to one made whole.
        assert derived == [{"basic"}] and source.builds == 2
        whole = Catalog.from_manager(manager, cache=False, dense=False)
        assert [c.id for c in catalog] == [c.id for c in whole]
        assert dict(catalog.names) == dict(whole.names) and catalog.servers == whole.servers
        assert catalog.get(capability_id("tool", "weather", "basic")).summary == "Weather for a city."


async def test_a_refresh_whose_catalog_failed_is_taken_in_by_the_next_call(
    keen_home: Path, write_config: Callable[[dict[str, Any]], Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A build that raises keeps nothing of what it was made from: the next call compares
    with the servers of the last catalog that was made, so the change still reaches it."""
    from keen.capabilities import Catalog

    with_servers = Catalog.with_servers
    failures = [RuntimeError("the disk went away")]

    def fails_once(self: Catalog, changed: Any) -> Catalog:
        if failures:
            raise failures.pop()
        return with_servers(self, changed)

    monkeypatch.setattr(Catalog, "with_servers", fails_once)
    async with _basic_cache(write_config) as (manager, server, source):
        source()
        await _add_weather(manager, server)
        with pytest.raises(RuntimeError, match="the disk went away"):
            source()
        catalog = source()
        assert capability_id("tool", "weather", "basic") in catalog


async def test_a_server_the_session_leaves_out_is_not_offered_from_its_skill_on_disk(
    keen_home: Path, write_config: Callable[[dict[str, Any]], Path]
) -> None:
    """A runtime limited with ``only`` never starts the other servers (they stay
    ``configured``): their skills on disk stand for no server starting, so their tools are
    not in the catalog (a call to one would be refused, not waited for)."""
    path = write_config({"a": IN_MEMORY, "b": IN_MEMORY})

    def transports() -> dict[str, Any]:
        return {name: in_memory_transport(make_basic_server()._mcp_server) for name in ("a", "b")}

    async with open_runtime(
        manager=Manager(path, transports=transports(), trust=PinGuard()), wait=30, sync=True
    ):
        pass  # both skills on disk, as an earlier session leaves them
    assert (keen_home / "skills" / "mcp:b").exists()
    manager = Manager(path, transports=transports(), trust=PinGuard(), only={"a"})
    async with open_runtime(manager=manager, wait=30) as rt:
        harness = rt.harness(mode="auto", workspace=keen_home)
        harness.begin_step()
        assert harness.catalog is not None
        servers = {cap.server for cap in harness.catalog if cap.server}
        assert capability_id("tool", "echo", "a") in harness.catalog
        assert servers == {"a"}, servers
        harness.close()


async def test_a_tool_held_for_review_is_not_offered_from_the_skill_on_disk(
    keen_home: Path, write_config: Callable[[dict[str, Any]], Path]
) -> None:
    """Under ``pinning: quarantine`` the skill shows a changed tool as it was pinned, and a
    call to it is refused until it is reviewed: while its server starts, the catalog from
    the skill on disk leaves it out, as the live list does (the unchanged ones stay)."""
    path = write_config({"srv": {**IN_MEMORY, "pinning": "quarantine"}})

    async def sync(description: str) -> None:
        server = make_echo_server("srv", "answer", description)
        manager = Manager(path, transports={"srv": in_memory_transport(server._mcp_server)}, trust=PinGuard())
        async with open_runtime(manager=manager, wait=30, sync=True) as rt:
            if not rt.gateway.pins.store.load("srv"):
                trust("srv", rt.manager.list_tools("srv"))  # reviewed as first listed

    await sync("Answer the question one way.")
    await sync("Answer the question another way now.")  # changed since pinned: held
    skill_md = (keen_home / "skills" / "mcp:srv" / "SKILL.md").read_text()
    assert "held for review" in skill_md, skill_md
    # A session's first step: the Manager not started yet, the skill on disk stands for it.
    manager = Manager(path, transports={}, trust=PinGuard())
    guarded = CatalogCache(
        manager, skills_root=keen_home / "skills", pins=PinGuard(), cache=False, dense=False
    )
    catalog = guarded()
    assert capability_id("tool", "echo", "srv") in catalog
    assert capability_id("tool", "answer", "srv") not in catalog
    # Without a pin check (as the live list without one) it is offered.
    plain = CatalogCache(manager, skills_root=keen_home / "skills", cache=False, dense=False)
    assert capability_id("tool", "answer", "srv") in plain()


async def test_a_marker_written_before_held_tools_offers_no_held_tool_and_the_next_sync_names_them(
    keen_home: Path, write_config: Callable[[dict[str, Any]], Path], caplog: pytest.LogCaptureFixture
) -> None:
    """A marker without ``held_tools`` (as Keen wrote them before it recorded held tools) read
    as none held: a changed tool held for review was offered as callable from the skill on
    disk, and its call refused. Now a skill whose description notes held tools offers none of
    its tools until its next sync names them; one noting none offers all; the sync writes the
    field to every marker, [] when nothing is held."""
    path = write_config({"srv": {**IN_MEMORY, "pinning": "quarantine"}, "calm": IN_MEMORY})
    calm = make_echo_server("calm", "answer", "Answer calmly.")

    async def sync(description: str) -> None:
        servers = {"srv": make_echo_server("srv", "answer", description), "calm": calm}
        transports = {name: in_memory_transport(server._mcp_server) for name, server in servers.items()}
        manager = Manager(path, transports=transports, trust=PinGuard())
        async with open_runtime(manager=manager, wait=30, sync=True) as rt:
            if not rt.gateway.pins.store.load("srv"):
                trust("srv", rt.manager.list_tools("srv"))  # reviewed as first listed

    await sync("Answer the question one way.")
    await sync("Answer the question another way now.")  # changed since pinned: held
    skills = keen_home / "skills"
    markers = {name: skills / f"mcp:{name}" / ".keen-generated-mcp.json" for name in ("srv", "calm")}
    written = {name: json.loads(marker.read_text()) for name, marker in markers.items()}
    assert (written["srv"]["held_tools"], written["calm"]["held_tools"]) == (["answer"], [])
    for name, marker in markers.items():  # as written before the field
        marker.write_text(json.dumps({k: v for k, v in written[name].items() if k != "held_tools"}))

    ids = {cap.id for cap in Catalog.from_skills_dir(skills)}
    assert not {capability_id("tool", tool, "srv") for tool in ("answer", "echo")} & ids, ids
    assert {capability_id("tool", tool, "calm") for tool in ("answer", "echo")} <= ids, ids
    assert "mcp:srv says tools are held for review" in caplog.text and "keen mcp sync" in caplog.text
    manager = Manager(path, transports={}, trust=PinGuard())  # a session's first step
    starting = CatalogCache(manager, skills_root=skills, pins=PinGuard(), cache=False, dense=False)()
    assert capability_id("tool", "answer", "srv") not in starting
    assert capability_id("tool", "answer", "calm") in starting
    # A person's search (keen tools search) still reads every tool the skills hold.
    everything = {cap.id for cap in Catalog.from_skills_dir(skills, include_held=True)}
    assert capability_id("tool", "answer", "srv") in everything

    await sync("Answer the question another way now.")  # unchanged tools: the markers get the field
    assert json.loads(markers["srv"].read_text())["held_tools"] == ["answer"]
    assert json.loads(markers["calm"].read_text())["held_tools"] == []
    ids = {cap.id for cap in Catalog.from_skills_dir(skills)}
    assert capability_id("tool", "echo", "srv") in ids and capability_id("tool", "answer", "srv") not in ids


_OPENED: list[str] | None = None
"""Paths opened while a test records them (:func:`_record_opens`); None: not recording."""


def _record_opens(event: str, args: tuple[object, ...]) -> None:
    if event == "open" and _OPENED is not None and isinstance(args[0], str | Path):
        _OPENED.append(str(args[0]))


async def test_a_starting_servers_skill_marker_is_read_once_beside_discovery(
    keen_home: Path, write_config: Callable[[dict[str, Any]], Path]
) -> None:
    # The catalog of a session's first step read each generated skill's marker twice after
    # discovery had: once for its server, once more for its held tools.
    global _OPENED
    path = write_config({"srv": {**IN_MEMORY, "pinning": "quarantine"}})
    server = make_echo_server("srv", "answer", "Answer the question.")
    manager = Manager(path, transports={"srv": in_memory_transport(server._mcp_server)}, trust=PinGuard())
    async with open_runtime(manager=manager, wait=30, sync=True):
        pass  # the skill on disk, as an earlier session leaves it
    skills = keen_home / "skills"
    cache = CatalogCache(
        Manager(path, transports={}, trust=PinGuard()),
        skills_root=skills,
        pins=PinGuard(),
        cache=False,
        dense=False,
    )
    sys.addaudithook(_record_opens)  # a hook stays for the process: it records only while asked
    _OPENED = []
    try:
        catalog = cache()
    finally:
        opened, _OPENED = _OPENED, None
    assert capability_id("tool", "answer", "srv") in catalog
    reads = [p for p in opened if p.endswith("mcp:srv/.keen-generated-mcp.json")]
    assert len(reads) == 2, reads  # discovery's (managed, tool count), the catalog's
