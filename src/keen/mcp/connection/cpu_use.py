"""What the machine's CPUs, and a started server's processes, are doing (Linux ``/proc``,
proc(5)): the readings the start bound goes by (:mod:`keen.mcp.connection.starts`).

Both readers return ``None`` (or leave a process out) where ``/proc`` cannot be read, so
elsewhere the bound goes by wall time alone.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Collection

__all__ = ["ProcessTrees", "TreeUse", "cpu_busy_share", "process_trees"]

TreeUse = tuple[int, int]
"""A process tree's (nanoseconds run on a CPU, nanoseconds waited on a run queue), summed
over the process and its descendants alive at the reading, since they started: the run time
of each process counts its ended threads and the children it reaped (``/proc/PID/stat``),
the wait its live threads' (``schedstat``) only."""

_TICK_NS = 1_000_000_000 // (os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100)


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


def _schedstat_counts() -> bool:
    """Whether this kernel keeps run and wait times per thread: without ``schedstat`` (a
    kernel built without sched_info, or one that reads zeros) every start would read asleep,
    so the trees are then not read at all and the bound goes by the CPUs' idle share."""
    try:
        with open("/proc/self/schedstat", "rb") as stat:
            return int(stat.read().split()[0]) > 0  # this process has run: zero means not kept
    except (OSError, ValueError, IndexError):
        return False


def _stat_fields(pid: int | str) -> list[bytes]:
    """``/proc/PID/stat``'s fields from the third (``state``) on: proc(5)'s field n is at
    n - 3. Raises OSError (the process is gone) or ValueError (no command name)."""
    with open(f"/proc/{pid}/stat", "rb") as stat:
        text = stat.read()
    # The command name may hold spaces and parentheses: the fields follow the last ")".
    return text[text.rindex(b")") + 2 :].split()


def _stat_ran(pid: int) -> int | None:
    # utime + stime + cutime + cstime (proc(5) fields 14-17): every thread of the process, those
    # ended included, and the children it reaped, in clock ticks. A launcher running short
    # children one after another, or a process of short threads, is working: summed over the
    # threads alive at each look, what ended would drop out and the start would read asleep.
    try:
        return sum(int(x) for x in _stat_fields(pid)[11:15]) * _TICK_NS
    except (OSError, ValueError, IndexError):
        return None


def _threads_use(pid: int) -> TreeUse | None:
    # /proc/PID/schedstat is the main thread's alone: a node or uv process works in others.
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return None
    ran = waited = 0
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat", "rb") as stat:
                fields = stat.read().split()
            ran, waited = ran + int(fields[0]), waited + int(fields[1])
        except (OSError, ValueError, IndexError):
            continue  # the thread ended meanwhile
    return ran, waited


class ProcessTrees:
    """A reader of process trees' CPU use (:meth:`__call__`), keeping each process's parent
    once read: a look every few hundredths of a second reads only the processes new since."""

    def __init__(self) -> None:
        self._parents: dict[int, int] = {}
        self._counts: bool | None = None  # whether schedstat is kept, asked at the first look
        # Per process: (run time counted, its live threads' schedstat sum, its stat ticks in ns,
        # run-queue wait counted, its live threads' wait).
        self._last: dict[int, tuple[int, int, int, int, int]] = {}
        self._now: dict[int, tuple[int, int, int, int, int]] = {}

    def _use(self, pid: int) -> TreeUse | None:
        # Two readings of one run time: the live threads' schedstat sum, exact but losing a
        # thread's time when it ends, and the stat ticks, which keep ended threads and reaped
        # children but lose up to a tick a field. The count grows by the larger of their two
        # changes since the last look, each against its own last value, so it never goes
        # back: switching from one reading to the other would read a working start asleep.
        threads = _threads_use(pid)
        if threads is None:
            return None
        exact, queued = threads
        ticks = _stat_ran(pid) or 0
        last = self._last.get(pid)
        if last is None:
            ran, waited = max(exact, ticks), queued
        else:
            # The wait is the live threads' only: an ended child's is lost, never taken back.
            ran = last[0] + max(0, exact - last[1], ticks - last[2])
            waited = last[3] + max(0, queued - last[4])
        self._now[pid] = (ran, exact, ticks, waited, queued)
        return ran, waited

    def _parents_above(self, above: int) -> dict[int, int]:
        """Every process's parent, for the processes whose id is above ``above`` (all of them
        when the ids wrapped round since: ``/proc/loadavg``'s last field is the newest id)."""
        try:
            with open("/proc/loadavg", "rb") as loadavg:
                newest = int(loadavg.read().split()[-1])
        except (OSError, ValueError, IndexError):
            newest = 0
        if newest < above:
            above = 0
        known, parents = self._parents, {}
        for name in os.listdir("/proc"):
            if not name.isdigit() or (pid := int(name)) <= above:
                continue
            parent = known.get(pid)
            if parent is None:
                try:
                    parent = int(_stat_fields(name)[1])  # ppid, field 4
                except (OSError, ValueError, IndexError):
                    continue
            parents[pid] = parent
        # The processes gone are forgotten (an id used again is read again).
        self._parents = parents
        return parents

    def __call__(self, pids: Collection[int]) -> dict[int, TreeUse]:
        """The CPU use of each process of ``pids`` together with its descendants (a ``uvx`` or
        ``npx`` launcher's server is its child).

        A child's id is above its parent's until the ids wrap round, so only the processes
        newer than the oldest of ``pids`` are looked at for descendants: a few, when those are
        the servers starting now, rather than every process of the machine.

        Args:
            pids: the processes (servers started by Keen, still running).

        Returns:
            ``{pid: (ns run, ns waited on a run queue)}`` for each of ``pids`` that could be
            read (a process gone, or no ``/proc``: left out; none where the kernel keeps no
            ``schedstat``).
        """
        if not pids:
            return {}
        if self._counts is None:
            self._counts = _schedstat_counts()
        if not self._counts:
            return {}
        self._now = {}
        try:
            return self._trees(pids)
        finally:
            self._last = self._now  # the processes gone are forgotten

    def _trees(self, pids: Collection[int]) -> dict[int, TreeUse]:
        own = {pid: use for pid in pids if (use := self._use(pid)) is not None}
        if not own:
            return {}
        try:
            parents = self._parents_above(min(own))
        except OSError:
            return own
        totals = {pid: list(use) for pid, use in own.items()}
        for pid, parent in parents.items():
            seen = 0
            while parent not in totals and parent in parents and seen < 64:  # up to a leader, if any
                parent, seen = parents[parent], seen + 1
            if parent in totals and pid not in totals and (use := self._use(pid)) is not None:
                totals[parent][0] += use[0]
                totals[parent][1] += use[1]
        return {pid: (ran, waited) for pid, (ran, waited) in totals.items()}


def process_trees(pids: Collection[int]) -> dict[int, TreeUse]:
    """:meth:`ProcessTrees.__call__` once, without keeping what it read."""
    return ProcessTrees()(pids)
