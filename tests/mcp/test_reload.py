"""``Manager.reload_server``: a reconnect the user asks for takes the server's current
configs.json entry (docs/architecture.md "Servers and their states"), against real stdio
and loopback HTTP servers and a real file that the test edits while the Manager runs."""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

from conftest import stdio_server
from helpers.http_servers import make_basic_server, serve_http
from helpers.loopback import alive
from keen.errors import ConfigError, Remedy, ServerMisconfigured, ServerNotConfigured
from keen.mcp import Manager, ServerState
from keen.mcp.listing.changes import ToolsChanged
from keen.trust import PinGuard

pytestmark = pytest.mark.anyio

OLD_KEY = "sk-old-4b3c2d1e0f9a"
NEW_KEY = "sk-new-8e7f6a5b4c3d"


async def started(path: Path) -> Manager:
    manager = Manager(path, trust=PinGuard())
    await manager.start()
    assert await manager.wait_ready(30)
    return manager


async def pid_of(manager: Manager, server: str) -> int:
    return int((await manager.call_tool(server, "pid", {})).text)


def written_files(keen_home: Path) -> str:
    """Every file Keen wrote under KEEN_HOME (not configs.json: the user's own file holds keys)."""
    return "".join(
        p.read_text(errors="replace")
        for p in keen_home.rglob("*")
        if p.is_file() and p.name != "configs.json"
    )


async def test_a_fixed_command_is_used_by_the_next_reconnect(write_config: Callable[..., Path]) -> None:
    path = write_config(
        {
            "fixme": {"transport": "stdio", "command": "keen-no-such-command-xyz"},
            "other": stdio_server("basic_stdio.py"),
        }
    )
    manager = await started(path)
    try:
        assert manager.status("fixme").state is ServerState.DISCONNECTED
        other_pid = await pid_of(manager, "other")
        # Before the fix in keen.mcp, a reconnect ran the command read at start again.
        write_config({"fixme": stdio_server("basic_stdio.py"), "other": stdio_server("basic_stdio.py")})
        assert await manager.reload_server("fixme") == "changed"
        status = await manager.refresh("fixme")
        assert status.state is ServerState.CONNECTED, status.last_error
        assert (await manager.call_tool("fixme", "add", {"a": 2, "b": 3})).text == "5"
        assert manager.config.servers["fixme"].model_dump()["command"] != "keen-no-such-command-xyz"
        # The other server was left alone: the same process, still connected.
        assert await pid_of(manager, "other") == other_pid
        assert manager.status("other").state is ServerState.CONNECTED
        # Read again with nothing changed: nothing to do.
        assert await manager.reload_server("fixme") == "unchanged"
    finally:
        await manager.aclose()


async def test_a_config_error_fixed_in_the_file_connects(write_config: Callable[..., Path]) -> None:
    path = write_config({"broken": {"command": "${KEEN_TEST_NEVER_SET}"}})
    manager = await started(path)
    try:
        assert manager.status("broken").state is ServerState.CONFIG_ERROR
        write_config({"broken": stdio_server("basic_stdio.py")})
        assert await manager.reload_server("broken") == "changed"
        changes: list[ToolsChanged] = []
        manager.subscribe_changes(changes.append)
        status = await manager.refresh("broken")
        assert status.state is ServerState.CONNECTED, status.last_error
        # Down at start (its entry invalid), its first connect tells its tools as added, once.
        [change] = changes
        assert (change.server, change.reason, change.removed, change.changed) == (
            "broken",
            "reconnect",
            (),
            (),
        )
        assert set(change.added) == {t.name for t in manager.list_tools("broken")} and "echo" in change.added
        assert [s.name for s in manager.servers()] == ["broken"]  # one entry, no longer config_error
        assert "broken" not in manager.config.invalid and "broken" in manager.config.servers
        assert (await manager.call_tool("broken", "echo", {"text": "fixed"})).text == "fixed"
    finally:
        await manager.aclose()


async def test_an_entry_still_broken_reports_its_error_and_the_fix(write_config: Callable[..., Path]) -> None:
    path = write_config(
        {"broken": {"command": "${KEEN_TEST_NEVER_SET}"}, "ok": stdio_server("basic_stdio.py")}
    )
    manager = await started(path)
    try:
        ok_pid = await pid_of(manager, "ok")
        write_config(
            {"broken": {"command": "x", "timeouts": {"connect": -1}}, "ok": stdio_server("basic_stdio.py")}
        )
        assert await manager.reload_server("broken") == "invalid"
        status = await manager.refresh("broken")
        assert status.state is ServerState.CONFIG_ERROR and status.remedy is Remedy.FIX_CONFIG
        assert "timeouts.connect" in status.last_error and "KEEN_TEST_NEVER_SET" not in status.last_error
        with pytest.raises(ServerMisconfigured, match=r"timeouts\.connect"):
            await manager.call_tool("broken", "echo", {"text": "x"})
        assert await pid_of(manager, "ok") == ok_pid
    finally:
        await manager.aclose()


