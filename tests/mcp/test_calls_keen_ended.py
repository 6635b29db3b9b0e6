"""A call in flight when Keen itself ends its server's session (the Manager closed, the server
removed from configs.json or its entry broken there, a reconnect asked for) fails saying
what Keen did, not that the server went away (docs/architecture.md "Servers and their
states").

Before, each read 'MCP server "c" went away during "wait"', a crash the user would look for
in a server that did nothing wrong, with the remedy "fix and reconnect this server". A real
stdio server (``tests/servers/cancel_stdio.py``): its ``wait`` tool writes ``started`` to a
file, then waits until it is cancelled.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

from conftest import stdio_server
from helpers.loopback import alive, wait_until
from keen.errors import KeenError, ServerDisconnected
from keen.mcp import Manager, ServerState
from keen.trust import PinGuard

pytestmark = pytest.mark.anyio

WriteConfig = Callable[[dict[str, Any]], Path]


def servers() -> dict[str, Any]:
    return {"c": stdio_server("cancel_stdio.py"), "other": stdio_server("basic_stdio.py")}


async def started(path: Path) -> Manager:
    manager = Manager(path, trust=PinGuard())
    await manager.start()
    assert await manager.wait_ready(30)
    return manager


async def waiting(manager: Manager, mark: Path, failed: list[KeenError]) -> None:
    """``c/wait`` until Keen ends it; the error it ends with goes to ``failed``."""
    try:
        await manager.call_tool("c", "wait", {"path": str(mark)})
    except KeenError as exc:
        failed.append(exc)


async def until_started(mark: Path) -> None:
    # The server writes the file: no event of Keen's says the call reached the tool.
    assert await anyio.to_thread.run_sync(wait_until, mark.exists, 30)


async def end_during_a_call(manager: Manager, tmp_path: Path, end: Callable[[], Any]) -> ServerDisconnected:
    mark, failed = tmp_path / "mark", []
    async with anyio.create_task_group() as tg:
        tg.start_soon(waiting, manager, mark, failed)
        await until_started(mark)
        await end()
    [error] = failed
    assert isinstance(error, ServerDisconnected), error
    assert "went away" not in error.message
    return error


async def test_a_server_removed_from_the_file_ends_its_call_saying_so(
    write_config: WriteConfig, tmp_path: Path
) -> None:
    path = write_config(servers())
    manager = await started(path)
    try:
        pid = int((await manager.call_tool("other", "pid", {})).text)

        async def remove() -> None:
            write_config({"other": servers()["other"]})
            with pytest.raises(KeenError, match='MCP server "c" is no longer in'):
                await manager.reload_server("c")

        error = await end_during_a_call(manager, tmp_path, remove)
        assert error.message == (
            f'"c/wait" did not finish: Keen stopped MCP server "c" as it was removed from {path}'
        )
        assert error.remedy is None
        # The other server and its session are untouched.
        assert int((await manager.call_tool("other", "pid", {})).text) == pid
    finally:
        await manager.aclose()


async def test_an_entry_broken_in_the_file_ends_its_call_saying_so(
    write_config: WriteConfig, tmp_path: Path
) -> None:
    path = write_config(servers())
    manager = await started(path)
    try:

        async def this_breaks() -> None:
            entries = servers()
            entries["c"] = {"transport": "stdio"}  # no command
            write_config(entries)
            assert await manager.reload_server("c") == "invalid"

        error = await end_during_a_call(manager, tmp_path, this_breaks)
        assert error.message == (
            f'"c/wait" did not finish: Keen stopped MCP server "c" as its entry in {path} is invalid now'
        )
        assert manager.status("c").state is ServerState.CONFIG_ERROR
    finally:
        await manager.aclose()


async def test_a_reconnect_asked_for_ends_the_call_saying_retry_and_the_new_session_stays(
    write_config: WriteConfig, tmp_path: Path
) -> None:
    path = write_config(servers())
    manager = await started(path)
    seen: list[tuple[str, ServerState]] = []
    manager.subscribe(lambda status: seen.append((status.name, status.state)))
    try:

        async def reconnect() -> None:
            assert (await manager.refresh("c")).state is ServerState.CONNECTED

        error = await end_during_a_call(manager, tmp_path, reconnect)
        # The call cut short did not mark the connection lost: observers saw the reconnect
        # only (they saw "c" DISCONNECTED, "went away during", on the old code).
        assert ("c", ServerState.DISCONNECTED) not in seen, seen
        assert (
            error.message
            == '"c/wait" did not finish: Keen reconnected MCP server "c" as asked; retry the call'
        )
        assert error.remedy is None
        assert manager.status("c").state is ServerState.CONNECTED
        mark = tmp_path / "again"
        async with anyio.create_task_group() as tg:
            tg.start_soon(waiting, manager, mark, [])
            await until_started(mark)  # the retry reaches the tool
            tg.cancel_scope.cancel()
    finally:
        await manager.aclose()


async def test_closing_the_manager_ends_its_calls_saying_so_and_stops_the_server(
    write_config: WriteConfig, tmp_path: Path
) -> None:
    path = write_config({"c": stdio_server("cancel_stdio.py"), "other": stdio_server("basic_stdio.py")})
    mark, failed = tmp_path / "mark", []
    # The calls' task group holds the Manager's (a Manager is closed from the task that
    # started it, in the scope it was started in).
    async with anyio.create_task_group() as tg:
        manager = await started(path)
        pid = int((await manager.call_tool("other", "pid", {})).text)
        tg.start_soon(waiting, manager, mark, failed)
        await until_started(mark)
        await manager.aclose()
    [error] = failed
    assert error.message == '"c/wait" did not finish: Keen stopped MCP server "c" as its Manager was closed'
    assert isinstance(error, ServerDisconnected) and error.remedy is None
    assert not alive(pid)
    assert manager.status("c").state is ServerState.DISCONNECTED
