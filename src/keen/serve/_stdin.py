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
one line without an end took the process's memory. A dropped request is answered with a
JSON-RPC error (-32600, Invalid Request) that says why, when its id can be read from the
line's first or last bytes, where a JSON-RPC request's top-level members are; without one,
the host waited out its own time limit. A line whose id cannot be read gets no answer:
JSON-RPC 2.0 (section 5.1) would answer it with a null id, which no host can match to a
request it waits on.
A dropped line that is the host's answer to keen serve's own request (a relayed sampling or
elicitation) is turned into an error answer to that request, read by the session as if the
host had sent it, so the request fails at once instead of waiting out its time limit.

As the SDK does for the streams it claims, fd 0 points at the null device while Keen
serves, so nothing else in the process (or a child that inherits it) reads the host's
messages; it is restored on exit.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import re
import sys
import threading
from collections.abc import AsyncIterator, Iterator
from typing import Any, Protocol, cast

import anyio
import anyio.from_thread
import anyio.lowlevel
import mcp_types as mt
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage

from keen.mcp.connection.message_size import MAX_MESSAGE_SIZE

__all__ = ["StdinLines", "claimed_stdin", "host_streams", "oversized_answer_id", "oversized_request_id"]

_CHUNK = 65536

_KEPT = 1024
"""Bytes kept of a dropped line's start and of its end, to find the request's id there."""

_SCALAR = rb'(?:"(?:[^"\\]|\\.)*"|-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?|true|false|null)'
_PAIR = rb'\s*"((?:[^"\\]|\\.)*)"\s*:\s*(' + _SCALAR + rb")\s*"
_HEAD_PAIR = re.compile(rb"[{,]" + _PAIR + rb"(?=[,}])")
"""A whole member with a scalar value, after the object's ``{`` or a comma (matched where the
last one ended): the object's first members, walked from its start."""
_TAIL = re.compile(rb"((?:," + _PAIR + rb")+)\}\s*$")
"""The members with scalar values that end the object, before its closing ``}``."""
_TAIL_PAIR = re.compile(rb"," + _PAIR)
_HEAD_COMPOUND = re.compile(rb'[{,]\s*"((?:[^"\\]|\\.)*)"\s*:\s*[\[{]')
"""The member after the head's scalar ones, whose value is an object or an array: its name."""


def oversized_request_id(head: bytes, tail: bytes) -> Any:
    """The id of the JSON-RPC request whose message starts with ``head`` and ends with
    ``tail`` (a line too long to read whole), or ``None`` when they do not show a request.

    Only the object's own members with scalar values are read: from its start up to the first
    member whose value is an object or array, and back from its end to the last such one;
    ``"id"`` (a string or an integer) and ``"method"`` must both be among them. A host's
    serializer puts them before or after ``params`` (the MCP SDKs: ``{"jsonrpc", "id",
    "method", "params"}`` in Python, ``{"method", "params", "jsonrpc", "id"}`` in TypeScript).
    """
    members, _ = _scalar_members(head, tail)
    if members is None or "method" not in members:
        return None
    return _message_id(members)


def oversized_answer_id(head: bytes, tail: bytes) -> Any:
    """The id of the JSON-RPC answer (a response or an error) whose message starts with
    ``head`` and ends with ``tail``, or ``None`` when they do not show one: the object's own
    scalar members (as :func:`oversized_request_id` reads them) hold ``"id"`` and no
    ``"method"``, and its first member with an object value is ``"result"`` or ``"error"``
    (the MCP SDKs: ``{"jsonrpc", "id", "result"}`` in Python, ``{"result", "jsonrpc", "id"}``
    in TypeScript)."""
    members, compound = _scalar_members(head, tail)
    if members is None or "method" in members or compound not in ("result", "error"):
        return None
    return _message_id(members)


