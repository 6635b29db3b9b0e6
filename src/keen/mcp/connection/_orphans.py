"""A stdio server's daemons are stopped with it (Linux).

The SDK stops a server by its process group. A server that double-forks a daemon (fork,
``setsid``, fork, the middle process exits) puts it in a session and group of its own, and
the kernel re-parents the orphan to PID 1, out of Keen's reach: it outlived the server.

Keen therefore becomes a *child subreaper* (``prctl(PR_SET_CHILD_SUBREAPER)``, prctl(2)),
once, before it starts its first server: orphans anywhere below Keen are re-parented to
Keen instead of PID 1. Every server is started with :data:`SPAWN_VAR` set to a token of its
own in its environment, which its children inherit; when the server has been stopped,
:func:`stop_adopted` kills Keen's adopted children that carry its token (and their process
groups) and reaps them. Zombies are reaped when they are plainly not Keen's own children:
Keen starts every child in its own process group and session, or as the leader of new
ones, so a child in a third group or session was adopted (:func:`reap_adopted`). That runs
while the SDK stops a server (it waits for the server's group to be gone, and a member
Keen adopted is gone only once Keen reaps it), after it, and before each server starts.

What remains: an adopted orphan that exits by itself while its server runs stays a zombie
until a server stops or starts; one that leads its own group and session when it exits
is never told apart from Keen's own children, and a daemon that clears its environment is
killed only through a marked process's group. After a SIGKILL to Keen nothing runs:
adopted daemons go on to PID 1. Other platforms have no subreaper; there a double-forked
daemon outlives its server.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import signal
import sys
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import TypeVar

import anyio

__all__ = ["SPAWN_VAR", "become_subreaper", "orphans_stopped", "reap_adopted", "stop_adopted"]

T = TypeVar("T")

logger = logging.getLogger(__name__)

SPAWN_VAR = "KEEN_MCP_SPAWN"
"""Set in each stdio server's environment to a token of that start (not a secret)."""

_PR_SET_CHILD_SUBREAPER = 36
_ROUNDS = 5
_REAP_SECONDS = 2.0
_POLL = 0.02


@functools.cache
def become_subreaper() -> bool:
    """Make this process a child subreaper (Linux 3.4+); True when it is one. Once per process."""
    if not sys.platform.startswith("linux"):
        return False
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


@dataclass(frozen=True)
class _Child:
    pid: int
    state: str
    pgid: int
    sid: int


def _children() -> list[_Child]:
    """This process's children, from ``/proc/<pid>/stat`` (proc(5))."""
    me = os.getpid()
    found: list[_Child] = []
    for pid in _child_pids():
        try:
            with open(f"/proc/{pid}/stat", "rb") as handle:
                stat = handle.read()
        except OSError:
            continue
        # "pid (comm) state ppid pgrp session ...": comm may hold spaces and parentheses.
        fields = stat[stat.rfind(b")") + 2 :].split()
        if len(fields) < 4 or int(fields[1]) != me:
            continue
        found.append(_Child(pid, fields[0].decode(), int(fields[2]), int(fields[3])))
    return found


def _child_pids() -> list[int]:
    """Candidate child PIDs: each thread's ``task/<tid>/children`` list where the kernel has
    it (an orphan goes to any thread of its subreaper), else every process in ``/proc``."""
    pids: list[int] = []
    try:
        tids = os.listdir("/proc/self/task")
        for tid in tids:
            with open(f"/proc/self/task/{tid}/children", "rb") as handle:
                pids += [int(p) for p in handle.read().split()]
        return pids
    except (OSError, ValueError):
        pass
    try:
        return [int(name) for name in os.listdir("/proc") if name.isdigit()]
    except OSError:
        return []


def _marked(pid: int, marker: bytes) -> bool:
    try:
        with open(f"/proc/{pid}/environ", "rb") as handle:
            return marker in handle.read().split(b"\0")
    except OSError:
        return False


def _reap(pid: int) -> bool:
    try:
        done, _ = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return True  # someone else reaped it
    return done == pid


def _zombie_waiting() -> bool:
    """Has this process a child that has exited and is not reaped yet? One ``waitid(2)``
    with ``WNOWAIT`` (it reaps nothing), so the scan of every child in ``/proc`` runs only
    when there is a zombie to find: it ran before each server started, reading the state
    of every server already running (quadratic in servers)."""
    try:
        return os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:
        return False  # no child at all
    except OSError:
        return True  # cannot tell: scan


def reap_adopted() -> int:
    """Reap this process's zombie children that it adopted; returns how many.

    Keen starts every child in its own process group and session, or as the leader of new
    ones, so a child in a third group or session was adopted: no one else will wait for it.
    """
    if not _zombie_waiting():
        return 0
    own_sid, own_pgid = os.getsid(0), os.getpgid(0)
    reaped = 0
    for child in _children():
        if child.state == "Z" and (
            child.pgid not in (own_pgid, child.pid) or child.sid not in (own_sid, child.pid)
        ):
            reaped += _reap(child.pid)
    return reaped


async def stop_adopted(token: str) -> int:
    """Kill and reap the live orphans this process adopted from the server started with
    ``token`` (and their process groups), and reap adopted zombies; returns how many it
    killed. Bounded to about 2 s; runs to its end even while its caller is being cancelled."""
    if not become_subreaper():
        return 0
    marker = f"{SPAWN_VAR}={token}".encode()
    own_pgid = os.getpgid(0)
    killed = 0
    with anyio.CancelScope(shield=True), anyio.move_on_after(_REAP_SECONDS):
        for _ in range(_ROUNDS):
            reap_adopted()
            targets = [c for c in _children() if c.state not in ("Z", "X") and _marked(c.pid, marker)]
            for child in targets:
                if child.pgid not in (own_pgid, 0):
                    # Its group holds the daemon's own children, none of Keen's (Keen's
                    # children lead their groups or share Keen's).
                    with contextlib.suppress(ProcessLookupError, PermissionError):
                        os.killpg(child.pgid, signal.SIGKILL)
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(child.pid, signal.SIGKILL)
            if not targets:
                break
            killed += len(targets)
            logger.debug("stopped %d process(es) a stdio server left behind", len(targets))
            pending = {child.pid for child in targets}
            while pending:
                pending = {pid for pid in pending if not _reap(pid)}
                if pending:
                    await anyio.sleep(_POLL)
    return killed


@contextlib.asynccontextmanager
async def orphans_stopped(transport: AbstractAsyncContextManager[T], token: str) -> AsyncIterator[T]:
    """Enter ``transport`` (a stdio server started with ``SPAWN_VAR=token``); on the way out,
    reap adopted zombies while it stops the server (the SDK waits for the server's process
    group to be gone, and a member adopted by Keen is gone only once Keen reaps it), then
    :func:`stop_adopted`. Without a subreaper, ``transport`` alone."""
    if not become_subreaper():
        async with transport as streams:
            yield streams
        return
    reap_adopted()
    stopped = anyio.Event()

    async def reap_until_stopped() -> None:
        with anyio.CancelScope(shield=True):
            while not stopped.is_set():
                reap_adopted()
                with anyio.move_on_after(_POLL):
                    await stopped.wait()

    async with anyio.create_task_group() as tg:
        try:
            async with transport as streams:
                try:
                    yield streams
                finally:
                    tg.start_soon(reap_until_stopped)
        finally:
            stopped.set()
            await stop_adopted(token)
