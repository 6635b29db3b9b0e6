"""The stdio transport, started off the event loop and watched without a thread (Linux).

The MCP SDK's ``stdio_client`` starts the server with ``anyio.open_process``: asyncio runs
``fork``/``exec`` in the event loop, which then waits until the child has called ``exec``
(tens of milliseconds on a loaded machine, during which no other server's message is
read), and on Python 3.11 asyncio waits for each child's exit in a thread of its own.

Here the process is started by ``subprocess.Popen`` in one thread kept for the purpose
(:class:`_Spawner`: not a pool's, whose retiring would fire the servers' death signal), its exit is watched
by the event loop through a pidfd (``pidfd_open(2)``, Linux 5.3) and its pipes through
asyncio's pipe transports (epoll): no thread per server. The rest is the SDK's transport:
newline-delimited JSON-RPC messages parsed as the SDK's stdio client parses them
(:func:`keen.mcp.connection.sdk_private.parse_stdio_line`) and written as it writes them
(but by the sending task itself, not through a writer task: :class:`_StdinStream`), stdout drained
while shutting down, and the shutdown sequence of the MCP specification (2025-11-25,
"Lifecycle" > "Shutdown"): close stdin, wait, SIGTERM to the server's process group, wait,
SIGKILL (the SDK's ``terminate_posix_process_tree``), every wait bounded and shielded from
cancellation so a cancelled caller never leaks a live server.

Where there is no pidfd (macOS, Linux before 5.3) the same transport runs, the exit waited
for by one thread per server (:class:`_Child`), as asyncio's child watcher does on Python 3.11;
so a large message is read in linear time and bounded there too (the SDK's reader scans what
it has gathered again at every read, and keeps it without a bound). On Windows, and under an
event loop other than asyncio's, the SDK's own ``stdio_client`` runs.
"""

from __future__ import annotations

import asyncio
import codecs
import concurrent.futures
import contextlib
import functools
import logging
import os
import queue
import signal
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Callable
from typing import Any, TextIO, TypeVar

import anyio
import anyio.lowlevel
import anyio.to_thread
from anyio.streams.memory import MemoryObjectSendStream
from mcp.client.stdio import (
    FORCE_KILL_TIMEOUT,
    PROCESS_TERMINATION_TIMEOUT,
    StdioServerParameters,
    get_default_environment,
    stdio_client,
)
from mcp.shared.message import SessionMessage

from keen.mcp.connection import message_size
from keen.mcp.connection.message_size import StdinStalled

__all__ = ["pidfd_supported", "spawned_stdio_client"]

logger = logging.getLogger(__name__)

T = TypeVar("T")

_KILL_REAP_TIMEOUT = 2.0
_CHUNK = 65536


@functools.cache
def pidfd_supported() -> bool:
    """True where a child's exit can be watched through a pidfd (Linux 5.3 and later)."""
    if not sys.platform.startswith("linux") or not hasattr(os, "pidfd_open"):
        return False
    try:
        os.close(os.pidfd_open(os.getpid()))
    except OSError:
        return False
    return True


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:  # another async library (trio)
        return None


class _Child:
    """A started server: its ``Popen``, its exit watched by the event loop through a pidfd, or
    where there is none (macOS, Linux before 5.3) by a thread waiting for it, as asyncio's own
    child watcher does on Python 3.11.

    Has what the SDK's ``terminate_posix_process_tree`` reads (``pid``, ``returncode``)."""

    def __init__(self, popen: subprocess.Popen[bytes], loop: asyncio.AbstractEventLoop) -> None:
        self.popen = popen
        self.pid = popen.pid
        self.exited = anyio.Event()
        self._loop = loop
        self._pidfd = -1
        if pidfd_supported():
            self._pidfd = os.pidfd_open(popen.pid)
            loop.add_reader(self._pidfd, self._on_exit)
        else:
            threading.Thread(target=self._wait, name=f"keen-stdio-exit-{popen.pid}", daemon=True).start()

    def _wait(self) -> None:
        self.popen.wait()
        with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits any more
            self._loop.call_soon_threadsafe(self.close)

    @property
    def returncode(self) -> int | None:
        return self.popen.poll()

    def _on_exit(self) -> None:
        # The pidfd is readable once the process has exited: reap it, stop watching.
        self.popen.poll()
        self.close()

    def close(self) -> None:
        if self._pidfd >= 0:
            if not self._loop.is_closed():
                self._loop.remove_reader(self._pidfd)
            os.close(self._pidfd)
            self._pidfd = -1
        self.exited.set()

    async def wait_exit(self, timeout: float) -> bool:
        with anyio.move_on_after(timeout):
            await self.exited.wait()
        return self.popen.poll() is not None


