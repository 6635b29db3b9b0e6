"""One broken server never breaks the others (README "Configuration"): a config with one
server broken three ways and two healthy servers, through the CLI from a temporary
``KEEN_HOME``, in ``keen mcp list``, ``keen mcp sync`` and ``keen mcp tools``, and in the
library (``Manager``). Only a file that cannot be parsed fails the whole command."""

from __future__ import annotations

import json
import re
from pathlib import Path

import anyio
import pytest

from helpers import stdio_entry
from helpers.cli import Home, make_home
from keen.errors import ConfigError, ServerMisconfigured
from keen.mcp import Manager
from keen.mcp.config import parse_config
from keen.mcp.types import ServerState
from keen.trust import PinGuard

BROKEN = {
    "unset": ("${KEEN_TEST_NEVER_SET}", ["KEEN_TEST_NEVER_SET", "export KEEN_TEST_NEVER_SET"]),
    "typo": (None, ["'comand'", "check its spelling"]),
    "ftp": (None, ["'url'", "http:// or https://"]),
}


def _servers() -> dict[str, object]:
    return {
        "alpha": stdio_entry("basic_stdio"),
        "unset": {"command": "${KEEN_TEST_NEVER_SET}"},
        "typo": {"comand": "x", "url": "http://127.0.0.1:9/mcp"},
        "ftp": {"url": "ftp://127.0.0.1/mcp", "auth": {"type": "api_key", "key": "k"}},
        "beta": stdio_entry("basic_stdio"),
    }


# What each broken entry still says: transport (written, or inferred from url/command) and auth.
KINDS = {
    "unset": ("stdio", "none"),
    "typo": ("streamable_http", "none"),
    "ftp": ("streamable_http", "api_key"),
}


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Home:
    home = make_home(tmp_path_factory.mktemp("broken"))
    home.write(_servers())
    return home


def test_list_shows_each_broken_server_alone_with_its_fix(home: Home) -> None:
    text = home.config_path.read_text()
    run = home.keen("mcp", "list", "--json", "--timeout", "30")
    assert run.code == 0, str(run)
    by = {s["name"]: s for s in run.json()}
    assert set(by) == {"alpha", "beta", "unset", "typo", "ftp"}
    assert by["alpha"]["state"] == by["beta"]["state"] == "connected"
    assert by["alpha"]["tool_count"] > 0
    for name, (_, needles) in BROKEN.items():
        assert by[name]["state"] == "config_error", by[name]
        for needle in needles:
            assert needle in by[name]["last_error"], by[name]
        assert f"keen mcp connect {name}" in by[name]["last_error"]
        assert (by[name]["transport"], by[name]["auth"]) == KINDS[name], by[name]
    table = home.keen("mcp", "list")
    assert table.code == 0, str(table)
    flat = " ".join(table.stdout.split())
    assert flat.count("config_error") == 3 and flat.count("connected") == 2
    # The rows under the header's rule; columns are two or more spaces apart.
    body = table.stdout.split("─\n", 1)[1].splitlines()
    cells = [re.split(r"\s{2,}", line.strip()) for line in body if line and not line.startswith(" ")]
    rows = {row[0]: row[1:3] for row in cells}
    for name, (transport, auth) in KINDS.items():
        assert [c.strip() for c in rows[name]] == [transport, auth], table.stdout
    assert "?" not in " ".join(c for row in rows.values() for c in row)
    assert home.config_path.read_text() == text  # nothing rewritten


def test_sync_generates_the_healthy_and_reports_the_broken(home: Home) -> None:
    run = home.keen("mcp", "sync", "--json", "--timeout", "30")
    assert run.code == 1, str(run)  # the healthy are synced; a script learns not all were
    by = {e["server"]: e for e in run.json()["servers"]}
    for name in ("alpha", "beta"):
        assert by[name]["action"] == "generated" and by[name]["enabled"]
    for name, (_, needles) in BROKEN.items():
        entry = by[name]
        assert entry["state"] == "config_error" and entry["action"] == "disabled" and not entry["enabled"]
        assert entry["remedy"] == "fix_config"
        for needle in needles:
            assert needle in entry["error"], entry
    assert (home.keen_home / "skills" / "mcp:alpha" / "SKILL.md").is_file()
    assert not (home.keen_home / "skills" / "mcp:unset" / "SKILL.md").exists()


def test_a_broken_server_named_in_a_command_exits_2_with_its_fix(home: Home) -> None:
    run = home.keen("mcp", "tools", "unset")
    assert run.code == 2, str(run)
    flat = " ".join(run.stderr.split())
    assert "export KEEN_TEST_NEVER_SET" in flat and "Traceback" not in run.stderr
    ok = home.keen("mcp", "tools", "beta", "--json")
    assert ok.code == 0, str(ok)
    assert {t["name"] for t in ok.json()} >= {"echo", "add"}


