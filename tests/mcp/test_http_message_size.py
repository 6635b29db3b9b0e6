"""One message from a Streamable HTTP server is bounded by Keen's limit, not the SDK's 1 MiB
(``keen.mcp.connection.message_size``): a large result arrives whole in a server-sent event,
a message over the limit fails its own call with words that say so and leaves the session
up, and a compressed JSON body is bounded by what it decodes to. Real FastMCP servers on
127.0.0.1, in the handshake era (2025-11-25), whose answers come as server-sent events."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fastmcp import FastMCP
from starlette.middleware.gzip import GZipMiddleware
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from helpers.http_servers import serve_http
from keen.errors import RemoteProtocolError, ServerDisconnected
from keen.mcp import Manager, ServerState
from keen.mcp.connection import message_size
from keen.trust import PinGuard
from servers.handshake_only import handshake_only_http

pytestmark = pytest.mark.anyio

MB = 1_000_000


def sized_server(description: str = "Text of n characters.") -> FastMCP:
    server = FastMCP("sized")

    @server.tool(description=description)
    def text_of_size(n: int) -> str:
        return "x" * n

    return server


def recording_encodings(seen: list[str]) -> Callable[[ASGIApp], ASGIApp]:
    """Middleware that notes each response's ``Content-Encoding`` (``""`` when none)."""

    def wrap(app: ASGIApp) -> ASGIApp:
        async def serve(scope: Scope, receive: Receive, send: Send) -> None:
            async def noting(message: Message) -> None:
                if message["type"] == "http.response.start":
                    headers = {k.decode().lower(): v.decode() for k, v in message["headers"]}
                    seen.append(headers.get("content-encoding", ""))
                await send(message)

            await app(scope, receive, noting)

        return serve

    return wrap


async def manager_for(write_config: Callable[..., Path], url: str) -> Manager:
    return Manager(write_config({"sized": {"transport": "streamable_http", "url": url}}), trust=PinGuard())


async def test_a_result_of_three_megabytes_arrives_in_one_event(write_config: Callable[..., Path]) -> None:
    with serve_http(sized_server(), wrap=handshake_only_http) as srv:
        async with await manager_for(write_config, srv.url) as manager:
            assert await manager.wait_ready(20), manager.status("sized").last_error
            assert manager.status("sized").protocol_version == "2025-11-25"
            # Its text and its structuredContent copy: about 6 MB in one event, over the SDK's
            # own 1 MiB default (which failed a 900 KB text as "went away").
            result = await manager.call_tool("sized", "text_of_size", {"n": 3 * MB})
            assert not result.is_error
            assert result.text == "x" * (3 * MB)


async def test_an_event_over_the_bound_fails_its_call_and_the_session_goes_on(
    write_config: Callable[..., Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(message_size, "MAX_MESSAGE_SIZE", MB)
    with serve_http(sized_server(), wrap=handshake_only_http) as srv:
        async with await manager_for(write_config, srv.url) as manager:
            assert await manager.wait_ready(20), manager.status("sized").last_error
            with pytest.raises(
                RemoteProtocolError,
                match=r'^MCP server "sized" sent more for "text_of_size" than Keen reads of one message '
                r"\(1,000,000 bytes\); ask the tool for less",
            ):
                await manager.call_tool("sized", "text_of_size", {"n": 2 * MB})
            status = manager.status("sized")
            assert status.state is ServerState.CONNECTED, status.last_error
            assert (await manager.call_tool("sized", "text_of_size", {"n": 10})).text == "x" * 10


@pytest.mark.parametrize("era", ["2025-11-25", "2026-07-28"])
async def test_a_gzipped_json_body_is_bounded_by_what_it_decodes_to(
    write_config: Callable[..., Path], monkeypatch: pytest.MonkeyPatch, era: str
) -> None:
    monkeypatch.setattr(message_size, "MAX_MESSAGE_SIZE", MB)
    encodings: list[str] = []

    def wrap(app: ASGIApp) -> ASGIApp:
        zipped = recording_encodings(encodings)(GZipMiddleware(app, minimum_size=1000))
        return handshake_only_http(zipped) if era == "2025-11-25" else zipped

    options: dict[str, Any] = {"json_response": True}
    with serve_http(sized_server(), app_options=options, wrap=wrap) as srv:
        async with await manager_for(write_config, srv.url) as manager:
            assert await manager.wait_ready(20), manager.status("sized").last_error
            assert manager.status("sized").protocol_version == era
            # Under the bound: decoded once, whole (the text and its structuredContent copy).
            encodings.clear()
            under = await manager.call_tool("sized", "text_of_size", {"n": 400_000})
            assert under.text == "x" * 400_000
            assert encodings == ["gzip"]  # it did come compressed
            # Over it once decoded, though its compressed body is a few kilobytes.
            with pytest.raises(
                RemoteProtocolError, match=r"than Keen reads of one message \(1,000,000 bytes\)"
            ):
                await manager.call_tool("sized", "text_of_size", {"n": 2 * MB})
            assert manager.status("sized").state is ServerState.CONNECTED


async def test_a_tool_list_over_the_bound_says_so_in_the_status(
    write_config: Callable[..., Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(message_size, "MAX_MESSAGE_SIZE", MB)
    with serve_http(sized_server(description="d" * (2 * MB)), wrap=handshake_only_http) as srv:
        async with await manager_for(write_config, srv.url) as manager:
            await manager.wait_ready(20)
            status = manager.status("sized")
            assert status.state is ServerState.DISCONNECTED
            assert status.last_error.startswith(
                'MCP server "sized" sent more during list_tools than Keen reads of one message (1,000,000 bytes)'
            ), status.last_error


@pytest.mark.parametrize(
    "n",
    [
        524_400,  # the text and its structuredContent copy: an event just over 1 MiB
        2 * MB,
    ],
)
async def test_an_http_sse_event_over_the_sdks_fixed_limit_says_why_the_session_ended(
    write_config: Callable[..., Path], caplog: pytest.LogCaptureFixture, n: int
) -> None:
    # The deprecated HTTP+SSE transport: every message on one stream, whose reader (the SDK's
    # sse_client) keeps 1 MiB an event with no setting, and ends the session past it.
    with serve_http(sized_server(), path="/sse", transport="sse") as srv:
        path = write_config({"legacy": {"transport": "sse", "url": srv.url}})
        async with Manager(path, trust=PinGuard()) as manager:
            assert await manager.wait_ready(20), manager.status("legacy").last_error
            # Events of 600 KB each (the text and its structuredContent copy), more than the
            # limit in all: each event is counted on its own.
            for _ in range(3):
                assert (
                    await manager.call_tool("legacy", "text_of_size", {"n": 300_000})
                ).text == "x" * 300_000
            assert "it sent an event" not in caplog.text  # nothing said of a session going on
            why = (
                r"it sent an event of more than 1,048,576 bytes, more than the HTTP\+SSE transport reads "
                r'\(the MCP SDK\'s fixed limit\); use "transport": "streamable_http" if the server offers it$'
            )
            with pytest.raises(
                ServerDisconnected, match=r'^MCP server "legacy" went away during "text_of_size": ' + why
            ):
                await manager.call_tool("legacy", "text_of_size", {"n": n})
            assert re.search(r"WARNING .*server legacy: " + why.rstrip("$"), caplog.text, re.MULTILINE), (
                caplog.text
            )
            status = manager.status("legacy")
            assert status.state is ServerState.DISCONNECTED
            # The call's words first, the session's end's ("MCP server "legacy": it sent ...") once
            # its owner task has seen it: each says why.
            assert re.search(why, status.last_error), status.last_error