class _Spawner:
    """One thread, for the life of the process, that starts every stdio server.

    Not a worker of a pool: the death signal a server asks for (``PR_SET_PDEATHSIG``,
    :mod:`keen.mcp.connection.spawn`) fires when the *thread* that started it ends (prctl(2)), so a
    pool thread retiring after a few idle seconds would kill the servers it started. It
    waits on a queue: no wake-ups while nothing starts.
    """

    def __init__(self) -> None:
        self._queue: queue.SimpleQueue[
            tuple[concurrent.futures.Future[Any], Callable[..., Any], tuple[Any, ...]]
        ]
        self._queue = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def submit(self, fn: Callable[..., T], *args: Any) -> concurrent.futures.Future[T]:
        with self._lock:
            if self._thread is None or not self._thread.is_alive():  # first use, or a forked child
                self._thread = threading.Thread(target=self._run, name="keen-mcp-spawner", daemon=True)
                self._thread.start()
        future: concurrent.futures.Future[T] = concurrent.futures.Future()
        self._queue.put((future, fn, args))
        return future

    def _run(self) -> None:
        while True:
            future, fn, args = self._queue.get()
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(fn(*args))
            except BaseException as exc:  # handed to the waiting task
                future.set_exception(exc)


_spawner = _Spawner()


def _spawn(
    command: str, args: list[str], env: dict[str, str], cwd: Any, errlog: TextIO
) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [command, *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=errlog,
        env=env,
        cwd=cwd,
        start_new_session=True,  # its own process group, as the SDK starts it: stopped as one
        bufsize=0,
    )


@contextlib.asynccontextmanager
async def spawned_stdio_client(
    server: StdioServerParameters,
    errlog: TextIO,
    launched: Callable[[int], None] | None = None,
    stall_limit: float | None = None,
) -> AsyncIterator[Any]:
    """The SDK's ``stdio_client(server, errlog)``, with the process started in the spawner
    thread and watched by the event loop (see the module docstring); ``launched`` is given the
    process id once it is started (not called where the SDK's own ``stdio_client`` runs).
    A server that reads nothing of its stdin for ``stall_limit`` seconds while Keen waits to
    write more (:class:`_StdinStream`) has its stream ended."""
    loop = _running_loop()
    if loop is None or sys.platform == "win32":  # no pipe transports on Windows' proactor loop
        async with stdio_client(server, errlog=errlog) as streams:
            yield streams
        return
    env = get_default_environment() | (server.env or {})
    started = _spawner.submit(_spawn, server.command, list(server.args), env, server.cwd, errlog)
    popen = await _started(started)
    child: _Child | None = None
    read_transport: asyncio.BaseTransport | None = None
    write_transport: asyncio.WriteTransport | None = None
    try:
        if launched is not None:
            launched(popen.pid)  # inside: whatever it raises, the process is stopped
        child = _Child(popen, loop)
        assert popen.stdin is not None and popen.stdout is not None
        reader = asyncio.StreamReader()
        read_transport, _ = await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(reader), popen.stdout
        )
        write_transport, protocol = await loop.connect_write_pipe(_WriteProtocol, popen.stdin)
    except BaseException:
        with anyio.CancelScope(shield=True):
            await _stop(popen, child, write_transport, read_transport)
        raise
    pipes = _Pipes(server, reader, write_transport, protocol, stall_limit)
    async with anyio.create_task_group() as tg:
        tg.start_soon(pipes.stdout_reader)
        try:
            yield pipes.pair
        finally:
            # Shielded, every wait bounded: a cancelled caller never leaks a live server.
            with anyio.CancelScope(shield=True):
                await pipes.shutdown()
                await _stop(popen, child, write_transport, read_transport)
            tg.cancel_scope.cancel()  # a kill survivor's open pipe could still hold a task


async def _started(future: concurrent.futures.Future[subprocess.Popen[bytes]]) -> subprocess.Popen[bytes]:
    # Shielded: a server that was started is stopped by the caller, even when it is cancelled.
    with anyio.CancelScope(shield=True):
        popen = await asyncio.wrap_future(future)
    return popen  # pyright: ignore[reportPossiblyUnboundVariable] (a shielded scope ends only here)


class _WriteProtocol(asyncio.Protocol):
    """Flow control for the server's stdin: :meth:`drain` waits while its pipe is full."""

    def __init__(self) -> None:
        self._writable = asyncio.Event()
        self._writable.set()
        self.lost = False

    @property
    def paused(self) -> bool:
        """Whether the pipe is full: a write waits in :meth:`drain`."""
        return not self._writable.is_set()

    def pause_writing(self) -> None:
        self._writable.clear()

    def resume_writing(self) -> None:
        self._writable.set()

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True
        self._writable.set()

    async def drain(self) -> None:
        await self._writable.wait()
        if self.lost:
            raise BrokenPipeError("the MCP server's stdin is closed")


