"""A Streamable HTTP server that no longer knows Keen's session (it restarted) answers 404,
and the client must start a new session (MCP 2025-11-25 "Transports > Session Management"):
the call fails as ``ServerDisconnected`` saying to reconnect, the server is marked
disconnected, and a reconnect works. Before, every call failed as a ``RemoteProtocolError``
("answered with JSON-RPC error -32600: Session not found") while the server stayed
"connected". A real FastMCP server on 127.0.0.1 in the handshake era, which keeps sessions.

A server that stops in the middle of a call fails that call only, saying what came; the next
call finds it gone, and it is marked disconnected (both eras).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path

import anyio
import pytest
from fastmcp import FastMCP

from helpers.changing import changing_http, wait_until
from helpers.http_servers import make_basic_server, serve_http
from helpers.loopback import free_port
from keen.errors import Remedy, RemoteProtocolError, ServerDisconnected
from keen.mcp import Manager, Reconnector, ServerState
from keen.trust import PinGuard
from servers.handshake_only import handshake_only_http

pytestmark = pytest.mark.anyio

BROKEN_CALL = {
    # Its answer's event stream had begun: it breaks off.
    "2025-11-25": 'broke off its answer to "hold": the event stream ended before the answer came; it may have '
    "taken effect, so check before repeating a call that changes something; if it recurs, check the server's "
    "logs and any proxy in front of it",
    # A JSON answer not begun yet: uvicorn answers 500 as it stops.
    "2026-07-28": 'answered "hold" with HTTP 500 and no JSON-RPC error; check the server\'s logs',
}


async def test_a_restarted_server_makes_the_call_say_reconnect(write_config: Callable[..., Path]) -> None:
    with serve_http(make_basic_server(), wrap=handshake_only_http) as srv:
        entry = {"transport": "streamable_http", "url": srv.url}
        async with Manager(write_config({"web": entry}), trust=PinGuard()) as manager:
            assert await manager.wait_ready(20), manager.status("web").last_error
            assert manager.status("web").protocol_version == "2025-11-25"
            assert (await manager.call_tool("web", "echo", {"text": "before"})).text == "before"
            srv.stop()
            srv.start()  # same port, no sessions
            with pytest.raises(
                ServerDisconnected,
                match=r'^MCP server "web" no longer knows Keen\'s session \(HTTP 404 to "echo"\): it restarted '
                r"or ended it; reconnect to start a new one$",
            ) as lost:
                await manager.call_tool("web", "echo", {"text": "after"})
            assert lost.value.remedy is Remedy.RECONNECT
            status = manager.status("web")
            assert status.state is ServerState.DISCONNECTED
            assert "no longer knows Keen's session" in status.last_error
            status = await manager.refresh("web")
            assert status.state is ServerState.CONNECTED, status.last_error
            assert (await manager.call_tool("web", "echo", {"text": "again"})).text == "again"


def holding_server(started: threading.Event) -> FastMCP:
    server = FastMCP("holding")

    @server.tool(description="Return the text unchanged.")
    def echo(text: str) -> str:
        return text

    @server.tool(description="Say it began, then wait 30 s.")
    async def hold() -> str:
        started.set()
        await anyio.sleep(30)
        return "held"

    return server


@pytest.mark.parametrize("era", ["2025-11-25", "2026-07-28"])
async def test_a_server_that_stops_mid_call_breaks_that_call_and_the_next_says_it_went_away(
    write_config: Callable[..., Path], era: str
) -> None:
    """Only that call fails, saying what came (an answer that broke off looks the same as a
    proxy's hiccup, so the session is kept); the next call finds the server gone, says it no
    longer accepts connections, and the server is marked disconnected."""
    started = threading.Event()
    wrap = handshake_only_http if era == "2025-11-25" else None
    with serve_http(holding_server(started), wrap=wrap) as srv:
        entry = {"transport": "streamable_http", "url": srv.url}
        async with Manager(write_config({"web": entry}), trust=PinGuard()) as manager:
            assert await manager.wait_ready(20), manager.status("web").last_error
            assert manager.status("web").protocol_version == era
            failed: list[BaseException] = []

            async def call() -> None:
                try:
                    await manager.call_tool("web", "hold", {})
                except RemoteProtocolError as exc:
                    failed.append(exc)

            async with anyio.create_task_group() as tg:
                tg.start_soon(call)
                assert await anyio.to_thread.run_sync(started.wait, 20)
                await anyio.to_thread.run_sync(srv.stop)
            assert [str(e) for e in failed] == [f'MCP server "web" {BROKEN_CALL[era]}']
            with pytest.raises(
                ServerDisconnected,
                match=r'^MCP server "web" went away during "echo": it no longer accepts connections \(.+\); check '
                r"that it is running$",
            ):
                await manager.call_tool("web", "echo", {"text": "again"})
            status = manager.status("web")
            assert status.state is ServerState.DISCONNECTED
            assert "it no longer accepts connections" in status.last_error


async def test_a_server_that_stops_under_a_listen_stream_is_marked_disconnected_and_reconnects(
    write_config: Callable[..., Path], tmp_path: Path
) -> None:
    """A 2026-07-28 server that stops while Keen follows its ``subscriptions/listen`` stream:
    the stream breaks, Keen opens it again, and the SDK ends the session on that refused
    connection. The server then reads ``disconnected``, saying why (it stayed ``connected``
    with no session: every call failed, and the Reconnector, which reconnects only a
    disconnected server, never brought it back); once it is back, a reconnect works."""
    port = free_port()
    with ExitStack() as running:
        url = running.enter_context(changing_http(tmp_path, port=port))
        async with Manager(write_config({"ch": {"url": url}}), trust=PinGuard()) as manager:
            assert await manager.wait_ready(20), manager.status("ch").last_error
            assert manager.status("ch").protocol_version == "2026-07-28"
            running.close()  # the server stops
            gone = await wait_until(
                lambda: manager.status("ch").state is ServerState.DISCONNECTED or None,
                "the server to read disconnected",
                timeout=30,
            )
            assert gone
            assert "it no longer accepts connections" in manager.status("ch").last_error
            with changing_http(tmp_path, port=port):
                assert await Reconnector(manager).ensure(["ch"]) == ["ch"]
                assert manager.status("ch").state is ServerState.CONNECTED, manager.status("ch").last_error
                assert (await manager.call_tool("ch", "echo", {"text": "back"})).text == "back"
