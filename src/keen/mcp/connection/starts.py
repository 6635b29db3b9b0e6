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
starts wait for a turn, the first waiter looks every :data:`LOOK` seconds at what each start in
flight did since the previous look (Linux ``/proc``: its process and its descendants, their
ended threads and reaped children included, :class:`keen.mcp.connection.cpu_use.ProcessTrees`). One whose processes were
on a CPU or waiting for one less than :data:`ASLEEP` of the time is asleep, waiting on
something other than the CPUs: it is set aside, holding no turn, and the waiters go in by the
rules above; should it be seen working again, it takes its turn back (over the bound until
enough starts end). The first time a start is set aside it is judged by the CPU its processes
used so far, not by its wall time: within its quick share the bound grows by one (a stream of
sleepers goes in at once, not one turn per look), past it the bound halves; its end moves the
bound no more. A start whose processes cannot be read (no ``/proc`` or no ``schedstat``, not yet launched) is
judged by the machine instead: past its quick share, it is set aside once at least
:data:`IDLE_CPUS` of the CPUs were idle since the last look (``/proc/stat``). The default bound
only; elsewhere the bound is as above.

Turns go to the longest start first (longest processing time first, the classic rule for
finishing a set of jobs early on a few machines): a waiter says how long its server's last
start took (:mod:`keen.mcp.connection.start_times`), and the one expected to take longest
is let in first, so the slowest server's own wait (its sleep, its install) begins at once
instead of behind every faster one. A server with no record (new, or its launch changed)
goes first: a first start is often the slowest (a package to fetch). One whose last start
did not finish, reaching a limit (to connect, to list) or stopped before its tools were listed, goes
last: it is expected to give nothing, and should it hang while working it holds its turn
for its whole limit. Ties keep the order they asked in. The starts asked for together (the
Manager's owners, begun in one go) are ordered among themselves: a turn is granted only
after the asking task yielded once, so the first ones asked do not go in before the others
are queued.
"""

from __future__ import annotations

import heapq
import itertools
import math
import os
import time
from collections.abc import Callable, Collection

import anyio
import anyio.lowlevel

from keen.mcp.connection.cpu_use import ProcessTrees, TreeUse, cpu_busy_share

__all__ = [
    "ASLEEP",
    "GROWTH",
    "IDLE_CPUS",
    "LOOK",
    "QUICK_MOST",
    "QUICK_SHARE",
    "StartSlots",
    "StartTurn",
    "order",
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

LOOK = 0.05
"""Seconds between the first waiter's looks at the starts in flight."""

ASLEEP = 0.1
"""The share of the time since the last look below which a start's processes, on a CPU or
waiting for one, count as asleep. A start that works, however many share the CPUs, is on one
or in their queue nearly all the time."""

IDLE_CPUS = 0.75
"""CPUs that must have been idle since the last look to set aside the starts that cannot be
read and are past their quick share."""

_NS = 1e9


def order(last: float | None) -> tuple[int, float]:
    """Where a waiter goes in the queue, smallest first (module docstring): a start with no
    record, then one remembered to take ``last`` seconds before one remembered shorter, and
    one whose last start did not finish (timed out or stopped) last of all.

    Args:
        last: seconds the server's last start took (``math.inf``: it did not finish),
            ``None`` when unknown
            (:meth:`keen.mcp.connection.start_times.StartTimes.last`).
    """
    if last is None:
        return (-1, 0.0)
    if math.isinf(last):
        return (2, 0.0)
    return (0, -last)


class StartTurn:
    """One server's turn to start: hold it from launch until its tool list is in (or it failed).

    Attributes:
        quick: seconds within which this start counts as quick (:data:`QUICK_SHARE` of its
            connect limit, at most :data:`QUICK_MOST`).
        began: the clock's reading when the turn was granted; ``None`` while it waits.
        granted: set when the turn is granted.
        abandoned: its waiter was cancelled before the turn came; the queue skips it.
        pid: the server's process, once launched (:meth:`launched`).
    """

    __slots__ = ("_judged", "_seen", "_slots", "abandoned", "began", "granted", "pid", "quick")

    def __init__(self, slots: StartSlots, quick: float) -> None:
        self._slots = slots
        self.quick = quick
        self.began: float | None = None
        self.granted = anyio.Event()
        self.abandoned = False
        self.pid: int | None = None
        self._seen: tuple[float, TreeUse] | None = None
        """(clock, its processes' use) at the last look."""
        self._judged = False
        """Its cost has moved the bound already (when first set aside)."""

    def launched(self, pid: int) -> None:
        """The server's process is started: from now on its CPU use says whether it works
        (module docstring)."""
        self.pid = pid
        self._seen = (self._slots._clock(), (0, 0))

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
        grow: let the bound grow past ``base`` while starts are quick, and set aside the
            starts that are asleep (the default bound); ``False``: ``base`` is fixed (a
            configured one).
        clock: seconds, monotonic (tests give their own).
        cpu_busy: the busy share of the CPUs since its previous call, or ``None`` when
            unknown (:func:`~keen.mcp.connection.cpu_use.cpu_busy_share`; tests give their
            own); with ``grow`` only.
        cpus: the machine's CPUs, to turn that share into idle CPUs.
        trees: the use of the given processes and their descendants, those it can read
            (a :class:`~keen.mcp.connection.cpu_use.ProcessTrees` of its own; tests give
            their own); with ``grow`` only.
    """

    def __init__(
        self,
        base: int,
        *,
        grow: bool = False,
        clock: Callable[[], float] = time.monotonic,
        cpu_busy: Callable[[], float | None] | None = None,
        cpus: int | None = None,
        trees: Callable[[Collection[int]], dict[int, TreeUse]] | None = None,
    ) -> None:
        if base < 1:
            raise ValueError(f"a start bound must be at least 1, not {base}")
        self.base = base
        self.bound = base
        """Starts allowed at once now: ``base`` up to ``GROWTH * base``."""
        self._cap = base * GROWTH if grow else base
        self._clock = clock
        self._running: set[StartTurn] = set()
        self._waiting: list[tuple[tuple[int, float], int, StartTurn]] = []
        """A heap of (order, arrival, waiter): the longest expected start first (:func:`order`)."""
        self._arrivals = itertools.count()
        self._grow = grow
        self._busy = (cpu_busy or cpu_busy_share()) if grow else None
        self._trees = trees or ProcessTrees()
        self._cpus = cpus or os.cpu_count() or 1
        self._asleep: set[StartTurn] = set()
        """Starts set aside as waiting on something other than the CPUs (:meth:`_look`)."""
        self._looked_at = -LOOK * 4  # seconds (time.monotonic): the CPUs' share is since then
        self._looker: StartTurn | None = None
        """The waiter that looks at the starts (the first in the queue when it went to sleep)."""

    @property
    def running(self) -> int:
        """Starts holding a turn now."""
        return len(self._running)

    @property
    def waiting(self) -> int:
        """Starts waiting for a turn (those given up while waiting included until their place
        comes)."""
        return len(self._waiting)

    @property
    def asleep(self) -> int:
        """Starts in flight set aside as asleep, holding no turn."""
        return len(self._asleep)

    async def turn(self, connect_limit: float, last: float | None = None) -> StartTurn:
        """Wait for a turn to start a server; the longest expected start goes first (module
        docstring), and the task always yields once before its turn is granted.

        Cancelled while waiting, it leaves the queue (a turn granted meanwhile is given back).

        Args:
            connect_limit: the server's connect limit, seconds (``timeouts.connect``).
            last: seconds its last start took, from its turn to its tool list
                (``math.inf`` when it timed out or was stopped unfinished);
                ``None`` when unknown (:meth:`keen.mcp.connection.start_times.StartTimes.last`).

        Returns:
            The granted turn: :meth:`StartTurn.launched` with the server's process id, then
            :meth:`StartTurn.end` when the start is over, :meth:`StartTurn.cancel` when it
            was stopped before it said anything of its cost.
        """
        await anyio.lowlevel.checkpoint_if_cancelled()
        turn = StartTurn(self, min(connect_limit * QUICK_SHARE, QUICK_MOST))
        heapq.heappush(self._waiting, (order(last), next(self._arrivals), turn))
        try:
            # Those asked in the same go queue up too before any is let in: the longest first.
            await anyio.lowlevel.checkpoint()
            self._admit(self._clock())
            while turn.began is None:
                if self._grow and self._looker is None:
                    self._looker = turn
                if self._looker is turn:
                    if turn.granted.is_set():
                        # Woken to take over the looks before it got here (the looker left
                        # while it yielded above): a set event would end every wait at once.
                        turn.granted = anyio.Event()
                    with anyio.move_on_after(LOOK):
                        await turn.granted.wait()
                    if turn.began is None:
                        self.look()
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
            elif self._looker is None and turn.began is None:
                # Perhaps the waiter woken to take over the looks, stopped in the same tick
                # as the looker: wake the next, or none would look until another start asks.
                self._wake_looker()
        return turn

    def look(self) -> None:
        """Set aside the starts in flight that are asleep, give back their turns to those
        seen working again, and let waiters in by the bound (module docstring). Called by the
        first waiter every :data:`LOOK` seconds; a no-op for a fixed bound."""
        if not self._grow:
            return
        now = self._clock()
        flight = [t for t in (*self._running, *self._asleep) if t.pid is not None]
        uses = self._trees([t.pid for t in flight if t.pid is not None]) if flight else {}
        for turn in flight:
            use, seen = uses.get(turn.pid or 0), turn._seen
            if use is None or seen is None:
                continue
            turn._seen = (now, use)
            if now <= seen[0]:
                continue
            # A descendant that ended takes its time out of the sum: no less than nothing.
            active = max(0, use[0] + use[1] - seen[1][0] - seen[1][1]) / _NS
            if active < ASLEEP * (now - seen[0]):
                if turn in self._running:
                    self._running.discard(turn)
                    self._asleep.add(turn)
                    if not turn._judged:
                        # What its start-up cost before it fell asleep: a cheap one lets one
                        # more in at once now, not only when its sleep is over.
                        turn._judged = True
                        self._judge(use[0] / _NS <= turn.quick)
            elif turn in self._asleep:
                self._asleep.discard(turn)
                self._running.add(turn)
        self._look_at_cpus(now)
        self._admit(now)

    def _look_at_cpus(self, now: float) -> None:
        # Starts whose processes cannot be read: past their quick share, set aside when the
        # machine's CPUs were idle enough since the last look.
        unread = [t for t in self._running if t._seen is None and t.began is not None]
        if self._busy is None or not unread:
            return
        busy = self._busy()
        # Real seconds, not the injected clock: the CPUs' share is over real time.
        looked = time.monotonic()
        stale, self._looked_at = looked - self._looked_at > 2 * LOOK + 0.15, looked
        if stale or busy is None or (1 - busy) * self._cpus < IDLE_CPUS:
            return
        for turn in unread:
            if turn.began is not None and now - turn.began > turn.quick:
                self._running.discard(turn)
                self._asleep.add(turn)

    def _wake_looker(self) -> None:
        # The next waiter takes over the looks; one waiter at a time wakes for them.
        self._drop_abandoned()
        if self._grow and self._waiting:
            self._waiting[0][2].granted.set()

    def _drop_abandoned(self) -> None:
        while self._waiting and self._waiting[0][2].abandoned:
            heapq.heappop(self._waiting)

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
        if turn in self._asleep:
            # Judged when it was set aside (or, set aside unread, not at all): how long it
            # took says nothing of its cost.
            self._asleep.discard(turn)
            self._admit(self._clock())
            return
        if turn not in self._running:
            return
        self._running.discard(turn)
        now = self._clock()
        if judge and not turn._judged and turn.began is not None:
            self._judge(now - turn.began <= turn.quick)
        self._admit(now)

    def _judge(self, quick: bool) -> None:
        if self._cap <= self.base:
            return
        if quick:
            self.bound = min(self._cap, self.bound + 1)
        else:
            self.bound = max(self.base, self.bound // 2)

    def _admit(self, now: float) -> None:
        self._drop_abandoned()
        while self._waiting and self._admits(now):
            waiter = heapq.heappop(self._waiting)[2]
            self._begin(waiter)
            waiter.granted.set()
            self._drop_abandoned()
