"""A Streamable HTTP server that no longer knows Keen's session (it restarted) answers 404,
and the client must start a new session (MCP 2025-11-25 "Transports > Session Management"):
the call fails as ``ServerDisconnected`` saying to reconnect, the server is marked
disconnected, and a reconnect works. Before, every call failed as a ``RemoteProtocolError``
("answered with JSON-RPC error -32600: Session not found") while the server stayed
"connected". A real FastMCP server on 127.0.0.1 in the handshake era, which keeps sessions.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from helpers.http_servers import make_basic_server, serve_http
from keen.errors import Remedy, ServerDisconnected
from keen.mcp import Manager, ServerState
from keen.trust import PinGuard
from servers.handshake_only import handshake_only_http

pytestmark = pytest.mark.anyio


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
