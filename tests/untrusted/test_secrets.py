"""No configured secret in any output.

Secrets reach Keen through a stdio server's ``env`` (after ``${VAR}`` expansion, under a
name that says nothing about secrets), an HTTP URL's query and userinfo. Hostile raw
JSON-RPC servers echo them on stderr, in JSON-RPC errors and before crashing. Every CLI
output (``list --json``, ``-v`` logs, ``call`` and ``connect`` errors, ``sync``) and every
file under ``KEEN_HOME`` (markers, SKILL.md, the stderr logs) is searched for them.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from helpers.hostile import CliRun, files_containing, hostile_entry, keen_cli
from keen.mcp import Manager
from keen.trust import PinGuard

pytestmark = pytest.mark.slow_file

STDIO_SECRET = "tok-stdio-5e8a1f93c2"
QUERY_SECRET = "qtok-0b7d44e1a9"
USER_SECRET = "upass-6c2f90ad17"
SECRETS = (STDIO_SECRET, QUERY_SECRET, USER_SECRET)


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def home(tmp_path: Path) -> Path:
    keen_home = tmp_path / "keen-home"
    (keen_home / "mcp").mkdir(parents=True)
    env = {"UPSTREAM": "${UPSTREAM_CRED}", "LOG_LEVEL": "info", "DB_HOST": "127.0.0.1:5432"}
    port = _closed_port()
    servers: dict[str, Any] = {
        # Prints the secret on stderr and exits before answering initialize.
        "early": hostile_entry(
            tmp_path / "early.json",
            {
                "stderr_at_start": "fatal: bad credential {env:UPSTREAM} for upstream at {env:DB_HOST}",
                "exit_at_start": 3,
            },
            env=env,
        ),
        # Connects; its tools echo the secret in a JSON-RPC error and on stderr before dying.
        "chatty": hostile_entry(
            tmp_path / "chatty.json",
            {
                "tools": [
                    {"name": "leak", "inputSchema": {"type": "object"}},
                    {"name": "crash", "inputSchema": {"type": "object"}},
                    # Quotes the secret in everything it says about itself.
                    {
                        "name": "lookup",
                        "title": "Lookup with {env:UPSTREAM}",
                        "description": "Looks things up with key {env:UPSTREAM}. Second sentence.",
                        "inputSchema": {
                            "type": "object",
                            "properties": {
                                "key": {"type": "string", "default": "{env:UPSTREAM}"},
                                "id": {"type": "string", "pattern": "^api_key=[a-z]+$"},
                            },
                        },
                        "annotations": {"title": "Lookup {env:UPSTREAM}", "readOnlyHint": True},
                    },
                ],
                "stderr_at_start": "starting with UPSTREAM={env:UPSTREAM}",
                "stderr_on_call": "calling upstream with {env:UPSTREAM}",
                "errors": {"leak": {"code": -32603, "message": "upstream refused {env:UPSTREAM}"}},
                "exit_on_call": {"crash": 1},
            },
            env=env,
        ),
        "web": {
            "transport": "streamable_http",
            "url": f"http://keen:${{USER_PASS}}@127.0.0.1:{port}/mcp?token=${{URL_TOKEN}}&v=2",
            "timeouts": {"connect": 5},
        },
    }
    config = {"version": 1, "servers": servers}
    (keen_home / "mcp" / "configs.json").write_text(json.dumps(config))
    return keen_home


ENV = {"UPSTREAM_CRED": STDIO_SECRET, "URL_TOKEN": QUERY_SECRET, "USER_PASS": USER_SECRET}


# Thirteen keen processes, each starting hostile servers: well under a minute on an idle
# machine, past the suite's 120 s limit at load 19 on 2 CPUs.
@pytest.mark.timeout(300)
def test_no_secret_in_any_output_or_file(home: Path, tmp_path: Path) -> None:
    first = keen_cli("mcp", "sync", keen_home=home, env=ENV)
    assert first.code == 1 and (home / "skills" / "mcp:chatty").is_dir(), first  # web, early: broken
    # chatty breaks: the next sync writes its (stderr-quoting) last_error into the marker.
    spec = json.loads((tmp_path / "chatty.json").read_text())
    (tmp_path / "chatty.json").write_text(json.dumps({**spec, "exit_at_start": 4}))
    broken = keen_cli("mcp", "sync", keen_home=home, env=ENV)
    marker = json.loads((home / "skills" / "mcp:chatty" / ".keen-generated-mcp.json").read_text())
    assert marker["status"] == "disconnected", marker
    assert "starting with UPSTREAM=[REDACTED]" in marker["last_error"], marker
    (tmp_path / "chatty.json").write_text(json.dumps(spec))
    runs: list[CliRun] = [
        broken,
        keen_cli("mcp", "list", "--json", keen_home=home, env=ENV),
        keen_cli("-v", "mcp", "list", keen_home=home, env=ENV),
        keen_cli("-v", "mcp", "sync", keen_home=home, env=ENV),
        keen_cli("-v", "mcp", "call", "chatty", "leak", "--yes", keen_home=home, env=ENV),
        keen_cli("-v", "mcp", "call", "chatty", "crash", "--yes", keen_home=home, env=ENV),
        keen_cli("-v", "mcp", "connect", "early", keen_home=home, env=ENV),
        keen_cli("-v", "mcp", "connect", "web", keen_home=home, env=ENV),
        keen_cli("mcp", "sync", "--json", keen_home=home, env=ENV),
        keen_cli("mcp", "tools", "chatty", "--json", keen_home=home, env=ENV),
        keen_cli("tools", "search", "look things up with a key", "--json", keen_home=home, env=ENV),
        keen_cli("prompt", keen_home=home, env=ENV),
        keen_cli(
            "mcp",
            "call",
            "chatty",
            "lookup",
            "--args",
            '{"id": "api_key=abc"}',
            "--yes",
            keen_home=home,
            env=ENV,
        ),
    ]
    for run in runs:
        for secret in SECRETS:
            assert secret not in run.output, f"{secret} leaked in\n{run}"
    for secret in SECRETS:
        assert files_containing(home, secret) == [], secret

    # The outputs still say what happened, with the secret's place marked.
    runs = runs[1:]
    listed = {s["name"]: s for s in json.loads(runs[0].stdout)}
    # The key is hidden; the address it was used at is configuration, and stays readable.
    assert "fatal: bad credential [REDACTED] for upstream at 127.0.0.1:5432" in listed["early"]["last_error"]
    assert "token=[REDACTED]" in listed["web"]["last_error"]
    assert "[REDACTED]@127.0.0.1" in listed["web"]["last_error"]
    # The server's JSON-RPC error failed the call: exit 1, its message redacted.
    assert runs[3].code == 1 and "upstream refused [REDACTED]" in runs[3].stderr, runs[3]
    assert runs[4].code == 2 and "calling upstream with [REDACTED]" in runs[4].stderr, runs[4]
    assert "[REDACTED]" in runs[5].stderr, runs[5]
    # The tool that quotes the secret keeps its name, its shape and its schema's pattern (only
    # the secret is replaced, so validation is the server's), and it is still called.
    schema = json.loads((home / "skills" / "mcp:chatty" / "schemas" / "lookup.json").read_text())
    assert schema["description"] == "Looks things up with key [REDACTED]. Second sentence."
    assert schema["title"] == "Lookup with [REDACTED]"
    assert schema["inputSchema"]["properties"]["key"]["default"] == "[REDACTED]"
    assert schema["inputSchema"]["properties"]["id"]["pattern"] == "^api_key=[a-z]+$"
    assert runs[-1].code == 0, runs[-1]
    log = (home / "logs" / "chatty.stderr.log").read_text()
    assert "starting with UPSTREAM=[REDACTED]" in log and "calling upstream with [REDACTED]" in log


def test_a_secret_in_a_full_tool_description_is_redacted(tmp_path: Path) -> None:
    """A server with the ``tool_descriptions`` extension lists minimal tools and gives the full
    description and inputSchema in a resource, which Keen reads right after tools/list. The
    secret it quotes there was redacted in tools/list only: the full text, secret and all,
    went into the skill's schema file, the pins and the search index."""
    keen_home = tmp_path / "keen-home"
    (keen_home / "mcp").mkdir(parents=True)
    uri = "resource:///tool_descriptions"
    full = {
        "lookup": {
            "description": "Looks things up with key {env:UPSTREAM}.",
            "inputSchema": {
                "type": "object",
                "properties": {"key": {"type": "string", "default": "{env:UPSTREAM}"}},
            },
        }
    }
    spec = {
        "tools": [{"name": "lookup", "description": "Look up.", "inputSchema": {"type": "object"}}],
        "resources": [{"uri": uri, "name": "tool_descriptions"}],
        "resource_reads": {uri: json.dumps(full)},
    }
    entry = hostile_entry(tmp_path / "ext.json", spec, env={"UPSTREAM": "${UPSTREAM_CRED}"})
    (keen_home / "mcp" / "configs.json").write_text(json.dumps({"version": 1, "servers": {"ext": entry}}))
    env = {"UPSTREAM_CRED": STDIO_SECRET}
    synced = keen_cli("mcp", "sync", keen_home=keen_home, env=env)
    assert synced.code == 0, synced
    listed = keen_cli("mcp", "tools", "ext", "--json", keen_home=keen_home, env=env)
    assert listed.code == 0, listed
    (tool,) = json.loads(listed.stdout)
    # The full description replaced the minimal one, with the secret blanked.
    assert tool["description"] == "Looks things up with key [REDACTED]."
    assert tool["inputSchema"]["properties"]["key"]["default"] == "[REDACTED]"
    assert STDIO_SECRET not in synced.output + listed.output
    assert files_containing(keen_home, STDIO_SECRET) == []


