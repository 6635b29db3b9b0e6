"""The deprecated HTTP+SSE transport (MCP 2024-11-05) as a client, against a real FastMCP
server serving it on 127.0.0.1: configured as ``"transport": "sse"``, and imported from a
Cursor-style file (a URL ending in ``/sse``, no type) then called through the CLI."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from helpers.cli import make_home
from helpers.http_servers import make_basic_server, serve_http
from keen.mcp import Manager, ServerState
from keen.trust import PinGuard

pytestmark = pytest.mark.anyio


async def test_an_sse_server_connects_lists_and_answers(write_config: Callable[..., Path]) -> None:
    with serve_http(make_basic_server(), path="/sse", transport="sse", api_key="k-sse-1") as srv:
        path = write_config(
            {"legacy": {"transport": "sse", "url": srv.url, "auth": {"type": "api_key", "key": "k-sse-1"}}}
        )
        async with Manager(path, trust=PinGuard()) as manager:
            assert await manager.wait_ready(20)
            status = manager.status("legacy")
            assert status.state is ServerState.CONNECTED, status.last_error
            assert status.transport == "sse"
            assert {"echo", "add"} <= {t.name for t in manager.list_tools("legacy")}
            result = await manager.call_tool("legacy", "add", {"a": 2, "b": 40})
            assert not result.is_error and "42" in result.text
        # The GET stream and the POSTed messages both carried the key.
        assert {r.method for r in srv.requests} >= {"GET", "POST"}
        assert all(r.headers.get("authorization") == "Bearer k-sse-1" for r in srv.requests)


async def test_a_wrong_key_on_sse_is_auth_failed(write_config: Callable[..., Path]) -> None:
    with serve_http(make_basic_server(), path="/sse", transport="sse", api_key="right") as srv:
        path = write_config(
            {"legacy": {"transport": "sse", "url": srv.url, "auth": {"type": "api_key", "key": "wrong"}}}
        )
        async with Manager(path, trust=PinGuard()) as manager:
            assert await manager.wait_ready(20)
            assert manager.status("legacy").state is ServerState.AUTH_FAILED


def test_imported_from_a_cursor_file_it_answers_a_call(tmp_path: Path) -> None:
    home = make_home(tmp_path)
    with serve_http(make_basic_server(), path="/sse", transport="sse") as srv:
        cursor = tmp_path / "mcp.json"  # Cursor infers SSE from the /sse path; there is no "type"
        cursor.write_text(json.dumps({"mcpServers": {"legacy": {"url": srv.url}}}))
        imported = home.keen("mcp", "import", str(cursor))
        assert imported.code == 0 and "imported legacy" in imported.stdout, str(imported)
        assert "deprecated" in imported.stderr
        call = home.keen("mcp", "call", "legacy", "add", "--args", '{"a": 20, "b": 22}', "--yes")
        assert call.code == 0 and call.stdout.strip() == "42", str(call)
        listed = home.keen("mcp", "list", "--json")
        (row,) = listed.json()
        assert (row["transport"], row["state"]) == ("sse", "connected")
