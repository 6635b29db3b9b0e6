"""ServerWatch against real in-memory MCP servers: discovery report, a sync per change, tool-change lines."""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import anyio
import pytest

from helpers.http_servers import make_basic_server
from keen.agent.servers import ServerWatch
from keen.errors import KeenError
from keen.mcp import Manager, in_memory_transport
from keen.mcp.listing.changes import ToolsChanged
from keen.mcp.types import ServerState
from keen.runtime import Runtime, open_runtime
from keen.trust import PinGuard

pytestmark = [pytest.mark.anyio, pytest.mark.slow_file]

IN_MEMORY = {"transport": "stdio", "command": "unused-in-memory"}


async def wait_until(check: Callable[[], bool], seconds: float = 60) -> None:
    # A bound, not a pause (a healthy run returns at once): discovery took over 20 s at load 19.
    with anyio.fail_after(seconds):
        while not check():  # noqa: ASYNC110 (polls state that has no event)
            await anyio.sleep(0.05)


async def test_discovery_reports_failures_then_tool_changes_resync(
    keen_home: Path, write_config: Callable[[dict[str, Any]], Path]
) -> None:
    path = write_config(
        {"basic": IN_MEMORY, "gone": {"transport": "stdio", "command": str(keen_home / "nope")}}
    )
    manager = Manager(
        path, transports={"basic": in_memory_transport(make_basic_server()._mcp_server)}, trust=PinGuard()
    )
    lines: list[tuple[str, str]] = []
    async with open_runtime(manager=manager) as rt:
        watch = ServerWatch(rt, lambda line, style: lines.append((line, style)))
        async with anyio.create_task_group() as tg:
            tg.start_soon(watch.run, 30.0)
            await wait_until(lambda: any(line.startswith("MCP ready") for line, _ in lines))
            # A slow start (a loaded machine) adds a "still connecting" line first: not what is tested.
            said = [(line, style) for line, style in lines if not line.startswith("still connecting (")]
            assert said[0][0].startswith("gone: disconnected: ") and said[0][1] == "red"
            assert said[0][0].endswith("then /mcp connect gone")
            assert lines[-1] == ("MCP ready: 1 of 2 servers connected, 7 tools.", "dim")
            assert watch.catalog_stale and rt.sync_report is not None
            assert (keen_home / "skills" / "mcp:basic" / "SKILL.md").exists()

            # A tool-list change (keen.mcp.listing.changes.ToolsChanged's shape): one line, a new sync.
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
            # A server down at start, at its first connect: its "connected, 2 tools" line says
            # it (a line naming each of its tools would not); flagged tools are still named.
            said = len(lines)
            watch.catalog_stale = False
            up = ToolsChanged("gone", "reconnect", added=("a", "b"), tool_count=2)
            watch.on_tools_changed(up)
            assert len(lines) == said and watch.catalog_stale
            watch.on_tools_changed(dataclasses.replace(up, flags={"a": ("hidden",)}))
            assert lines[-1] == ("gone: tools changed: +a +b; flagged for review: a", "cyan")
            tg.cancel_scope.cancel()
        watch.close()


@contextlib.asynccontextmanager
async def crashed_chat(
    keen_home: Path, write_config: Callable[[dict[str, Any]], Path]
) -> AsyncIterator[tuple[Runtime, ServerWatch, list[tuple[str, str]]]]:
    """A runtime with the ``chat`` server and a watch that follows it, once a call made the
    server crash and the watch said so: ``(runtime, watch, the watch's lines)``."""
    from conftest import stdio_server
    from keen.mcp.connection.reconnect import Reconnector

    path = write_config(
        {
            "chat": stdio_server(
                "chat_tools.py",
                env={"CHAT_TOOLS_LOG": str(keen_home / "notes")},
                # A bound, not a pause: at load 34 the forked server took over the default
                # 15 s to answer initialize, and the test then saw a failed start, not a crash.
                timeouts={"connect": 60},
            )
        }
    )
    lines: list[tuple[str, str]] = []
    async with open_runtime(config_path=path) as rt:
        watch = ServerWatch(
            rt, lambda line, style: lines.append((line, style)), reconnector=Reconnector(rt.manager)
        )
        async with anyio.create_task_group() as tg:
            tg.start_soon(watch.run, 30.0)
            await wait_until(lambda: any(line.startswith("MCP ready") for line, _ in lines))
            await crash(rt)
            await wait_until(lambda: gone(lines) == 1)
            yield rt, watch, lines
            tg.cancel_scope.cancel()
        watch.close()


