"""``keen serve``'s stdin over stdio, read so that Ctrl-C and SIGTERM still stop it.

The SDK's ``stdio_server()`` reads stdin in an anyio worker thread; a blocking read cannot
be cancelled, and its task group waits for it, so ``keen serve`` ignored Ctrl-C and SIGTERM
for as long as the host kept stdin open. Here a daemon thread reads the descriptor with
``os.read`` (no buffered object, whose lock a thread left blocked at exit would hold) and
hands each line to the event loop; the async side is cancellable at any time, and the
abandoned thread cannot keep the process alive.

One message is bounded as a server's is (:data:`keen.mcp.connection.message_size.MAX_MESSAGE_SIZE`):
a host's line past it is dropped up to its newline, with a warning on the ``keen.serve``
logger (stderr, the host's log of this server), and the lines after it are served. Unbounded,
one line without an end took the process's memory.

As the SDK does for the streams it claims, fd 0 points at the null device while Keen
serves, so nothing else in the process (or a child that inherits it) reads the host's
messages; it is restored on exit.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import threading
from collections.abc import AsyncIterator, Iterator

import anyio
import anyio.from_thread
import anyio.lowlevel

from keen.mcp.connection.message_size import MAX_MESSAGE_SIZE

__all__ = ["claimed_stdin"]

_CHUNK = 65536

logger = logging.getLogger("keen.serve")


def _dup_above_std(fd: int) -> int:
    if sys.platform == "win32":
        return os.dup(fd)
    import fcntl

    return fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 3)


class StdinLines:
    """The lines of descriptor ``fd`` as an async iterator (``async for line in ...``), each
    with its newline, decoded as UTF-8 (undecodable bytes replaced), as the SDK reads them.

    A line of more than ``limit`` bytes is dropped (up to its newline), with a warning.
    """

    def __init__(self, fd: int, limit: int = MAX_MESSAGE_SIZE) -> None:
        self.fd = fd
        self.limit = limit

    def __aiter__(self) -> AsyncIterator[str]:
        return self._lines()

    async def _lines(self) -> AsyncIterator[str]:
        send, receive = anyio.create_memory_object_stream[str](1)
        token = anyio.lowlevel.current_token()
        fd, limit = self.fd, self.limit

        def pump() -> None:
            # A line grows in a bytearray and only each new chunk is searched for its end:
            # re-joining and re-splitting the whole pending line per 64 kB chunk was quadratic
            # (a 20 MB message took 10 s to read, 80 MB 100 s).
            pending = bytearray()
            dropping = False  # past the limit: read up to the line's end, keeping nothing
            try:
                while chunk := os.read(fd, _CHUNK):
                    start = 0
                    while (end := chunk.find(b"\n", start)) != -1:
                        if dropping:
                            dropping = False
                        elif len(pending) + end - start > limit:  # its newline not counted
                            _dropped(limit)
                        else:
                            pending += chunk[start : end + 1]
                            text = pending.decode("utf-8", "replace")
                            anyio.from_thread.run(send.send, text, token=token)
                        pending.clear()
                        start = end + 1
                    if not dropping:
                        pending += chunk[start:]
                        if len(pending) > limit:
                            pending.clear()
                            dropping = True
                            _dropped(limit)
                if pending:
                    anyio.from_thread.run(send.send, pending.decode("utf-8", "replace"), token=token)
            except (OSError, RuntimeError, anyio.BrokenResourceError, anyio.ClosedResourceError):
                pass  # the descriptor failed, the loop is gone, or nobody reads any more
            finally:
                with contextlib.suppress(RuntimeError):
                    anyio.from_thread.run_sync(send.close, token=token)

        threading.Thread(target=pump, name="keen-serve-stdin", daemon=True).start()
        async with receive:
            async for line in receive:
                yield line


def _dropped(limit: int) -> None:
    logger.warning(
        "the host sent a message of more than %s bytes, more than keen serve reads of one message: it was "
        "dropped, and its request gets no answer",
        f"{limit:,}",
    )


@contextlib.contextmanager
def claimed_stdin() -> Iterator[StdinLines]:
    """The host's messages on stdin, read cancellably; fd 0 reads the null device meanwhile.

    Yields:
        The lines to give ``mcp.server.stdio.stdio_server(stdin=...)``.
    """
    private = _dup_above_std(0)
    null = os.open(os.devnull, os.O_RDONLY)
    try:
        os.dup2(null, 0)
    finally:
        os.close(null)
    try:
        yield StdinLines(private)
    finally:
        # The reader thread may still block on ``private``: it is left open, never recycled.
        os.dup2(private, 0)
