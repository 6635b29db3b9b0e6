"""The HTTP transports of one connection: headers, auth and the status watch.

Streamable HTTP, or for a ``transport: "sse"`` entry the HTTP+SSE transport of MCP
2024-11-05 (the SDK's ``sse_client``: a GET stream that names the endpoint to POST to).

An ``api_key`` server gets its header on every request; an ``oauth`` server, the
``httpx2.Auth`` its owner built. The SDK reports an HTTP 401 as a bare ``MCPError -32603``
without the status, so a response hook records the MCP endpoint's status and
``WWW-Authenticate`` challenge for the error translation (:mod:`keen.mcp.connection.translate`).

One message is bounded (:mod:`keen.mcp.connection.message_size`): a server-sent event by the
SDK's ``max_sse_event_size``, a JSON response's body by :class:`BoundedJsonBody`, set on it
by the same response hook. The HTTP+SSE transport's stream keeps the SDK's fixed 1 MiB an
event; :class:`LegacyEventWatch` sees an event pass it first, so the connection can say why
it ends.

A request Keen gave up on (its time ran out, or its caller went away) has its HTTP exchange
ended (:class:`Exchanges`). The SDK does that itself only in the 2026-07-28 era; in the
handshake era it sends ``notifications/cancelled`` and goes on reading the POST's answer,
which nobody waits for any more: a server that never answers, or keeps the stream open with
keep-alive comments, held one pooled connection per such call (100 of them and no request
got a connection: the session ended), and one whose headers never came ended the whole
session when the read timeout passed.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Callable
from contextvars import ContextVar
from typing import Any

import anyio
import httpx2
import mcp_types as mt
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client

from keen._text import one_line
from keen.mcp.config.servers import HttpServerConfig
from keen.mcp.connection import message_size
from keen.mcp.connection.translate import ConnectFacts
from keen.mcp.listing.streams import StreamProxy

__all__ = [
    "LEGACY_EVENT_LIMIT",
    "AbandonedJsonBody",
    "AbandonedSseStream",
    "BoundedJsonBody",
    "Exchanges",
    "JsonBodyTooLarge",
    "LegacyEventWatch",
    "http_transport",
]

_EXCHANGE: ContextVar[_Exchange | None] = ContextVar("keen_http_exchange", default=None)
"""The exchange whose POST the current task sends: the SDK reads a POST's answer in the task
that sent it, and its read stream hands each message's sender's context to the reader."""

_ABANDONED = "Keen gave up on this request (it timed out or its caller went away)"


class AbandonedSseStream(httpx2.SSEError):
    """The answer to a request Keen gave up on, as an event stream, ended by Keen (an
    ``httpx2.SSEError``: the SDK answers the request with it, and the session goes on)."""


class AbandonedJsonBody(httpx2.StreamError):
    """The answer to a request Keen gave up on, as a JSON body, ended by Keen (an
    ``httpx2.StreamError``: the SDK answers the request with it, and the session goes on)."""


class _Exchange:
    """One POST and its answer, until its body is read or closed."""

    def __init__(self, request: httpx2.Request) -> None:
        self.request = request
        self.abandoned = False
        self._scope: anyio.CancelScope | None = None
        self._id: Any = None
        self._parsed = False

    def request_id(self) -> Any:
        """The JSON-RPC id of the request this POST carries, ``None`` for a notification or a
        response. Parsed only when some request is given up on, not for every POST."""
        if not self._parsed:
            self._parsed = True
            try:
                body = json.loads(self.request.content)
            except ValueError:
                body = None
            if isinstance(body, dict) and "method" in body:
                self._id = body.get("id")  # pyright: ignore[reportUnknownMemberType]
        return self._id

    def guard(self) -> anyio.CancelScope:
        """A scope for one wait on the server (the answer's head, or a chunk of its body),
        cancelled when the exchange is abandoned. One a wait: a scope is entered only once,
        and none may span the body's ``yield``."""
        scope = self._scope = anyio.CancelScope()
        if self.abandoned:
            scope.cancel()
        return scope

    def abandon(self) -> None:
        self.abandoned = True
        if self._scope is not None:
            self._scope.cancel()


class _AbandonableBody(httpx2.AsyncByteStream):
    """An answer's body that ends, raising ``error``, once its exchange is abandoned."""

    def __init__(
        self,
        inner: httpx2.AsyncByteStream,
        exchange: _Exchange,
        error: type[Exception],
        done: Callable[[], None],
    ) -> None:
        self._inner = inner
        self._exchange = exchange
        self._error = error
        self._done = done

    async def __aiter__(self) -> AsyncIterator[bytes]:
        chunks = self._inner.__aiter__()
        exchange = self._exchange
        try:
            while True:
                chunk = b""
                with exchange.guard():
                    try:
                        chunk = await chunks.__anext__()
                    except StopAsyncIteration:
                        return
                if exchange.abandoned:
                    raise self._error(_ABANDONED)
                yield chunk
        finally:
            self._done()

    async def aclose(self) -> None:
        self._done()
        await self._inner.aclose()


class Exchanges:
    """The POSTs of one Streamable HTTP connection still in flight, so that the exchange of a
    request Keen gave up on can be ended (:meth:`abandon`) without ending the session.

    The SDK ends a request's POST itself only in the 2026-07-28 era (closing the stream is
    the cancellation there); in the handshake era its ``notifications/cancelled`` is the
    signal (MCP 2025-11-25 "Cancellation") and the POST went on, its answer read for nobody.
    """

    def __init__(self, on_broken: Callable[[str], None] = lambda why: None) -> None:
        self._open: dict[_Exchange, None] = {}
        self._on_broken = on_broken

    def abandon(self, request_id: Any) -> None:
        """End the exchange of request ``request_id`` (none when it already ended)."""
        if request_id is None:
            return
        for exchange in list(self._open):
            if exchange.request_id() == request_id:
                exchange.abandon()

    def client(self, **options: Any) -> httpx2.AsyncClient:
        """An ``httpx2.AsyncClient(**options)`` whose POSTs can be abandoned."""
        return _Client(self, **options)

    def answers(self, read: Any) -> StreamProxy:
        """``read`` (a session's read stream), each answer a POST's JSON body carried given the
        id of the request that POST sent, as the SDK does for an answer in an event stream.

        A JSON body with another id went to no request (or to another one), and the request
        waited out its whole ``timeouts.call_tool`` to fail as one that took too long."""
        return _AnswerIds(read)

    def cancels(self, write: Any) -> StreamProxy:
        """``write`` (a session's write stream), abandoning the exchange of every request the
        session sends ``notifications/cancelled`` for, once it is sent."""
        return _CancelWatch(write, self)

    async def send(
        self, client: httpx2.AsyncClient, request: httpx2.Request, **options: Any
    ) -> httpx2.Response:
        """``client``'s own ``send`` of ``request``, ended when its request is abandoned."""
        exchange = _Exchange(request)
        self._open[exchange] = None
        _EXCHANGE.set(exchange)  # this POST's own task: its answer is read here

        def done() -> None:
            self._open.pop(exchange, None)

        response: httpx2.Response | None = None
        try:
            with exchange.guard():
                response = await httpx2.AsyncClient.send(client, request, **options)
            if exchange.abandoned or response is None:
                if response is not None:
                    await response.aclose()
                # Given up before the answer began. The SDK has no way to end a POST but its
                # answer: an event stream that fails at once, read by nobody (the request's
                # waiter is gone), ends it as one given up on later does.
                response = httpx2.Response(
                    200,
                    headers={"content-type": "text/event-stream"},
                    request=request,
                    stream=httpx2.ByteStream(b""),
                )
        except httpx2.ProtocolError as exc:
            # The SDK ends the session on it (its POST task raises): say why first, or the
            # call and the status say only that the server went away.
            done()
            self._on_broken(
                f"its HTTP answer to a request could not be read ({one_line(str(exc) or type(exc).__name__, 200)}:"
                " a malformed answer, headers longer than httpx2 reads, or a connection closed without one),"
                " and the MCP SDK ends the session on that; check the server's logs and any proxy in front of it"
            )
            raise
        except BaseException:
            done()
            raise
        kind = response.headers.get("content-type", "").lower()
        if not isinstance(response.stream, httpx2.AsyncByteStream):
            done()  # not this client's kind of answer
            return response
        if kind.startswith("text/event-stream"):
            error: type[Exception] = AbandonedSseStream
        elif kind.startswith("application/json"):
            error = AbandonedJsonBody
        else:
            done()  # not read as an answer: nothing to end
            return response
        response.stream = _AbandonableBody(response.stream, exchange, error, done)
        return response


class _Client(httpx2.AsyncClient):
    """An ``httpx2.AsyncClient`` whose POSTs are :class:`Exchanges`'."""

    def __init__(self, exchanges: Exchanges, **options: Any) -> None:
        super().__init__(**options)
        self._exchanges = exchanges

    async def send(self, request: httpx2.Request, **options: Any) -> httpx2.Response:  # pyright: ignore[reportIncompatibleMethodOverride]
        if request.method != "POST":
            return await super().send(request, **options)
        return await self._exchanges.send(self, request, **options)


class _AnswerIds(StreamProxy):
    async def receive(self) -> Any:
        item = await self._inner.receive()
        message = getattr(item, "message", None)
        if isinstance(message, mt.JSONRPCResponse | mt.JSONRPCError):
            context = getattr(self._inner, "last_context", None)
            exchange = context.get(_EXCHANGE) if context is not None else None
            if exchange is not None:
                request_id = exchange.request_id()
                if request_id is not None and message.id != request_id:
                    message.id = request_id
        return item

    def __aiter__(self) -> _AnswerIds:
        return self

    async def __anext__(self) -> Any:
        try:
            return await self.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            raise StopAsyncIteration from None


class _CancelWatch(StreamProxy):
    def __init__(self, inner: Any, exchanges: Exchanges) -> None:
        super().__init__(inner)
        self._exchanges = exchanges

    async def send(self, item: Any) -> None:
        message = getattr(item, "message", None)
        if (
            isinstance(message, mt.JSONRPCNotification)
            and message.method == "notifications/cancelled"
            and isinstance(message.params, dict)
        ):
            # Ended before the frame is sent: its pooled connection is then free for the frame
            # itself (with every connection held by such answers, no frame could go out).
            self._exchanges.abandon(message.params.get("requestId"))  # pyright: ignore[reportUnknownMemberType]
        await self._inner.send(item)


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


def _watch_legacy_events(response: httpx2.Response, on_too_large: Callable[[str], None]) -> None:
    content_type = response.headers.get("content-type", "").lower()
    # A compressed stream's bytes are not the event's: it is left to the SDK's words.
    stream = response.stream
    if (
        content_type.startswith("text/event-stream")
        and "content-encoding" not in response.headers
        and isinstance(stream, httpx2.AsyncByteStream)
    ):
        response.stream = LegacyEventWatch(stream, on_too_large)


def _bound_json_body(response: httpx2.Response) -> None:
    if response.headers.get("content-type", "").lower().startswith("application/json"):
        response.stream = BoundedJsonBody(response)
        if "content-encoding" in response.headers:
            del response.headers["content-encoding"]


@contextlib.asynccontextmanager
async def http_transport(
    cfg: HttpServerConfig,
    facts: ConnectFacts,
    auth: httpx2.Auth | None,
    on_status: Callable[[int], None],
    on_ending: Callable[[str], None] = lambda why: None,
) -> AsyncIterator[Any]:
    """The read and write streams of a streamable HTTP (or HTTP+SSE) connection to ``cfg.url``.

    ``facts`` and ``on_status`` hear each status the MCP endpoint answers with. ``on_ending``
    hears why the session is about to end: on the HTTP+SSE transport, an event past
    :data:`LEGACY_EVENT_LIMIT` (:class:`LegacyEventWatch`); on Streamable HTTP, an answer that
    broke HTTP (``httpx2.ProtocolError``: a header block past httpx2's limit, a connection
    closed without an answer), on which the SDK ends the session. The read timeout is at
    least 300 s (a long call streams its result), else ``timeouts.call_tool``.
    """
    headers = dict(cfg.headers)
    if cfg.auth.type == "api_key":
        headers[cfg.auth.header] = cfg.auth.header_value()
    endpoint = cfg.url.split("?", 1)[0].rstrip("/")

    async def on_response(response: httpx2.Response) -> None:
        if str(response.request.url).split("?", 1)[0].rstrip("/") == endpoint:
            _bound_json_body(response)
            if cfg.transport == "sse":
                _watch_legacy_events(response, on_ending)
            on_status(response.status_code)
            facts.http_status = response.status_code
            facts.www_authenticate = response.headers.get("www-authenticate")

    read_timeout = max(300.0, cfg.timeouts.call_tool)
    if cfg.transport == "sse":

        def factory(
            headers: dict[str, str] | None = None,
            timeout: httpx2.Timeout | None = None,
            auth: httpx2.Auth | None = None,
        ) -> httpx2.AsyncClient:
            # The SDK's own factory's settings, with the status watch.
            return httpx2.AsyncClient(
                headers=headers, auth=auth, timeout=timeout, event_hooks={"response": [on_response]}
            )

        async with sse_client(
            cfg.url,
            headers=headers,
            timeout=cfg.timeouts.connect,
            sse_read_timeout=read_timeout,
            httpx_client_factory=factory,
            auth=auth,
        ) as streams:
            yield streams
        return
    exchanges = Exchanges(on_ending)
    client = exchanges.client(
        headers=headers,
        auth=auth,
        event_hooks={"response": [on_response]},
        # No wait for a pooled connection of its own: a request waits as long as its caller
        # does (its call's time limit ends the wait, Exchanges), not timeouts.connect, past
        # which httpx2 raised in the SDK's POST task and the session ended.
        timeout=httpx2.Timeout(cfg.timeouts.connect, read=read_timeout, pool=None),
    )
    async with (
        client,
        streamable_http_client(
            cfg.url, http_client=client, max_sse_event_size=message_size.MAX_MESSAGE_SIZE
        ) as streams,
    ):
        read, write = streams
        yield exchanges.answers(read), exchanges.cancels(write)
