"""``keen chat`` in a real terminal (tmux): the start, slash commands and completion, and a
configured secret kept off the screen. The other terminal tests: ``test_repl_tmux_questions.py``
(approval, forms, pages to open), ``test_repl_tmux_interrupts.py`` (Ctrl-C, streaming) and
``test_repl_tmux_crashes.py`` (a server that dies); the sessions: ``helpers.chat_tmux``.
"""

from __future__ import annotations

import stat
from collections.abc import Callable

import pytest

from helpers.chat_tmux import PROMPT, SECRET, Chat, call, say, search

pytestmark = [pytest.mark.timeout(180), pytest.mark.e2e, pytest.mark.slow_file]


def test_startup_slash_commands_and_a_configured_secret_kept_off_the_screen_history_and_log(
    tmux_chat: Callable[..., Chat],
) -> None:
    """One session (a keen chat, its server and a terminal cost about 2 s of CPU to start):
    the start with a failing server, the slash commands and completion, then a call that
    carries a configured secret."""
    script = [
        say("Hello Bob, from the greet skill."),
        search("write a note"),
        call("note", text=f"token {SECRET}"),
        say(f"Saved {SECRET}."),
    ]
    chat = tmux_chat(script, broken=True)
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

    # Tab completes a command (typed at the open prompt, as ``chat.send`` types).
    chat.idle()
    at = t.mark()
    t.type("/sea", enter=False)
    t.send("Tab")
    t.wait_for(r"^keen> /search[ \t]*$", after=at)
    t.send("C-u")

    # /SKILL ARGS: the skill body, arguments substituted, stays in the conversation; ARGS is the turn.
    at = chat.send("/greet Bob")
    t.wait_for(r"Activated skill greet\.", after=at)
    t.wait_for(r"Hello Bob, from the greet skill\.\s+keen>[ \t]*$", after=at)

    # /mcp:SERVER with no arguments: activated, no model call (the script has no answer left).
    at = chat.send("/mcp:chat")
    t.wait_for(r"Activated skill mcp:chat: it stays in the conversation", after=at)

    # A configured secret (the chat server's env) in a call's arguments and in the answer.
    at = chat.send("save my token")
    t.wait_for(r'"text": "token \[REDACTED\]"', after=at)  # the approval question
    t.wait_for(r"this session:[ \t]*$", after=at)
    t.type("y")
    t.wait_for(r"<- noted: token \[REDACTED\]", after=at)
    t.wait_for(r"Saved", after=at)

    chat.send("/exit")
    assert t.exit_status() == 0
    activations = [e for e in chat.sessions() if e["type"] == "agent.activate"]
    assert [e["skill"] for e in activations] == ["greet", "mcp:chat"], chat.sessions()
    history = chat.keen_home / "history"
    assert stat.S_IMODE(history.stat().st_mode) == 0o600
    assert "/greet Bob" in history.read_text()
    assert chat.notes.read_text() == f"token {SECRET}\n"  # the server got the real value
    assert SECRET not in t.screen()
    assert SECRET not in (chat.keen_home / "history").read_text()
    for path in (chat.keen_home / "sessions").glob("*.jsonl"):
        assert SECRET not in path.read_text()