async def test_a_working_entry_broken_in_the_file_stops_its_server(write_config: Callable[..., Path]) -> None:
    path = write_config({"local": stdio_server("basic_stdio.py"), "ok": stdio_server("basic_stdio.py")})
    manager = await started(path)
    seen: list[tuple[str, ServerState]] = []
    manager.subscribe(lambda s: seen.append((s.name, s.state)))
    try:
        pid, ok_pid = await pid_of(manager, "local"), await pid_of(manager, "ok")
        write_config({"local": {"command": "${KEEN_TEST_NEVER_SET}"}, "ok": stdio_server("basic_stdio.py")})
        assert await manager.reload_server("local") == "invalid"
        assert not alive(pid), "stopped by its owner task (which opened the session) before the return"
        status = manager.status("local")
        assert status.state is ServerState.CONFIG_ERROR and "KEEN_TEST_NEVER_SET" in status.last_error
        assert seen == [("local", ServerState.CONFIG_ERROR)]  # not the retired owner's "disconnected"
        assert [s.name for s in manager.servers()] == ["ok", "local"]
        assert await pid_of(manager, "ok") == ok_pid
    finally:
        await manager.aclose()


async def test_a_server_added_to_the_file_becomes_known_and_connects(
    write_config: Callable[..., Path],
) -> None:
    path = write_config({"first": stdio_server("basic_stdio.py")})
    manager = await started(path)
    try:
        with pytest.raises(
            ServerNotConfigured, match=r'MCP server "late" is not configured \(configured: first\)'
        ):
            manager.status("late")
        write_config({"first": stdio_server("basic_stdio.py"), "late": stdio_server("basic_stdio.py")})
        assert await manager.reload_server("late") == "added"
        assert manager.status("late").state is ServerState.CONFIGURED
        assert await manager.wait_ready(1)  # a server not started yet does not hold up the wait
        status = await manager.refresh("late")
        assert status.state is ServerState.CONNECTED, status.last_error
        assert [s.name for s in manager.servers()] == ["first", "late"]
        late_pid = await pid_of(manager, "late")
    finally:
        await manager.aclose()
    assert not alive(late_pid), "aclose() left the added server running"


async def test_a_server_removed_from_the_file_is_no_longer_configured(
    write_config: Callable[..., Path],
) -> None:
    path = write_config(
        {"leaving": stdio_server("basic_stdio.py"), "staying": stdio_server("basic_stdio.py")}
    )
    manager = await started(path)
    try:
        pid = await pid_of(manager, "leaving")
        write_config({"staying": stdio_server("basic_stdio.py")})
        with pytest.raises(ServerNotConfigured, match='MCP server "leaving" is no longer in') as removed:
            await manager.reload_server("leaving")
        assert "no longer in" in removed.value.message and str(path) in removed.value.message
        assert not alive(pid)
        assert [s.name for s in manager.servers()] == ["staying"]
        assert "leaving" not in manager.config.servers
        with pytest.raises(
            ServerNotConfigured, match=r'MCP server "leaving" is not configured \(configured: staying\)'
        ):
            await manager.refresh("leaving")
        # A name that was never configured says so, as before.
        with pytest.raises(ServerNotConfigured, match="is not configured"):
            await manager.reload_server("ghost")
    finally:
        await manager.aclose()


async def test_a_file_that_cannot_be_read_changes_nothing(write_config: Callable[..., Path]) -> None:
    path = write_config({"local": stdio_server("basic_stdio.py")})
    manager = await started(path)
    try:
        pid = await pid_of(manager, "local")
        path.write_text('{"version": 1, "servers": {')
        with pytest.raises(ConfigError, match="invalid JSON"):
            await manager.reload_server("local")
        assert await pid_of(manager, "local") == pid
    finally:
        await manager.aclose()


async def test_a_config_given_in_code_is_not_replaced_by_the_file(write_config: Callable[..., Path]) -> None:
    # keen serve and library users may pass their own config: configs.json is not theirs.
    write_config({"local": {"command": "keen-no-such-command-xyz"}})
    async with Manager(
        config={"version": 1, "servers": {"local": stdio_server("basic_stdio.py")}}, trust=PinGuard()
    ) as manager:
        assert await manager.wait_ready(30)
        assert await manager.reload_server("local") == "unchanged"
        assert (await manager.refresh("local")).state is ServerState.CONNECTED
        with pytest.raises(ServerNotConfigured, match="is not configured"):
            await manager.reload_server("ghost")


