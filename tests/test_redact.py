"""Secret redaction (keen._redact): each text redacted once, and a secret added later still
hidden in a text redacted before it."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest

import keen._redact as redact_module
from keen._redact import REDACTED, Redactor


class _Counted:
    """A pattern that counts its substitutions (the real pattern does the work)."""

    def __init__(self, pattern: re.Pattern[str], runs: list[str]) -> None:
        self._pattern, self._runs = pattern, runs

    def sub(self, repl: object, text: str) -> str:
        self._runs.append(text)
        return self._pattern.sub(repl, text)  # pyright: ignore[reportArgumentType, reportCallIssue]


@pytest.fixture
def runs(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    seen: list[str] = []
    monkeypatch.setattr(redact_module, "_PATTERNS", [_Counted(p, seen) for p in redact_module._PATTERNS])  # pyright: ignore[reportPrivateUsage]
    yield seen


def test_a_value_seen_again_is_not_scanned_again(runs: list[str]) -> None:
    redactor = Redactor()
    text = "Authorization: Bearer abcdefghijklmnop for get_weather"
    first = redactor.redact(text)
    assert "abcdefghijklmnop" not in first
    scanned = len(runs)
    assert scanned == len(redact_module._PATTERNS)  # pyright: ignore[reportPrivateUsage]
    # The call event, the result event and the audit record redact the same values again.
    assert redactor.redact(text) == first
    assert redactor.redact(text) == first
    assert len(runs) == scanned


def test_a_secret_added_later_is_hidden_in_text_redacted_before(runs: list[str]) -> None:
    redactor = Redactor()
    text = "the token is sk-live-0123456789"
    assert redactor.redact(text) == text
    redactor.add("sk-live-0123456789")
    assert redactor.redact(text) == f"the token is {REDACTED}"
    redactor.add("the token")  # a longer text of its own: the literal secrets change again
    assert redactor.redact(text) == f"{REDACTED} is {REDACTED}"


def test_long_texts_are_not_remembered(runs: list[str]) -> None:
    redactor = Redactor()
    text = "x" * (redact_module._MEMO_CHARS + 1)  # pyright: ignore[reportPrivateUsage]
    redactor.redact(text)
    redactor.redact(text)
    assert len(runs) == 2 * len(redact_module._PATTERNS)  # pyright: ignore[reportPrivateUsage]


def test_a_memo_read_before_a_secret_came_no_longer_answers_for_it() -> None:
    """An event's fields are looked up in the memo read at its start: a secret added midway
    must not leave that memo handing out a text redacted without it."""
    redactor = Redactor()
    text = "the word opensesame99 here"
    assert redactor.redact(text) == text
    memo = redactor.memo  # as EventLog.emit holds it for one event
    assert memo.get(text) == text
    redactor.add("opensesame99")
    assert memo.get(text) is None
    assert redactor.redact(text) == f"the word {REDACTED} here"
    assert text not in memo  # the stale memo is never written again
