"""`keen mcp list|tools|call|import` as a user runs them, with a private ``KEEN_HOME`` and
``HOME`` and stdin that is not a terminal.

The contract: exit 0 on success, 1 when the tool returned ``isError``, 2 on any Keen error
with the message on stderr and never a traceback; ``--json`` prints exactly the documented
keys; secrets never reach stdout or stderr. Most runs are in-process (``CliRunner``); the
``list`` and ``call`` smoke tests run the installed console script as real processes
against the real servers.
"""

from __future__ import annotations

import json
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from helpers import stdio_entry
from helpers.cli import Home, Run, make_home
from helpers.hostile import hostile_entry
from helpers.http_servers import HttpServer, make_basic_server, serve_http
from keen.mcp.config import load_config

RIGHT_KEY = "sk-right-4f1c9a7e2b"
WRONG_KEY = "sk-wrong-8d3e5b1f0c"
BASIC_TOOLS = {"echo", "add", "fail", "sleep", "die", "env", "cwd", "pid"}
LIST_KEYS = {
    *("name", "transport", "auth", "state", "protocol_version", "tool_count", "last_error", "flags"),
    *("enabled", "last_connected_at", "last_refresh_at", "ttl_ms", "cache_scope"),
}
_make_home = make_home


@pytest.fixture(scope="module")
def http_server() -> Iterator[HttpServer]:
    with serve_http(make_basic_server(), api_key=RIGHT_KEY) as server:
        yield server


@pytest.fixture(scope="module")
def mixed(tmp_path_factory: pytest.TempPathFactory, http_server: HttpServer) -> Home:
    """Good and broken servers of every kind in one config (shared by list/tools/call)."""
    home = _make_home(tmp_path_factory.mktemp("mixed"))
    home.write(
        {
            "basic": stdio_entry("basic_stdio"),
            "slow": stdio_entry("basic_stdio", timeouts={"call_tool": 0.5}),
            "hang": stdio_entry("hang_init", timeouts={"connect": 1}),
            "exit": stdio_entry("exit_now"),
            "garbage": stdio_entry("garbage_stdout", timeouts={"connect": 1}),
            "missing": {"command": str(home.home / "no-such-mcp-server")},
            "http-ok": {"url": http_server.url, "auth": {"type": "api_key", "key": RIGHT_KEY}},
            "http-wrong": {"url": http_server.url, "auth": {"type": "api_key", "key": WRONG_KEY}},
            "http-none": {"url": http_server.url},
            "http-oauth": {"url": http_server.url, "auth": {"type": "oauth", "scopes": ["read"]}},
            "off": {**stdio_entry("basic_stdio"), "enabled": False},
        }
    )
    return home


@dataclass(frozen=True)
class Listed:
    as_json: Run
    table: Run
    exit_log: str  # the exit_now server's stderr log right after the two runs


@pytest.fixture(scope="module")
def listed(mixed: Home) -> Listed:
    """`keen mcp list --json` and `keen mcp list` on the mixed config, run once in parallel."""
    as_json, table = mixed.keen_processes(["mcp", "list", "--json", "--timeout", "30"], ["mcp", "list"])
    return Listed(as_json, table, (mixed.keen_home / "logs" / "exit.stderr.log").read_text())


def _no_secrets(*runs: Run) -> None:
    for run in runs:
        for secret in (RIGHT_KEY, WRONG_KEY):
            assert secret not in run.stdout + run.stderr, str(run)


# -- keen mcp list --------------------------------------------------------------------------------


