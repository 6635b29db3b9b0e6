"""A Streamable HTTP call Keen gave up on ends its HTTP exchange, in the handshake era too
(``keen.mcp.connection._http_exchanges.Exchanges``).

A real FastMCP server on 127.0.0.1 in the 2025-11-25 era, whose ``stall`` tool is answered by
middleware that never finishes: no answer at all, an event stream of keep-alive comments, or a
JSON body one byte at a time. The call ends at ``timeouts.call_tool`` with a ``CallTimeout``;
the server then sees its client go (before, the POST stayed open for nobody: one pooled
connection per such call until the session ended, or the session ended when the read timeout
passed), and the session goes on.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from fastmcp import FastMCP
from starlette.types import ASGIApp, Receive, Send

from helpers.http_servers import make_echo_server, serve_http
from keen.errors import CallTimeout
from keen.mcp import Manager, ServerState
from keen.trust import PinGuard
from servers.handshake_only import answering_posts

pytestmark = pytest.mark.anyio


def echo_server() -> FastMCP:
    return make_echo_server("stalling", "stall", "Never finishes (answered by the middleware).")


async def _never_finish(how: str, send: Send) -> None:
    if how == "silent":
        await anyio.sleep_forever()
    kind = b"text/event-stream" if how == "pings" else b"application/json"
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", kind)]})
    chunk = b": keep-alive\n\n" if how == "pings" else b" "
    while True:
        await send({"type": "http.response.body", "body": chunk, "more_body": True})
        await anyio.sleep(0.5)


def stalling(how: str, gone: threading.Event) -> Callable[[ASGIApp], ASGIApp]:
    """Middleware answering ``tools/call`` of ``stall`` as ``how`` says, forever; ``gone`` is
    set when the client closes that exchange."""

    async def respond(request: Any, receive: Receive, send: Send) -> bool:
        if request.get("method") == "tools/call" and request["params"]["name"] == "stall":
            async with anyio.create_task_group() as tg:
                tg.start_soon(_never_finish, how, send)
                while (await receive())["type"] != "http.disconnect":
                    pass
                gone.set()
                tg.cancel_scope.cancel()
            return True
        return False

    return answering_posts(respond)


@pytest.mark.parametrize("how", ["silent", "pings", "trickle"])
async def test_a_call_given_up_on_ends_its_exchange_and_the_session_goes_on(
    write_config: Callable[..., Path], how: str
) -> None:
    gone = threading.Event()
    with serve_http(echo_server(), wrap=stalling(how, gone)) as srv:
        entry = {"transport": "streamable_http", "url": srv.url, "timeouts": {"call_tool": 1}}
        async with Manager(write_config({"stalling": entry}), trust=PinGuard()) as manager:
            assert await manager.wait_ready(20), manager.status("stalling").last_error
            assert manager.status("stalling").protocol_version == "2025-11-25"
            with pytest.raises(
                CallTimeout,
                match=r'^"stalling/stall" did not finish within 1 s and was cancelled; retry, or raise',
            ):
                await manager.call_tool("stalling", "stall", {})
            # The exchange is closed by Keen, not left open until a read timeout (300 s).
            assert await anyio.to_thread.run_sync(gone.wait, 20), (
                "the server never saw the client give up the exchange"
            )
            status = manager.status("stalling")
            assert status.state is ServerState.CONNECTED, status.last_error
            assert (await manager.call_tool("stalling", "echo", {"text": "after"})).text == "after"


async def test_more_calls_given_up_on_at_once_than_the_pool_holds_leave_the_session_up(
    write_config: Callable[..., Path],
) -> None:
    """httpx2's pool holds 100 connections to a server: 120 calls kept open at once all end at
    their time limit, and the session still answers. Before, the calls past the pool waited
    for a connection until ``timeouts.connect`` and the session ended ('went away')."""
    gone = threading.Event()
    with serve_http(echo_server(), wrap=stalling("pings", gone)) as srv:
        entry = {"transport": "streamable_http", "url": srv.url, "timeouts": {"call_tool": 2, "connect": 5}}
        async with Manager(write_config({"stalling": entry}), trust=PinGuard()) as manager:
            assert await manager.wait_ready(20), manager.status("stalling").last_error
            errors: list[BaseException] = []

            async def call() -> None:
                try:
                    await manager.call_tool("stalling", "stall", {})
                except Exception as exc:
                    errors.append(exc)

            async with anyio.create_task_group() as tg:
                for _ in range(120):
                    tg.start_soon(call)
            assert len(errors) == 120
            assert all(isinstance(error, CallTimeout) for error in errors), {str(e) for e in errors}
            status = manager.status("stalling")
            assert status.state is ServerState.CONNECTED, status.last_error
            assert (await manager.call_tool("stalling", "echo", {"text": "after"})).text == "after"
