"""The Reconnector's ``stable_after`` (keen mcp watch's): a reconnect resets the back-off
only once its session lasted that long, against a real stdio server killed at will and a
test clock (its windows are read, never timed)."""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path

import pytest
from tests.helpers import server_script
from tests.helpers.changing import wait_until

from keen.mcp import Manager, ServerState
from keen.mcp.connection.reconnect import Reconnector
from keen.trust import PinGuard

pytestmark = pytest.mark.anyio


async def test_the_back_off_resets_only_after_a_session_that_lasted_stable_after(tmp_path: Path) -> None:
    pidfile = tmp_path / "server.pid"
    spec = tmp_path / "spec.json"
    tools = [{"name": "a", "description": "A.", "inputSchema": {"type": "object"}}]
    spec.write_text(json.dumps({"tools": tools, "pidfile": str(pidfile)}))
    entry = {"command": sys.executable, "args": [str(server_script("hostile_stdio")), str(spec)]}
    config = {"mcpServers": {"s": entry}}
    now = [100.0]
    async with Manager(config=config, logs_dir=tmp_path / "logs", trust=PinGuard()) as manager:
        assert await manager.wait_ready(30)
        reconnector = Reconnector(manager, stable_after=30.0, clock=lambda: now[0])

        async def crash() -> None:
            os.kill(int(pidfile.read_text()), signal.SIGKILL)
            await wait_until(lambda: reconnector.reconnectable("s"), "the server to be gone", 30)

        async def reconnect() -> None:
            assert await reconnector.ensure(["s"]) == ["s"]
            assert manager.status("s").state is ServerState.CONNECTED

        await crash()
        await reconnect()  # the first attempt: at once
        await crash()  # right after it connected
        assert reconnector.retry_in("s") == 1.0  # a 1 s window, as after a failure
        now[0] += 1.0
        await reconnect()
        await crash()  # right after again: the window doubled
        assert reconnector.retry_in("s") == 2.0
        now[0] += 2.0
        await reconnect()
        now[0] += 30.0  # this session lasts 30 s
        await crash()
        assert reconnector.retry_in("s") == 0.0  # back to the first window, passed long ago
        await reconnect()
        await crash()  # right after: 1 s again, not 8
        assert reconnector.retry_in("s") == 1.0