def test_list_json_states_and_keys(listed: Listed) -> None:
    run = listed.as_json
    assert run.code == 0, str(run)
    rows = run.json()
    assert [row["name"] for row in rows] == [
        "basic", "slow", "hang", "exit", "garbage", "missing",
        "http-ok", "http-wrong", "http-none", "http-oauth", "off",
    ]  # fmt: skip
    for row in rows:
        assert set(row) == LIST_KEYS, row
    by = {row["name"]: row for row in rows}
    expected = {
        "basic": ("stdio", "none", "connected", 8),
        "slow": ("stdio", "none", "connected", 8),
        "hang": ("stdio", "none", "disconnected", 0),
        "exit": ("stdio", "none", "disconnected", 0),
        "garbage": ("stdio", "none", "disconnected", 0),
        "missing": ("stdio", "none", "disconnected", 0),
        "http-ok": ("streamable_http", "api_key", "connected", 7),
        "http-wrong": ("streamable_http", "api_key", "auth_failed", 0),
        "http-none": ("streamable_http", "none", "auth_required", 0),
        "http-oauth": ("streamable_http", "oauth", "auth_required", 0),
        "off": ("stdio", "none", "configured", 0),
    }
    for name, (transport, auth, state, tools) in expected.items():
        row = by[name]
        assert (row["transport"], row["auth"], row["state"], row["tool_count"]) == (
            transport,
            auth,
            state,
            tools,
        ), row
    assert by["basic"]["last_error"] == ""
    assert by["http-ok"]["last_error"] == ""
    _no_secrets(run)


def test_list_errors_say_what_to_do(listed: Listed) -> None:
    by = {row["name"]: row["last_error"] for row in listed.as_json.json()}
    assert "initialize within 1 s" in by["hang"] and '"timeouts.connect"' in by["hang"]
    assert "fatal: demo crash" in by["exit"] and "keen mcp connect exit" in by["exit"]
    assert "non-JSON on stdout" in by["garbage"] and "stderr" in by["garbage"]
    assert "no-such-mcp-server" in by["missing"] and 'fix "command"' in by["missing"]
    assert "rejected the API key" in by["http-wrong"] and '"auth.key"' in by["http-wrong"]
    assert '"auth"' in by["http-none"] and "api_key" in by["http-none"]
    assert "keen mcp connect http-oauth" in by["http-oauth"]
    assert '"enabled": false' in by["off"]


def test_list_table(listed: Listed) -> None:
    run = listed.table
    assert run.code == 0, str(run)
    header = next(line for line in run.stdout.splitlines() if "transport" in line)
    for column in ("name", "transport", "auth", "state", "tools", "last error"):
        assert column in header
    body = run.stdout.split("─\n", 1)[1]  # the rows, under the header's rule
    lines = {line.split()[0]: line for line in body.splitlines() if line and not line.startswith(" ")}
    assert "connected" in lines["basic"] and "8" in lines["basic"]
    assert "auth_failed" in lines["http-wrong"]
    assert "auth_required" in lines["http-none"]
    assert "auth_required" in lines["http-oauth"]
    assert "disconnected" in lines["missing"]
    assert "disabled" in lines["off"]
    _no_secrets(run)


def test_a_server_that_exits_at_once_is_started_once(listed: Listed) -> None:
    # No automatic retry: each of the two `list` runs starts it exactly once.
    assert listed.exit_log.count("--- keen: starting exit") == 2, listed.exit_log[:2000]
    assert "connecting" not in listed.table.stdout, str(listed.table)


def test_list_with_no_config_tells_how_to_add_servers(tmp_path: Path) -> None:
    home = _make_home(tmp_path)
    table, as_json = home.keen_many(["mcp", "list"], ["mcp", "list", "--json"])
    assert table.code == 0 and as_json.code == 0
    assert "keen mcp import" in table.stdout
    assert as_json.json() == []
    assert not (home.home / ".keen").exists()


# -- broken configs -------------------------------------------------------------------------------

