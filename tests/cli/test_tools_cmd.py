"""`keen tools search` and `keen prompt --budget` over the demo server's generated skills,
and a catalog from a live Manager (the demo server over stdio).

The commands run in this process (``helpers.cli.Home.keen``: the console script's own typer
app, so one search model serves every run); the console script runs as its own process
where the process is what the test shows: the line ``keen demo --keep`` prints, run as
printed, and ``keen tools index`` reading the vectors a previous process wrote.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from helpers.cli import KEEN, Home, Run
from helpers.forkserver import OWN_VECTOR_CACHE, launch_args
from keen.capabilities import Catalog, SearchFilter
from keen.capabilities.search import flush
from keen.mcp import Manager
from keen.mcpskills.startup import sync_from_manager
from keen.trust import PinGuard

pytestmark = pytest.mark.slow_file

# Keen's own demo server: trusted for its annotations (its readOnlyHint is true).
DEMO = {
    "transport": "stdio",
    "command": sys.executable,
    "args": launch_args("-m", "keen.demo.server"),
    "trust_annotations": True,
}
WRITES = {"mcp__demo__add_note", "mcp__demo__delete_note"}


def keen(*args: str) -> Run:
    """``keen ARGS`` in this process, on the ``KEEN_HOME`` the test set (the ``keen_home`` fixture)."""
    keen_home = Path(os.environ["KEEN_HOME"])
    return Home(keen_home, keen_home.parent / "user-home").keen(*args, columns=200)


def keen_process(*args: str, own_vectors: bool = False) -> Run:
    """``keen ARGS`` as its own process (the console script, forked from the warm process);
    ``own_vectors``: its search model's vectors cached in its ``KEEN_HOME``, as a user's are,
    not in the run's one cache (``helpers.forkserver.OWN_VECTOR_CACHE``)."""
    env = {**os.environ, "COLUMNS": "200", "NO_COLOR": "1"}
    if own_vectors:
        env[OWN_VECTOR_CACHE] = "1"
    done = subprocess.run(
        [*KEEN, *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert "Traceback" not in done.stderr and "internal error" not in done.stderr, done.stderr
    return Run(args, done.returncode, done.stdout, done.stderr)


async def _sync_demo(config: Path) -> None:
    async with Manager(config, trust=PinGuard()) as manager:
        assert await manager.wait_ready(60)
        live = Catalog.from_manager(manager)
        assert {c.id for c in live} >= WRITES
        hits = live.search("delete a note", k=8, filter=SearchFilter(mode="read-only"))
        assert hits and not {h.id for h in hits} & WRITES
        assert live.load("mcp__demo__convert_units").schema["type"] == "object"
        await sync_from_manager(manager)


@pytest.fixture(scope="module")
def synced_demo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A ``KEEN_HOME`` with the demo server configured and synced, once for the module."""
    home = tmp_path_factory.mktemp("demo") / "keen-home"
    config = home / "mcp" / "configs.json"
    config.parent.mkdir(parents=True)
    config.write_text(json.dumps({"version": 1, "servers": {"demo": DEMO}}, indent=2))
    with pytest.MonkeyPatch.context() as env:
        env.setenv("KEEN_HOME", str(home))
        anyio.run(_sync_demo, config)
        # The search above caches its index in this home in the background, a while later:
        # written now, not while a test copies the home (copytree failed on a vanished
        # temporary folder).
        flush()
    return home


@pytest.fixture
def demo_home(keen_home: Path, synced_demo: Path) -> Path:
    """The test's own ``KEEN_HOME``, a copy of the module's synced one (the tests change it)."""
    shutil.copytree(synced_demo, keen_home, dirs_exist_ok=True)
    return keen_home


@pytest.mark.anyio
async def test_tools_search_on_the_demo_skills_with_no_server_running(demo_home: Path) -> None:
    done = keen("tools", "search", "convert miles to kilometers", "-k", "3", "--json")
    assert done.code == 0, done.stderr
    hits = json.loads(done.stdout)
    assert hits[0]["tool"] == "convert_units" and hits[0]["server"] == "demo"
    assert hits[0]["location"].endswith("mcp:demo/schemas/convert_units.json") and len(hits) == 3
    table = keen("tools", "search", "what time is it in Tokyo")
    assert table.code == 0 and "current_time" in table.stdout
    ro = json.loads(keen("tools", "search", "remove a note", "--read-only", "--json", "-k", "8").stdout)
    assert ro and not {h["id"] for h in ro} & WRITES


@pytest.mark.anyio
async def test_tools_search_errors_say_what_to_do(demo_home: Path) -> None:
    unknown = keen("tools", "search", "x", "--server", "nope")
    assert unknown.code == 2 and "nope is not a configured server (configured: demo;" in unknown.stderr
    assert "`keen mcp add` adds one" in unknown.stderr
    empty = keen("tools", "search", "  ")
    assert empty.code == 2 and "describe the task" in empty.stderr


@pytest.mark.anyio
async def test_tools_search_server_says_why_a_server_has_no_tools_or_searches_a_hidden_one(
    demo_home: Path,
) -> None:
    # '--server' answered "no generated skill for server X" both for a server whose skill was
    # only disabled (hidden from the model's catalog; its schemas are on disk) and for one
    # configured but never synced, with no word of `keen mcp sync`.
    assert keen("skills", "disable", "mcp:demo").code == 0
    hidden = keen("tools", "search", "convert miles to kilometers", "--server", "demo", "--json")
    assert hidden.code == 0, hidden.stderr
    assert json.loads(hidden.stdout)[0]["tool"] == "convert_units"
    assert "mcp:demo is disabled" in hidden.stderr and "keen skills enable mcp:demo" in hidden.stderr
    config = demo_home / "mcp" / "configs.json"
    data = json.loads(config.read_text())
    data["servers"]["later"] = DEMO
    config.write_text(json.dumps(data))
    unsynced = keen("tools", "search", "x", "--server", "later")
    assert unsynced.code == 2
    assert "later has no generated skill yet (run `keen mcp sync`" in unsynced.stderr, unsynced.stderr


def test_tools_search_without_skills(keen_home: Path) -> None:
    done = keen("tools", "search", "anything")
    assert done.code == 2 and "keen mcp sync" in done.stderr and "keen demo --keep" in done.stderr


@pytest.mark.e2e
def test_keen_demo_keep_ends_with_a_scripted_chat_and_its_line_searches_the_skills(keen_home: Path) -> None:
    """``keen demo --keep`` tells the whole story down to a scripted chat session, and the
    line it ends with runs as printed: its KEEN_HOME holds the demo's generated skills,
    searchable with no server running. (One run of ``keen demo`` for both: it starts the
    demo server as a new interpreter and syncs it, about 4 s of CPU.)"""
    demo = keen_process("demo", "--keep")
    assert demo.code == 0, demo.stdout + demo.stderr
    chat_part = demo.stdout.split("7. keen chat", 1)[1]
    assert "A marathon (26.2 mi) is 42.16 km." in chat_part
    assert "approval asked: demo/add_note" in chat_part and "Saved it as a note" in chat_part
    assert "call_mcp_tool demo/convert_units" in chat_part and "characters read (not kept)" in chat_part
    line = next(x for x in demo.stdout.splitlines() if x.startswith("kept "))
    command = line.split("to use its skills: ", 1)[1]
    kept = Path(shlex.split(command)[0].removeprefix("KEEN_HOME="))
    try:
        assert kept.is_dir() and kept != keen_home
        env = {**os.environ, "COLUMNS": "200", "NO_COLOR": "1", "KEEN_HOME": str(kept)}
        found = subprocess.run(
            [*KEEN, "tools", "search", "convert miles", "--json", "--wait", "100"],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
            stdin=subprocess.DEVNULL,
        )
        assert found.returncode == 0, found.stderr
        top = json.loads(found.stdout)[0]
        assert top["tool"] == "convert_units"
        # The transformer ranked too, from the installed model (no download), and says why
        # (--wait: a loaded machine may take longer than the default 5 s to encode the tools).
        assert top["signals"]["dense"] > 0 and "dense" in top["signals"], top
        assert top["why"] and "note:" not in found.stderr, found.stderr
    finally:
        shutil.rmtree(kept, ignore_errors=True)


@pytest.mark.e2e
def test_keen_demo_on_a_users_config_leaves_only_the_demo_servers_notes_in_keen_home(demo_home: Path) -> None:
    """``keen demo`` on a config with a ``demo`` server runs in the user's KEEN_HOME: its
    scripted chat's script is not left there (README "Files" lists what is), and the note
    the chat saves is in that KEEN_HOME's ``demo-notes.json``, the entry having no ``env``."""
    before = {p.name for p in demo_home.iterdir()}
    demo = keen_process("demo")
    assert demo.code == 0, demo.stdout + demo.stderr
    assert "Saved it as a note" in demo.stdout.split("7. keen chat", 1)[1]
    made = {p.name for p in demo_home.iterdir()} - before
    assert "demo-chat-script.jsonl" not in made, sorted(made)
    notes = json.loads((demo_home / "demo-notes.json").read_text(encoding="utf-8"))
    assert [n["title"] for n in notes["notes"]] == ["marathon"]


@pytest.mark.anyio
async def test_prompt_budget(demo_home: Path) -> None:
    full = json.loads(keen("prompt", "--budget", "100000", "--json").stdout)
    assert full["step"] == "full" and full["tokens"] <= 100000
    tight_budget = full["overhead_tokens"] + 40
    tight = json.loads(keen("prompt", "--budget", str(tight_budget), "--json").stdout)
    assert tight["tokens"] <= tight_budget and tight["step"] in ("compact", "folded", "empty")
    text = keen("prompt", "--budget", str(tight_budget)).stdout
    assert text.strip() == tight["text"].strip()
    stats = keen("prompt", "--budget", "10", "--stats")
    assert stats.code == 2 and "cannot hold" in stats.stderr
    # The remedy names the budgets that work ("raise --budget" left the user guessing).
    found = re.search(r"raise --budget to at least (\d+) .*, or (\d+) for the whole catalog", stats.stderr)
    assert found, stats.stderr
    least, whole = int(found[1]), int(found[2])
    assert keen("prompt", "--budget", str(least - 1)).code == 2
    assert keen("prompt", "--budget", str(least)).code == 0
    assert json.loads(keen("prompt", "--budget", str(whole - 1), "--json").stdout)["step"] != "full"
    assert json.loads(keen("prompt", "--budget", str(whole), "--json").stdout)["step"] == "full"


@pytest.mark.anyio
async def test_tools_search_shows_one_hit_for_a_server_configured_twice(
    keen_home: Path, write_config
) -> None:
    config = write_config({"demo": DEMO, "demo-again": DEMO})
    async with Manager(config, trust=PinGuard()) as manager:
        assert await manager.wait_ready(60)
        await sync_from_manager(manager)
    hits = json.loads(keen("tools", "search", "convert miles to kilometers", "-k", "3", "--json").stdout)
    tools = [h["tool"] for h in hits]
    assert tools.count("convert_units") == 1 and len(set(tools)) == 3
    first = hits[tools.index("convert_units")]
    other = "demo-again" if first["server"] == "demo" else "demo"
    assert first["copies"] == [f"mcp__{other}__convert_units"]
    table = keen("tools", "search", "convert miles to kilometers", "-k", "1")
    assert "(+1 identical)" in table.stdout


@pytest.mark.anyio
async def test_two_servers_the_tool_that_does_the_task_ranks_first_not_the_better_matching_server(
    keen_home: Path, write_config
) -> None:
    # `keen demo`'s two servers: "add two numbers" ranked the demo server's add_note above
    # server-everything's get-sum ("the sum of two numbers"). Standardised over two servers,
    # the slightly better server match was worth as much as a clear one (server_trust).
    from conftest import peer

    everything = {"transport": "stdio", "command": peer("node", "mcp-server-everything"), "args": ["stdio"]}
    config = write_config({"demo": DEMO, "everything": everything})
    async with Manager(config, trust=PinGuard()) as manager:
        assert await manager.wait_ready(60)
        await sync_from_manager(manager)
    done = keen("tools", "search", "add two numbers", "-k", "3", "--json")
    assert done.code == 0, done.stderr
    assert json.loads(done.stdout)[0]["tool"] == "get-sum"
    first = json.loads(keen("tools", "search", "save a note", "-k", "1", "--json").stdout)
    assert first[0]["tool"] == "add_note"  # the demo server's own tools still win their tasks


@pytest.mark.e2e
@pytest.mark.anyio
async def test_tools_index_encodes_once_then_reads_the_cache(demo_home: Path) -> None:
    first = keen_process("tools", "index", own_vectors=True)
    assert first.code == 0, first.stderr
    # The fixture's own search may have encoded some already (in this process, in the background).
    counts = re.search(
        r"indexed 8 tools of 1 servers in [\d.]+ s \((\d) encoded, (\d) from the cache\)", first.stdout
    )
    assert counts and int(counts[1]) + int(counts[2]) == 8, first.stdout
    again = keen_process("tools", "index", own_vectors=True)
    assert again.code == 0 and "(0 encoded, 8 from the cache)" in again.stdout, again.stdout
    # A search reads them too (in this process: the transformer ranked, and said nothing).
    found = keen("tools", "search", "how many kilometres is a marathon", "--json", "-k", "1")
    assert "dense" in json.loads(found.stdout)[0]["signals"] and "note:" not in found.stderr


def test_a_read_only_claim_counts_in_search_only_from_a_server_trusted_for_it(demo_home: Path) -> None:
    """README "Annotations only from servers you trust for them": keen chat's /search and keen
    serve judge a readOnlyHint of a server not trusted for its annotations as a claim, but
    `keen tools search` took it as true (risk low, listed by --read-only). It now judges as
    they do: trusted through "trust_annotations", or once `keen mcp trust` pinned the tool."""

    def convert_units(*flags: str) -> list[dict[str, object]]:
        done = keen("tools", "search", "convert miles to kilometers", "--json", "-k", "8", *flags)
        assert done.code == 0, done.stderr
        return [h for h in json.loads(done.stdout) if h["tool"] == "convert_units"]

    assert [h["risk"] for h in convert_units("--read-only")] == ["low"]  # "trust_annotations": true
    config = demo_home / "mcp" / "configs.json"
    data = json.loads(config.read_text())
    data["servers"]["demo"] = {k: v for k, v in DEMO.items() if k != "trust_annotations"}
    config.write_text(json.dumps(data))
    assert [h["risk"] for h in convert_units()] == ["medium"]
    assert convert_units("--read-only") == []
    # It said only "no matching tools", as if nothing fit the query: it says why, and the fix.
    none = keen("tools", "search", "convert miles to kilometers", "--read-only")
    assert none.code == 0 and none.stdout.strip() == "no matching tools", none
    assert "note: tools of demo claim readOnlyHint" in none.stderr, none.stderr
    assert "`keen mcp trust SERVER`" in none.stderr and '"trust_annotations": true' in none.stderr, (
        none.stderr
    )
    # The best match, delete_note, claims nothing, but other demo tools do: trusting the server
    # lists one for this very command, so the note weighs every tool, not the top k.
    writes = keen("tools", "search", "delete a note", "--read-only", "-k", "1")
    assert writes.stdout.strip() == "no matching tools", writes
    assert "note: tools of demo claim readOnlyHint" in writes.stderr, writes.stderr
    assert "mark none of them read-only" not in writes.stderr, writes.stderr
    assert keen("mcp", "diff", "demo").code == 0
    assert keen("mcp", "trust", "demo").code == 0
    listed = keen("tools", "search", "delete a note", "--read-only", "-k", "1", "--json")
    assert [h["risk"] for h in json.loads(listed.stdout)] == ["low"], listed
    assert [h["risk"] for h in convert_units()] == ["low"]
    assert [h["risk"] for h in convert_units("--read-only")] == ["low"]
    # "pinning": "off": keen chat compares no pins, so the reviewed pin counts for nothing.
    data["servers"]["demo"]["pinning"] = "off"
    config.write_text(json.dumps(data))
    assert [h["risk"] for h in convert_units()] == ["medium"]
    # There the note names only "trust_annotations": a keen mcp trust would change nothing.
    unpinned = keen("tools", "search", "convert miles to kilometers", "--read-only")
    assert unpinned.stdout.strip() == "no matching tools", unpinned
    assert 'with "pinning": "off" no reviewed pin counts' in unpinned.stderr, unpinned.stderr
    assert "keen mcp trust" not in unpinned.stderr and '"trust_annotations": true' in unpinned.stderr, (
        unpinned.stderr
    )
    # A grant spelt as the validation also reads it ("true") is one, as in keen chat.
    data["servers"]["demo"]["trust_annotations"] = "true"
    config.write_text(json.dumps(data))
    assert keen("mcp", "get", "demo").code == 0  # the entry is valid as written
    assert [h["risk"] for h in convert_units("--read-only")] == ["low"]
