"""``keen chat`` in a real terminal (tmux): slash commands, approval, elicitation, Ctrl-C.

Each test runs the installed ``keen chat`` with a scripted model (``--model scripted:FILE``,
one JSON line per model call), a private ``KEEN_HOME`` and the FastMCP server
``tests/servers/chat_tools.py`` over stdio, types with ``tmux send-keys`` and reads the
screen with ``capture-pane``. Waits are bounded (:data:`helpers.tmux.WAIT`); each tmux
server is killed in teardown, which also ends keen and its MCP servers.
"""

from __future__ import annotations

import json
import os
import stat
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import SERVERS
from helpers.cli import REAL_KEEN as KEEN
from helpers.fake_llm import FakeLLM, Reply
from helpers.forkserver import script_args
from helpers.tmux import Tmux

pytestmark = [pytest.mark.timeout(180), pytest.mark.e2e]

PROMPT = r"^keen>"


def call(tool: str, **arguments: Any) -> dict[str, Any]:
    """A scripted model answer that calls ``chat``'s ``tool`` through call_mcp_tool."""
    return {"content": "", "tool_calls": [{"name": "call_mcp_tool", "arguments": {"server": "chat", "tool": tool, "arguments": arguments}}]}  # fmt: skip


def search(query: str) -> dict[str, Any]:
    return {"content": "", "tool_calls": [{"name": "search_tools", "arguments": {"query": query}}]}


def say(text: str) -> dict[str, Any]:
    return {"content": text}