BROKEN: dict[str, tuple[str, list[str], list[str]]] = {
    "json": ('{"version": 1,\n  "servers": {,}}', ["mcp", "list"], ["line 2, column 15", "fix the syntax"]),
    "version": ('{"version": 7, "servers": {}}', ["mcp", "list", "--json"], ['"version": 1']),
    "name": (
        '{"version": 1, "servers": {"mcp:x": {"command": "x"}}}',
        ["mcp", "tools", "mcp:x"],
        ["'mcp:x'", "letters, digits"],
    ),
    "url": (
        '{"version": 1, "servers": {"s": {"url": "ftp://h/mcp"}}}',
        ["mcp", "call", "s", "t", "--yes"],
        ["'url'", "http:// or https://"],
    ),
    "key": (
        '{"version": 1, "servers": {"s": {"url": "http://127.0.0.1:9/mcp", "auth": {"type": "api_key"}}}}',
        ["mcp", "tools", "s"],
        ["'auth.key'", 'add "key"'],
    ),
    "unset-var": (
        '{"version": 1, "servers": {"s": {"command": "${KEEN_CLI_TEST_UNSET}"}}}',
        ["mcp", "tools", "s", "--json"],
        ["KEEN_CLI_TEST_UNSET", "export"],
    ),
}


@pytest.mark.parametrize("kind", sorted(BROKEN))
def test_broken_config_exits_2_naming_the_problem(kind: str, tmp_path: Path) -> None:
    text, command, needles = BROKEN[kind]
    home = _make_home(tmp_path)
    home.config_path.parent.mkdir(parents=True)
    home.config_path.write_text(text)
    run = home.keen(*command)
    assert run.code == 2, str(run)
    assert run.stdout == "", str(run)
    flat = " ".join(run.stderr.split())
    assert str(home.config_path) in flat, str(run)
    for needle in needles:
        assert needle in flat, str(run)
    assert home.config_path.read_text() == text  # nothing rewritten, nothing lost


# -- keen mcp tools -------------------------------------------------------------------------------


def test_tools_table_and_json(mixed: Home) -> None:
    table, as_json, http = mixed.keen_many(
        ["mcp", "tools", "basic"], ["mcp", "tools", "basic", "--json"], ["mcp", "tools", "http-ok", "--json"]
    )
    assert table.code == 0, str(table)
    assert "basic: 8 tools" in table.stdout
    assert "Add two integers." in table.stdout
    assert as_json.code == 0, str(as_json)
    tools = as_json.json()
    assert {t["name"] for t in tools} == BASIC_TOOLS
    for tool in tools:
        assert {"name", "description", "inputSchema"} <= set(tool) <= {
            "name", "title", "description", "inputSchema", "annotations", "outputSchema",
        }  # fmt: skip
    add = next(t for t in tools if t["name"] == "add")
    assert add["inputSchema"]["required"] == ["a", "b"]
    assert add["annotations"]["readOnlyHint"] is True
    assert http.code == 0, str(http)
    assert {t["name"] for t in http.json()} == BASIC_TOOLS - {"die"}
    _no_secrets(table, as_json, http)


def test_tools_of_unusable_servers_exit_2(mixed: Home) -> None:
    unknown, wrong_key, crashed, disabled = mixed.keen_many(
        ["mcp", "tools", "nope"],
        ["mcp", "tools", "http-wrong"],
        ["mcp", "tools", "exit"],
        ["mcp", "tools", "off"],
    )
    assert unknown.code == 2 and '"nope" is not configured' in unknown.stderr, str(unknown)
    assert wrong_key.code == 2 and "rejected" in wrong_key.stderr, str(wrong_key)
    assert "keen mcp connect http-wrong" in wrong_key.stderr
    assert crashed.code == 2 and "fatal: demo crash" in crashed.stderr, str(crashed)
    assert disabled.code == 2 and "disabled" in disabled.stderr, str(disabled)
    assert "run: keen mcp enable off" in disabled.stderr and "restart" not in disabled.stderr
    for run in (unknown, wrong_key, crashed, disabled):
        assert run.stdout == ""
    _no_secrets(unknown, wrong_key, crashed, disabled)


# -- keen mcp call --------------------------------------------------------------------------------


