"""ServerWatch against real in-memory MCP servers: discovery report, a sync per change, tool-change lines."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import anyio
import pytest

from helpers.http_servers import make_basic_server
from keen.agent.servers import ServerWatch
from keen.mcp import Manager, in_memory_transport
from keen.runtime import open_runtime

pytestmark = pytest.mark.anyio

IN_MEMORY = {"transport": "stdio", "command": "unused-in-memory"}


async def wait_until(check: Callable[[], bool], seconds: float = 20) -> None:
    with anyio.fail_after(seconds):
        while not check():  # noqa: ASYNC110 (polls state that has no event)
            await anyio.sleep(0.05)


async def test_discovery_reports_failures_then_tool_changes_resync(
    keen_home: Path, write_config: Callable[[dict[str, Any]], Path]
) -> None:
    path = write_config(
        {"basic": IN_MEMORY, "gone": {"transport": "stdio", "command": str(keen_home / "nope")}}
    )
    manager = Manager(path, transports={"basic": in_memory_transport(make_basic_server()._mcp_server)})
    lines: list[tuple[str, str]] = []
    async with open_runtime(manager=manager) as rt:
        watch = ServerWatch(rt, lambda line, style: lines.append((line, style)))
        async with anyio.create_task_group() as tg:
            tg.start_soon(watch.run, 30.0)
            await wait_until(lambda: any(line.startswith("MCP ready") for line, _ in lines))
            assert lines[0][0].startswith("gone: disconnected: ") and lines[0][1] == "red"
            assert lines[0][0].endswith("then /mcp connect gone")
            assert lines[-1] == ("MCP ready: 1 of 2 servers connected, 7 tools.", "dim")
            assert watch.catalog_stale and rt.sync_report is not None
            assert (keen_home / "skills" / "mcp:basic" / "SKILL.md").exists()

            # A tool-list change (keen.mcp.changes.ToolsChanged's shape): one line, a new sync.
            watch.catalog_stale = False
            before = rt.sync_report
            change = SimpleNamespace(
                server="basic",
                added=("new_tool",),
                removed=("old_tool",),
                changed=(SimpleNamespace(name="echo", fields=("description",)),),
                flags={"new_tool": ("override",)},
            )
            watch.on_tools_changed(change)
            assert lines[-1] == (
                "basic: tools changed: +new_tool -old_tool ~echo (description); flagged for review: new_tool",
                "cyan",
            )
            await wait_until(lambda: rt.sync_report is not before)
            assert watch.catalog_stale
            watch.on_tools_changed(SimpleNamespace(server="basic", added=(), removed=(), changed=()))
            assert lines[-1][0].startswith("basic: tools changed: +new_tool")  # an empty change says nothing
            tg.cancel_scope.cancel()
        watch.close()