class _Pipes:
    """The two streams a ``ClientSession`` reads and writes, bridged to the pipes.

    Read: one task parses the server's stdout into a memory stream (as the SDK's
    ``stdio_client`` does). Write: :class:`_StdinStream` writes each message to the pipe as
    the session sends it, where the SDK hands it to a second task through a memory stream:
    that hand-off cost every message two or three more steps of the event loop, and with
    servers started a few at a time each step was a loop iteration of its own."""

    def __init__(
        self,
        server: StdioServerParameters,
        reader: asyncio.StreamReader,
        write_transport: asyncio.WriteTransport,
        protocol: _WriteProtocol,
        stall_limit: float | None = None,
    ) -> None:
        self._server = server
        self._reader = reader
        self._to_session, self._read = anyio.create_memory_object_stream[SessionMessage | Exception](0)
        self._write = _StdinStream(server, write_transport, protocol, self._to_session, stall_limit)
        self._shutting_down = False
        self.pair = (self._read, self._write)

    async def stdout_reader(self) -> None:
        from keen.mcp.connection.sdk_private import parse_stdio_line

        server = self._server
        decoder = codecs.getincrementaldecoder(server.encoding)(errors=server.encoding_error_handler)
        # The unfinished line's pieces, joined once its newline comes: a message of many
        # chunks (a large result) is scanned once, not again with every chunk read.
        pending: list[str] = []
        pending_chars = 0
        to_session = self._to_session
        try:
            async with to_session:
                while data := await self._reader.read(_CHUNK):
                    text = decoder.decode(data)
                    if "\n" not in text:
                        pending.append(text)
                        pending_chars += len(text)
                        if pending_chars > message_size.MAX_MESSAGE_SIZE:
                            await self._too_large(pending_chars)
                            return  # the session sees its stream end; the drain below remains
                        continue
                    lines = text.split("\n")
                    if pending:
                        pending.append(lines[0])
                        lines[0] = "".join(pending)
                        pending.clear()
                    pending_chars = 0
                    if rest := lines.pop():
                        pending.append(rest)
                        pending_chars = len(rest)
                    for line in lines:
                        message = parse_stdio_line(line)
                        try:
                            # Straight to a session already waiting for it: no step of the
                            # loop in between. Else wait for it (send yields; so does a read
                            # of an empty pipe: a chatty server cannot hold the loop).
                            try:
                                to_session.send_nowait(message)
                            except anyio.WouldBlock:
                                await to_session.send(message)
                        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                            return  # the session is gone; the drain below remains
        except (ConnectionError, OSError):
            if not self._shutting_down:
                logger.exception("Reading from the MCP server's stdout failed mid-session")
        finally:
            await self._drain()

    async def _too_large(self, chars: int) -> None:
        """Tell the session why its stream ends (:class:`~keen.mcp.connection.message_size.MessageTooLarge`)."""
        reason = (
            f"it sent {chars:,} characters of one message without its end, more than the"
            f" {message_size.MAX_MESSAGE_SIZE:,} Keen reads of a message; Keen closed its connection"
        )
        with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
            await self._to_session.send(message_size.MessageTooLarge(reason))

    async def _drain(self) -> None:
        # Read and drop what the server still writes, so it never blocks on a full pipe
        # and misses its chance to exit; ends at end of file or when the stop closes it.
        with anyio.CancelScope(shield=True), contextlib.suppress(ConnectionError, OSError):
            while await self._reader.read(_CHUNK):
                pass

    async def shutdown(self) -> None:
        """Stop traffic. What was sent is in the pipe transport's buffer, which closing it
        (:func:`_stop`) flushes before the pipe closes."""
        self._shutting_down = True
        self._read.close()  # the reader goes on to drain stdout
        self._write.close()
        for stream in (self._read, self._to_session):
            await stream.aclose()
        await anyio.lowlevel.checkpoint()


