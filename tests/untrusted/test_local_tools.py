"""The model's local tools (read_file, list_dir, glob, grep) against a model that attacks.

A scripted model drives the real ``keen chat -p`` in a subprocess whose workspace is the
home folder, with ``KEEN_HOME=~/.keen`` inside it (the default layout). It tries to read
Keen's own files (an OAuth token, configs.json) directly, through ``..``, an absolute path
and symlinks, to grep and glob them, and to read a workspace file holding a copy of a
known secret; then it tries to hang the agent with a backtracking pattern, a FIFO and a
grep that runs for minutes, which SIGTERM and SIGINT must still end at once.
(Local tools exist only in ``keen chat`` and the REPL; ``keen mcp call`` offers none, and
a host of ``keen serve`` is shown to have none either.)
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from helpers.hostile import KEEN, CliRun, hostile_entry, keen_cli, keen_env
from helpers.serve import in_process

OAUTH_TOKEN = "gho_oauthTokenForGithub7f3e9a1c"
REFRESH_TOKEN = "ghr_refreshToken0d8b2c64e5"
ENV_KEY = "sk-upstream-5b9e1d7a3c"


@dataclass(frozen=True)
class World:
    home: Path  # the workspace: keen chat runs here
    keen_home: Path

    def script(self, *steps: list[tuple[str, dict[str, Any]]] | str) -> str:
        """A scripted model: each step is a list of local tool calls, or the final answer."""
        lines = [
            {"content": step}
            if isinstance(step, str)
            else {"content": "", "tool_calls": [{"name": n, "arguments": a} for n, a in step]}
            for step in steps
        ]
        path = self.home.parent / f"script-{time.monotonic_ns()}.jsonl"  # outside the workspace
        path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
        return f"scripted:{path}"

    def chat(self, model: str, *extra: str) -> tuple[CliRun, dict[str, Any]]:
        run = keen_cli(
            "chat",
            "-p",
            "look around",
            "--model",
            model,
            "--json",
            *extra,
            keen_home=self.keen_home,
            cwd=self.home,
        )
        assert run.code in (0, 1) and run.stdout.strip(), run
        return run, json.loads(run.stdout)


@pytest.fixture
def world(tmp_path: Path) -> World:
    home = tmp_path / "home"
    keen_home = home / ".keen"
    (keen_home / "mcp" / "auth").mkdir(parents=True)
    record = {
        "version": 1,
        "server": "github",
        "resource_url": "https://api.example.com/mcp",
        "tokens": {"access_token": OAUTH_TOKEN, "token_type": "Bearer", "refresh_token": REFRESH_TOKEN},
    }
    (keen_home / "mcp" / "auth" / "github.json").write_text(json.dumps(record), encoding="utf-8")
    servers = {
        "up": hostile_entry(
            tmp_path / "up.json",
            {"tools": [{"name": "ping", "description": "Pings.", "inputSchema": {"type": "object"}}]},
            env={"UPSTREAM": ENV_KEY},
        )
    }
    (keen_home / "mcp" / "configs.json").write_text(
        json.dumps({"version": 1, "servers": servers}), encoding="utf-8"
    )
    (keen_home / "skills" / "notes").mkdir(parents=True)
    (keen_home / "skills" / "notes" / "SKILL.md").write_text(
        "---\nname: notes\ndescription: d\n---\nskill body\n"
    )
    (home / "sub").mkdir()
    (home / "notes.txt").write_text(f"pasted {OAUTH_TOKEN} and {ENV_KEY} here\n", encoding="utf-8")
    (home / "tok.json").symlink_to(keen_home / "mcp" / "auth" / "github.json")
    (home / "cfg").symlink_to(keen_home / "mcp")
    return World(home, keen_home)


def _texts(record: dict[str, Any]) -> list[str]:
    return [str(call.get("text", "")) for call in record["tool_calls"]]


def test_keens_own_files_are_refused_and_known_secrets_redacted(world: World) -> None:
    auth = world.keen_home / "mcp" / "auth" / "github.json"
    reads = [
        ".keen/mcp/auth/github.json",
        "tok.json",
        "cfg/configs.json",
        "sub/../.keen/mcp/configs.json",
        str(auth),
        str(world.keen_home / "sessions"),
    ]
    model = world.script(
        [("read_file", {"path": p}) for p in reads],
        [
            ("list_dir", {"path": ".keen/mcp"}),
            ("grep", {"pattern": "token|UPSTREAM", "path": ".keen"}),
            ("grep", {"pattern": "gh[or]_|sk-", "path": "."}),
            ("glob", {"pattern": "**/*.json"}),
            ("read_file", {"path": "notes.txt"}),
            ("read_file", {"path": ".keen/skills/notes/SKILL.md"}),
            ("list_dir", {"path": ".keen/skills"}),
        ],
        "done",
    )
    run, record = world.chat(model)
    calls = record["tool_calls"]
    assert len(calls) == len(reads) + 7, run
    refused = calls[: len(reads) + 2]
    for call in refused:
        assert call["outcome"] == "error" and "Keen's own files" in call["text"], call
    grep_all, globbed, notes, skill, skills = _texts(record)[len(reads) + 2 :]
    # The walks leave KEEN_HOME out; the copies in a workspace file are redacted.
    assert "notes.txt:1: pasted [REDACTED] and [REDACTED] here" in grep_all, grep_all
    assert ".keen/mcp" not in grep_all and ".keen/mcp" not in globbed and "auth" not in globbed
    assert "[REDACTED]" in notes and "skill body" in skill and "notes/" in skills
    for secret in (OAUTH_TOKEN, REFRESH_TOKEN, ENV_KEY):
        assert secret not in run.stdout + run.stderr
        for log in (world.keen_home / "sessions").glob("*.jsonl"):
            assert secret not in log.read_text(encoding="utf-8")


def test_a_backtracking_pattern_and_a_fifo_do_not_hang_grep(world: World) -> None:
    (world.home / "evil.txt").write_text("a" * 40 + "!\n", encoding="utf-8")
    os.mkfifo(world.home / "pipe")
    model = world.script(
        [("grep", {"pattern": "^(a|a)+$", "path": "evil.txt"})],
        [("grep", {"pattern": "pasted", "path": "."}), ("read_file", {"path": "pipe"})],
        "done",
    )
    # A hang is caught by the run's own limit (keen_cli's RUN_TIMEOUT): the run is not timed
    # here, a loaded machine stretches a whole `keen chat`.
    _, record = world.chat(model)
    slow, walked, fifo = record["tool_calls"]
    assert slow["outcome"] == "error" and "backtracks" in slow["text"], slow
    assert walked["outcome"] == "ok" and "notes.txt:1:" in walked["text"], walked
    assert fifo["outcome"] == "error" and "not a file" in fifo["text"], fifo


def _wait_for_call(sessions: Path, tool: str, proc: subprocess.Popen[bytes], within: float = 60) -> Path:
    """The session log once it records a call of ``tool`` (polled: the log is another process's file)."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()
        for log in sessions.glob("*.jsonl"):
            events = [
                json.loads(line) for line in log.read_text(encoding="utf-8").splitlines() if line.strip()
            ]
            if any(e["type"] == "call" and e.get("name") == tool for e in events):
                return log
        time.sleep(0.05)
    raise AssertionError(f"no {tool} call was logged within {within} s")


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_long_grep_ends_at_once_on_a_signal(world: World, signum: int) -> None:
    # Each line costs the pattern milliseconds (under the per-line limit); all of them, minutes.
    (world.home / "slow.txt").write_text(("a" * 16 + "!\n") * 20_000, encoding="utf-8")
    model = world.script([("grep", {"pattern": "^(a|a)+$", "path": "slow.txt"})], "done")
    proc = subprocess.Popen(
        [*KEEN, "chat", "-p", "look", "--model", model, "--json"],
        env=keen_env(world.keen_home),
        cwd=world.home,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        log = _wait_for_call(world.keen_home / "sessions", "grep", proc)
        proc.send_signal(signum)
        code = proc.wait(timeout=8)  # keen ends well within this after the signal, or this raises
    finally:
        if proc.poll() is None:
            proc.kill()
        _out, err = proc.communicate()
    assert code == 128 + signum, err
    events = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]
    results = [e for e in events if e["type"] == "result"]
    assert [r["outcome"] for r in results] == ["cancelled"], results


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["search", "extension"])
async def test_keen_serve_offers_no_local_tools(
    world: World, mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A host of ``keen serve`` reaches MCP tools only: no tool of it reads a file (its server
    in this process, the host over memory streams: what it offers is under test)."""
    monkeypatch.setenv("KEEN_HOME", str(world.keen_home))
    async with in_process(world.keen_home, "session", mode=mode) as (_, client):
        names = {tool.name for tool in (await client.list_tools()).tools}
        result = await client.call_tool("read_file", {"path": str(world.keen_home / "mcp" / "configs.json")})
    assert names and not names & {"read_file", "list_dir", "glob", "grep"}, names
    text = json.dumps(result.model_dump(mode="json"))
    assert result.is_error and ENV_KEY not in text and OAUTH_TOKEN not in text, text
