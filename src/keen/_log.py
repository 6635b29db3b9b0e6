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

from collections.abc import Callable
from typing import Any

__all__ = ["LazyLogger", "before_first_record"]

_hooks: list[Callable[[], None]] = []


def before_first_record(hook: Callable[[], None]) -> None:
    """Run ``hook`` once, when a :class:`LazyLogger` is first used (before its record is
    made): ``keen prompt`` sets the CLI's logging up there instead of importing
    :mod:`logging` at its start. Only records made through a ``LazyLogger`` run it: a caller
    whose other code logs through :mod:`logging` directly sets logging up at once."""
    _hooks.append(hook)


class LazyLogger:
    """``logging.getLogger(name)``, looked up at each use (``logging`` caches it).

    Args:
        name: the logger's name, ``__name__`` of the module that logs.
    """

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __getattr__(self, attribute: str) -> Any:
        while _hooks:
            _hooks.pop(0)()
        import logging

        return getattr(logging.getLogger(self.name), attribute)
