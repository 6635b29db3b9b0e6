"""Startup sync against real MCP servers: a stdio server, one that dies at start, and a
Streamable HTTP server that rejects the configured API key (docs/architecture.md "Startup sync")."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from conftest import stdio_server
from helpers.forkserver import script_args
from helpers.http_servers import make_basic_server, serve_http
from keen import paths
from keen._redact import redactor
from keen.errors import KeenError, Remedy
from keen.mcp import Manager
from keen.mcpskills import MARKER_FILE, ServerSnapshot, sync_mcp_skills
from keen.mcpskills.startup import sync_from_manager
from keen.skills import SkillsConfig, discover
from keen.trust import PinGuard

SERVERS = Path(__file__).resolve().parents[1] / "servers"
WRONG_KEY = "wrong-key-7f3a9c2e"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def snapshots(manager: Manager) -> list[ServerSnapshot]:
    out: list[ServerSnapshot] = []
    for st in manager.servers():
        tools = manager.list_tools(st.name) if st.state.value == "connected" else []
        out.append(ServerSnapshot(st, tools, manager.server_info(st.name)))
    return out


@pytest.mark.anyio
async def test_sync_from_real_servers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KEEN_HOME", str(tmp_path / "home"))
    redactor.add(WRONG_KEY)
    with serve_http(make_basic_server(), api_key="right-key-1234") as srv:
        config = {
            "version": 1,
            "servers": {
                "basic": {
                    "transport": "stdio",
                    "command": sys.executable,
                    # Forked from the worker's warm process (tests/helpers/forkserver.py):
                    # a real stdio server whose interpreter's start is not under test.
                    "args": script_args(
                        str(SERVERS / "basic_stdio.py"), "--tools", "3", "--instructions", "Echo and add."
                    ),
                },
                "crashy": {
                    "transport": "stdio",
                    "command": sys.executable,
                    "args": [str(SERVERS / "exit_now.py")],
                },
                "locked": {
                    "transport": "streamable_http",
                    "url": srv.url,
                    "auth": {"type": "api_key", "key": WRONG_KEY},
                },
            },
        }
        paths.mcp_config_path().parent.mkdir(parents=True)
        paths.mcp_config_path().write_text(json.dumps(config), encoding="utf-8")
        async with Manager(trust=PinGuard()) as manager:
            assert await manager.wait_ready(timeout=60)
            snaps = await snapshots(manager)
            basic_tools = manager.list_tools("basic")
    root = paths.skills_dir()
    report = sync_mcp_skills(
        snaps, skills_root=root, skills_config=SkillsConfig.load(paths.skills_config_path())
    )
    by = {e.server: e for e in report.entries}
    assert (by["basic"].action, by["basic"].enabled) == ("generated", True)
    assert (by["crashy"].action, by["crashy"].enabled, by["crashy"].state) == (
        "disabled",
        False,
        "disconnected",
    )
    assert by["locked"].state in ("auth_failed", "auth_required") and not by["locked"].enabled
    assert by["locked"].remedy is Remedy.RECONNECT  # an API key: fix configs.json, then reconnect
    skill = root / "mcp:basic"
    names = sorted(t.name for t in basic_tools)
    assert "echo" in names and "extra_0002" in names
    assert sorted(p.stem for p in (skill / "schemas").glob("*.json")) == names
    echo = next(t for t in basic_tools if t.name == "echo")
    schema = json.loads((skill / "schemas" / "echo.json").read_text(encoding="utf-8"))
    assert schema["inputSchema"] == echo.input_schema and schema["server"] == "basic"
    assert schema["annotations"]["readOnlyHint"] is True
    text = (skill / "SKILL.md").read_text(encoding="utf-8")
    assert "Echo and add." in text and "| echo | Return the text unchanged. | schemas/echo.json |" in text
    marker = json.loads((skill / MARKER_FILE).read_text(encoding="utf-8"))
    assert marker["tool_count"] == len(basic_tools) and marker["status"] == "connected"
    found = discover(root)
    assert [s.name for s in found.enabled] == ["mcp:basic"]
    for path in root.rglob("*"):
        if path.is_file():
            assert WRONG_KEY.encode() not in path.read_bytes(), path
    assert WRONG_KEY not in json.dumps(report.to_dict())


@pytest.mark.anyio
async def test_sync_hints_name_the_config_a_manager_was_given_in_code(keen_home: Path) -> None:
    # A session opened with its own config was told its server is disabled, or its entry
    # is to be fixed, "in configs.json", a file it never read.
    given = "the config this Manager was given"
    config = {
        "version": 1,
        "servers": {
            "off": {"command": "unused", "enabled": False},
            "broken": {"command": "unused", "transport": "carrier-pigeon"},
        },
    }
    async with Manager(config=config, trust=PinGuard()) as manager:
        await manager.wait_ready(20)
        report = await sync_from_manager(manager, skills_root=keen_home / "skills")
    entries = {e.server: e for e in report.entries}
    assert entries["off"].hint == f"the server is disabled in {given}"
    assert entries["broken"].state == "config_error"
    assert entries["broken"].hint == f"fix its entry in {given} as the error says"


@pytest.mark.anyio
async def test_a_sync_of_a_manager_not_running_refuses_and_leaves_the_skills(keen_home: Path) -> None:
    # Not started, a Manager lists no server: the sync took the time server's skill for one
    # whose server was removed and deleted it. Closed, its servers read as disconnected: the
    # sync disabled the skill in config.json.
    config = {"version": 1, "servers": {"local": stdio_server("basic_stdio.py")}}
    root = keen_home / "skills"
    manager = Manager(config=config, trust=PinGuard())
    async with manager:
        assert await manager.wait_ready(20)
        assert [e.action for e in (await sync_from_manager(manager, skills_root=root)).entries] == [
            "generated"
        ]
    skills = {p.name for p in root.iterdir()}
    settings = (root / "config.json").read_text(encoding="utf-8")
    with pytest.raises(
        KeenError, match=r"^sync_from_manager\(\) has no server to sync: this Manager has not started"
    ):
        await sync_from_manager(Manager(config=config, trust=PinGuard()), skills_root=root)
    with pytest.raises(
        KeenError, match=r"^sync_from_manager\(\) has no server to sync: this Manager was closed"
    ):
        await sync_from_manager(manager, skills_root=root)
    assert {p.name for p in root.iterdir()} == skills and "mcp:local" in skills
    assert (root / "config.json").read_text(encoding="utf-8") == settings
