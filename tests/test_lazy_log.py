"""keen._log: a module's logger with logging imported at first use, and the hooks run before
the first record (``keen prompt`` sets the CLI's logging up there)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator

import pytest

from keen import _log
from keen._log import LazyLogger, before_first_record


class _Kept(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


@pytest.fixture
def kept() -> Iterator[_Kept]:
    handler = _Kept()
    logger = logging.getLogger("keen.test_lazy_log")
    yield handler
    logger.removeHandler(handler)
    _log._hooks.clear()  # pyright: ignore[reportPrivateUsage]
    _log._pending = False  # pyright: ignore[reportPrivateUsage]


def test_a_second_threads_record_waits_for_the_hook_and_each_hook_runs_once(kept: _Kept) -> None:
    entered, release, calls = threading.Event(), threading.Event(), []

    def set_up() -> None:
        calls.append("set_up")
        entered.set()
        assert release.wait(30)
        logging.getLogger("keen.test_lazy_log").addHandler(kept)

    before_first_record(set_up)
    log = LazyLogger("keen.test_lazy_log")
    first = threading.Thread(target=lambda: log.warning("from the first thread"))
    first.start()
    assert entered.wait(30)
    second_done = threading.Event()

    def second() -> None:
        log.warning("from the second thread")
        second_done.set()

    other = threading.Thread(target=second)
    other.start()
    # The second record is not made while the hook runs (it would go to logging's default
    # handler, unredacted and unescaped)...
    assert not second_done.wait(0.2)
    release.set()
    first.join(30)
    other.join(30)
    # ...but after it, through what the hook set up; and the hook ran once.
    assert sorted(kept.messages) == ["from the first thread", "from the second thread"]
    assert calls == ["set_up"]


def test_a_hook_that_fails_does_not_raise_out_of_the_log_call(kept: _Kept) -> None:
    def broken() -> None:
        raise RuntimeError("no terminal")

    before_first_record(broken)
    before_first_record(lambda: logging.getLogger("keen.test_lazy_log").addHandler(kept))
    LazyLogger("keen.test_lazy_log").warning("still written")
    assert kept.messages == ["still written"]
