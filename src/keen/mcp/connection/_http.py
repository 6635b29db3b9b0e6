"""The HTTP transports of one connection: headers, auth and the status watch.

Streamable HTTP, or for a ``transport: "sse"`` entry the HTTP+SSE transport of MCP
2024-11-05 (the SDK's ``sse_client``: a GET stream that names the endpoint to POST to).

An ``api_key`` server gets its header on every request; an ``oauth`` server, the
``httpx2.Auth`` its owner built. The SDK reports an HTTP 401 as a bare ``MCPError -32603``
without the status, so a response hook records the MCP endpoint's status and
``WWW-Authenticate`` challenge for the error translation (:mod:`keen.mcp.connection.translate`),
or, for an answer to a call's own request, that call's (``translate.call_facts``).

One message is bounded (:mod:`keen.mcp.connection._http_bounds`, set on each answer by the
same response hook), and a request Keen gave up on has its HTTP exchange ended without
ending the session (:mod:`keen.mcp.connection._http_exchanges`).
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
from keen.mcp.connection._http_bounds import bound_json_body, watch_sse_transport_events
from keen.mcp.connection._http_exchanges import Exchanges, posts_a_request
from keen.mcp.connection.translate import ConnectFacts, current_call_facts

__all__ = ["http_transport"]


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
    the SDK's limit there (:class:`~keen.mcp.connection._http_bounds.HttpSseEventWatch`); on Streamable HTTP, an answer that
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
            bound_json_body(response)
            if cfg.transport == "sse":
                watch_sse_transport_events(response, on_ending)
            facts.http_status = response.status_code
            facts.www_authenticate = response.headers.get("www-authenticate")
            status = response.status_code
            if (call := current_call_facts()) is None:
                on_status(status)  # no call's: connect, the session's own stream
            elif (request := posts_a_request()) or (request is None and status != 202):
                # An answer to one of the call's own requests (HTTP+SSE answers each with a
                # 202, its answer coming on the stream; the answers Keen posts to the server's
                # own requests, such as an elicitation's, are no request of the call's).
                call.http_status = status

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
