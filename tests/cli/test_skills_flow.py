"""The skills CLI contract end to end, as a user runs it: keen mcp sync / connect, keen skills,
keen prompt [--stats], against real stdio and loopback HTTP servers."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from helpers import stdio_entry
from helpers.cli import Home
from helpers.cli import make_home as _make_home
from helpers.http_servers import HttpServer, make_basic_server, serve_http

KEY = "sk-flow-7a6b5c4d3e2f"
SKILL_KEYS = {"name", "description", "enabled", "path", "managed"}
STATS_KEYS = {"all_schemas_tokens", "catalog_tokens", "reduction", "tokenizer", "servers"}


@pytest.fixture(scope="module")
def http_server() -> Iterator[HttpServer]:
    with serve_http(make_basic_server(n_extra_tools=5), api_key=KEY) as server:
        yield server


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory, http_server: HttpServer) -> Home:
    home = _make_home(tmp_path_factory.mktemp("flow"))
    home.write(
        {
            "basic": stdio_entry("basic_stdio", "--tools", "40"),
            "exit": stdio_entry("exit_now"),
            "web": {"url": http_server.url, "auth": {"type": "api_key", "key": KEY}},
            "wrongkey": {"url": http_server.url, "auth": {"type": "api_key", "key": "sk-not-the-key-1234"}},
        }
    )
    mine = home.keen_home / "skills" / "mcp:mine"
    mine.mkdir(parents=True)
    (mine / "SKILL.md").write_text(
        "---\nname: mcp:mine\ndescription: my own notes about a server\n---\nbody\n"
    )
    return home


def test_sync_generates_and_disables_by_state(home: Home) -> None:
    run = home.keen("mcp", "sync", "--json")
    assert run.code == 1, str(run)  # exit and wrongkey did not connect; the others are synced
    report = run.json()
    assert report["skills_root"] == str(home.keen_home / "skills")
    by = {e["server"]: e for e in report["servers"]}
    assert by["basic"]["action"] == "generated" and by["basic"]["enabled"]
    assert by["web"]["action"] == "generated" and by["web"]["enabled"]
    assert by["exit"]["action"] == "disabled" and not by["exit"]["enabled"]
    assert by["wrongkey"]["action"] == "disabled" and "keen mcp connect wrongkey" in by["wrongkey"]["hint"]
    skill = home.keen_home / "skills" / "mcp:basic"
    assert (skill / "SKILL.md").read_text().startswith("---\nname: mcp:basic\n")
    assert len(list((skill / "schemas").glob("*.json"))) == 48
    marker = json.loads((skill / ".keen-generated-mcp.json").read_text())
    assert (
        marker["managed_by"] == "keen-mcp" and marker["status"] == "connected" and marker["tool_count"] == 48
    )
    # no secret in anything Keen wrote
    for path in (home.keen_home / "skills").rglob("*"):
        if path.is_file():
            assert KEY not in path.read_text(errors="replace"), path
    table = home.keen("mcp", "sync")
    assert table.code == 1 and f"skills are in {home.keen_home / 'skills'}" in " ".join(table.stdout.split())


def test_skills_list_prompt_and_stats(home: Home) -> None:
    home.keen("mcp", "sync", "--json")
    listed = home.keen("skills", "list", "--json")
    assert listed.code == 0, str(listed)
    skills = {s["name"]: s for s in listed.json()}
    assert all(set(s) == SKILL_KEYS for s in skills.values())
    assert skills["mcp:basic"]["managed"] and skills["mcp:basic"]["enabled"]
    assert skills["mcp:mine"]["managed"] is False
    prompt = home.keen("prompt")
    assert prompt.code == 0
    line = next(ln for ln in prompt.stdout.splitlines() if ln.startswith("- mcp:basic: "))
    assert line.endswith(f"→ read {home.keen_home / 'skills' / 'mcp:basic'}/SKILL.md")
    assert "mcp:exit" not in prompt.stdout and "mcp:wrongkey" not in prompt.stdout
    stats = home.keen("prompt", "--stats", "--json")
    assert stats.code == 0, str(stats)
    figures = stats.json()
    assert set(figures) == STATS_KEYS
    servers = {s["name"]: s for s in figures["servers"]}
    assert servers["basic"]["tool_count"] == 48 and servers["web"]["tool_count"] == 12
    assert figures["all_schemas_tokens"] == sum(s["schema_tokens"] for s in servers.values())
    assert 0 < figures["catalog_tokens"] < figures["all_schemas_tokens"]
    assert figures["reduction"] == round(1 - figures["catalog_tokens"] / figures["all_schemas_tokens"], 4)
    assert figures["tokenizer"] == "tiktoken:o200k_base"  # exact on every install, no file needed


def test_disable_is_kept_and_connect_enables(home: Home) -> None:
    # Synced here too: under xdist's default distribution this test may share no worker,
    # and so no module-scoped home, with the tests above.
    assert home.keen("mcp", "sync", "--json").code == 1  # exit and wrongkey are broken
    assert home.keen("skills", "disable", "mcp:basic").code == 0
    home.keen("mcp", "sync", "--json")
    assert "mcp:basic" not in home.keen("prompt").stdout  # an explicit disable survives a sync
    call = home.keen("mcp", "call", "basic", "echo", "--args", '{"text": "hidden but callable"}', "--yes")
    assert call.code == 0 and call.stdout.strip() == "hidden but callable"
    connected = home.keen("mcp", "connect", "basic", "--json")
    assert connected.code == 0, str(connected)
    assert connected.json()["skill"]["enabled"] is True
    assert "- mcp:basic: " in home.keen("prompt").stdout
    failed = home.keen("mcp", "connect", "exit")
    assert failed.code == 2 and "fatal: demo crash" in failed.stderr and "disabled" in failed.stderr


def test_removed_server_is_cleaned_up_but_user_dirs_are_not(home: Home) -> None:
    home.keen("mcp", "sync", "--json")
    config = json.loads(home.config_path.read_text())
    del config["servers"]["basic"]
    home.config_path.write_text(json.dumps(config))
    report = home.keen("mcp", "sync", "--json").json()
    by = {e["server"]: e for e in report["servers"]}
    assert by["basic"]["action"] == "removed"
    assert not (home.keen_home / "skills" / "mcp:basic").exists()
    assert (home.keen_home / "skills" / "mcp:mine" / "SKILL.md").exists()
    assert (
        "mcp:basic" not in json.loads((home.keen_home / "skills" / "config.json").read_text())["is_enabled"]
    )


def test_skills_commands_report_unknown_names(home: Home) -> None:
    for args in (("skills", "enable", "mcp:ghost"), ("skills", "show", "mcp:ghost")):
        run = home.keen(*args)
        assert run.code == 2 and "mcp:ghost" in run.stderr
    assert Path(home.config_path).exists()
