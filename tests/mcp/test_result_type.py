"""A 2026-07-28 result without ``resultType`` is a complete result (MCP 2026-07-28, SEP-2322).

The server (tests/servers/no_result_type.py, a real stdio process) strips the field from every
result; the SDK alone validates the result against that revision's schema and fails the call.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from conftest import stdio_server
from keen.mcp import Manager, ServerState
from keen.trust import PinGuard

pytestmark = pytest.mark.anyio


async def test_a_result_without_result_type_is_read_as_complete(write_config: Callable[..., Path]) -> None:
    path = write_config({"bare": stdio_server("no_result_type.py")})
    async with Manager(path, trust=PinGuard()) as manager:
        assert await manager.wait_ready(20)
        status = manager.status("bare")
        assert status.state is ServerState.CONNECTED, status.last_error
        assert status.protocol_version == "2026-07-28"
        assert {"echo", "add"} <= {tool.name for tool in manager.list_tools("bare")}
        result = await manager.call_tool("bare", "add", {"a": 2, "b": 40})
        assert not result.is_error and result.text == "42"
