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

A start's wall time says nothing of its cost once it waits: a server hanging at initialize, or
waiting on the network, holds its turn for its whole connect limit while using no CPU, and
with one turn per CPU two such servers held every other start back for that long. So while
starts wait behind turns all past their quick share, the first waiter looks at the machine's
CPUs every :data:`RECHECK` seconds (Linux ``/proc/stat``): when at least :data:`IDLE_CPUS` of
them were idle since its last look, the starts past their quick share are set aside as
waiting, not working. They hold no turn from then on, their end neither grows nor shrinks
the bound, and the waiters go in by the rules above. The default bound only; elsewhere (no
``/proc/stat``) the bound is as above.

Turns are given in the order they were asked for.
"""

from __future__ import annotations

import os
import time
from collections import deque
from collections.abc import Callable

import anyio
import anyio.lowlevel

__all__ = [
    "GROWTH",
    "IDLE_CPUS",
    "QUICK_MOST",
    "QUICK_SHARE",
    "RECHECK",
    "StartSlots",
    "StartTurn",
    "cpu_busy_share",
]

QUICK_SHARE = 1 / 20
"""The share of its connect limit within which a start counts as quick: 0.75 s of the default
15 s, far enough from the limit that a bound which keeps starts near it keeps them well inside."""

QUICK_MOST = 0.75
"""Seconds: a start that took longer is never quick, whatever its limit (a limit raised for a
slow first ``uvx`` install would otherwise count a 6 s start as cheap)."""

GROWTH = 4
"""How far past its base a growing bound goes (4x the CPUs): should a burst of costly starts be
let in together after cheap ones, each takes at most that many times its own cost."""


RECHECK = 0.25
"""Seconds between the first waiter's looks at the CPUs while every start in flight is past its
quick share."""

IDLE_CPUS = 0.75
"""CPUs that must have been idle since the last look to let one more start in past the bound."""


def cpu_busy_share() -> Callable[[], float | None]:
    """A reader of the machine's busy share of CPU time since its previous call.

    Returns:
        A function returning the share (0 to 1) of all CPUs' time spent busy (not idle or
        waiting on I/O, ``/proc/stat``'s first line) since it was last called, ``None`` at its
        first call or where ``/proc/stat`` cannot be read.
    """
    last: list[int] = []

    def busy() -> float | None:
        try:
            with open("/proc/stat", "rb") as stat:
                fields = [int(x) for x in stat.readline().split()[1:]]
        except (OSError, ValueError):
            return None
        total, idle = sum(fields), sum(fields[3:5])
        share = None
        if last and total > last[0]:
            share = 1 - (idle - last[1]) / (total - last[0])
        last[:] = (total, idle)
        return share

    return busy


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
        cpu_busy: the busy share of the CPUs since its previous call, or ``None`` when
            unknown (:func:`cpu_busy_share`; tests give their own); with ``grow`` only.
        cpus: the machine's CPUs, to turn that share into idle CPUs.
    """

    def __init__(
        self,
        base: int,
        *,
        grow: bool = False,
        clock: Callable[[], float] = time.monotonic,
        cpu_busy: Callable[[], float | None] | None = None,
        cpus: int | None = None,
    ) -> None:
        if base < 1:
            raise ValueError(f"a start bound must be at least 1, not {base}")
        self.base = base
        self.bound = base
        """Starts allowed at once now: ``base`` up to ``GROWTH * base``."""
        self._cap = base * GROWTH if grow else base
        self._clock = clock
        self._running: set[StartTurn] = set()
        self._waiting: deque[StartTurn] = deque()
        self._busy = (cpu_busy or cpu_busy_share()) if grow else None
        self._cpus = cpus or os.cpu_count() or 1
        self._idle: set[StartTurn] = set()
        """Starts set aside as waiting on something other than the CPUs (:meth:`_look`)."""
        self._looked_at = -RECHECK * 4  # seconds (time.monotonic): the CPUs' share is since then
        self._looker: StartTurn | None = None
        """The waiter that looks at the CPUs (the first in the queue when it went to sleep)."""

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
            while turn.began is None:
                if self._busy is not None and self._looker is None:
                    self._looker = turn
                if self._looker is turn:
                    with anyio.move_on_after(RECHECK):
                        await turn.granted.wait()
                    if turn.began is None:
                        self._look()
                else:
                    await turn.granted.wait()
                    if turn.began is None:  # woken to take over the looks, not granted
                        turn.granted = anyio.Event()
        except BaseException:
            if turn.began is None:
                turn.abandoned = True  # skipped when its place comes: no O(n) removal each
            else:
                turn.cancel()
            raise
        finally:
            if self._looker is turn:
                self._looker = None
                self._wake_looker()
        return turn

    def _look(self) -> None:
        """When the CPUs were idle enough since the last look, set aside the starts past
        their quick share (waiting, not working: they hold no turn from now on) and let
        waiters in by the bound (module docstring)."""
        assert self._busy is not None
        busy = self._busy()
        # Real seconds, not the injected clock: the CPUs' share is over real time.
        looked = time.monotonic()
        stale, self._looked_at = looked - self._looked_at > 2 * RECHECK, looked
        self._drop_abandoned()
        if stale or not self._waiting or busy is None or (1 - busy) * self._cpus < IDLE_CPUS:
            return
        now = self._clock()
        for turn in [t for t in self._running if t.began is not None and now - t.began > t.quick]:
            self._running.discard(turn)
            self._idle.add(turn)
        self._admit(now)

    def _wake_looker(self) -> None:
        # The next waiter takes over the looks; one waiter at a time wakes for them.
        self._drop_abandoned()
        if self._busy is not None and self._waiting:
            self._waiting[0].granted.set()

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
        if turn in self._idle:
            # Set aside as waiting: how long it took says nothing of a start's CPU.
            self._idle.discard(turn)
            return
        if turn not in self._running:
            return
        self._running.discard(turn)
        now = self._clock()
        if judge and self._cap > self.base and turn.began is not None:
            if now - turn.began <= turn.quick:
                self.bound = min(self._cap, self.bound + 1)
            else:
                self.bound = max(self.base, self.bound // 2)
        self._admit(now)

    def _admit(self, now: float) -> None:
        self._drop_abandoned()
        while self._waiting and self._admits(now):
            waiter = self._waiting.popleft()
            self._begin(waiter)
            waiter.granted.set()
            self._drop_abandoned()