def test_call_success_and_tool_error(mixed: Home) -> None:
    # The console script for a success and a tool error (exit codes of a real process) ...
    ok, tool_error_json = mixed.keen_processes(
        ["mcp", "call", "basic", "add", "--args", '{"a": 2, "b": 40}', "--yes"],
        ["mcp", "call", "basic", "fail", "--args", '{"message": "boom 18"}', "--yes", "--json"],
    )
    # ... the rest in-process.
    ok_json, http, tool_error = mixed.keen_many(
        ["mcp", "call", "basic", "echo", "--args", '{"text": "hi there"}', "--yes", "--json"],
        ["mcp", "call", "http-ok", "add", "--args", '{"a": 1, "b": 1}', "--yes"],
        ["mcp", "call", "basic", "fail", "--args", '{"message": "boom 17"}', "--yes"],
    )
    assert ok.code == 0 and ok.stdout.strip() == "42", str(ok)
    assert ok_json.code == 0, str(ok_json)
    body = ok_json.json()
    assert set(body) <= {"content", "isError", "structuredContent"}
    assert body["isError"] is False
    assert body["content"] == [{"type": "text", "text": "hi there"}]
    assert http.code == 0 and http.stdout.strip() == "2", str(http)
    assert tool_error.code == 1, str(tool_error)
    assert "boom 17" in tool_error.stderr and tool_error.stdout == ""
    assert tool_error_json.code == 1, str(tool_error_json)
    assert tool_error_json.json()["isError"] is True
    assert "boom 18" in json.dumps(tool_error_json.json()["content"])
    _no_secrets(ok, ok_json, http, tool_error, tool_error_json)


def test_call_keen_errors_exit_2(mixed: Home) -> None:
    runs = mixed.keen_many(
        ["mcp", "call", "basic", "add", "--args", '{"a": "two"}', "--yes"],
        ["mcp", "call", "basic", "ad", "--args", "{}", "--yes"],
        ["mcp", "call", "nope", "add", "--yes"],
        ["mcp", "call", "slow", "sleep", "--args", '{"seconds": 5}', "--yes"],
        ["mcp", "call", "basic", "die", "--yes"],
        ["mcp", "call", "basic", "add", "--args", "{not json", "--yes"],
        ["mcp", "call", "basic", "add", "--args", "[1, 2]", "--yes"],
        ["mcp", "call", "hang", "add", "--yes"],
        ["mcp", "call", "http-oauth", "add", "--yes"],
    )
    expected = [
        ["invalid arguments", "$.a", "'b' is a required property"],
        ['has no tool "ad"', "add"],
        ['"nope" is not configured', "basic"],
        ["within 0.5 s", '"timeouts.call_tool"'],
        ['"basic"', "keen mcp connect basic"],
        ["--args is not valid JSON", "line 1, column 2"],
        ["--args must be a JSON object"],
        ['"hang"', "did not answer initialize"],
        ["keen mcp connect http-oauth"],
    ]
    for run, needles in zip(runs, expected, strict=True):
        assert run.code == 2, str(run)
        assert run.stdout == "", str(run)
        flat = " ".join(run.stderr.split())
        for needle in needles:
            assert needle in flat, f"{needle!r} missing\n{run}"


def test_call_output_that_cannot_be_written_is_refused_before_the_call(tmp_path: Path) -> None:
    """--output is checked before the tool runs (a write must not run for a result that cannot
    be saved, and a retry would run it twice); a write that fails anyway prints the result."""
    home = _make_home(tmp_path)
    spec = {"tools": [{"name": "write", "inputSchema": {"type": "object"}}], "stderr_on_call": "CALLED"}
    home.write({"w": hostile_entry(tmp_path / "spec.json", spec)})
    log = home.keen_home / "logs" / "w.stderr.log"
    missing, folder = home.keen_many(
        ["mcp", "call", "w", "write", "--yes", "--output", str(tmp_path / "no" / "such" / "out.txt")],
        ["mcp", "call", "w", "write", "--yes", "--output", str(tmp_path)],
    )
    assert missing.code == 2 and "does not exist" in missing.stderr, str(missing)
    assert folder.code == 2 and "is a directory" in folder.stderr, str(folder)
    assert not log.exists() or "CALLED" not in log.read_text(), "the tool ran although --output was unusable"
    if Path("/dev/full").exists():  # writes there fail with ENOSPC after every check passed
        full = home.keen("mcp", "call", "w", "write", "--yes", "--output", "/dev/full")
        assert full.code == 2 and "its whole result is on stdout instead" in full.stderr, str(full)
        assert full.stdout.strip() == "ok", str(full)
        assert "CALLED" in log.read_text()


