"""A call refused because Keen's tool list is stale: re-list once, retry once, or say what changed.

The upstream is the real changing server (``tests/servers/changing_server.py``, the MCP
SDK's server) over streamable HTTP in the 2026-07-28 era. Its tools are changed *quietly*
(no change notice), through a client of its own, so Keen still holds the old list when
it calls.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from mcp.client.client import Client
from tests.helpers.changing import changing_http

from keen.errors import ToolChanged, ToolNotFound
from keen.mcp import Manager, ServerState
from keen.mcp.listing.changes import ToolsChanged
from keen.trust import PinGuard

pytestmark = pytest.mark.anyio

WriteConfig = Callable[[dict[str, Any]], Path]


async def _mutate(url: str, **arguments: Any) -> None:
    async with Client(url, cache=None) as upstream:
        result = await upstream.call_tool("mutate", {"quiet": True, **arguments})
        assert not result.is_error, result


async def _lists(manager: Manager) -> int:
    result = await manager.call_tool("changing", "stats", {})
    return int(json.loads(result.text)["lists"])


async def _manager(path: Path) -> Manager:
    manager = Manager(path, trust=PinGuard())
    await manager.start()
    assert await manager.wait_ready(30)
    status = manager.status("changing")
    assert status.state is ServerState.CONNECTED, status.last_error
    assert status.protocol_version == "2026-07-28"
    return manager


async def test_header_mismatch_relists_and_retries_once(write_config: WriteConfig, tmp_path: Path) -> None:
    with changing_http(tmp_path) as url:
        manager = await _manager(write_config({"changing": {"url": url}}))
        try:
            changes: list[ToolsChanged] = []
            manager.subscribe_changes(changes.append)
            # The server now wants Mcp-Param-Text on every echo; Keen's copy does not know it.
            await _mutate(url, op="header", name="echo")
            listed = await _lists(manager)
            assert "x-mcp-header" not in json.dumps([t.to_dict() for t in manager.list_tools("changing")])
            result = await manager.call_tool("changing", "echo", {"text": "hello"})
            assert not result.is_error and result.text == "hello"
            # One re-list (told to observers), and Keen's copy now carries the header mark.
            assert await _lists(manager) == listed + 1
            assert [(c.reason, [x.name for x in c.changed]) for c in changes] == [("refresh", ["echo"])]
            echo = next(t for t in manager.list_tools("changing") if t.name == "echo")
            assert echo.input_schema["properties"]["text"]["x-mcp-header"] == "Text"
            # The next call carries the header from the start: no re-list.
            assert (await manager.call_tool("changing", "echo", {"text": "again"})).text == "again"
            assert await _lists(manager) == listed + 1
        finally:
            await manager.aclose()


async def test_a_changed_input_schema_is_named_not_retried(write_config: WriteConfig, tmp_path: Path) -> None:
    with changing_http(tmp_path) as url:
        manager = await _manager(write_config({"changing": {"url": url}}))
        try:
            await _mutate(url, op="reshape", name="echo")
            with pytest.raises(
                ToolChanged,
                match=r'MCP server "changing" changed tool "echo" since Keen last listed it \(inputSchema\), and the call was not run',
            ) as caught:
                await manager.call_tool("changing", "echo", {"text": "hello"})
            assert caught.value.changed_fields == ("inputSchema",)
            assert '"changing" changed tool "echo"' in caught.value.message
            assert "inputSchema" in caught.value.message
            # Keen now holds the new definition: a call that fits it goes through.
            echo = next(t for t in manager.list_tools("changing") if t.name == "echo")
            assert "mode" in echo.input_schema["properties"]
            assert (await manager.call_tool("changing", "echo", {"text": "ok"})).text == "ok"
        finally:
            await manager.aclose()


async def test_a_removed_tool_is_named_after_one_relist(write_config: WriteConfig, tmp_path: Path) -> None:
    with changing_http(tmp_path) as url:
        manager = await _manager(write_config({"changing": {"url": url}}))
        try:
            async with Client(url, cache=None) as upstream:
                await upstream.call_tool("mutate", {"op": "add", "name": "gone"})
            await manager.refresh_tools("changing")
            assert "gone" in {t.name for t in manager.list_tools("changing")}
            await _mutate(url, op="remove", name="gone")
            listed = await _lists(manager)
            with pytest.raises(
                ToolNotFound, match='MCP server "changing" no longer has tool "gone"'
            ) as caught:
                await manager.call_tool("changing", "gone", {"text": "x"})
            assert 'no longer has tool "gone"' in caught.value.message
            assert "gone" not in {t.name for t in manager.list_tools("changing")}
            assert await _lists(manager) == listed + 1
        finally:
            await manager.aclose()
