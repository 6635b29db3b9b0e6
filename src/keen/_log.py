"""A module's logger, with :mod:`logging` imported at its first use (a leaf: imports
nothing of Keen).

``import logging`` brings ``threading``, ``traceback``, ``string`` and ``weakref`` with it,
about a tenth of what a host's ``keen.prompt.budgeted_prompt`` imports (about 21 of 184
million instructions, ``bench/prompt_start.py``); the modules on that path (the skills
discovery and its store, the token counter, the prompt) log only when something goes wrong
(a file that cannot be read or written), so a prompt built without trouble never imports
it. The records are the same: each call goes to ``logging.getLogger(name)``, so levels,
handlers and ``caplog`` see them as ever.
"""

from __future__ import annotations

import _thread
import contextlib
from collections.abc import Callable
from typing import Any

__all__ = ["LazyLogger", "before_first_record"]

_hooks: list[Callable[[], None]] = []
_hooks_lock = _thread.RLock()  # _thread: threading is what this module leaves unimported
_pending = False
"""Hooks were given and have not all finished: a log call's one check on its way."""
_depth = 0
"""How deep :func:`_run_hooks` is in the thread holding the lock (a hook that logs)."""


def before_first_record(hook: Callable[[], None]) -> None:
    """Run ``hook`` once, when a :class:`LazyLogger` is first used (before its record is
    made): ``keen prompt`` sets the CLI's logging up there instead of importing
    :mod:`logging` at its start. Only records made through a ``LazyLogger`` run it: a caller
    whose other code logs through :mod:`logging` directly sets logging up at once."""
    global _pending
    with _hooks_lock:
        _hooks.append(hook)
        _pending = True


class LazyLogger:
    """``logging.getLogger(name)``, looked up at each use (``logging`` caches it).

    Args:
        name: the logger's name, ``__name__`` of the module that logs.
    """

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __getattr__(self, attribute: str) -> Any:
        if _pending:
            _run_hooks()
        import logging

        return getattr(logging.getLogger(self.name), attribute)


def _run_hooks() -> None:
    """Run the hooks :func:`before_first_record` was given, once each. Another thread's first
    record waits until they have run (logging is set up before it is made); a hook that logs
    runs the ones after it first (each is taken off before it runs); a hook that fails leaves
    the record to logging's defaults rather than raising out of the caller's log call."""
    global _pending, _depth
    with _hooks_lock:
        _depth += 1
        try:
            while _hooks:
                hook = _hooks.pop(0)
                with contextlib.suppress(Exception):  # a log call must not raise; the record goes out
                    hook()
        finally:
            _depth -= 1
            if not _depth and not _hooks:
                _pending = False
