"""``keen chat`` in a real terminal (tmux): an MCP server that dies during a call, what the
person is told once, and the reconnects that follow (``helpers.chat_tmux``).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from helpers.chat_tmux import Chat, call, say, search

pytestmark = [pytest.mark.timeout(180), pytest.mark.e2e, pytest.mark.slow_file]


def test_a_server_that_crashes_is_reported_once_and_reconnected_by_command_call_or_skill(
    tmux_chat: Callable[..., Chat], tmp_path: Path
) -> None:
    """One session (a keen chat, its server and a terminal cost about 2 s of CPU to start)
    in which the server crashes three times: brought back by ``/mcp connect``, by the
    model's next call, then by its skill."""
    chat = tmux_chat(
        [
            search("stop the server at once"),
            call("crash"),
            say("The server died."),
            call("note", text="after the crash"),
            say("Noted after the crash."),
            call("crash"),
            say("It died again."),
            call("note", text="after the second crash"),
            say("Noted after the second crash."),
            call("crash"),
            say("It died a third time."),
            call("note", text="through the skill"),
            say("Noted through the skill."),
        ],
        clock=tmp_path / "clock",
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
    # /mcp connect said it; the watch did not say it again.
    assert t.count(r"^chat: connected") == 1, t.screen()
    assert t.count(r"^chat: disconnected") == 1, t.screen()

    at = chat.send("crash it again")
    t.wait_for(r"^chat: disconnected \(.*fatal: crash called", after=at)
    # No /mcp connect: the model's next call to the server reconnects it; one line says so.
    at = chat.send("note it")
    t.wait_for(r"^chat: reconnected, 5 tools", after=at)
    t.wait_for(r"this session:[ \t]*$", after=at)
    t.type("y")
    t.wait_for(r"<- noted: after the second crash\s+Noted after the second crash\.", after=at)
    # It crashes again and the watch disables its skill: /mcp:chat reconnects the server
    # first, so its skill is enabled again and activates.
    chat.advance(1.1)  # past the 1 s back-off window that follows a reconnect
    at = chat.send("crash it a third time")
    t.wait_for(r"It died a third time\.", after=at)
    t.wait_for(r"^chat: disconnected", after=at)
    at = chat.send("/mcp:chat note it through the skill")
    t.wait_for(r"^chat: reconnected, 5 tools", after=at)
    t.wait_for(r"Activated skill mcp:chat\.", after=at)
    t.wait_for(r"this session:[ \t]*$", after=at)
    t.type("y")
    t.wait_for(r"<- noted: through the skill\s+Noted through the skill\.", after=at)
    assert chat.leave() == 0
    # Each reconnect said once; the watch added no "chat: connected" line of its own.
    assert t.count(r"^chat: reconnected") == 2, t.screen()
    assert t.count(r"^chat: connected") == 1, t.screen()
    assert t.count(r"^chat: disconnected") == 3, t.screen()
    reconnects = [e for e in chat.sessions() if e["type"] == "agent.reconnect"]
    assert [e["state"] for e in reconnects] == ["connected", "connected"], reconnects
