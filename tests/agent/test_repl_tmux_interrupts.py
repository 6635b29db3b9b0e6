"""``keen chat`` in a real terminal (tmux): Ctrl-C during a slow MCP call, a local tool
and a streaming model answer, and the session going on after it (``helpers.chat_tmux``).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from helpers.chat_tmux import Chat, call, chat_server, say, search
from helpers.fake_llm import FakeLLM, Reply
from helpers.hostile import hostile_entry
from helpers.loopback import alive, wait_until

pytestmark = [pytest.mark.timeout(180), pytest.mark.e2e, pytest.mark.slow_file]


def test_ctrl_c_cancels_a_slow_call_and_a_runaway_grep_and_the_session_goes_on(
    tmux_chat: Callable[..., Chat], tmp_path: Path
) -> None:
    """One session (a keen chat, its server and a terminal cost about 2 s of CPU to start):
    Ctrl-C during a slow MCP call, then during a local tool's backtracking grep
    (it pinned the CPU and Keen ignored Ctrl-C; a local tool runs in a worker thread, so
    Ctrl-C ends its turn at once), then at the prompt."""
    (tmp_path / "slow.txt").write_text(("a" * 16 + "!\n") * 20_000)
    grep = {"name": "grep", "arguments": {"pattern": "^(a|a)+$", "path": "slow.txt"}}
    chat = tmux_chat(
        [
            search("wait seconds"),
            call("slow", seconds=120),
            say("Still here."),
            {"content": "", "tool_calls": [grep]},
            say("Still here after the grep."),
        ]
    )
    t = chat.tmux
    chat.ready()

    at = chat.send("wait two minutes")
    t.wait_for(r"-> chat/slow \{\"seconds\": 120\}", after=at)
    t.send("C-c")
    t.wait_for(r"\(cancelled\)\s+keen>[ \t]*$", after=at)

    at = chat.send("are you there?")
    t.wait_for(r"Still here\.", after=at)
    at = chat.send("/mcp")
    t.wait_for(r"^chat\s+stdio\s+none\s+connected", after=at)

    at = chat.send("search the slow file")
    t.wait_for(r"-> grep ", after=at)
    t.send("C-c")
    t.wait_for(r"\(cancelled\)\s+keen>[ \t]*$", after=at, timeout=5)
    at = chat.send("are you there?")
    t.wait_for(r"Still here after the grep\.", after=at)

    # Ctrl-C with text clears the line; at an empty prompt it leaves, cleanly. Typed only once
    # the prompt is open: keys typed while the answer is still being printed are echoed by the
    # terminal (not yet in raw mode), and the prompt is then drawn to the right of that echo.
    chat.idle()
    at = t.mark()
    t.type("half a thought", enter=False)
    t.wait_for(r"^keen> half a thought", after=at)
    t.send("C-c")
    t.wait_for(r"^keen>[ \t]*$", after=at)
    t.send("C-c")
    assert t.exit_status() == 0
    turns = [e for e in chat.sessions() if e["type"] == "agent.turn"]
    assert [bool(e.get("cancelled")) for e in turns] == [True, False, True, False], turns
    results = [e for e in chat.sessions() if e["type"] == "result"]
    assert [(r["capability"], r["outcome"]) for r in results] == [
        ("local__search_tools", "ok"),
        ("mcp__chat__slow", "cancelled"),
        ("local__grep", "cancelled"),
    ], results


def test_tokens_stream_as_they_come_and_ctrl_c_stops_the_model(tmux_chat: Callable[..., Chat]) -> None:
    slow = "Counting slowly: one two three four five six seven eight nine ten eleven twelve."
    with FakeLLM([Reply(text=slow, pause=0.5), Reply(text="Back again.")]) as fake:
        chat = tmux_chat(
            [],
            model=["--model", "openai:fake-model", "--base-url", f"{fake.url}/v1"],
            env={"OPENAI_API_KEY": "sk-fake-key-for-the-repl-tests"},
        )
        t = chat.tmux
        chat.ready()
        at = chat.send("count for me")
        t.wait_for(r"Counting slowly: one", after=at)
        assert "twelve" not in t.screen()[at:]  # shown while the model still writes
        t.send("C-c")
        t.wait_for(r"\(cancelled\)\s+keen>[ \t]*$", after=at)
        at = chat.send("still there?")
        t.wait_for(r"Back again\.\s+keen>[ \t]*$", after=at)
        assert chat.leave() == 0
        assert "twelve" not in t.screen()
        assert len(fake.requests) == 2
        # The cancelled turn stays in the conversation the model sees next.
        second = json.dumps(fake.requests[1].body["messages"])
        assert "count for me" in second and "still there?" in second


def test_ctrl_c_while_the_repl_stops_its_servers_on_the_way_out_lets_the_stop_finish(tmp_path: Path) -> None:
    """Ctrl-D leaves; the stop of a server that ignores EOF and SIGTERM takes a few seconds
    (README "Stopping servers"). A Ctrl-C meanwhile raised KeyboardInterrupt into that
    shielded stop (the REPL's own Ctrl-C receiver had closed): keen hung and the server
    kept running. Now it says Keen is still stopping the servers, and the stop finishes."""
    pidfile = tmp_path / "stubborn.pid"
    spec = {
        "tools": [{"name": "noop", "inputSchema": {"type": "object"}}],
        "stderr_at_eof": "stdin closed",
        "ignore_eof": True,
        "ignore_signals": True,
        "pidfile": str(pidfile),
    }
    servers = {
        "chat": chat_server(tmp_path / "notes.txt"),
        "stubborn": hostile_entry(tmp_path / "spec.json", spec),
    }
    chat = Chat(tmp_path, [say("hi")], servers)
    try:
        chat.ready(servers=2)
        server = int(pidfile.read_text())
        log = chat.keen_home / "logs" / "stubborn.stderr.log"
        chat.idle()
        chat.tmux.send("C-d")
        assert wait_until(lambda: log.exists() and "stdin closed" in log.read_text(), 30), "the stop began"
        chat.tmux.send("C-c")
        assert chat.tmux.exit_status(timeout=60) == 0
        assert "still stopping the MCP servers" in chat.tmux.screen()
        assert wait_until(lambda: not alive(server), 10), "the server was stopped"
    finally:
        chat.tmux.kill()
