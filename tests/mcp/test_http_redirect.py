"""A Streamable HTTP server whose configured URL answers with a same-origin 307 (a trailing
slash moved, a path renamed): the SDK follows it, and the request it then sends is built
over the first one's body stream. Keen reads each POST's request id from it (its answer's
id, a call given up on), so connecting, a call, and a call that times out all work as at
the URL itself, in both eras. Real FastMCP servers on 127.0.0.1."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from helpers.http_servers import make_basic_server, serve_http
from keen.errors import CallTimeout
from keen.mcp import Manager, ServerState
from keen.trust import PinGuard
from servers.handshake_only import handshake_only_http

pytestmark = pytest.mark.anyio


def moved(era: str) -> Callable[[Any], Any]:
    """``/old`` answers 307 to ``/mcp``; the rest goes to the MCP app (handshake-only or not)."""

    def wrap(app: Any) -> Any:
        inner = handshake_only_http(app) if era == "2025-11-25" else app

        async def serve(scope: Any, receive: Any, send: Any) -> None:
            if scope["type"] == "http" and scope["path"] == "/old":
                await send(
                    {"type": "http.response.start", "status": 307, "headers": [(b"location", b"/mcp")]}
                )
                await send({"type": "http.response.body", "body": b""})
                return
            await inner(scope, receive, send)

        return serve

    return wrap


@pytest.mark.parametrize("era", ["2025-11-25", "2026-07-28"])
async def test_a_server_behind_a_same_origin_redirect_connects_answers_and_times_out(
    write_config: Callable[..., Path], era: str
) -> None:
    with serve_http(make_basic_server(), wrap=moved(era)) as srv:
        old = srv.url.replace("/mcp", "/old")
        entry = {"transport": "streamable_http", "url": old, "timeouts": {"call_tool": 1}}
        async with Manager(write_config({"moved": entry}), trust=PinGuard()) as manager:
            assert await manager.wait_ready(20)
            status = manager.status("moved")
            assert status.state is ServerState.CONNECTED, status.last_error
            assert status.protocol_version == era
            assert (await manager.call_tool("moved", "echo", {"text": "hi"})).text == "hi"
            with pytest.raises(
                CallTimeout, match=r'^"moved/sleep" did not finish within 1 s and was cancelled'
            ):
                await manager.call_tool("moved", "sleep", {"seconds": 30})
            assert (await manager.call_tool("moved", "echo", {"text": "again"})).text == "again"
            assert any(r.path == "/old" for r in srv.requests)