def test_tools_table_keeps_descriptions_beside_a_very_long_tool_name(tmp_path: Path) -> None:
    home = _make_home(tmp_path)
    long_name = "x" * 300
    spec = {
        "tools": [
            {"name": long_name, "description": "Long-named tool.", "inputSchema": {"type": "object"}},
            {"name": "short", "description": "Short-named tool.", "inputSchema": {"type": "object"}},
        ]
    }
    home.write({"w": hostile_entry(tmp_path / "spec.json", spec)})
    run = home.keen("mcp", "tools", "w")
    assert run.code == 0, str(run)
    assert "Long-named tool." in run.stdout and "Short-named tool." in run.stdout, str(run)
    # Folded onto several lines, never cut: every x is there.
    assert run.stdout.count("x") >= 300


def test_call_without_yes_on_a_non_tty_is_refused(mixed: Home) -> None:
    run = mixed.keen("mcp", "call", "basic", "add", "--args", '{"a": 1, "b": 2}')
    assert run.code == 2, str(run)
    assert "--yes" in run.stderr and "nothing was sent" in run.stderr
    assert run.stdout == ""


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["basic", "nope"], 'has no tool "nope"'),
        (["basic", "add", "--args", '{"a": "one"}'], "invalid arguments"),
        (["missing", "echo"], "no-such-mcp-server"),
        (["ghost", "echo"], "not configured"),
    ],
)
def test_call_without_yes_that_cannot_run_says_why_not_to_add_yes(
    mixed: Home, args: list[str], needle: str
) -> None:
    # Without a terminal every call was refused up front with "needs approval ... rerun with
    # --yes", and rerunning with --yes only then told the real problem (a tool that does not
    # exist, invalid arguments, a server that does not start).
    run = mixed.keen("mcp", "call", *args)
    assert run.code == 2, str(run)
    assert needle in run.stderr and "--yes" not in run.stderr, str(run)


# -- keen mcp import ------------------------------------------------------------------------------

CLAUDE_DESKTOP = {
    "mcpServers": {
        "filesystem": {
            "command": "npx",
            "args": ["-y", "@modelcontextprotocol/server-filesystem", "/Users/me/Desktop"],
        },
        "internal": {
            "type": "http",
            "url": "https://mcp.example.com/mcp",
            "headers": {"Authorization": f"Bearer {RIGHT_KEY}"},
        },
        "weather": {"command": "uvx", "args": ["weather-mcp"], "env": {"API_TOKEN": "${WEATHER_TOKEN}"}},
        "bad name!": {"command": "x"},
        "legacy": {"type": "sse", "url": "https://old.example.com/sse"},
    }
}


def test_import_claude_desktop_file(tmp_path: Path) -> None:
    home = _make_home(tmp_path)
    source = tmp_path / "claude_desktop_config.json"
    source.write_text(json.dumps(CLAUDE_DESKTOP))

    run = home.keen("mcp", "import", str(source))

    assert run.code == 1, str(run)  # one entry was refused; the others are imported all the same
    for name in ("filesystem", "internal", "weather", "legacy"):
        assert f"imported {name}" in run.stdout
    assert "refused bad name!" in run.stderr and "--rename" in run.stderr
    assert "note legacy" in run.stderr and "deprecated" in run.stderr and "/mcp" in run.stderr
    assert str(home.config_path) in run.stdout
    _no_secrets(run)
    assert stat.S_IMODE(home.config_path.stat().st_mode) == 0o600
    servers = load_config(home.config_path, environ={"WEATHER_TOKEN": "t"}).servers
    assert list(servers) == ["filesystem", "internal", "weather", "legacy"]
    assert servers["legacy"].transport == "sse"
    assert servers["filesystem"].transport == "stdio"
    assert servers["internal"].transport == "streamable_http"
    assert servers["internal"].auth_type == "api_key"
    raw = json.loads(home.config_path.read_text())
    assert raw["servers"]["weather"]["env"] == {"API_TOKEN": "${WEATHER_TOKEN}"}  # kept unexpanded
    assert not (home.home / ".keen").exists()


