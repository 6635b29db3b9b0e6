"""A server's -32601 (method not found) names the request it was the answer to.

JSON-RPC 2.0's -32601 says the server has no such method. Keen reported it as "does not
support tools/call" whatever the request was, so a server without ``resources/read`` or
``prompts/get`` read as one without tools, and the user was sent to look at the wrong
capability. A raw hostile stdio server that lists a resource and a prompt answers both
reads with -32601, as it answers every method it does not know.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from helpers.hostile import hostile_entry
from keen.errors import RemoteProtocolError
from keen.mcp import Manager, ServerState
from keen.trust import PinGuard

pytestmark = pytest.mark.anyio


async def test_a_read_or_a_get_the_server_lacks_names_its_own_method(
    tmp_path: Path, write_config: Callable[..., Path]
) -> None:
    spec = {
        "resources": [{"uri": "evil://report", "name": "report"}],
        "prompts": [{"name": "summary"}],
        "tools": [{"name": "gone", "inputSchema": {"type": "object"}}],
        "errors": {"gone": {"code": -32601, "message": "no tools/call"}},
    }
    config = write_config({"evil": hostile_entry(tmp_path / "spec.json", spec)})
    async with Manager(config, trust=PinGuard()) as manager:
        assert await manager.wait_ready(60)
        assert manager.servers()[0].state is ServerState.CONNECTED, manager.servers()[0].last_error
        with pytest.raises(
            RemoteProtocolError, match=r'^MCP server "evil" does not support resources/read: '
        ):
            await manager.read_resource("evil", "evil://report")
        with pytest.raises(RemoteProtocolError, match=r'^MCP server "evil" does not support prompts/get: '):
            await manager.get_prompt("evil", "summary")
        # A tool call's -32601 is still the call's.
        with pytest.raises(RemoteProtocolError, match=r'^MCP server "evil" does not support tools/call: '):
            (await manager.call_tool("evil", "gone", {})).raise_for_error()
        assert manager.servers()[0].state is ServerState.CONNECTED
