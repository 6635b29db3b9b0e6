"""One message of an HTTP transport, bounded (:mod:`keen.mcp.connection.message_size`), and a
JSON body that does not arrive whole failing only its request.

On Streamable HTTP, Keen's bound: a server-sent event through the SDK's
``max_sse_event_size`` (set by ``keen.mcp.connection._http``), a JSON response's body by
:class:`BoundedJsonBody` (:func:`bound_json_body`, from the transport's response hook). On
the HTTP+SSE transport, the SDK's own fixed limit an event, which a caller cannot set:
:class:`HttpSseEventWatch` sees an event pass it first, so the connection can say why the
session ends.

A JSON response's body that breaks off (the connection closed or failed mid-body) or cannot
be decoded raised an ``httpx2`` error the SDK does not catch there: its POST task failed and
the whole session ended, "went away". :class:`BoundedJsonBody` raises it as an
``httpx2.StreamError`` instead, which the SDK answers the request with (its
``Failed to parse JSON response: ...``), and the session goes on.
"""

from __future__ import annotations

import codecs
from collections.abc import AsyncIterator, Callable

import httpx2

from keen._redact import redactor
from keen._text import one_line
from keen.mcp.connection import message_size, sdk_private

__all__ = [
    "JSON_BODY_BROKEN",
    "JSON_BODY_STALLED",
    "JSON_BODY_UNDECODABLE",
    "BoundedJsonBody",
    "HttpSseEventWatch",
    "JsonBodyBroken",
    "JsonBodyTooLarge",
    "bound_json_body",
    "http_error_words",
    "watch_sse_transport_events",
]

JSON_BODY_BROKEN = "the connection ended before its JSON body did"
"""How Keen words a JSON body that broke off (:class:`JsonBodyBroken`)."""

JSON_BODY_STALLED = "its JSON body stopped coming for longer than the read timeout"
"""How Keen words a JSON body whose next bytes did not come within the read timeout
(:class:`JsonBodyBroken`)."""

JSON_BODY_UNDECODABLE = "a JSON body that could not be decoded"
"""How Keen words a JSON body its ``Content-Encoding`` does not decode (:class:`JsonBodyBroken`)."""


class JsonBodyTooLarge(httpx2.StreamError):
    """A JSON response's body went over :data:`~keen.mcp.connection.message_size.MAX_MESSAGE_SIZE`
    bytes (an ``httpx2.StreamError``: the SDK answers the request with it, and the session goes on)."""


class JsonBodyBroken(httpx2.StreamError):
    """A JSON response's body that did not arrive whole: the connection closed or failed
    mid-body, its next bytes did not come within the read timeout, or its
    ``Content-Encoding`` did not decode (an ``httpx2.StreamError``: the SDK answers the
    request with it, and the session goes on)."""


class BoundedJsonBody(httpx2.AsyncByteStream):
    """A JSON response's body, decoded, that raises :class:`JsonBodyTooLarge` once it passes
    :data:`~keen.mcp.connection.message_size.MAX_MESSAGE_SIZE` bytes.

    The bound counts the decoded bytes, what reading the body keeps: a few kilobytes of gzip
    can decode to gigabytes. httpx2 decodes them itself, through a response made over the
    raw stream with the same ``Content-Encoding``; the response this replaces the stream of
    has that header removed, so nothing is decoded twice. A body that breaks off or does not
    decode raises :class:`JsonBodyBroken`.
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
        chunks = self._decoding.aiter_bytes()
        while True:
            try:
                chunk = await chunks.__anext__()
            except StopAsyncIteration:
                return
            except httpx2.TimeoutException as exc:
                raise JsonBodyBroken(f"{JSON_BODY_STALLED} ({http_error_words(exc)})") from exc
            except httpx2.TransportError as exc:
                raise JsonBodyBroken(f"{JSON_BODY_BROKEN} ({http_error_words(exc)})") from exc
            except httpx2.DecodingError as exc:
                raise JsonBodyBroken(f"{JSON_BODY_UNDECODABLE} ({http_error_words(exc)})") from exc
            size += len(chunk)
            if size > self._limit:
                raise JsonBodyTooLarge(
                    f"{message_size.JSON_BODY_TOO_LARGE}{self._limit:,} bytes, more than Keen reads of one message"
                )
            yield chunk

    async def aclose(self) -> None:
        await self._decoding.aclose()


def http_error_words(exc: Exception) -> str:
    """``exc``'s words (its type's name when it has none) on one line of at most 200
    characters, redacted first: httpx2's words can carry the server's bytes (h11's
    ``illegal chunk header: b'...'``), and a secret cut in half would no longer match."""
    return one_line(redactor.redact(str(exc) or type(exc).__name__), 200)


class HttpSseEventWatch(httpx2.AsyncByteStream):
    """The HTTP+SSE transport's event stream, passed on unchanged, that calls ``on_too_large``
    (once) when an event passes the SDK's limit on that transport, before the SDK's reader
    fails on it and ends the session.

    It runs the parser the SDK's reader runs, httpx2's, with the same limit
    (:func:`~keen.mcp.connection.sdk_private.sse_event_parser`,
    :func:`~keen.mcp.connection.sdk_private.sse_transport_max_event_size`), over the stream's
    text decoded as httpx2 decodes it (the response's charset, else UTF-8, errors replaced):
    both see the same event pass the limit at the same read.
    """

    def __init__(
        self, stream: httpx2.AsyncByteStream, charset: str, on_too_large: Callable[[str], None]
    ) -> None:
        self._stream = stream
        self._limit = sdk_private.sse_transport_max_event_size()
        self._parser: sdk_private.EventParser | None = sdk_private.sse_event_parser(self._limit)
        try:
            self._text = codecs.getincrementaldecoder(charset)(errors="replace")
        except LookupError:  # a charset Python does not know: httpx2 falls back to UTF-8 too
            self._text = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._on_too_large = on_too_large

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self._stream:
            if self._parser is not None:
                self._watch(self._parser, chunk)
            yield chunk

    async def aclose(self) -> None:
        await self._stream.aclose()

    def _watch(self, parser: sdk_private.EventParser, chunk: bytes) -> None:
        try:
            for _event in parser.decode(self._text.decode(chunk)):
                pass  # read for its size only: the SDK's reader handles it
        except httpx2.SSEError:
            self._parser = None
            self._on_too_large(
                f"it sent an event of more than {self._limit:,} bytes, more than the HTTP+SSE transport"
                ' reads (the MCP SDK\'s fixed limit); use "transport": "streamable_http" if the server offers it'
            )


def watch_sse_transport_events(response: httpx2.Response, on_too_large: Callable[[str], None]) -> None:
    """Put an HTTP+SSE event stream (``response``) behind :class:`HttpSseEventWatch`; leave
    anything else as it is. A compressed stream is left to the SDK's words too."""
    content_type = response.headers.get("content-type", "").lower()
    stream = response.stream
    if (
        content_type.startswith("text/event-stream")
        and "content-encoding" not in response.headers
        and isinstance(stream, httpx2.AsyncByteStream)
    ):
        response.stream = HttpSseEventWatch(stream, response.charset_encoding or "utf-8", on_too_large)


def bound_json_body(response: httpx2.Response) -> None:
    if response.headers.get("content-type", "").lower().startswith("application/json"):
        response.stream = BoundedJsonBody(response)
        if "content-encoding" in response.headers:
            del response.headers["content-encoding"]