@pytest.mark.anyio
async def test_a_secret_in_a_resource_list_is_redacted(
    write_config: Callable[..., Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Resources (and templates and prompts) are listed at connect time for the capability
    catalog, which the model reads, and for ``keen serve``'s hosts. A secret the server
    quoted in a resource's title or description went to both as written; its URI and name
    stay as sent (a read must send them)."""
    monkeypatch.setenv("UPSTREAM_CRED", STDIO_SECRET)
    resource = {
        "uri": "file:///notes/today.txt",
        "name": "today",
        "title": "Notes of {env:UPSTREAM}",
        "description": "Read with key {env:UPSTREAM}.",
    }
    spec = {"tools": [{"name": "t", "inputSchema": {"type": "object"}}], "resources": [resource]}
    entry = hostile_entry(tmp_path / "res.json", spec, env={"UPSTREAM": "${UPSTREAM_CRED}"})
    async with Manager(write_config({"res": entry}), trust=PinGuard()) as manager:
        assert await manager.wait_ready(20)
        (listed,) = manager.list_resources("res")
    assert listed == {
        "uri": "file:///notes/today.txt",
        "name": "today",
        "title": "Notes of [REDACTED]",
        "description": "Read with key [REDACTED].",
    }


def test_a_secret_in_the_servers_instructions_or_info_is_redacted(tmp_path: Path) -> None:
    """A server's initialize ``instructions`` and ``serverInfo`` (name, title, version) were
    stored as sent, so a secret Keen gave the server, quoted there, was written into SKILL.md."""
    keen_home = tmp_path / "keen-home"
    (keen_home / "mcp").mkdir(parents=True)
    spec = {
        "tools": [{"name": "lookup", "description": "Look up.", "inputSchema": {"type": "object"}}],
        "instructions": "Looks things up in the archive. Uses key {env:UPSTREAM} for upstream.",
        "server_name": "srv-{env:UPSTREAM}",
        "server_title": "Archive {env:UPSTREAM}",
        "server_version": "1.0+{env:UPSTREAM}",
    }
    entry = hostile_entry(tmp_path / "i.json", spec, env={"UPSTREAM": "${UPSTREAM_CRED}"})
    (keen_home / "mcp" / "configs.json").write_text(json.dumps({"version": 1, "servers": {"ins": entry}}))
    env = {"UPSTREAM_CRED": STDIO_SECRET}
    synced = keen_cli("mcp", "sync", keen_home=keen_home, env=env)
    assert synced.code == 0, synced
    shown = keen_cli("mcp", "list", "--json", keen_home=keen_home, env=env)
    assert shown.code == 0, shown
    assert STDIO_SECRET not in synced.output + shown.output
    assert files_containing(keen_home, STDIO_SECRET) == []
    skill = "\n".join(path.read_text() for path in keen_home.rglob("SKILL.md"))
    assert "Uses key [REDACTED] for upstream." in skill


@pytest.mark.anyio
async def test_the_servers_info_is_redacted_where_it_is_stored(
    write_config: Callable[..., Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("UPSTREAM_CRED", STDIO_SECRET)
    spec = {
        "tools": [{"name": "t", "inputSchema": {"type": "object"}}],
        "instructions": "Key {env:UPSTREAM}.",
        "server_name": "srv-{env:UPSTREAM}",
        "server_title": "Archive {env:UPSTREAM}",
        "server_version": "1.0+{env:UPSTREAM}",
    }
    entry = hostile_entry(tmp_path / "info.json", spec, env={"UPSTREAM": "${UPSTREAM_CRED}"})
    async with Manager(write_config({"info": entry}), trust=PinGuard()) as manager:
        assert await manager.wait_ready(20)
        info = manager.status("info").info
    assert info is not None
    assert (info.name, info.title, info.version, info.instructions) == (
        "srv-[REDACTED]",
        "Archive [REDACTED]",
        "1.0+[REDACTED]",
        "Key [REDACTED].",
    )