class _StdinStream:
    """The session's write stream: :meth:`send` writes the message, one JSON line, to the
    server's stdin and waits while the pipe is full (as the SDK's writer task waits).

    A write that fails (the server closed its stdin, or exited) ends the read side too, so
    a request waiting for its answer ends instead of hanging, and every later send raises
    ``BrokenResourceError``, as a send to the SDK's ended writer does; after :meth:`close`,
    ``ClosedResourceError``.

    The wait for a full pipe ends once the server took nothing of it for ``stall_limit``
    seconds (progress, not the whole flush, is timed: a slow reader is reading): the SDK
    starts a request's clock once its write returns, so a server that stopped reading
    (stopped, its event loop blocked) held every call behind the write for ever, past its
    ``timeouts.call_tool``, and a Manager's close with them. Then the stream ends as a
    failed write ends it, the session told why (:class:`StdinStalled`)."""

    def __init__(
        self,
        server: StdioServerParameters,
        transport: asyncio.WriteTransport,
        protocol: _WriteProtocol,
        to_session: MemoryObjectSendStream[Any],
        stall_limit: float | None = None,
    ) -> None:
        self._encoding = server.encoding
        self._errors = server.encoding_error_handler
        self._transport = transport
        self._protocol = protocol
        self._to_session = to_session
        self._closed = False
        self._broken = False
        self._stall_limit = stall_limit

    async def send(self, message: SessionMessage) -> None:
        # A cancelled sender stops here, as at a memory stream's send; a live one does not
        # yield a step of the loop for nothing (a full pipe makes it wait below).
        await anyio.lowlevel.checkpoint_if_cancelled()
        if self._closed:
            raise anyio.ClosedResourceError
        if self._broken:
            raise anyio.BrokenResourceError
        json = message.message.model_dump_json(by_alias=True, exclude_unset=True)
        try:
            if self._transport.is_closing():
                raise BrokenPipeError("the MCP server's stdin is closed")
            self._transport.write((json + "\n").encode(self._encoding, self._errors))
            if self._transport.is_closing():
                # asyncio's pipe transport takes a failed write (EPIPE: the server closed
                # its stdin since the loop last polled) as fatal inside write() and tells
                # the protocol only at a later step: without this the read side stays
                # open and the request waits for its timeout.
                raise BrokenPipeError("the MCP server's stdin is closed")
            if self._stall_limit is None or not self._protocol.paused:
                await self._protocol.drain()  # at once unless paused: no scope per message
                return
            # Bounded by progress, not by the whole flush: a server that reads a large
            # message slowly (4 KB every 10 ms) is reading, and only one that took nothing
            # in stall_limit seconds is taken for stalled.
            left = self._transport.get_write_buffer_size()
            while True:
                with anyio.move_on_after(self._stall_limit):
                    await self._protocol.drain()
                    return
                now = self._transport.get_write_buffer_size()
                if now >= left:
                    break
                left = now
            await self._stalled()
        except OSError:
            # The server may still be alive: end the read side so a request does not hang.
            self._broken = True
            await self._to_session.aclose()

    async def _stalled(self) -> None:
        """End the stream of a server that read nothing for ``stall_limit`` seconds, saying why."""
        self._broken = True
        why = StdinStalled(
            f"it read nothing of its stdin for {self._stall_limit:g} s (its timeouts.call_tool) while Keen "
            "had more to send; Keen closed its connection"
        )
        try:
            with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
                await self._to_session.send(why)
        finally:  # a sender cancelled while it tells still ends the read side
            await self._to_session.aclose()

    def close(self) -> None:
        self._closed = True

    async def aclose(self) -> None:
        self.close()

    async def __aenter__(self) -> _StdinStream:
        return self

    async def __aexit__(self, *_: object) -> None:
        self.close()


async def _stop(
    popen: subprocess.Popen[bytes],
    child: _Child | None,
    write_transport: asyncio.BaseTransport | None,
    read_transport: asyncio.BaseTransport | None,
) -> None:
    """Close stdin, wait for the exit, then SIGTERM and SIGKILL the server's process group."""
    from mcp.os.posix.utilities import terminate_posix_process_tree

    if write_transport is not None:
        write_transport.close()
    elif popen.stdin is not None:
        with contextlib.suppress(OSError):
            popen.stdin.close()
    if child is None:
        with contextlib.suppress(OSError):
            child = _Child(popen, asyncio.get_running_loop())
    if child is None:  # no pidfd for it (out of descriptors): kill the group, poll briefly
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(popen.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            await anyio.to_thread.run_sync(popen.wait, _KILL_REAP_TIMEOUT)
    elif not await child.wait_exit(PROCESS_TERMINATION_TIMEOUT):
        await terminate_posix_process_tree(child, FORCE_KILL_TIMEOUT)  # pyright: ignore[reportArgumentType]
        if not await child.wait_exit(_KILL_REAP_TIMEOUT):
            logger.warning(
                "MCP server process %d is still alive after the kill escalation; abandoning it", popen.pid
            )
    if child is not None:
        child.close()
    if read_transport is not None:
        read_transport.close()
    elif popen.stdout is not None:
        with contextlib.suppress(OSError):
            popen.stdout.close()
