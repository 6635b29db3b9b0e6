"""tools/list paging that never ends ends the connect within ``timeouts.list_tools``, and the
status says what happened: a server naming a new cursor on every page is told apart from one
that did not answer (before: 'did not answer tools/list within 2 s; check that it starts and
speaks MCP', after it had sent dozens of pages); one that repeats a cursor is named in
Keen's own words (``keen.mcp.listing.tool_pages``). A real FastMCP server on 127.0.0.1 whose
tools/list is answered by middleware.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fastmcp import FastMCP
from starlette.types import ASGIApp, Receive, Send

from helpers.http_servers import serve_http
from keen.mcp import Manager, ServerState
from keen.trust import PinGuard
from servers.handshake_only import answering_posts

pytestmark = pytest.mark.anyio


def paging(next_cursor: Callable[[int], str]) -> Callable[[ASGIApp], ASGIApp]:
    """Middleware answering tools/list page ``n`` (cursor ``str(n)``, none for the first) with
    one tool and ``nextCursor`` ``next_cursor(n)``, for ever."""

    async def respond(request: Any, receive: Receive, send: Send) -> bool:
        if request.get("method") == "tools/list":
            page = int((request.get("params") or {}).get("cursor") or 0)
            tool = {"name": f"tool_{page}", "inputSchema": {"type": "object"}}
            result = {"tools": [tool], "nextCursor": next_cursor(page)}
            answer = json.dumps({"jsonrpc": "2.0", "id": request["id"], "result": result}).encode()
            await send(
                {
                    "type": "http.response.start",
                    "status": 200,
                    "headers": [(b"content-type", b"application/json")],
                }
            )
            await send({"type": "http.response.body", "body": answer})
            return True
        return False

    return answering_posts(respond)


async def status_with(write_config: Callable[..., Path], next_cursor: Callable[[int], str]) -> str:
    with serve_http(FastMCP("paging"), wrap=paging(next_cursor)) as srv:
        entry = {"transport": "streamable_http", "url": srv.url, "timeouts": {"list_tools": 2}}
        async with Manager(write_config({"paging": entry}), trust=PinGuard()) as manager:
            assert await manager.wait_ready(20)
            status = manager.status("paging")
            assert status.state is ServerState.DISCONNECTED
            return status.last_error


async def test_a_new_cursor_on_every_page_ends_at_the_time_limit_saying_so(
    write_config: Callable[..., Path],
) -> None:
    error = await status_with(write_config, lambda page: str(page + 1))
    assert error.startswith('MCP server "paging" sent '), error
    assert (
        " tools/list pages in 2 s, each naming a next one, and no last; its pagination may be broken: "
        in error
    )
    assert error.endswith('to give it more time, raise "timeouts.list_tools" in configs.json'), error


async def test_a_cursor_that_comes_back_ends_the_listing_saying_so(write_config: Callable[..., Path]) -> None:
    error = await status_with(write_config, lambda page: str(1 - page))  # 1, 0, 1, ...
    assert error == (
        "MCP server \"paging\" repeated tools/list cursor '1': its pagination is broken; check its version and logs"
    )
