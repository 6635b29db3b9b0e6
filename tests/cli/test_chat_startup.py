"""``keen chat -p`` answers first and connects behind (docs/chat.md "Startup"): the model is
asked about a second after start with the skills on disk, a server still connecting is named
in one line and joins when it is ready, and a call to it waits for it. A server no earlier
run has seen is waited for (the model would not know of it), so the first run writes every
skill and the second one answers at once."""

from __future__ import annotations

import json
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from shlex import quote as shlex_quote
from typing import Any

import pytest

from conftest import stdio_server
from helpers.cli import KEEN, Home, make_home
from helpers.fake_llm import KEY, FakeLLM, Reply
from helpers.forkserver import forked
from helpers.skills import settle
from keen.paths import skill_dir_name

pytestmark = [pytest.mark.e2e, pytest.mark.slow_file]

QUIET = 1.0
"""Seconds a held server stays held, once holding, with no model request allowed: the window
in which a chat that did not wait for it would have asked the model (a second run, which
does not wait, asks it about 0.5 s after its start on an idle machine)."""


def hold_file(home: Home) -> Path:
    return home.keen_home.parent / "hold-slow"


@pytest.fixture
def home(tmp_path: Path) -> Home:
    home = make_home(tmp_path)
    home.write(
        {
            "quick": stdio_server("cpu_burn.py", "0"),
            # Held while its hold file exists (tests/servers/cpu_burn.py): the test decides
            # when it comes up, so a loaded machine makes it neither early nor late.
            "slow": stdio_server(
                "cpu_burn.py", "0", "--hold", str(hold_file(home)), timeouts={"connect": 60}
            ),
        }
    )
    return home


def wait_for(condition: Callable[[], bool], what: str, limit: float = 60) -> None:
    end = time.monotonic() + limit
    while not condition():
        assert time.monotonic() < end, f"{what}: not within {limit} s"
        time.sleep(0.01)