def _scalar_members(head: bytes, tail: bytes) -> tuple[dict[str, Any] | None, str | None]:
    """The object's own members with scalar values, read from ``head`` and ``tail`` (None when
    one cannot be decoded), and the name of the member after the head's scalar ones (the
    first with an object or array value), when it shows."""
    pairs: list[tuple[bytes, bytes]] = []
    at = len(head) - len(head.lstrip())  # at the object's "{", then at each "," after a member
    while match := _HEAD_PAIR.match(head, at):
        pairs.append((match[1], match[2]))
        at = match.end()
    compound = _HEAD_COMPOUND.match(head, at)
    if ended := _TAIL.search(tail):
        pairs += [(match[1], match[2]) for match in _TAIL_PAIR.finditer(ended[1])]
    members: dict[str, Any] = {}
    try:
        for key, value in pairs:  # a member named twice: the last counts, as the SDK's parser reads it
            members[json.loads(b'"' + key + b'"')] = json.loads(value)
        name = json.loads(b'"' + compound[1] + b'"') if compound else None
    except ValueError:
        return None, None
    return members, name


def _message_id(members: dict[str, Any]) -> Any:
    """``members["id"]`` when it is an id an answer can carry (a string or an integer), else None."""
    message_id = members.get("id")
    if isinstance(message_id, bool) or not isinstance(message_id, int | str):
        return None
    if isinstance(message_id, str):
        try:
            message_id.encode()  # a lone surrogate ("\ud800") is no id the answer could carry
        except UnicodeEncodeError:
            return None
    return message_id


class _Sends(Protocol):
    """A session's write stream (the SDK's own stream type is private)."""

    async def send(self, item: SessionMessage, /) -> None: ...


class _DroppedLine:
    """What is kept of a line being dropped: its size, its first and its last bytes."""

    def __init__(self, start: bytes | bytearray) -> None:
        self.size = len(start)
        self.head = bytes(start[:_KEPT])
        self.tail = bytes(start[-_KEPT:])

    def add(self, data: bytes) -> None:
        self.size += len(data)
        if len(self.head) < _KEPT:
            self.head += data[: _KEPT - len(self.head)]
        self.tail = (self.tail + data[-_KEPT:])[-_KEPT:]


logger = logging.getLogger("keen.serve")


def _dup_above_std(fd: int) -> int:
    if sys.platform == "win32":
        return os.dup(fd)
    import fcntl

    return fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 3)