@pytest.mark.e2e
@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ('{"version": 1,\n "servers": {,}}', "line 2"),
        ('{"version": 9, "servers": {}}', '"version": 1'),
        ('{"mcpServers": {"a": {"command": "x"}}}', "keen mcp import"),
    ],
)
def test_only_an_unusable_file_fails_everything(text: str, needle: str, tmp_path: Path) -> None:
    home = make_home(tmp_path)
    home.config_path.parent.mkdir(parents=True)
    home.config_path.write_text(text)
    run = home.keen("mcp", "list")
    assert run.code == 2, str(run)
    assert needle in " ".join(run.stderr.split()), str(run)
    # The front ends that keep an event log refuse the file before writing a line of it:
    # an audit log that says a session started when none could is a false record.
    (script := tmp_path / "model.jsonl").write_text('{"content": "hi"}\n')
    for args in (
        ("serve",),
        ("serve", "--transport", "http", "--port", "1"),
        ("chat", "-p", "hi", "--model", f"scripted:{script}"),
    ):
        run = home.keen_process(*args)
        assert run.code == 2 and needle in " ".join(run.stderr.split()), str(run)
    # Caches (the token counter's) are no record of anything: only they may appear.
    written = [
        p
        for p in home.keen_home.rglob("*")
        if p.is_file() and p != home.config_path and "cache" not in p.relative_to(home.keen_home).parts
    ]
    assert written == [], written


def test_keen_serve_with_a_config_path_that_is_not_there_says_so(home: Home, tmp_path: Path) -> None:
    # keen serve --config <typo> served no server, without a word, to the host that ran it.
    missing = tmp_path / "nowhere" / "configs.json"
    run = home.keen("serve", "--config", str(missing))
    assert run.code == 2, str(run)
    assert f"--config {missing}: no such file" in " ".join(run.stderr.split()), str(run)


def test_the_library_keeps_the_healthy_servers(home: Home) -> None:
    text = json.dumps({"version": 1, "servers": _servers()})
    with pytest.raises(ConfigError, match="KEEN_TEST_NEVER_SET"):
        parse_config(text, environ={})  # strict by default: a validator of a whole file
    config = parse_config(text, environ={}, strict=False)
    assert list(config.servers) == ["alpha", "beta"]
    assert set(config.invalid) == {"unset", "typo", "ftp"}
    with pytest.raises(ConfigError, match="unset"):
        config.raise_for_invalid()

    async def main() -> None:
        # Manager loads configs.json itself the same way: no strict flag to know about.
        async with Manager(home.config_path, logs_dir=home.keen_home / "logs", trust=PinGuard()) as manager:
            assert await manager.wait_ready(30)
            states = {s.name: s.state for s in manager.servers()}
            assert states["alpha"] is ServerState.CONNECTED and states["beta"] is ServerState.CONNECTED
            assert states["ftp"] is ServerState.CONFIG_ERROR
            result = await manager.call_tool("beta", "echo", {"text": "hi"})
            assert "hi" in result.text
            with pytest.raises(ServerMisconfigured, match="ftp://"):
                await manager.call_tool("ftp", "echo", {"text": "hi"})

    anyio.run(main)


def test_sync_exits_0_when_every_enabled_server_connected(tmp_path: Path) -> None:
    home = make_home(tmp_path)
    home.write({"alpha": stdio_entry("basic_stdio"), "off": {"command": "never-run", "enabled": False}})
    run = home.keen("mcp", "sync", "--json", "--timeout", "30")
    assert run.code == 0, str(run)  # a server the user disabled is no failure
    by = {e["server"]: e for e in run.json()["servers"]}
    assert by["alpha"]["action"] == "generated" and not by["off"]["enabled"]


def test_sync_reports_an_invalid_name_like_any_broken_entry(tmp_path: Path) -> None:
    home = make_home(tmp_path)
    home.write({"bad name!": {"command": "x"}, "alpha": stdio_entry("basic_stdio")})
    run = home.keen("mcp", "sync", "--json", "--timeout", "30")
    assert run.code == 1, str(run)
    by = {e["server"]: e for e in run.json()["servers"]}
    bad = by["bad name!"]
    assert (bad["state"], bad["action"], bad["enabled"], bad["remedy"]) == (
        "config_error",
        "disabled",
        False,
        "fix_config",
    ), bad
    assert "server name 'bad name!' is invalid" in bad["error"] and bad["skill_path"] is None
    assert by["alpha"]["action"] == "generated"
    assert sorted(p.name for p in (home.keen_home / "skills").iterdir() if p.name.startswith("mcp:")) == [
        "mcp:alpha"
    ]


@pytest.mark.parametrize("given", ["0", "-1", "nan", "inf"])
@pytest.mark.parametrize(
    "option", ["--pins-poll", "--auth-ttl", "--session-ttl", "--notify-interval", "--ready-wait"]
)
def test_keen_serve_refuses_a_time_that_is_not_a_number_of_seconds(
    home: Home, option: str, given: str
) -> None:
    # NaN slipped past a `<= 0` check and KeenServer refused it with a traceback; every time
    # option now shares one check (--ready-wait alone may be 0: no wait).
    run = home.keen("serve", option, given)
    if option == "--ready-wait" and given == "0":
        assert run.code == 0, str(run)  # the host closes stdin at once: served, and ended
        return
    assert run.code == 2, str(run)
    said = " ".join(run.stderr.split())
    what = "a number of seconds >= 0" if option == "--ready-wait" else "a positive number of seconds"
    assert f"{option} must be {what}, got {float(given)!r}; " in said, str(run)
    assert "internal error" not in said, str(run)


def test_keen_serve_takes_a_pins_poll(home: Home) -> None:
    # The host closes stdin at once: keen serve starts with the option, serves, and ends.
    run = home.keen("-v", "serve", "--mode", "extension", "--pins-poll", "0.25")
    assert run.code == 0, str(run)
    # The option reaches KeenServer (before, dropping it from the call failed no test).
    assert "keen serve: looks at the pin files every 0.25 s (--pins-poll)" in run.stderr, str(run)
