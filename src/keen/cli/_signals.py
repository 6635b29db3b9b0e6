"""SIGTERM and SIGHUP end a command the way Ctrl-C does: cancel it, close every session.

Without this, ``kill <keen>`` (or closing the terminal) ends Python at once and leaves
each stdio server running with parent PID 1. Here the signal cancels the command's
task; the Manager's shutdown (shielded, bounded) closes sessions and stops the server
processes; then the command exits with ``128 + signal`` (143 for SIGTERM, 129 for SIGHUP),
as a shell reports a process a signal ended. SIGKILL cannot be caught: see
``keen.mcp._spawn`` for what stops servers then.
"""

from __future__ import annotations

import signal
import sys
from collections.abc import Awaitable, Callable
from typing import TypeVar

import anyio

__all__ = ["Signalled", "run_until_signal"]

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
    received: list[int] = []
    outcome: list[T] = []

    async def main() -> None:
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

    anyio.run(main)
    if received:
        raise Signalled(received[0])
    return outcome[0]
