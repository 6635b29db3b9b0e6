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

from typing import Any

__all__ = ["LazyLogger"]


class LazyLogger:
    """``logging.getLogger(name)``, looked up at each use (``logging`` caches it).

    Args:
        name: the logger's name, ``__name__`` of the module that logs.
    """

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __getattr__(self, attribute: str) -> Any:
        import logging

        return getattr(logging.getLogger(self.name), attribute)