class Chat:
    """``keen chat -p PROMPT --json --yes`` against ``fake``, as a process whose stderr lines
    are read as they come (``lines``), so a test can act on what it says while it runs."""

    def __init__(self, home: Home, fake: FakeLLM, prompt: str) -> None:
        self.began = time.monotonic()
        self.proc = subprocess.Popen(
            [
                *KEEN,
                "chat",
                "-p",
                prompt,
                "--json",
                "--yes",
                "--model",
                "openai:m",
                "--base-url",
                fake.url + "/v1",
            ],
            env={**home.env(), "OPENAI_API_KEY": KEY},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        self.lines.extend(self.proc.stderr)

    def said(self, text: str) -> bool:
        return any(text in line for line in list(self.lines))

    def ended(self) -> bool:
        return self.proc.poll() is not None

    def end(self) -> subprocess.CompletedProcess[str]:
        assert self.proc.stdout is not None
        try:
            out = self.proc.stdout.read()
            self.proc.wait(timeout=120)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
        self._reader.join(10)
        return subprocess.CompletedProcess(self.proc.args, self.proc.returncode, out, "".join(self.lines))


def first_step_servers(home: Home, run: subprocess.CompletedProcess[str]) -> list[str]:
    """The servers connected when the turn's first model request was built (its session log)."""
    session = json.loads(run.stdout)["session"]
    events = [json.loads(line) for line in (home.keen_home / "sessions" / f"{session}.jsonl").open()]
    diff = next(e for e in events if e["type"] == "capability.diff")
    return sorted(diff["policy_inputs"]["connected_servers"])


def test_the_second_run_asks_the_model_before_the_slow_server_is_up(home: Home) -> None:
    hold = hold_file(home)
    held = hold.with_name(hold.name + ".held")
    with FakeLLM([Reply(text="first"), Reply(text="second")]) as fake:
        hold.touch()
        chat = Chat(home, fake, "hello")
        wait_for(lambda: held.exists() or chat.ended(), "the slow server holding")
        # Run 1: neither server was known, so both are waited for: no request while the slow
        # one is held, and the first one only after it is let go.
        time.sleep(QUIET)
        assert fake.requests == [], "the model was asked before the slow server was up"
        released = time.monotonic()
        hold.unlink()
        first = chat.end()
        assert first.returncode == 0, first.stderr
        assert first_step_servers(home, first) == ["quick", "slow"], first.stderr
        assert fake.requests[0].at >= released
        skills = home.keen_home / "skills"
        assert (skills / "mcp:quick" / "SKILL.md").exists() and (skills / "mcp:slow" / "SKILL.md").exists()
        # Run 2: the slow server is held until the model has been asked.
        hold.touch()
        chat = Chat(home, fake, "hello again")
        wait_for(lambda: len(fake.requests) == 2 or chat.ended(), "the second request")
        hold.unlink()
        second = chat.end()
    assert second.returncode == 0, second.stderr
    print(
        f"\nkeen chat -p, second run: the model was asked {fake.requests[1].at - chat.began:.2f} s after start"
    )
    # Asked before the slow server was up (the old one-shot waited for every server).
    assert "slow" not in first_step_servers(home, second), second.stderr
    # The quick server is usually up within the first second; on a loaded machine it may be
    # named as still connecting too. The slow one always is.
    assert re.search(
        r"still connecting \((1 server|2 servers)\): (quick, )?slow; answering with the skills on disk",
        second.stderr,
    ), second.stderr
    assert json.loads(second.stdout)["answer"] == "second"
    # The prompt held both servers' catalog lines, the slow one's from disk.
    system = fake.requests[1].body["messages"][0]["content"]
    assert "mcp:quick" in system and "mcp:slow" in system


def ping_the_held_server(
    home: Home, replies: list[Reply]
) -> tuple[subprocess.CompletedProcess[str], FakeLLM]:
    """A ``keen chat -p "ping the slow server"`` whose ``slow`` server is held until a call
    waits for it (the model answers ``replies``); the ended run, asserted to exit 0, and the
    model with its requests."""
    hold = hold_file(home)
    hold.touch()
    with FakeLLM(replies) as fake:
        chat = Chat(home, fake, "ping the slow server")
        # The slow server comes up only once the call waits for it.
        wait_for(lambda: chat.said("the call waits for it") or chat.ended(), "the call waiting")
        hold.unlink()
        run = chat.end()
    assert run.returncode == 0, run.stderr
    return run, fake


def test_a_call_to_a_server_still_connecting_waits_for_it(home: Home) -> None:
    warm = home.keen("mcp", "sync", "--timeout", "60")  # the skills on disk, as an earlier run leaves them
    assert warm.code == 0, str(warm)
    schema = str(home.keen_home / "skills" / "mcp:slow" / "schemas" / "ping.json")
    replies = [
        Reply(tool_calls=[{"name": "read_file", "arguments": {"path": schema}}]),
        Reply(tool_calls=[{"name": "call_mcp_tool", "arguments": {"server": "slow", "tool": "ping"}}]),
        Reply(text="it said pong"),
    ]
    run, fake = ping_the_held_server(home, replies)
    record = json.loads(run.stdout)
    outcomes = [(c["name"], c["outcome"]) for c in record["tool_calls"]]
    assert outcomes == [("read_file", "ok"), ("call_mcp_tool", "ok")], record
    assert "slow: still connecting; the call waits for it" in run.stderr
    assert "slow: connected, 1 tools" in run.stderr
    assert fake.requests[2].body["messages"][-1]["content"] == "pong"


@pytest.mark.parametrize("since", ["unchanged", "server_added", "server_disabled"])
def test_search_finds_the_tools_of_a_server_still_connecting_from_its_skill_on_disk(
    tmp_path: Path, since: str
) -> None:
    """docs/chat.md: a turn sent before discovery ends uses the catalog from the skills on
    disk. search_tools is part of it: it finds the held server's tool from its skill, and a
    call to what it found waits for the server (it found nothing: "0 of 0 tools"). Three
    starts: the configuration unchanged since the sync (the request goes out before any
    server starts), a server added since (the new one is waited for, the held one is not),
    and a server disabled since (keen mcp disable: its skill stays enabled until the next
    sync, but its tools are not offered, as the session never starts it)."""
    home = make_home(tmp_path)
    slow = stdio_server("cpu_burn.py", "0", "--hold", str(hold_file(home)), timeouts={"connect": 60})
    off = stdio_server("cpu_burn.py", "0")
    home.write({"slow": slow, "off": off} if since == "server_disabled" else {"slow": slow})
    warm = home.keen("mcp", "sync", "--timeout", "60")  # the skill on disk, as an earlier run leaves it
    assert warm.code == 0, str(warm)
    if since == "server_added":
        home.write({"slow": slow, "empty": stdio_server("empty_stdio.py")})
    if since == "server_disabled":
        disabled = home.keen("mcp", "disable", "off")
        assert disabled.code == 0, str(disabled)
        assert (home.keen_home / "skills" / skill_dir_name("mcp:off")).is_dir()  # until the next sync
    replies = [
        Reply(tool_calls=[{"name": "search_tools", "arguments": {"query": "answer pong", "limit": 3}}]),
        Reply(tool_calls=[{"name": "call_mcp_tool", "arguments": {"server": "slow", "tool": "ping"}}]),
        Reply(text="it said pong"),
    ]
    run, fake = ping_the_held_server(home, replies)
    found, called = json.loads(run.stdout)["tool_calls"]
    assert found["outcome"] == "ok" and "mcp__slow__ping (server slow" in found["text"], found
    assert "callable next step" in found["text"], found
    assert "mcp__off__" not in found["text"], found
    assert called["outcome"] == "ok", called
    assert fake.requests[2].body["messages"][-1]["content"] == "pong"


# Runs `keen chat -p` with a scripted model and prints, when the model is first asked, whether
# the MCP SDK was loaded, whether the server had been launched (it touches a file first: a
# server's own start, which a loaded machine can delay past the chat's first wait) and how many
# child processes the chat had started (the server's, the moment Keen spawned it).
FIRST_REQUEST = """
import gc, json, os, sys
from pathlib import Path
from keen.agent.providers import scripted

launched = Path(sys.argv[2])

def children():
    count = 0
    for entry in os.listdir("/proc"):
        try:
            stat = Path("/proc", entry, "stat").read_text() if entry.isdigit() else ""
        except OSError:  # gone meanwhile
            continue
        if stat and int(stat.rpartition(")")[2].split()[1]) == os.getpid():
            count += 1
    return count

async def first_request(self, messages, tools):
    seen = {"sdk": sorted(m for m in ("mcp", "mcp_types") if m in sys.modules),
            "launched": launched.exists(), "children": children(),
            "system": messages[0].content, "yaml": "yaml" in sys.modules,
            "pydantic": "pydantic" in sys.modules, "typer": "typer" in sys.modules,
            "deferred": sorted(m for m in ("hashlib", "keen._redact", "keen.capabilities.descriptor",
                                           "anyio", "anyio.from_thread", "keen.agent.model_events")
                               if m in sys.modules),
            "runtime": sorted(m for m in ("keen.runtime", "keen.harness.pipeline", "keen.agent.loop")
                              if m in sys.modules),
            # tempfile loads with the first file Keen writes (keen._fs)
            "written": "tempfile" in sys.modules,
            "section_computed": bool(getattr(sys.modules.get("keen.capabilities._section_store"), "_made", 0)),
            "collector": gc.isenabled()}
    print(json.dumps(seen), flush=True)
    os._exit(0)
    yield  # an async generator, like the real stream

scripted.ScriptedModel.stream = first_request
from keen.cli import main
sys.argv = ["keen", "chat", "-m", "scripted:" + sys.argv[1], "-p", "hello"]
main()
"""


def launch_marked(home: Home, name: str, launched: Path) -> None:
    """Configure ``name``, a quick server whose launch leaves the file ``launched`` first."""
    server = stdio_server("cpu_burn.py", "0")
    command = f"touch {launched} && exec {' '.join(map(shlex_quote, [server['command'], *server['args']]))}"
    home.write({name: {"transport": "stdio", "command": "/bin/sh", "args": ["-c", command]}})


def first_request(home: Home, launched: Path, *, fresh: bool = True) -> tuple[dict[str, Any], str]:
    """Run ``keen chat -p`` with a scripted model until it is first asked: what it saw then
    (``sdk``, ``launched``, ``system``), and the chat's stderr. ``fresh``: as a new
    interpreter, for what it had imported by then; else forked from the worker's warm
    process (``helpers.forkserver``), where only what it did and said is under test."""
    run = asked(home, launched, fresh=fresh)
    lines = [line for line in run.stdout.splitlines() if line.startswith("{")]
    assert lines, run.stderr
    return json.loads(lines[-1]), run.stderr


def asked(home: Home, launched: Path, *, fresh: bool = True) -> subprocess.CompletedProcess[str]:
    """:func:`first_request`'s process, whether it asked the model or not."""
    script = home.keen_home.parent / "script.jsonl"
    script.write_text(json.dumps({"content": "hi"}) + "\n", encoding="utf-8")
    # A forked one skips the imports (the MCP SDK's alone cost a start that connects a
    # server about 1.5 s of CPU) and so cannot say which ones the chat made before asking.
    return python_c(home, FIRST_REQUEST, str(script), str(launched), fresh=fresh)


def python_c(home: Home, source: str, *args: str, fresh: bool = True) -> subprocess.CompletedProcess[str]:
    """``python -c source args`` in ``home``'s environment, its output captured: a new
    interpreter (``fresh``) or forked from the worker's warm process."""
    argv = ["-c", source, *args]
    return subprocess.run(
        [sys.executable, *argv] if fresh else forked(*argv),
        env=home.env(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_with_the_skills_on_disk_the_model_is_asked_before_any_server_or_the_sdk_starts(
    tmp_path: Path,
) -> None:
    home = make_home(tmp_path)
    launched = tmp_path / "launched"
    launch_marked(home, "quick", launched)
    warm = home.keen("mcp", "sync", "--timeout", "60")  # the skills on disk, as an earlier run leaves them
    assert warm.code == 0, str(warm)
    assert launched.exists()
    launched.unlink()
    seen, stderr = first_request(home, launched)
    assert seen["sdk"] == [], seen  # the MCP SDK loads with the first server, behind the request
    assert (seen["launched"], seen["children"]) == (False, 0), stderr  # the server starts behind the request
    assert "mcp:quick" in seen["system"]  # its catalog line, from the skill on disk
    assert "still connecting (1 server): quick; answering with the skills on disk" in stderr
    # The next start takes the skills from the store the first one wrote (keen.skills.cache):
    # it parses no SKILL.md, so it never imports a YAML parser before the request.
    again, stderr = first_request(home, launched)
    assert (again["yaml"], again["launched"], again["system"]) == (False, False, seen["system"]), stderr
    # Nor OpenSSL's hashlib (keen._digest), the log redactor (imported at the first record
    # or answer text), the capability descriptors (the settings' permission modes come from
    # keen.capabilities.modes) or anyio at all (the request goes out on asyncio's own loop,
    # keen.cli._chat._run_early; the session and its signal watch import it behind it),
    # nor the answer's events (keen.agent.model_events), which are not needed before the request.
    assert again["deferred"] == [], again


def test_a_server_new_to_this_home_is_started_and_waited_for_before_the_model_is_asked(
    tmp_path: Path,
) -> None:
    home = make_home(tmp_path)
    launched = tmp_path / "launched"
    launch_marked(home, "fresh", launched)
    seen, stderr = first_request(home, launched, fresh=False)
    # No skill on disk: the model would not know of it, so it is connected and synced first,
    # the collector running meanwhile (it waits only for a request built before the session).
    assert (seen["launched"], seen["collector"]) == (True, True), stderr
    assert "mcp:fresh" in seen["system"], seen["system"]


def test_with_no_server_configured_the_model_is_asked_before_pydantic_or_typer_loads(
    tmp_path: Path,
) -> None:
    # No configs.json: nothing to validate, so the config's, the pins' and the sync's models
    # (pydantic, about 130 ms of CPU) stay unloaded until after the first request; a plain
    # `keen chat -p` command line runs without typer (keen.cli._chat).
    home = make_home(tmp_path)
    skill = home.keen_home / "skills" / "notes"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text(
        "---\nname: notes\ndescription: Keeps the user's notes.\n---\nWrite notes down.\n", encoding="utf-8"
    )
    seen, stderr = first_request(home, tmp_path / "launched")
    assert "notes" in seen["system"], seen["system"]  # the catalog was built from the skill on disk
    assert (seen["pydantic"], seen["typer"]) == (False, False), stderr
    assert seen["deferred"] == [], seen  # nor hashlib, the redactor, the descriptors, anyio, the events


def whole_chat(home: Home) -> subprocess.CompletedProcess[str]:
    """One whole ``keen chat -p`` with a scripted model, as a first run in a home: forked from
    a warm process, whose exit runs no ``atexit`` hook (keen.tokens' caches are not written)."""
    script = home.keen_home.parent / "whole.jsonl"
    script.write_text(json.dumps({"content": "hi"}) + "\n", encoding="utf-8")
    return subprocess.run(
        [*KEEN, "chat", "-m", f"scripted:{script}", "-p", "hello", "--timeout", "60"],
        env=home.env(),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_a_second_run_asks_the_model_before_the_runtime_or_the_config_models_load(tmp_path: Path) -> None:
    home = make_home(tmp_path)
    launched = tmp_path / "launched"
    launch_marked(home, "quick", launched)
    first = whole_chat(home)  # validates configs.json and syncs the skill: what a second run finds
    assert first.returncode == 0, first.stderr
    launched.unlink()
    seen, stderr = first_request(home, launched)
    # The prompt came from the skills on disk and configs.json read as plain JSON: no
    # pydantic, no runtime, harness or turn loop, no server launched when the model was asked.
    assert (seen["pydantic"], seen["runtime"], seen["sdk"], seen["launched"], seen["children"]) == (
        False,
        [],
        [],
        False,
        0,
    ), stderr
    assert "mcp:quick" in seen["system"]
    assert seen["collector"] is False  # paused until the request is out (keen._gcfreeze)
    # The whole session after it runs as ever: the server still starts and joins.
    again = whole_chat(home)
    assert again.returncode == 0, again.stderr
    assert launched.exists()
    assert "still connecting (1 server): quick; answering with the skills on disk" in again.stderr


def test_a_config_broken_since_the_last_run_gives_its_error_before_the_model_is_asked(tmp_path: Path) -> None:
    home = make_home(tmp_path)
    launched = tmp_path / "launched"
    launch_marked(home, "quick", launched)
    assert whole_chat(home).returncode == 0
    text = home.config_path.read_text()
    home.config_path.write_text(text.replace('"servers"', '"servers" "', 1))  # invalid JSON now
    run = asked(home, launched, fresh=False)
    assert run.returncode == 2, run.stderr
    assert not [line for line in run.stdout.splitlines() if line.startswith("{")], "the model was asked"
    assert re.search(
        r"configs\.json: invalid JSON at line \d+, column \d+: .*; fix the syntax there", run.stderr
    )
    # The same words as any other command that reads it.
    listed = home.keen_process("mcp", "list")
    assert listed.code == 2
    assert run.stderr.strip().splitlines()[-1] == listed.stderr.strip().splitlines()[-1]


def test_an_entry_broken_since_the_last_run_is_reported_and_the_rest_answers(tmp_path: Path) -> None:
    home = make_home(tmp_path)
    launched = tmp_path / "launched"
    launch_marked(home, "quick", launched)
    assert whole_chat(home).returncode == 0
    config = json.loads(home.config_path.read_text())
    config["servers"]["pigeon"] = {"transport": "carrier-pigeon"}
    home.config_path.write_text(json.dumps(config))
    launched.unlink()
    seen, stderr = first_request(home, launched, fresh=False)
    # Not the validated text: validated in full first, and the servers start before the
    # model is asked, with the broken entry's error said, as on any run that finds one.
    assert "server pigeon:" in stderr and "transport 'carrier-pigeon' is not supported" in stderr, stderr
    assert seen["children"] == 1, stderr  # the server's process, whether it has run yet or not


def test_sigterm_while_the_early_answer_streams_ends_the_chat_as_ever(home: Home) -> None:
    # The early request goes out on asyncio's own loop before anyio and the signal watch
    # load (keen.cli._chat._run_early); once the session runs, SIGTERM ends the chat as it
    # ends any command (keen.cli._signals): the turn cancelled, the servers closed, exit 143.
    hold = hold_file(home)
    held = hold.with_name(hold.name + ".held")
    # A first run writes the skills and records configs.json as valid: the next one sends
    # its request early.
    with FakeLLM([Reply(text="first"), Reply(text="a long and slow answer " * 40, pause=0.1)]) as fake:
        first = Chat(home, fake, "hello").end()
        assert first.returncode == 0, first.stderr
        held.unlink(missing_ok=True)  # the slow server touched it in passing
        hold.touch()
        try:
            # A slow answer (a pause after each streamed piece): the servers start behind
            # it, and the held one says so while the turn is still streaming.
            chat = Chat(home, fake, "hello again")
            wait_for(lambda: held.exists() or chat.ended(), "the servers started behind the answer")
            assert not chat.ended(), chat.end().stderr
            chat.proc.send_signal(signal.SIGTERM)
            run = chat.end()
        finally:
            hold.unlink()
    assert run.returncode == 143, run.stderr
    assert "answering with the skills on disk" in run.stderr  # the early path
    assert "stopped by SIGTERM; MCP servers closed" in run.stderr
    assert len(fake.requests) == 2  # the early request was the second run's only one


def test_a_second_run_over_skills_copied_in_place_writes_nothing_before_the_model_is_asked(
    tmp_path: Path,
) -> None:
    # The skills folder copied back in place (every inode and ctime new: a restore, or what
    # bench/prompt_start.py's configured rows start from) leaves the skills store's stat data
    # stale: the early request reads each skill's frontmatter again but writes no store before
    # it (the session's scan writes it), and the budgeted section, whose inputs are the same,
    # comes from the section store the first run left (keen.capabilities._section_store).
    home = make_home(tmp_path)
    launched = tmp_path / "launched"
    launch_marked(home, "quick", launched)
    # Two runs (forked: their start is not under test), the second over the skill the first
    # wrote, and keen.tokens' rank and count caches written into this home as a user's first
    # start leaves them (a forked run counts with the warm process's counter and writes
    # neither): the caches settled. A new interpreter that only builds the counter writes
    # them, instead of a whole first chat as one (the MCP SDK imported, the server connected:
    # about 1.5 s of CPU more).
    tokens = python_c(home, "from keen.tokens import token_counter; token_counter().count('settled')")
    assert tokens.returncode == 0, tokens.stderr
    for _ in range(2):
        warm = whole_chat(home)
        assert warm.returncode == 0, warm.stderr
    skills = home.keen_home / "skills"
    shutil.copytree(skills, tmp_path / "copy", symlinks=True)
    shutil.rmtree(skills)
    (tmp_path / "copy").rename(skills)
    settle()  # past the skills store's racy window
    seen, stderr = first_request(home, launched)
    assert "mcp:quick" in seen["system"], stderr
    assert (seen["written"], seen["section_computed"], seen["yaml"]) == (False, False, False), stderr
    again = whole_chat(home)  # the session wrote the store: the next start takes every skill from it
    assert again.returncode == 0, again.stderr
    # Only the prompt is compared here, not what was imported: forked from the warm process.
    assert first_request(home, launched, fresh=False)[0]["system"] == seen["system"]


# Runs a whole `keen chat -p` with a scripted model and prints whether the cyclic collector
# ran when the model was first asked and when the session's Manager started.
COLLECTOR = """
import gc, json, sys
import keen._gcfreeze
from keen.agent.providers import scripted

seen = {}
stream = scripted.ScriptedModel.stream
freeze = keen._gcfreeze.freeze_if_asked

def first_request(self, messages, tools):
    seen.setdefault("request", gc.isenabled())
    return stream(self, messages, tools)

def manager_start():
    seen.setdefault("manager", gc.isenabled())
    freeze()

scripted.ScriptedModel.stream = first_request
keen._gcfreeze.freeze_if_asked = manager_start  # before keen.mcp.manager imports it, or
if "keen.mcp.manager" in sys.modules:  # where it has (forked from a warm process)
    sys.modules["keen.mcp.manager"].freeze_if_asked = manager_start
from keen.cli import main
sys.argv = ["keen", "chat", "-m", "scripted:" + sys.argv[1], "-p", "hello", "--timeout", "60"]
try:
    main()
finally:
    print(json.dumps({**seen, "end": gc.isenabled()}), flush=True)
"""


def test_the_collector_waits_for_the_early_request_and_runs_in_the_session(tmp_path: Path) -> None:
    home = make_home(tmp_path)
    launch_marked(home, "quick", tmp_path / "launched")
    assert whole_chat(home).returncode == 0  # the skills on disk: the next run asks early
    script = tmp_path / "collector.jsonl"
    script.write_text(json.dumps({"content": "hi"}) + "\n", encoding="utf-8")
    # Forked from the worker's warm process: what is imported is not under test here, and a
    # new interpreter importing the MCP SDK to connect the server cost about 2.5 s of CPU.
    run = python_c(home, COLLECTOR, str(script), fresh=False)
    assert run.returncode == 0, run.stderr
    assert "answering with the skills on disk" in run.stderr  # the early path
    seen = json.loads(run.stdout.splitlines()[-1])
    # Paused while the request was built (keen._gcfreeze), running again once it was out:
    # when the session's Manager started, and after the command.
    assert seen == {"request": False, "manager": True, "end": True}, run.stderr


def test_the_collector_runs_again_when_the_turn_fails_before_any_request(tmp_path: Path) -> None:
    home = make_home(tmp_path)
    missing = tmp_path / "no-such-script.jsonl"  # the model cannot be opened: the turn fails
    run = python_c(home, COLLECTOR, str(missing), fresh=False)
    assert run.returncode != 0
    assert "no-such-script.jsonl" in run.stderr, run.stderr
    seen = json.loads(run.stdout.splitlines()[-1])
    assert seen == {"end": True}, run.stderr