async def test_a_server_enabled_in_the_file_takes_calls_after_the_reconnect(
    write_config: Callable[..., Path],
) -> None:
    path = write_config({"off": stdio_server("basic_stdio.py", enabled=False)})
    manager = await started(path)
    try:
        status = manager.status("off")
        assert status.state is ServerState.CONFIGURED and not status.enabled and status.last_error
        write_config({"off": stdio_server("basic_stdio.py")})
        assert await manager.reload_server("off") == "changed"
        status = manager.status("off")
        assert status.enabled and status.last_error == "" and status.remedy is None
        assert (await manager.refresh("off")).state is ServerState.CONNECTED
        assert (await manager.call_tool("off", "echo", {"text": "on"})).text == "on"  # not ServerDisabled
    finally:
        await manager.aclose()


async def test_a_new_key_is_used_and_no_key_is_shown(
    write_config: Callable[..., Path], keen_home: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)

    def keyed(url: str, key: str, **extra: Any) -> dict[str, Any]:
        return {"url": url, "auth": {"type": "api_key", "key": key}, **extra}

    with serve_http(make_basic_server(), api_key=NEW_KEY) as srv:
        path = write_config({"keyed": keyed(srv.url, OLD_KEY)})
        manager = await started(path)
        texts: list[str] = []
        try:
            assert manager.status("keyed").state is ServerState.AUTH_FAILED
            write_config({"keyed": keyed(srv.url, NEW_KEY)})
            assert await manager.reload_server("keyed") == "changed"
            status = await manager.refresh("keyed")
            assert status.state is ServerState.CONNECTED, status.last_error
            assert (await manager.call_tool("keyed", "echo", {"text": "in"})).text == "in"
            # Now broken with the key still in it: the error names the field, not the key.
            write_config({"keyed": keyed("ftp://" + NEW_KEY, NEW_KEY)})
            assert await manager.reload_server("keyed") == "invalid"
            texts += [json.dumps(s.to_dict()) for s in manager.servers()]
            with pytest.raises(
                ServerMisconfigured,
                match=re.escape("server 'keyed': field 'url': 'ftp://[REDACTED]' is not an http"),
            ) as refused:
                await manager.call_tool("keyed", "echo", {"text": "x"})
            texts.append(str(refused.value))
        finally:
            await manager.aclose()
    shown = caplog.text + "\n".join(texts) + written_files(keen_home)
    assert "keyed" in shown and "url" in "\n".join(texts)
    assert OLD_KEY not in shown and NEW_KEY not in shown


async def test_a_server_added_while_discovery_waits_does_not_break_wait_ready(
    write_config: Callable[..., Path],
) -> None:
    # keen chat's watch waits for discovery while the prompt is live; /mcp connect of a server
    # added to the file changed the dict wait_ready was iterating ("dictionary changed size").
    slow = stdio_server("hang_init.py", timeouts={"connect": 3})
    path = write_config({"slow": slow})
    manager = Manager(path, trust=PinGuard())
    await manager.start()
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(manager.wait_ready, 30)
            await anyio.sleep(0.3)  # the waiter is parked on the slow server
            write_config({"slow": slow, "late": stdio_server("basic_stdio.py")})
            assert await manager.reload_server("late") == "added"
        assert manager.status("slow").state is ServerState.DISCONNECTED
    finally:
        await manager.aclose()


async def test_fixing_an_entry_whose_connection_hangs_does_not_wait_out_the_old_attempt(
    write_config: Callable[..., Path],
) -> None:
    # The old attempt hangs in initialize with a 600 s connect timeout; the fixed entry must
    # connect without waiting for it (the guard below is far below 600 s, far above a connect).
    path = write_config({"s": stdio_server("hang_init.py", timeouts={"connect": 600})})
    manager = Manager(path, trust=PinGuard())
    await manager.start()
    try:
        await anyio.sleep(0.5)
        assert manager.status("s").state is ServerState.CONNECTING
        write_config({"s": stdio_server("basic_stdio.py")})
        with anyio.fail_after(120):
            assert await manager.reload_server("s") == "changed"
            status = await manager.refresh("s")
        assert status.state is ServerState.CONNECTED, status
        assert (await manager.call_tool("s", "add", {"a": 1, "b": 2})).text
    finally:
        await manager.aclose()