async def crash(rt: Runtime) -> None:
    with pytest.raises(KeenError, match='MCP server "chat" went away during "crash"'):
        await rt.manager.call_tool("chat", "crash", {})


def gone(lines: list[tuple[str, str]]) -> int:
    return sum(line.startswith("chat: disconnected") for line, _ in lines)


async def test_a_server_that_goes_away_is_reported_with_when_keen_brings_it_back(
    keen_home: Path, write_config: Callable[[dict[str, Any]], Path]
) -> None:
    # The line read 'chat: disconnected: MCP server "chat" exited unexpectedly; last stderr:
    # fatal: crash called; then /mcp connect chat', as if the user had to reconnect it, while
    # the session reconnects it at the next call that needs it.
    async with crashed_chat(keen_home, write_config) as (rt, _watch, lines):
        assert rt.manager.status("chat").state is ServerState.DISCONNECTED
    [(line, style)] = [entry for entry in lines if entry[0].startswith("chat: disconnected")]
    assert style == "red"
    assert line.startswith('chat: disconnected (MCP server "chat" exited unexpectedly'), line
    assert "fatal: crash called" in line and "then /mcp connect" not in line, line
    assert line.endswith("; Keen reconnects it at the next call to it; `/mcp connect chat` does it now"), line


async def test_a_server_that_goes_away_again_right_after_a_told_reconnect_is_reported_again(
    keen_home: Path, write_config: Callable[[dict[str, Any]], Path]
) -> None:
    # The watch took a told state as reported only when it next woke (SETTLE_SECONDS later):
    # a server reconnected by a call and gone again before then was back in the state the
    # watch had printed, so its second going away was never said (keen chat under tmux).
    async with crashed_chat(keen_home, write_config) as (rt, watch, lines):
        await reconnect_as_chat_does(rt, watch)
        await crash(rt)
        await wait_until(lambda: gone(lines) == 2)
    assert not [line for line, _ in lines if line.startswith("chat: connected")], lines


async def reconnect_as_chat_does(rt: Runtime, watch: ServerWatch) -> None:
    """keen chat's on-demand reconnect (``Agent.revive``): the reconnector's attempt, then
    its own line and :meth:`ServerWatch.told`."""
    assert watch.reconnector is not None
    assert await watch.reconnector.ensure(["chat"], 60) == ["chat"]
    status = rt.manager.status("chat")
    assert status.state is ServerState.CONNECTED, status.last_error
    watch.told(status)


