"""Leaving a task group entered by hand (``__aenter__``), keeping the body's error in sight.

``keen.mcpskills.live.LiveSkills`` and ``keen.runtime.open_runtime``'s deferred start enter
a task group around a caller's body. Given the body's exception, the group's exit raised it
wrapped in an ``ExceptionGroup``, which a caller's ``except KeenError`` missed; left without
it, a background task's failure replaced it and the body's error was only the group's
``__context__``.
"""

from __future__ import annotations

import anyio.abc


async def leave_task_group(tg: anyio.abc.TaskGroup, exc: BaseException | None) -> None:
    """Exit ``tg`` for a body that ended with ``exc`` (``None``: it ended well).

    The body's exception propagates as it was raised when every task ended well; when a task
    failed too, the group raised holds the task's error and the body's (an ``Exception``; a
    cancellation is the group's own to handle).

    Raises:
        BaseExceptionGroup: a task of ``tg`` failed.
    """
    try:
        await tg.__aexit__(None, None, None)
    except BaseExceptionGroup as group:
        if not isinstance(exc, Exception) or any(e is exc for e in group.exceptions):
            raise
        raise group.derive([*group.exceptions, exc]) from None
