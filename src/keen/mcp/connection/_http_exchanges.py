"""The POSTs of one Streamable HTTP connection, so that a request Keen gave up on has its
HTTP exchange ended without ending the session (:class:`Exchanges`).

A request Keen gave up on (its time ran out, or its caller went away): the SDK ends its POST
itself only in the 2026-07-28 era; in the handshake era it sends ``notifications/cancelled``
and goes on reading the POST's answer, which nobody waits for any more: a server that never
answers, or keeps the stream open with keep-alive comments, held one pooled connection per
such call (100 of them and no request got a connection: the session ended), and one whose
headers never came ended the whole session when the read timeout passed. Each answer a
POST's JSON body carries is also given the id of the request that POST sent, as the SDK does
for an answer in an event stream.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Callable
from contextvars import ContextVar
from typing import Any

import anyio
import httpx2
import mcp_types as mt

from keen.mcp.connection._http_bounds import http_error_words
from keen.mcp.listing.streams import ReadStreamProxy, StreamProxy

__all__ = ["AbandonedJsonBody", "AbandonedSseStream", "Exchanges", "posts_a_request"]

_EXCHANGE: ContextVar[_Exchange | None] = ContextVar("keen_http_exchange", default=None)
"""The exchange whose POST the current task sends: the SDK reads a POST's answer in the task
that sent it, and its read stream hands each message's sender's context to the reader."""

_ABANDONED = "Keen gave up on this request (it timed out or its caller went away)"

_REQUEST_HEAD = re.compile(rb'\{"jsonrpc":"2\.0","id":(-?\d+|"(?:[^"\\]|\\.)*"),"method":')
"""The head of a request as the SDK's POST carries it (compact JSON, its model's field order):
its id read from at most :data:`_HEAD_BYTES` bytes, not by parsing a body that may hold
megabytes of arguments (30 ms for 10 MB). Any other form is parsed whole."""

_HEAD_BYTES = 512


def posts_a_request() -> bool | None:
    """Whether the POST this task sends carries a JSON-RPC request (not a notification, not
    an answer to the server's own request); ``None`` outside an :class:`Exchanges` POST."""
    exchange = _EXCHANGE.get()
    return None if exchange is None else exchange.request_id() is not None


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
        response (or a body that cannot be read). Parsed once, when first asked: for its
        answer's id, or when some request is given up on."""
        if not self._parsed:
            self._parsed = True
            try:
                try:
                    content = self.request.content
                except httpx2.RequestNotRead:
                    # A redirect the SDK follows (same origin, 307/308) is built over the first
                    # request's body stream, not its bytes: read it (an in-memory stream).
                    content = self.request.read()
                if head := _REQUEST_HEAD.match(content, 0, _HEAD_BYTES):
                    self._id = json.loads(head[1])
                    return self._id
                body = json.loads(content)
            except (ValueError, RuntimeError, httpx2.StreamError):
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
        self._answered = False  # the server has answered a request of this connection

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
                f"its HTTP answer to a request could not be read ({http_error_words(exc)}: a malformed answer, headers longer"
                " than httpx2 reads, or a connection closed without one), and the MCP SDK ends the session on"
                " that; check the server's logs and any proxy in front of it"
            )
            raise
        except (httpx2.ConnectError, httpx2.ConnectTimeout) as exc:
            # The SDK ends the session on it too. Once the server has answered, it stopped (an
            # answer that broke off mid-call fails only that call): the next call says so.
            done()
            if self._answered:
                self._on_broken(
                    f"it no longer accepts connections ({http_error_words(exc)}); check that it is running"
                )
            raise
        except BaseException:
            done()
            raise
        self._answered = True
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


class _AnswerIds(ReadStreamProxy):
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