async def test_a_reconnect_that_returns_after_the_watch_wakes_is_not_said_twice(
    keen_home: Path, write_config: Callable[[dict[str, Any]], Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Under load the attempt returned (and keen chat printed its line and told the watch)
    # after the watch had woken on the server's "connected": the watch printed "chat:
    # connected" too. Here the attempt's tail is stretched past the watch's settle time.
    from keen.agent.servers import SETTLE_SECONDS

    async with crashed_chat(keen_home, write_config) as (rt, watch, lines):
        refresh = rt.manager.refresh
        connected = anyio.Event()

        async def slow_tail(name: str, **kwargs: Any) -> Any:
            status = await refresh(name, **kwargs)
            connected.set()
            # The watch wakes on "connected" and looks SETTLE_SECONDS later, while the
            # attempt still runs.
            await anyio.sleep(SETTLE_SECONDS * 4)
            return status

        monkeypatch.setattr(rt.manager, "refresh", slow_tail)
        async with anyio.create_task_group() as tg:
            tg.start_soon(reconnect_as_chat_does, rt, watch)
            await connected.wait()
        monkeypatch.undo()
        await crash(rt)
        await wait_until(lambda: gone(lines) == 2)
    assert not [line for line, _ in lines if line.startswith("chat: connected")], lines


async def test_a_look_between_the_attempts_end_and_its_caller_says_nothing(
    keen_home: Path, write_config: Callable[[dict[str, Any]], Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    # The attempt's end wakes keen chat's reconnect, which prints its line and tells the
    # watch; the watch's own look could run between the two (its settle time ran out at
    # that moment on a loaded machine) and said "chat: connected" as well. Here the caller
    # tells the watch only after the watch has looked once more.
    async with crashed_chat(keen_home, write_config) as (rt, watch, lines):
        assert watch.reconnector is not None
        news = watch._news  # pyright: ignore[reportPrivateUsage]
        looked = anyio.Event()

        def look() -> list[Any]:
            try:
                return news()
            finally:
                looked.set()

        monkeypatch.setattr(watch, "_news", look)
        assert await watch.reconnector.ensure(["chat"], 60) == ["chat"]
        looked = anyio.Event()
        with anyio.move_on_after(10):  # a watch that said it already looks no more
            await looked.wait()
        watch.told(rt.manager.status("chat"))
        monkeypatch.undo()
        await crash(rt)
        await wait_until(lambda: gone(lines) == 2)
    assert not [line for line, _ in lines if line.startswith("chat: connected")], lines


async def test_a_reconnect_the_watch_is_not_told_of_is_said_once_the_attempt_ends(
    keen_home: Path, write_config: Callable[[dict[str, Any]], Path]
) -> None:
    # Held back while the attempt runs, a server back is still said when nobody tells the
    # watch (an attempt that went on in the background after keen chat stopped waiting).
    async with crashed_chat(keen_home, write_config) as (_rt, watch, lines):
        assert watch.reconnector is not None
        assert await watch.reconnector.ensure(["chat"], 60) == ["chat"]
        await wait_until(lambda: any(line.startswith("chat: connected") for line, _ in lines))


async def test_a_server_still_connecting_when_discovery_ends_is_told_and_followed(
    keen_home: Path, write_config: Callable[[dict[str, Any]], Path]
) -> None:
    # The line said "still connecting after 0.5 s; /mcp shows its state", not that the
    # attempt goes on and that a line follows when it ends.
    from conftest import stdio_server

    path = write_config({"slow": stdio_server("hang_init.py", timeouts={"connect": 3})})
    lines: list[tuple[str, str]] = []
    async with open_runtime(config_path=path) as rt:
        watch = ServerWatch(rt, lambda line, style: lines.append((line, style)))
        async with anyio.create_task_group() as tg:
            tg.start_soon(watch.run, 0.5)
            await wait_until(lambda: any(line.startswith("MCP ready") for line, _ in lines))
            # Named at once (the session answers meanwhile), then told when discovery ends.
            assert lines[0][0].startswith("still connecting (1 server): slow;"), lines
            first = lines[1][0]
            await wait_until(lambda: any(line.startswith("slow: disconnected") for line, _ in lines))
            tg.cancel_scope.cancel()
        watch.close()
    assert first == (
        "slow: still connecting after 0.5 s; it goes on in the background, and a line here says when it is"
        " ready or why not (/mcp shows its state)"
    ), first
    assert "did not answer initialize" in lines[-1][0], lines


async def test_a_session_started_with_no_servers_follows_one_connected_later(
    keen_home: Path, write_config: Callable[[dict[str, Any]], Path]
) -> None:
    # With no servers at the start, the watch said "restart keen chat" and stopped listening:
    # a server added to configs.json and connected with /mcp connect was never followed.
    from conftest import stdio_server

    path = write_config({})
    lines: list[tuple[str, str]] = []
    async with open_runtime(config_path=path) as rt:
        watch = ServerWatch(rt, lambda line, style: lines.append((line, style)))
        async with anyio.create_task_group() as tg:
            tg.start_soon(watch.run, 30.0)
            await wait_until(lambda: bool(lines))
            assert lines == [
                (
                    f"No MCP servers configured: add them to {path} (or run `keen mcp import FILE`), then"
                    " /mcp connect NAME.",
                    "dim",
                )
            ]
            write_config(
                {"chat": stdio_server("chat_tools.py", env={"CHAT_TOOLS_LOG": str(keen_home / "notes")})}
            )
            async with watch.lock:  # as /mcp connect runs in the REPL
                outcome = await rt.connect("chat")
                watch.settle()
            assert outcome.enabled and (keen_home / "skills" / "mcp:chat" / "SKILL.md").exists()
            with pytest.raises(KeenError, match='MCP server "chat" went away during "crash"'):
                await rt.manager.call_tool("chat", "crash", {})
            await wait_until(lambda: any(line.startswith("chat: disconnected") for line, _ in lines))
            tg.cancel_scope.cancel()
        watch.close()
