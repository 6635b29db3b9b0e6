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
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx2
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client

from keen.mcp.config.servers import HttpServerConfig
from keen.mcp.connection import message_size
from keen.mcp.connection.translate import ConnectFacts

__all__ = ["LEGACY_EVENT_LIMIT", "BoundedJsonBody", "JsonBodyTooLarge", "LegacyEventWatch", "http_transport"]


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
    on_too_large: Callable[[str], None] = lambda why: None,
) -> AsyncIterator[Any]:
    """The read and write streams of a streamable HTTP (or HTTP+SSE) connection to ``cfg.url``.

    ``facts`` and ``on_status`` hear each status the MCP endpoint answers with; on the
    HTTP+SSE transport, ``on_too_large`` hears why the session is about to end when an event
    passes :data:`LEGACY_EVENT_LIMIT` (:class:`LegacyEventWatch`). The read timeout is at
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
                _watch_legacy_events(response, on_too_large)
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
    client = httpx2.AsyncClient(
        headers=headers,
        auth=auth,
        event_hooks={"response": [on_response]},
        timeout=httpx2.Timeout(cfg.timeouts.connect, read=read_timeout),
    )
    async with (
        client,
        streamable_http_client(
            cfg.url, http_client=client, max_sse_event_size=message_size.MAX_MESSAGE_SIZE
        ) as streams,
    ):
        yield streams