class Chat:
    """A ``keen chat`` session under tmux and the files around it."""

    def __init__(
        self,
        root: Path,
        script: list[dict[str, Any]],
        servers: dict[str, Any],
        *,
        model: list[str] | None = None,
        env: dict[str, str] | None = None,
    ) -> None:
        self.root = root
        self.keen_home = root / "keen-home"
        self.notes = root / "notes.txt"
        config = self.keen_home / "mcp" / "configs.json"
        config.parent.mkdir(parents=True)
        config.write_text(json.dumps({"version": 1, "servers": servers}))
        script_path = root / "script.jsonl"
        script_path.write_text("".join(json.dumps(line) + "\n" for line in script))
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(root / "home"),
            "KEEN_HOME": str(self.keen_home),
            "LANG": "C.UTF-8",
            "LC_ALL": "C.UTF-8",
            **(env or {}),
        }
        (root / "home").mkdir()
        model = model or ["--model", f"scripted:{script_path}"]
        self.tmux = Tmux([*KEEN, "chat", *model], env=env, cwd=root)

    def ready(self, servers: int = 1) -> None:
        """Wait for the prompt and for background discovery to report."""
        self.tmux.wait_for(PROMPT)
        self.tmux.wait_for(rf"MCP ready: {servers} of \d+ servers connected")

    def idle(self) -> None:
        """Wait until the last line on the screen is an empty prompt (the REPL waits for input)."""
        self.tmux.wait_for(r"^keen>[ \t]*\s*\Z")

    def leave(self) -> int:
        """At an empty prompt, press Ctrl-D; the exit status.

        Waits for the prompt first: between prompts the terminal is in cooked mode, where the
        line discipline takes a Ctrl-D as end-of-file and the REPL never sees it.
        """
        self.idle()
        self.tmux.send("C-d")
        return self.tmux.exit_status()

    def send(self, text: str) -> int:
        """At an empty prompt, type a line and press Enter; returns the screen offset of the
        prompt line (for ``wait_for(after=...)``)."""
        self.idle()
        mark = self.tmux.mark()
        self.tmux.type(text)
        return mark

    def sessions(self) -> list[dict[str, Any]]:
        """Every event of the session logs."""
        events: list[dict[str, Any]] = []
        for path in sorted((self.keen_home / "sessions").glob("*.jsonl")):
            events += [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        return events


SECRET = "sk-test-5b1e0c7a9d3f4e21"
"""A key in the chat server's env (configs.json): Keen must never show or store it."""


def chat_server(notes: Path) -> dict[str, Any]:
    return {
        "transport": "stdio",
        "command": sys.executable,
        # Forked from the worker's warm process (tests/helpers/forkserver.py): the server is
        # not what these tests watch, keen chat on a terminal is.
        "args": script_args(str(SERVERS / "chat_tools.py")),
        "env": {"CHAT_TOOLS_LOG": str(notes), "SERVICE_TOKEN": SECRET},
        # The suite's own server, trusted for its annotations: these tests are about the REPL.
        "trust_annotations": True,
    }


@pytest.fixture
def start(tmp_path: Path) -> Iterator[Callable[..., Chat]]:
    chats: list[Chat] = []

    def make(script: list[dict[str, Any]], *, broken: bool = False, **options: Any) -> Chat:
        servers = {"chat": chat_server(tmp_path / "notes.txt")}
        if broken:
            servers["broken"] = {"transport": "stdio", "command": str(tmp_path / "no-such-server")}
        chat = Chat(tmp_path, script, servers, **options)
        chats.append(chat)
        return chat

    yield make
    for chat in chats:
        chat.tmux.kill()


def test_startup_reports_failures_and_slash_commands_work(start: Callable[..., Chat]) -> None:
    chat = start([say("Hello Bob, from the greet skill.")], broken=True)
    skill = chat.keen_home / "skills" / "greet"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text("---\nname: greet\ndescription: Greet someone.\n---\nSay hello to $1.\n")
    t = chat.tmux
    t.wait_for(PROMPT)
    # Discovery ran in the background; the failed server gets one line with its fix.
    t.wait_for(r"broken: disconnected: .*no-such-server.*\n?.*/mcp connect\s+broken")
    chat.ready()

    at = chat.send("/help")
    t.wait_for(r"/mcp connect SERVER\s+reconnect SERVER", after=at)
    t.wait_for(r"Skills: .*/greet", after=at)

    at = chat.send("/mcp")
    t.wait_for(r"^chat\s+stdio\s+none\s+connected\s+5\b", after=at)
    t.wait_for(r"^broken\s+stdio\s+none\s+disconnected", after=at)

    at = chat.send("/skills list")
    t.wait_for(r"^greet\s+yes\s+no\s+Greet someone", after=at)
    t.wait_for(r"^mcp:chat\s+yes\s+yes\s", after=at)
    at = chat.send("/skills disable mcp:chat")
    t.wait_for(r"Disabled skill mcp:chat\.", after=at)
    at = chat.send("/skills list")
    t.wait_for(r"^mcp:chat\s+no\s+yes\s", after=at)
    at = chat.send("/skills reload")
    t.wait_for(r"Reloaded skills: 2 in ", after=at)
    at = chat.send("/skills enable mcp:nothing")
    t.wait_for(r"error: no skill named 'mcp:nothing'; /skills list shows the skills", after=at)

    # /mcp connect: a failed reconnect says why and how to fix it; a good one re-enables the skill.
    at = chat.send("/mcp connect broken")
    t.wait_for(r"error: broken: disconnected: .*no-such-server", after=at)
    at = chat.send("/mcp connect chat")
    t.wait_for(r"chat: connected, 5 tools; skill mcp:chat enabled", after=at)
    at = chat.send("/skills list")
    t.wait_for(r"^mcp:chat\s+yes\s+yes\s", after=at)

    at = chat.send("/search write a note down")
    t.wait_for(r"^chat\s+note\s+medium\s+Write a note down", after=at)

    at = chat.send("/tools")
    t.wait_for(r"No turn yet", after=at)

    at = chat.send("/nonsense")
    t.wait_for(r"unknown command /nonsense: no such command or skill; /help lists both", after=at)

    # Tab completes a command.
    at = t.mark()
    t.type("/sea", enter=False)
    t.send("Tab")
    t.wait_for(r"keen> /search[ \t]*$", after=at)
    t.send("C-u")

    # /SKILL ARGS: the skill body, arguments substituted, stays in the conversation; ARGS is the turn.
    at = chat.send("/greet Bob")
    t.wait_for(r"Activated skill greet\.", after=at)
    t.wait_for(r"Hello Bob, from the greet skill\.\s+keen>[ \t]*$", after=at)

    # /mcp:SERVER with no arguments: activated, no model call (the script has no answer left).
    at = chat.send("/mcp:chat")
    t.wait_for(r"Activated skill mcp:chat: it stays in the conversation", after=at)

    chat.send("/exit")
    assert t.exit_status() == 0
    activations = [e for e in chat.sessions() if e["type"] == "agent.activate"]
    assert [e["skill"] for e in activations] == ["greet", "mcp:chat"], chat.sessions()
    history = chat.keen_home / "history"
    assert stat.S_IMODE(history.stat().st_mode) == 0o600
    assert "/greet Bob" in history.read_text()


def test_approval_yes_no_always(start: Callable[..., Chat]) -> None:
    chat = start(
        [
            search("write a note"),
            call("note", text="first"),
            say("Noted first."),
            call("note", text="second"),
            say("Not noted."),
            call("note", text="interrupted"),
            call("note", text="third"),
            call("note", text="fourth"),
            say("Noted both."),
        ]
    )
    t = chat.tmux
    chat.ready()

    at = chat.send("note first")
    t.wait_for(r"Allow chat/note\?", after=at)
    t.wait_for(r'"text": "first"', after=at)
    t.wait_for(r"\[y\]es / \[n\]o / \[a\]lways for chat/note this session:[ \t]*$", after=at)
    t.type("y")
    t.wait_for(r"<- noted: first\s+Noted first\.", after=at)

    at = chat.send("note second")
    t.wait_for(r'"text": "second"', after=at)
    t.wait_for(r"this session:[ \t]*$", after=at)
    t.type("n")
    t.wait_for(r"<- Denied \(permission\): the user did not approve this call", after=at)
    t.wait_for(r"Not noted\.", after=at)

    # Ctrl-C at the question: no, and the turn stops (the model is not called again).
    at = chat.send("note this")
    t.wait_for(r'"text": "interrupted"', after=at)
    t.wait_for(r"this session:[ \t]*$", after=at)
    t.send("C-c")
    t.wait_for(r"denied; stopping the turn", after=at)
    t.wait_for(r"\(cancelled\)\s+keen>[ \t]*$", after=at)

    at = chat.send("note two more")
    t.wait_for(r'"text": "third"', after=at)
    t.wait_for(r"this session:[ \t]*$", after=at)
    t.type("a")
    t.wait_for(r"<- noted: fourth\s+Noted both\.", after=at)
    # "always" covered the fourth call: no question for it.
    assert t.count(r'^\s+"text": "fourth"$') == 0
    assert t.count(r"Allow chat/note\?") == 4

    assert chat.leave() == 0
    assert chat.notes.read_text().splitlines() == ["first", "third", "fourth"]


def test_elicitation_form_with_defaults(start: Callable[..., Chat]) -> None:
    chat = start(
        [
            search("book a table"),
            call("book_table"),
            say("Booked."),
            call("book_table"),
            say("As you wish."),
            call("book_table"),
            say("Never mind."),
        ]
    )
    t = chat.tmux
    chat.ready()

    at = chat.send("book a table")
    t.wait_for(r"Server chat asks:\s+Details for the booking\?", after=at)
    t.wait_for(r"Time \(1\) 18:00, 2\) 20:00\)", after=at)
    t.wait_for(r"\[a\]ccept \(fill in the form\) / \[d\]ecline / \[c\]ancel: a[ \t]*$", after=at)
    t.send("Enter")
    t.wait_for(r"Name: Ada[ \t]*$", after=at)  # the schema's default, pre-filled
    t.send("C-u")
    t.type("Grace")
    t.wait_for(r"Party: 2[ \t]*$", after=at)
    t.type("x")  # appended to the default: "2x" is not a number
    refused = t.wait_for(r"Party: type a whole number", after=at).end()
    t.wait_for(r"Party: 2[ \t]*$", after=refused)
    t.send("C-u")
    t.type("4")
    t.wait_for(r"Outdoor: no[ \t]*$", after=at)
    t.send("C-u")
    t.type("yes")
    t.wait_for(r"Time: 20:00[ \t]*$", after=at)
    t.send("Enter")
    t.wait_for(r"<- booked: name=Grace party=4 outdoor=True time=20:00\s+Booked\.", after=at)

    at = chat.send("book another")
    t.wait_for(r"\[c\]ancel: a[ \t]*$", after=at)
    t.send("C-u")
    t.type("d")
    t.wait_for(r"<- booking decline\s+As you wish\.", after=at)

    # Ctrl-C in the form: cancel (dismissed), and the call still returns to the model.
    at = chat.send("one more")
    t.wait_for(r"\[c\]ancel: a[ \t]*$", after=at)
    t.send("Enter")
    t.wait_for(r"Name: Ada[ \t]*$", after=at)
    t.send("C-c")
    t.wait_for(r"<- booking cancel\s+Never mind\.", after=at)

    assert chat.leave() == 0


def test_a_page_to_open_shows_its_host_and_url_and_asks_first(start: Callable[..., Chat]) -> None:
    chat = start(
        [
            search("connect account"),
            call("connect_account"),
            say("Connected."),
            call("connect_account"),
            say("Not now."),
        ]
    )
    t = chat.tmux
    chat.ready()

    at = chat.send("connect my account")
    t.wait_for(r"Server chat asks you to open a page:\s+Sign in to Example Cloud", after=at)
    t.wait_for(r"host: auth\.example\.com", after=at)
    t.wait_for(r"https://auth\.example\.com/connect\?state=abc123", after=at)
    # Enter alone declines: opening a page takes an explicit "o".
    t.wait_for(r"\[o\]pen it \(I will go there\) / \[d\]ecline / \[c\]ancel: d[ \t]*$", after=at)
    t.send("C-u")
    t.type("o")
    opened = t.wait_for(r"open the link above in your browser", after=at).end()
    # The server reports the page done (notifications/elicitation/complete): one line says so.
    done = t.wait_for(r"chat: the page at auth\.example\.com is done", after=opened).end()
    t.wait_for(r"<- connect accept\s+Connected\.", after=done)

    at = chat.send("again")
    t.wait_for(r"\[c\]ancel: d[ \t]*$", after=at)
    t.send("C-u")
    t.type("x")  # not a choice: asked again, with the choices named
    refused = t.wait_for(r"type o, d or c", after=at).end()
    t.wait_for(r"\[c\]ancel: d[ \t]*$", after=refused)
    t.send("Enter")
    t.wait_for(r"<- connect decline\s+Not now\.", after=at)

    assert chat.leave() == 0


def test_ctrl_c_cancels_a_slow_call_and_the_session_goes_on(start: Callable[..., Chat]) -> None:
    chat = start([search("wait seconds"), call("slow", seconds=120), say("Still here.")])
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

    # Ctrl-C with text clears the line; at an empty prompt it leaves, cleanly.
    at = t.mark()
    t.type("half a thought", enter=False)
    t.wait_for(r"keen> half a thought", after=at)
    t.send("C-c")
    t.wait_for(r"^keen>[ \t]*$", after=at)
    t.send("C-c")
    assert t.exit_status() == 0
    turns = [e for e in chat.sessions() if e["type"] == "agent.turn"]
    assert [bool(e.get("cancelled")) for e in turns] == [True, False], turns


def test_ctrl_c_cancels_a_grep_that_would_run_for_minutes(start: Callable[..., Chat], tmp_path: Path) -> None:
    """A local tool runs in a worker thread: Ctrl-C ends its turn at once (issue 24: a
    backtracking grep pinned the CPU and Keen ignored Ctrl-C)."""
    (tmp_path / "slow.txt").write_text(("a" * 16 + "!\n") * 20_000)
    grep = {"name": "grep", "arguments": {"pattern": "^(a|a)+$", "path": "slow.txt"}}
    chat = start([{"content": "", "tool_calls": [grep]}, say("Still here.")])
    t = chat.tmux
    chat.ready()
    at = chat.send("search the slow file")
    t.wait_for(r"-> grep ", after=at)
    t.send("C-c")
    t.wait_for(r"\(cancelled\)\s+keen>[ \t]*$", after=at, timeout=5)
    at = chat.send("are you there?")
    t.wait_for(r"Still here\.", after=at)
    results = [e for e in chat.sessions() if e["type"] == "result"]
    assert [r["outcome"] for r in results] == ["cancelled"], results


def test_a_configured_secret_never_reaches_the_screen_history_or_log(start: Callable[..., Chat]) -> None:
    chat = start([search("write a note"), call("note", text=f"token {SECRET}"), say(f"Saved {SECRET}.")])
    t = chat.tmux
    chat.ready()
    at = chat.send("save my token")
    t.wait_for(r'"text": "token \[REDACTED\]"', after=at)  # the approval question
    t.wait_for(r"this session:[ \t]*$", after=at)
    t.type("y")
    t.wait_for(r"<- noted: token \[REDACTED\]", after=at)
    t.wait_for(r"Saved", after=at)
    assert chat.leave() == 0
    assert chat.notes.read_text() == f"token {SECRET}\n"  # the server got the real value
    assert SECRET not in t.screen()
    assert SECRET not in (chat.keen_home / "history").read_text()
    for path in (chat.keen_home / "sessions").glob("*.jsonl"):
        assert SECRET not in path.read_text()


def test_tokens_stream_as_they_come_and_ctrl_c_stops_the_model(start: Callable[..., Chat]) -> None:
    slow = "Counting slowly: one two three four five six seven eight nine ten eleven twelve."
    with FakeLLM([Reply(text=slow, pause=0.5), Reply(text="Back again.")]) as fake:
        chat = start(
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


def test_a_server_that_crashes_mid_call_is_reported_once_and_reconnects(start: Callable[..., Chat]) -> None:
    chat = start(
        [
            search("stop the server at once"),
            call("crash"),
            say("The server died."),
            call("note", text="after the crash"),
            say("Noted after the crash."),
        ]
    )
    t = chat.tmux
    chat.ready()
    at = chat.send("crash it")
    # The model is told, with the fix; the person gets one line from the watch.
    t.wait_for(r"<- Error: MCP server \"chat\" went away during \"crash\"", after=at)
    t.wait_for(r"The server died\.", after=at)
    t.wait_for(
        r"^chat: disconnected \(.*fatal: crash called\); Keen reconnects it at the next call", after=at
    )
    t.wait_for(r"`/mcp connect chat` does it now", after=at)

    at = chat.send("/mcp connect chat")
    t.wait_for(r"chat: connected, 5 tools; skill mcp:chat enabled", after=at)
    at = chat.send("note it")
    t.wait_for(r"this session:[ \t]*$", after=at)
    t.type("y")
    t.wait_for(r"<- noted: after the crash\s+Noted after the crash\.", after=at)
    assert chat.leave() == 0
    # /mcp connect said it; the watch did not say it again.
    assert t.count(r"^chat: connected") == 1, t.screen()
    assert t.count(r"^chat: disconnected") == 1, t.screen()


def test_a_crashed_server_is_reconnected_by_the_next_call_or_by_its_skill(start: Callable[..., Chat]) -> None:
    chat = start(
        [
            search("stop the server at once"),
            call("crash"),
            say("The server died."),
            call("note", text="after the crash"),
            say("Noted after the crash."),
            call("crash"),
            say("It died again."),
            call("note", text="through the skill"),
            say("Noted through the skill."),
        ]
    )
    t = chat.tmux
    chat.ready()
    at = chat.send("crash it")
    t.wait_for(r"^chat: disconnected \(.*fatal: crash called", after=at)
    # No /mcp connect: the model's next call to the server reconnects it; one line says so.
    at = chat.send("note it")
    t.wait_for(r"^chat: reconnected, 5 tools", after=at)
    t.wait_for(r"this session:[ \t]*$", after=at)
    t.type("y")
    t.wait_for(r"<- noted: after the crash\s+Noted after the crash\.", after=at)
    # It crashes again and the watch disables its skill: /mcp:chat reconnects the server
    # first, so its skill is enabled again and activates.
    time.sleep(1.1)  # past the 1 s back-off window that follows a reconnect
    at = chat.send("crash it again")
    t.wait_for(r"It died again\.", after=at)
    t.wait_for(r"^chat: disconnected", after=at)
    at = chat.send("/mcp:chat note it through the skill")
    t.wait_for(r"^chat: reconnected, 5 tools", after=at)
    t.wait_for(r"Activated skill mcp:chat\.", after=at)
    t.wait_for(r"this session:[ \t]*$", after=at)
    t.type("y")
    t.wait_for(r"<- noted: through the skill\s+Noted through the skill\.", after=at)
    assert chat.leave() == 0
    # Each reconnect said once; the watch did not add a "chat: connected" line of its own.
    assert t.count(r"^chat: reconnected") == 2, t.screen()
    assert t.count(r"^chat: connected") == 0, t.screen()
    assert t.count(r"^chat: disconnected") == 2, t.screen()
    reconnects = [e for e in chat.sessions() if e["type"] == "agent.reconnect"]
    assert [e["state"] for e in reconnects] == ["connected", "connected"], reconnects
