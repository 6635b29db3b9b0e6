"""``keen chat --resume`` in a real terminal (tmux): a session left with Ctrl-D names itself
and how to go on with it; ``--resume`` in the same directory says what came back, and the
model (an OpenAI-compatible fake on 127.0.0.1) receives the earlier turn."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from helpers.chat_tmux import Chat
from helpers.fake_llm import KEY, FakeLLM, Reply

pytestmark = [pytest.mark.timeout(180), pytest.mark.e2e]


def test_a_session_left_is_resumed_with_its_turns(tmux_chat: Callable[..., Chat]) -> None:
    with FakeLLM([Reply(text="Noted: pineapple."), Reply(text="You said pineapple.")]) as fake:
        chat = tmux_chat(
            [], model=["--model", "openai:m", "--base-url", fake.url + "/v1"], env={"OPENAI_API_KEY": KEY}
        )
        chat.ready()
        chat.send("remember the word pineapple")
        chat.tmux.wait_for(r"Noted: pineapple\.")
        assert chat.leave() == 0
        named = chat.tmux.wait_for(r"session (\S+): keen chat --resume (\S+) goes on with it")
        first = named.group(1)
        assert named.group(2) == first
        log = chat.keen_home / "sessions" / f"{first}.jsonl"
        before = log.read_bytes()

        chat.again("--resume")
        t = chat.tmux
        t.wait_for(rf"resumed session {first}: 1 turn\(s\), 0 tool call\(s\) \(compacted\); last message:")
        t.wait_for(rf"its log names {first} as its parent")
        chat.ready()
        at = chat.send("which word?")
        t.wait_for(r"You said pineapple\.", after=at)
        assert chat.leave() == 0
    said = [(m["role"], m["content"]) for m in fake.requests[-1].body["messages"][1:]]
    assert said == [
        ("user", "remember the word pineapple"),
        ("assistant", "Noted: pineapple."),
        ("user", "which word?"),
    ], said
    assert log.read_bytes() == before  # the old log is only read
