"""``keen.cli._signals.ask_cancellably``: a blocking question in a daemon thread, its answer
handed back to the event loop (anyio's thread bridge, imported at the first question so a
chat's first request never loads it: tests/cli/test_chat_startup.py)."""

from __future__ import annotations

import threading

import anyio

from keen.cli._signals import ask_cancellably


def test_the_answer_comes_back_from_the_asking_thread() -> None:
    asked_in: list[threading.Thread] = []

    def ask(answer: bool) -> bool:
        asked_in.append(threading.current_thread())
        return answer

    assert anyio.run(ask_cancellably, lambda: ask(True)) is True
    assert anyio.run(ask_cancellably, lambda: ask(False)) is False
    assert all(t is not threading.main_thread() and t.daemon for t in asked_in), asked_in


def test_a_question_that_fails_is_a_no() -> None:
    def broken() -> bool:
        raise OSError("stdin is closed")

    assert anyio.run(ask_cancellably, broken) is False
