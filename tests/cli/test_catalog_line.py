"""The catalog line a model reads (README "What the model sees"), through the CLI from a
temporary ``KEEN_HOME``: a server's ``description`` in configs.json is its catalog line,
a server that connects but lists no tools is shown as such with its stderr hint and gets no
catalog line, and ``keen prompt --max-chars N`` too small for one line is an error, not an empty prompt."""

from __future__ import annotations

import pytest

from helpers import stdio_entry
from helpers.cli import Home, Run, make_home

pytestmark = pytest.mark.slow_file

MINE = "Scratch notes and arithmetic for the team's demos"


@pytest.fixture(scope="module")
def synced(tmp_path_factory: pytest.TempPathFactory) -> tuple[Home, Run]:
    """The module's home and its first ``keen mcp sync --json`` (the three servers started once)."""
    home = make_home(tmp_path_factory.mktemp("catalog"))
    home.write(
        {
            "described": {**stdio_entry("basic_stdio"), "description": MINE},
            "plain": stdio_entry("basic_stdio"),
            "empty": stdio_entry("empty_stdio"),
        }
    )
    sync = home.keen("mcp", "sync", "--json", "--timeout", "30")
    assert sync.code == 0, str(sync)
    return home, sync


@pytest.fixture(scope="module")
def home(synced: tuple[Home, Run]) -> Home:
    return synced[0]


def test_config_description_is_the_catalog_line(home: Home) -> None:
    run = home.keen("prompt")
    assert run.code == 0, str(run)
    lines = {line.split(":", 2)[1]: line for line in run.stdout.splitlines() if line.startswith("- mcp:")}
    assert lines["described"].startswith(f"- mcp:described: {MINE} → read ")
    assert MINE not in lines["plain"]  # the other server keeps its derived line
    shown = home.keen("skills", "show", "mcp:described", "--json").json()
    assert shown["description"] == MINE


def test_max_chars_too_small_for_one_line_is_an_error(home: Home) -> None:
    run = home.keen("prompt", "--max-chars", "20")
    assert run.code == 2, str(run)
    assert run.stdout == ""
    assert "--max-chars 20 is too small" in " ".join(run.stderr.split())
    roomy = home.keen("prompt", "--max-chars", "4000")
    assert roomy.code == 0 and "- mcp:described:" in roomy.stdout


def test_a_server_with_no_tools_is_shown_and_gets_no_catalog_line(synced: tuple[Home, Run]) -> None:
    home, first_sync = synced
    listed = {s["name"]: s for s in home.keen("mcp", "list", "--json", "--timeout", "30").json()}
    empty = listed["empty"]
    assert empty["state"] == "connected" and empty["tool_count"] == 0
    assert "lists no tools" in empty["last_error"] and "JIRA_API_TOKEN is not set" in empty["last_error"]
    sync = first_sync.json()  # the module's sync: the servers are not started a third time for it
    entry = {e["server"]: e for e in sync["servers"]}["empty"]
    assert entry["action"] == "disabled" and not entry["enabled"]
    assert "lists no tools" in entry["hint"] and "JIRA_API_TOKEN" in entry["hint"]
    assert "mcp:empty" not in home.keen("prompt").stdout


def test_a_derived_line_says_what_the_tools_do(tmp_path_factory: pytest.TempPathFactory) -> None:
    from conftest import peer

    home = make_home(tmp_path_factory.mktemp("derived"))
    for name, binary in (
        ("time", peer("py", "mcp-server-time")),
        ("everything", peer("node", "mcp-server-everything")),
    ):
        assert home.keen("mcp", "add", name, "--", binary).code == 0
    sync = home.keen("mcp", "sync", "--json", "--timeout", "60")
    assert sync.code == 0, str(sync)
    lines = {
        line.split(":", 2)[1]: line
        for line in home.keen("prompt").stdout.splitlines()
        if line.startswith("- mcp:")
    }
    assert set(lines) == {"time", "everything"}, lines
    for line in lines.values():
        # Never the server's name as a label, nor boilerplate about who its instructions are for.
        assert "MCP server." not in line and "Audience" not in line and "instructions" not in line, line
    assert "time" in lines["time"].split("Tools:")[0].lower()  # what convert_time / get_current_time do
    assert "Tools: convert_time, get_current_time (2)." in lines["time"]