class StdinLines:
    """The lines of descriptor ``fd`` as an async iterator (``async for line in ...``), each
    with its newline, decoded as UTF-8 (undecodable bytes replaced), as the SDK reads them.

    A line of more than ``limit`` bytes is dropped (up to its newline), with a warning; the
    answer to a request among them is made here, and sent by :meth:`answer_refused`.
    """

    def __init__(self, fd: int, limit: int = MAX_MESSAGE_SIZE) -> None:
        self.fd = fd
        self.limit = limit
        # Unbounded, yet one answer per ``limit`` bytes read at most.
        self._refusals, self._refused = anyio.create_memory_object_stream[SessionMessage](math.inf)

    def __aiter__(self) -> AsyncIterator[str]:
        return self._lines()

    async def answer_refused(self, write: _Sends) -> None:
        """Send on ``write`` (the session's write stream) the answer to each request dropped
        for its size, until the lines end."""
        async with self._refused:
            async for answer in self._refused:
                try:
                    await write.send(answer)
                except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                    # The host closed stdin first: the session, and its write stream, ended.
                    logger.debug("the session ended before a dropped request's answer went out")
                    return

    async def _lines(self) -> AsyncIterator[str]:
        send, receive = anyio.create_memory_object_stream[str](1)
        token = anyio.lowlevel.current_token()
        fd, limit, refusals = self.fd, self.limit, self._refusals

        def ended(line: _DroppedLine) -> None:
            request_id = oversized_request_id(line.head, line.tail)
            if request_id is None and (answer_id := oversized_answer_id(line.head, line.tail)) is not None:
                # The host's answer to keen serve's own request (a relayed sampling or
                # elicitation): that request fails now, as the host's error, rather than
                # waiting out its time limit.
                failed = _invalid(
                    answer_id,
                    f"the host's answer was {line.size:,} bytes, more than the {limit:,} keen serve reads"
                    " of one message: it was dropped",
                )
                text = failed.model_dump_json(by_alias=True, exclude_unset=True) + "\n"
                anyio.from_thread.run(send.send, text, token=token)
                return
            if request_id is None:
                logger.warning(
                    "the dropped message (%s bytes) shows no request id in its first or last bytes: it gets no answer",
                    f"{line.size:,}",
                )
                return
            answer = _invalid(
                request_id,
                f"this request is {line.size:,} bytes, more than the {limit:,} keen serve reads of one"
                " message: it was not run; send less in one request (a file's path or a URL rather than"
                " its content)",
            )
            anyio.from_thread.run_sync(refusals.send_nowait, SessionMessage(answer), token=token)

        def pump() -> None:
            # A line grows in a bytearray and only each new chunk is searched for its end:
            # re-joining and re-splitting the whole pending line per 64 kB chunk was quadratic
            # (a 20 MB message took 10 s to read, 80 MB 100 s).
            pending = bytearray()
            dropped: _DroppedLine | None = None  # past the limit: read up to its end, keeping its ends
            try:
                while chunk := os.read(fd, _CHUNK):
                    start = 0
                    while (end := chunk.find(b"\n", start)) != -1:
                        if dropped is None and len(pending) + end - start > limit:  # its newline not counted
                            dropped = _DroppedLine(pending)
                            _dropped(limit)
                        if dropped is not None:
                            dropped.add(chunk[start:end])
                            ended(dropped)
                            dropped = None
                        else:
                            pending += chunk[start : end + 1]
                            text = pending.decode("utf-8", "replace")
                            anyio.from_thread.run(send.send, text, token=token)
                        pending.clear()
                        start = end + 1
                    if dropped is not None:
                        dropped.add(chunk[start:])
                    else:
                        pending += chunk[start:]
                        if len(pending) > limit:
                            dropped = _DroppedLine(pending)
                            pending.clear()
                            _dropped(limit)
                if pending:
                    anyio.from_thread.run(send.send, pending.decode("utf-8", "replace"), token=token)
            except (OSError, RuntimeError, anyio.BrokenResourceError, anyio.ClosedResourceError):
                pass  # the descriptor failed, the loop is gone, or nobody reads any more
            finally:
                with contextlib.suppress(RuntimeError):
                    anyio.from_thread.run_sync(send.close, token=token)
                with contextlib.suppress(RuntimeError):
                    anyio.from_thread.run_sync(refusals.close, token=token)

        threading.Thread(target=pump, name="keen-serve-stdin", daemon=True).start()
        async with receive:
            async for line in receive:
                yield line


def _invalid(message_id: Any, message: str) -> mt.JSONRPCError:
    """The JSON-RPC error (-32600, Invalid Request) that stands for a dropped message."""
    return mt.JSONRPCError(
        jsonrpc="2.0", id=message_id, error=mt.ErrorData(code=mt.INVALID_REQUEST, message=message)
    )


def _dropped(limit: int) -> None:
    logger.warning(
        "the host sent a message of more than %s bytes, more than keen serve reads of one message: it is dropped",
        f"{limit:,}",
    )


@contextlib.asynccontextmanager
async def host_streams(
    lines: StdinLines, stdout: anyio.AsyncFile[str] | None = None
) -> AsyncIterator[tuple[Any, Any]]:
    """The SDK's stdio transport over ``lines`` (and ``stdout``, by default the process's):
    the read and write streams of the host's session, the requests dropped for their size
    answered on the write stream meanwhile."""
    # stdio_server only iterates its stdin (`async for line in stdin`).
    stdin = cast("anyio.AsyncFile[str]", lines)
    async with stdio_server(stdin=stdin, stdout=stdout) as (read, write), anyio.create_task_group() as tg:
        tg.start_soon(lines.answer_refused, write)
        yield read, write
        tg.cancel_scope.cancel()


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
