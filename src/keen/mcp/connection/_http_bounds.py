"""One message of an HTTP transport, bounded (:mod:`keen.mcp.connection.message_size`).

On Streamable HTTP, Keen's bound: a server-sent event through the SDK's
``max_sse_event_size`` (set by ``keen.mcp.connection._http``), a JSON response's body by
:class:`BoundedJsonBody` (:func:`bound_json_body`, from the transport's response hook). On
the HTTP+SSE transport, the SDK's own fixed limit an event, which a caller cannot set:
:class:`HttpSseEventWatch` sees an event pass it first, so the connection can say why the
session ends.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

import httpx2

from keen.mcp.connection import message_size

__all__ = [
    "LEGACY_EVENT_LIMIT",
    "BoundedJsonBody",
    "JsonBodyTooLarge",
    "LegacyEventWatch",
    "bound_json_body",
    "watch_legacy_events",
]


class JsonBodyTooLarge(httpx2.StreamError):
    """A JSON response's body went over :data:`~keen.mcp.connection.message_size.MAX_MESSAGE_SIZE`
    bytes (an ``httpx2.StreamError``: the SDK answers the request with it, and the session goes on)."""


class BoundedJsonBody(httpx2.AsyncByteStream):
    """A JSON response's body, decoded, that raises :class:`JsonBodyTooLarge` once it passes
    :data:`~keen.mcp.connection.message_size.MAX_MESSAGE_SIZE` bytes.

    The bound counts the decoded bytes, what reading the body keeps: a few kilobytes of gzip
    can decode to gigabytes. httpx2 decodes them itself, through a response made over the
    raw stream with the same ``Content-Encoding``; the response this replaces the stream of
    has that header removed, so nothing is decoded twice.
    """

    def __init__(self, response: httpx2.Response) -> None:
        encoding = response.headers.get_list("content-encoding")
        self._decoding = httpx2.Response(
            response.status_code,
            headers=[("content-encoding", value) for value in encoding],
            stream=response.stream,
        )
        self._limit = message_size.MAX_MESSAGE_SIZE

    async def __aiter__(self) -> AsyncIterator[bytes]:
        size = 0
        async for chunk in self._decoding.aiter_bytes():
            size += len(chunk)
            if size > self._limit:
                raise JsonBodyTooLarge(
                    f"{message_size.JSON_BODY_TOO_LARGE}{self._limit:,} bytes, more than Keen reads of one message"
                )
            yield chunk

    async def aclose(self) -> None:
        await self._decoding.aclose()


LEGACY_EVENT_LIMIT = 1024 * 1024
"""The bytes of one event the SDK's ``sse_client`` reads (``mcp.shared._httpx_utils.sse_within_origin``'s
``max_event_size``, which ``sse_client`` does not set): past it, its reader raises httpx2's
``SSEError`` and the session ends."""


class LegacyEventWatch(httpx2.AsyncByteStream):
    """The HTTP+SSE transport's event stream, passed on unchanged, that calls ``on_too_large``
    (once) when an event passes :data:`LEGACY_EVENT_LIMIT`, before the SDK's reader sees it.

    It counts as httpx2's event decoder does (``httpx2._sse``): the bytes of an event's lines
    without their line ends, comment lines (``:``) left out, and the unfinished line's bytes
    so far; a blank line ends the event. A CR alone as a line end (rare) is not one here: such
    an event counts larger, never smaller, than the SDK's count.
    """

    def __init__(self, stream: httpx2.AsyncByteStream, on_too_large: Callable[[str], None]) -> None:
        self._stream = stream
        self._on_too_large: Callable[[str], None] | None = on_too_large
        self._event = 0  # bytes of the current event's finished lines
        self._line = 0  # bytes of the unfinished line so far
        self._comment: bool | None = None  # whether it is a comment (None: no byte of it yet)
        self._last_cr = False  # whether its last byte is a CR (a CRLF cut between two reads)

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self._stream:
            if self._on_too_large is not None:
                self._count(chunk)
            yield chunk

    async def aclose(self) -> None:
        await self._stream.aclose()

    def _count(self, chunk: bytes) -> None:
        start = 0
        while (end := chunk.find(b"\n", start)) != -1:
            self._add(chunk[start:end])
            length = self._line - self._last_cr
            if length == 0:
                self._event = 0  # a blank line: the event ends
            elif not self._comment:
                self._event += length
            self._line, self._comment, self._last_cr = 0, None, False
            start = end + 1
        self._add(chunk[start:])
        if self._event + self._line > LEGACY_EVENT_LIMIT and self._on_too_large is not None:
            self._on_too_large(
                f"it sent an event of more than {LEGACY_EVENT_LIMIT:,} bytes, more than the HTTP+SSE"
                ' transport reads (the MCP SDK\'s fixed limit); use "transport": "streamable_http" if'
                " the server offers it"
            )
            self._on_too_large = None

    def _add(self, piece: bytes) -> None:
        if piece:
            if self._comment is None:
                self._comment = piece.startswith(b":")
            self._line += len(piece)
            self._last_cr = piece.endswith(b"\r")


def watch_legacy_events(response: httpx2.Response, on_too_large: Callable[[str], None]) -> None:
    content_type = response.headers.get("content-type", "").lower()
    # A compressed stream's bytes are not the event's: it is left to the SDK's words.
    stream = response.stream
    if (
        content_type.startswith("text/event-stream")
        and "content-encoding" not in response.headers
        and isinstance(stream, httpx2.AsyncByteStream)
    ):
        response.stream = LegacyEventWatch(stream, on_too_large)


def bound_json_body(response: httpx2.Response) -> None:
    if response.headers.get("content-type", "").lower().startswith("application/json"):
        response.stream = BoundedJsonBody(response)
        if "content-encoding" in response.headers:
            del response.headers["content-encoding"]