def test_import_keeps_existing_servers_unless_overwrite(tmp_path: Path) -> None:
    home = _make_home(tmp_path)
    home.write({"filesystem": {"command": "my-own-fs"}, "mine": {"command": "mine"}})
    source = tmp_path / "mcp.json"
    source.write_text(json.dumps({"mcpServers": {"filesystem": {"command": "npx"}, "new": {"command": "n"}}}))

    kept = home.keen("mcp", "import", str(source))
    assert kept.code == 1, str(kept)  # filesystem was skipped
    assert "imported new" in kept.stdout
    assert "skipped filesystem" in kept.stderr and "--overwrite" in kept.stderr
    raw = json.loads(home.config_path.read_text())
    assert list(raw["servers"]) == ["filesystem", "mine", "new"]
    assert raw["servers"]["filesystem"] == {"command": "my-own-fs"}

    replaced = home.keen("mcp", "import", str(source), "--overwrite")
    assert replaced.code == 0, str(replaced)
    raw = json.loads(home.config_path.read_text())
    assert raw["servers"]["filesystem"] == {"transport": "stdio", "command": "npx"}
    assert raw["servers"]["mine"] == {"command": "mine"}
    assert stat.S_IMODE(home.config_path.stat().st_mode) == 0o600


def test_import_with_nothing_importable_exits_1_or_2(tmp_path: Path) -> None:
    home = _make_home(tmp_path)
    refused_only = tmp_path / "refused.json"
    refused_only.write_text(json.dumps({"mcpServers": {"a b": {"command": "x"}}}))
    not_json = tmp_path / "broken.json"
    not_json.write_text('{"mcpServers": ')
    no_servers = tmp_path / "other.json"
    no_servers.write_text('{"theme": "dark"}')
    runs = home.keen_many(
        ["mcp", "import", str(refused_only)],
        ["mcp", "import", str(not_json)],
        ["mcp", "import", str(no_servers)],
        ["mcp", "import", str(tmp_path / "absent.json")],
    )
    needles = ["refused a b", "line 1, column 16", '"mcpServers"', "does not exist"]
    # A refused entry is the file's (1); a file Keen cannot use at all, an error (2).
    for run, needle, code in zip(runs, needles, [1, 2, 2, 2], strict=True):
        assert run.code == code, str(run)
        assert needle in " ".join(run.stderr.split()), str(run)
    assert not home.config_path.exists()


def test_import_merges_beside_a_broken_entry_and_refuses_an_unparseable_file(tmp_path: Path) -> None:
    home = _make_home(tmp_path)
    home.config_path.parent.mkdir(parents=True)
    home.config_path.write_text('{"version": 1, "servers": {"x": {"url": "nope"}}}')
    source = tmp_path / "mcp.json"
    source.write_text(json.dumps({"mcpServers": {"new": {"command": "n"}}}))
    run = home.keen("mcp", "import", str(source))
    assert run.code == 0, str(run)  # one broken entry is no reason to refuse: it is kept as written
    assert json.loads(home.config_path.read_text())["servers"] == {
        "x": {"url": "nope"},
        "new": {"transport": "stdio", "command": "n"},
    }
    home.config_path.write_text('{"version": 1, "servers": {,}}')
    run = home.keen("mcp", "import", str(source))
    assert run.code == 2, str(run)
    assert "line 1" in run.stderr
    assert home.config_path.read_text() == '{"version": 1, "servers": {,}}'
