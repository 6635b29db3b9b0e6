"""How many stdio servers start at once (docs/architecture.md "Servers and their states").

Starting a stdio server costs CPU (an interpreter, ``npx``, ``uvx``): thirty started
together on two CPUs each finish late, past their connect limits. So starts take turns, one
per CPU (at least two) at once by default. Held to that bound, many *cheap* starts are slow
for nothing: 292 tiny servers took about twice the MCP SDK's wall time (all started at
once), and Keen's event loop woke for each of their messages one by one instead of taking
them in batches.

So the default bound grows while starts prove cheap. A start's wall time bounds its CPU time
from above, its children's included (the server a ``uvx`` or ``npx`` launcher starts): a
start that ended within :data:`QUICK_SHARE` of its connect limit (and :data:`QUICK_MOST` at
most) cost at most that much CPU. Each such start raises the bound by one, up to
:data:`GROWTH` times the base; one that took longer halves it, never below the base. Beyond
the base a start is let in only while every start in flight is still within its own quick
share: a costly start already running is not shared out among a stream of cheap ones. A
configured bound (``max_starting``) stays fixed.

Turns are given in the order they were asked for.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable

import anyio
import anyio.lowlevel

__all__ = ["GROWTH", "QUICK_MOST", "QUICK_SHARE", "StartSlots", "StartTurn"]

QUICK_SHARE = 1 / 20
"""The share of its connect limit within which a start counts as quick: 0.75 s of the default
15 s, far enough from the limit that a bound which keeps starts near it keeps them well inside."""

QUICK_MOST = 0.75
"""Seconds: a start that took longer is never quick, whatever its limit (a limit raised for a
slow first ``uvx`` install would otherwise count a 6 s start as cheap)."""

GROWTH = 4
"""How far past its base a growing bound goes (4x the CPUs): should a burst of costly starts be
let in together after cheap ones, each takes at most that many times its own cost."""


class StartTurn:
    """One server's turn to start: hold it from launch until its tool list is in (or it failed).

    Attributes:
        quick: seconds within which this start counts as quick (:data:`QUICK_SHARE` of its
            connect limit, at most :data:`QUICK_MOST`).
        began: the clock's reading when the turn was granted; ``None`` while it waits.
        granted: set when the turn is granted.
        abandoned: its waiter was cancelled before the turn came; the queue skips it.
    """

    __slots__ = ("_slots", "abandoned", "began", "granted", "quick")

    def __init__(self, slots: StartSlots, quick: float) -> None:
        self._slots = slots
        self.quick = quick
        self.began: float | None = None
        self.granted = anyio.Event()
        self.abandoned = False

    def end(self) -> None:
        """The start is over (connected or failed): give the turn back, judging how long it
        took. Idempotent."""
        self._slots._end(self, judge=True)

    def cancel(self) -> None:
        """Give the turn back unused (stopped before launch): says nothing of a start's cost."""
        self._slots._end(self, judge=False)


class StartSlots:
    """The bound on stdio starts in flight (module docstring).

    Args:
        base: starts always allowed at once (the CPUs, or the configured ``max_starting``).
        grow: let the bound grow past ``base`` while starts are quick (the default bound);
            ``False``: ``base`` is fixed (a configured one).
        clock: seconds, monotonic (tests give their own).
    """

    def __init__(self, base: int, *, grow: bool = False, clock: Callable[[], float] = time.monotonic) -> None:
        if base < 1:
            raise ValueError(f"a start bound must be at least 1, not {base}")
        self.base = base
        self.bound = base
        """Starts allowed at once now: ``base`` up to ``GROWTH * base``."""
        self._cap = base * GROWTH if grow else base
        self._clock = clock
        self._running: set[StartTurn] = set()
        self._waiting: deque[StartTurn] = deque()

    @property
    def running(self) -> int:
        """Starts holding a turn now."""
        return len(self._running)

    async def turn(self, connect_limit: float) -> StartTurn:
        """Wait for a turn to start a server.

        Cancelled while waiting, it leaves the queue (a turn granted meanwhile is given back).

        Args:
            connect_limit: the server's connect limit, seconds (``timeouts.connect``).

        Returns:
            The granted turn: :meth:`StartTurn.end` when the start is over,
            :meth:`StartTurn.cancel` when it was stopped before it said anything of its cost.
        """
        await anyio.lowlevel.checkpoint_if_cancelled()
        turn = StartTurn(self, min(connect_limit * QUICK_SHARE, QUICK_MOST))
        self._drop_abandoned()
        if not self._waiting and self._admits(self._clock()):
            self._begin(turn)
            return turn
        self._waiting.append(turn)
        try:
            await turn.granted.wait()
        except BaseException:
            if turn.began is None:
                turn.abandoned = True  # skipped when its place comes: no O(n) removal each
            else:
                turn.cancel()
            raise
        return turn

    def _drop_abandoned(self) -> None:
        while self._waiting and self._waiting[0].abandoned:
            self._waiting.popleft()

    def _admits(self, now: float) -> bool:
        held = len(self._running)
        if held < self.base:
            return True
        if held >= self.bound:
            return False
        return all(now - t.began <= t.quick for t in self._running if t.began is not None)

    def _begin(self, turn: StartTurn) -> None:
        turn.began = self._clock()
        self._running.add(turn)

    def _end(self, turn: StartTurn, *, judge: bool) -> None:
        if turn not in self._running:
            return
        self._running.discard(turn)
        now = self._clock()
        if judge and self._cap > self.base and turn.began is not None:
            if now - turn.began <= turn.quick:
                self.bound = min(self._cap, self.bound + 1)
            else:
                self.bound = max(self.base, self.bound // 2)
        self._drop_abandoned()
        while self._waiting and self._admits(now):
            waiter = self._waiting.popleft()
            self._begin(waiter)
            waiter.granted.set()
            self._drop_abandoned()
