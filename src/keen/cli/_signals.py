"""SIGTERM and SIGHUP end a command the way Ctrl-C does: cancel it, close every session.

Without this, ``kill <keen>`` (or closing the terminal) ends Python at once and leaves
each stdio server running with parent PID 1. Here the signal cancels the command's
task; the Manager's shutdown (shielded, bounded) closes sessions and stops the server
processes; then the command exits with ``128 + signal`` (143 for SIGTERM, 129 for SIGHUP),
as a shell reports a process a signal ended. SIGKILL cannot be caught: see
``keen.mcp.connection.spawn`` for what stops servers then.

A second Ctrl-C while the first one's shutdown runs is told to wait (a line on stderr): asyncio
answers it by raising ``KeyboardInterrupt`` wherever the loop is, which broke the shielded
shutdown midway (an "unhandled exception during asyncio.run() shutdown" on the terminal) and,
with a server that reads nothing, left Keen waiting for ever on a stop that no longer ran.

A question to the user (``ask_cancellably``) waits in a daemon thread, so a signal that
arrives while Keen waits for an answer still ends the command at once.

anyio is imported when a function here runs, not with the module: ``keen chat -p`` sends
its first model request on asyncio's own loop and only then enters :func:`until_signal`
(``keen.cli._chat``), so anyio's import (about 25 ms of CPU) is not paid before it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Awaitable, Callable, Iterator
from types import FrameType
from typing import TypeVar

__all__ = ["Signalled", "ask_cancellably", "confirm_line", "run_until_signal", "until_signal"]

T = TypeVar("T")

_SIGNALS = (signal.SIGTERM,) if sys.platform == "win32" else (signal.SIGTERM, signal.SIGHUP)


class Signalled(Exception):
    """The command was stopped by ``signum``; ``exit_code`` is ``128 + signum``."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum
        self.exit_code = 128 + signum


def run_until_signal(fn: Callable[[], Awaitable[T]]) -> T:
    """``anyio.run(fn)``, cancelled by SIGTERM or SIGHUP; then raises :class:`Signalled`."""
    import anyio

    return anyio.run(until_signal, fn)


async def until_signal(fn: Callable[[], Awaitable[T]]) -> T:
    """``await fn()`` in the running event loop, cancelled by SIGTERM or SIGHUP; then
    raises :class:`Signalled` (:func:`run_until_signal` in a loop already running)."""
    import anyio

    received: list[int] = []
    outcome: list[T] = []
    with _one_ctrl_c():
        async with anyio.create_task_group() as tg:

            async def watch() -> None:
                with anyio.open_signal_receiver(*_SIGNALS) as signals:
                    async for signum in signals:
                        received.append(int(signum))
                        tg.cancel_scope.cancel()
                        return

            tg.start_soon(watch)
            outcome.append(await fn())
            tg.cancel_scope.cancel()
    if received:
        raise Signalled(received[0])
    return outcome[0]


@contextlib.contextmanager
def _one_ctrl_c() -> Iterator[None]:
    """Within the block, the first Ctrl-C goes to the handler in place (asyncio's: cancel the
    main task, whose shutdown stops the servers); a later one writes a line on stderr instead
    of raising ``KeyboardInterrupt`` into that shutdown (module docstring). The stop it waits
    for is bounded (README "Stopping servers"). A handler set meanwhile (the chat REPL's own,
    for a turn) is left as it is."""
    from keen._terminal import STILL_STOPPING

    previous = signal.getsignal(signal.SIGINT)
    if not callable(previous) or threading.current_thread() is not threading.main_thread():
        yield
        return
    seen = 0

    def on_ctrl_c(signum: int, frame: FrameType | None) -> None:
        nonlocal seen
        seen += 1
        if seen == 1:
            previous(signum, frame)
            return
        with contextlib.suppress(OSError):
            os.write(2, STILL_STOPPING)

    signal.signal(signal.SIGINT, on_ctrl_c)
    try:
        yield
    finally:
        if signal.getsignal(signal.SIGINT) is on_ctrl_c:
            signal.signal(signal.SIGINT, previous)


async def ask_cancellably(ask: Callable[[], bool]) -> bool:
    """Run the blocking ``ask()`` (a terminal prompt) in a daemon thread and await its answer.

    The event loop keeps running meanwhile, so SIGTERM, SIGHUP and Ctrl-C cancel the wait;
    the abandoned thread cannot keep the process alive. An exception in ``ask`` is a no.
    """
    import anyio.from_thread  # here, not with the module: a chat's first request never asks
    import anyio.lowlevel

    answer: list[bool] = []
    done = anyio.Event()
    token = anyio.lowlevel.current_token()

    def run() -> None:
        try:
            answer.append(bool(ask()))
        except BaseException:
            answer.append(False)
        finally:
            # RuntimeError: the loop is gone, so nobody is waiting any more.
            with contextlib.suppress(RuntimeError):
                anyio.from_thread.run_sync(done.set, token=token)

    threading.Thread(target=run, name="keen-prompt", daemon=True).start()
    await done.wait()
    return answer[0]


def confirm_line(question: str) -> bool:
    """Ask ``question`` on stderr and read one line from stdin: True for ``y`` or ``yes``.

    Reads the file descriptor directly, not ``sys.stdin``: a thread left blocked in a
    buffered read holds its lock, and Python aborts at exit when a daemon thread does.
    """
    sys.stderr.write(question)
    sys.stderr.flush()
    line = os.read(sys.stdin.fileno(), 1024).decode("utf-8", "replace").strip().lower()
    return line in ("y", "yes")
