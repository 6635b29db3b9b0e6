"""``keen chat --resume [SESSION] -p``: a one-shot turn that goes on with an earlier session,
rebuilt from its log, against real MCP servers (keen-demo over stdio) and an
OpenAI-compatible fake on 127.0.0.1 that keeps what the model was sent; logs cut mid-line,
written by a newer Keen, not a chat, or naming a server no longer configured."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from helpers.cli import Home, Run, make_home
from helpers.fake_llm import KEY, FakeLLM, Reply
from helpers.forkserver import launch_args

pytestmark = pytest.mark.e2e

SECRET = "sk-proj-Rm4vX2mN4bL6kJ9hG3fD1sA7pO5iU0yQ"


@pytest.fixture
def home(tmp_path: Path) -> Home:
    home = make_home(tmp_path)
    home.write(
        {
            "demo": {
                "transport": "stdio",
                "command": sys.executable,
                "args": launch_args("-m", "keen.demo.server"),
                "env": {"KEEN_HOME": str(home.keen_home), "DEMO_TOKEN": SECRET},
                "trust_annotations": True,  # Keen's own demo server
            }
        }
    )
    return home


def chat(home: Home, fake: FakeLLM, *args: str, cwd: Path | None = None) -> Run:
    """``keen chat ARGS`` against ``fake``, in the user's home (the sessions' workspace)."""
    return home.keen_process(
        "chat",
        *args,
        "--model",
        "openai:m",
        "--base-url",
        fake.url + "/v1",
        env={"OPENAI_API_KEY": KEY},
        cwd=cwd or home.home,
        timeout=120,
    )


def convert_turn(home: Home) -> list[Reply]:
    schema = home.keen_home / "skills" / "mcp:demo" / "schemas" / "convert_units.json"
    arguments = {"value": 10, "from_unit": "km", "to_unit": "mi"}
    return [
        Reply(tool_calls=[{"name": "read_file", "arguments": {"path": str(schema)}}]),
        Reply(
            tool_calls=[
                {
                    "name": "call_mcp_tool",
                    "arguments": {"server": "demo", "tool": "convert_units", "arguments": arguments},
                }
            ]
        ),
        Reply(text="10 km is 6.21 mi."),
    ]


def sessions(home: Home) -> dict[str, Path]:
    return {p.stem: p for p in (home.keen_home / "sessions").glob("*.jsonl")}


def sent(fake: FakeLLM, request: int = -1) -> list[tuple[str, str]]:
    """The (role, text) of each message of a request but the system prompt."""
    return [(m["role"], str(m.get("content"))) for m in fake.requests[request].body["messages"][1:]]


def first_session(home: Home) -> str:
    """One turn with a tool call and a configured secret in the prompt; its session id."""
    with FakeLLM(convert_turn(home)) as fake:
        run = chat(home, fake, "-p", f"convert 10 km to miles with {SECRET}", "--yes", "--json")
    assert run.code == 0, str(run)
    return run.json()["session"]


def test_resume_goes_on_with_the_last_session_and_a_named_one(home: Home) -> None:
    first = first_session(home)
    old = sessions(home)[first].read_bytes()
    with FakeLLM([Reply(text="32,808 feet.")]) as fake:
        run = chat(home, fake, "--resume", "-p", "and in feet?")
    assert run.code == 0 and run.stdout.strip() == "32,808 feet.", str(run)
    assert f"resumed session {first}: 1 turn(s), 2 tool call(s) (compacted)" in run.stderr, run.stderr
    messages = sent(fake)
    roles = [role for role, _ in messages]
    assert roles == ["user", "user", "assistant", "user"], messages
    assert messages[0][1] == "convert 10 km to miles with [REDACTED]"  # redacted in the log: stays so
    assert messages[1][1].startswith("[Tool output:") and "6.2137" in messages[1][1], messages[1]
    assert messages[2:] == [("assistant", "10 km is 6.21 mi."), ("user", "and in feet?")]
    assert SECRET not in json.dumps([r.body for r in fake.requests])
    # The old log is only read; the new session has its own, naming its parent.
    assert sessions(home)[first].read_bytes() == old
    [second] = set(sessions(home)) - {first}
    events = [json.loads(line) for line in sessions(home)[second].read_text().splitlines()]
    [resumed] = [e for e in events if e["type"] == "agent.resume"]
    assert resumed["parent"] == first and resumed["turns"] == 1, resumed
    assert [e["turn"] for e in events if e["type"] == "agent.user"] == [2]
    shown = home.keen_process("sessions", "show", second)
    assert shown.code == 0 and f"resumes session {first} (1 turn(s) restored" in shown.stdout, str(shown)

    # A named session (the start of its id), resumed in turn: both turns come back.
    with FakeLLM([Reply(text="Both.")]) as fake:
        again = chat(home, fake, "--resume", second[:-2], "-p", "what did I ask?")
    assert again.code == 0, str(again)
    assert f"resumed session {second}: 2 turn(s), 2 tool call(s)" in again.stderr, again.stderr
    said = [text for role, text in sent(fake) if role == "user" and not text.startswith("[Tool output")]
    assert said == ["convert 10 km to miles with [REDACTED]", "and in feet?", "what did I ask?"]
    for text in (run.stderr, again.stderr, *(p.read_text() for p in sessions(home).values())):
        assert SECRET not in text


def test_a_log_cut_mid_line_is_resumed_as_far_as_it_goes_and_left_as_it_was(home: Home) -> None:
    first = first_session(home)
    whole = sessions(home)[first].read_bytes()
    # A copy that ends in the middle of the answer's line: the process died writing it.
    answer = whole.rfind(b'"type": "agent.model"')
    cut = home.keen_home / "sessions" / "20990101T000000Z-c0ffee.jsonl"
    # And a damaged line after the first.
    head = whole.index(b"\n") + 1
    cut.write_bytes(whole[:head] + b"{damaged\n" + whole[head : answer + 40])
    before = cut.read_bytes()
    with FakeLLM([Reply(text="Going on.")]) as fake:
        run = chat(home, fake, "--resume", "20990101T000000Z-c0ffee", "-p", "go on")
    assert run.code == 0, str(run)
    assert "was cut while it was written" in run.stderr, run.stderr
    assert "line 2 is not a readable event (the file was damaged); skipped" in run.stderr, run.stderr
    assert "turn 1 (convert 10 km to miles with [REDACTED]) did not finish" in run.stderr, run.stderr
    messages = sent(fake)
    # The turn's message and its calls' record come back, without the answer it never logged
    # whole.
    assert [role for role, _ in messages] == ["user", "user", "user"], messages
    assert "6.2137" in messages[1][1] and messages[2] == ("user", "go on")
    assert cut.read_bytes() == before


def test_logs_that_cannot_be_resumed_say_why_and_what_to_do(home: Home, tmp_path: Path) -> None:
    folder = home.keen_home / "sessions"
    folder.mkdir(parents=True)
    newer = folder / "20990101T000000Z-aaaaaa.jsonl"
    newer.write_text(
        json.dumps({"type": "session.start", "workspace": str(home.home)})
        + "\n"
        + json.dumps({"type": "agent.start", "log_format": 99})
        + "\n"
    )
    served = folder / "20990101T000000Z-bbbbbb.jsonl"
    served.write_text(json.dumps({"type": "session.start", "workspace": str(home.home)}) + "\n")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    with FakeLLM([]) as fake:
        runs = {
            "newer": chat(home, fake, "--resume", "20990101T000000Z-a", "-p", "hi"),
            "serve": chat(home, fake, "--resume", "20990101T000000Z-b", "-p", "hi"),
            "unknown": chat(home, fake, "--resume", "nope", "-p", "hi"),
            "both": chat(home, fake, "--resume", "20990101T", "-p", "hi"),
            "here": chat(home, fake, "--resume", "-p", "hi", cwd=elsewhere),
            "bare": chat(home, fake, "20990101T000000Z-aaaaaa", "-p", "hi"),
            "unquoted": chat(home, fake, "-p", "hello", "there"),
        }
        assert fake.requests == []
    expected = {
        "newer": r"was written by a newer Keen \(chat log format 99; this Keen reads 1\); update Keen",
        "serve": r"is not a chat session .*`keen sessions show` replays it",
        "unknown": r"no session 'nope' in .*; `keen sessions list` lists them",
        "both": r"'20990101T' starts 2 session ids .*; give more of it",
        "here": r"no chat session of this directory \(.*elsewhere\) to resume .*keen chat --resume ID",
        "bare": r"unexpected argument '20990101T000000Z-aaaaaa': quote the prompt \(-p \"\.\.\.\"\), or resume "
        r"a session with keen chat --resume ID",
        "unquoted": r"unexpected argument 'there': quote the prompt \(-p \"\.\.\.\"\), or resume",
    }
    import re

    for name, pattern in expected.items():
        run = runs[name]
        assert run.code == 2 and re.search(pattern, " ".join(run.stderr.split())), (name, str(run))
    assert newer.read_text().count("\n") == 2 and served.read_text().count("\n") == 1


def test_a_server_no_longer_configured_is_said_and_its_calls_stay(home: Home) -> None:
    first_session(home)
    home.write({})
    with FakeLLM([Reply(text="It is gone.")]) as fake:
        run = chat(home, fake, "--resume", "-p", "convert again")
    assert run.code == 0, str(run)
    flat = " ".join(run.stderr.split())
    assert "server demo, which the conversation used, is no longer configured" in flat, run.stderr
    assert any("call_mcp_tool demo/convert_units" in text for _, text in sent(fake))


def test_a_server_now_disabled_is_said_and_its_calls_stay(home: Home) -> None:
    first_session(home)
    entries = json.loads(home.config_path.read_text())["servers"]
    entries["demo"]["enabled"] = False
    home.write(entries)
    with FakeLLM([Reply(text="It is off.")]) as fake:
        run = chat(home, fake, "--resume", "-p", "convert again")
    assert run.code == 0, str(run)
    flat = " ".join(run.stderr.split())
    assert (
        "server demo, which the conversation used, is disabled in configs.json: its calls stay in the "
        "history as recorded, and new calls to it fail until it is enabled (keen mcp enable demo)"
    ) in flat, run.stderr
    assert any("call_mcp_tool demo/convert_units" in text for _, text in sent(fake))
