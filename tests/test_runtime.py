"""keen.runtime: one session context (config -> Manager -> discovery -> sync -> Gateway).

The servers are real MCP servers (FastMCP, as in tests/helpers) run in this process over
the SDK's in-memory transport (``Manager(transports=...)``), so a session costs no
subprocess; tests/test_peers.py keeps the subprocess and HTTP peers.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from fastmcp import FastMCP

from helpers import server_script
from helpers.forkserver import script_args
from helpers.http_servers import make_basic_server
from keen.errors import (
    ApprovalDenied,
    ConfigError,
    KeenError,
    RemoteToolError,
    ServerNotConfigured,
    SkillError,
)
from keen.gateway import ApprovalRequest, allow_all
from keen.mcp import Manager, ServerState, ServerStatus, in_memory_transport
from keen.runtime import open_runtime
from keen.skills import SkillsConfig
from keen.trust import PinGuard

pytestmark = pytest.mark.anyio

# A configs.json entry for a server whose transport the test supplies (in memory).
IN_MEMORY = {"transport": "stdio", "command": "unused-in-memory"}


def _manager(config_path: Path, **servers: Any) -> Manager:
    return Manager(
        config_path,
        transports={name: in_memory_transport(server._mcp_server) for name, server in servers.items()},
        trust=PinGuard(),
    )


async def test_session_waits_syncs_and_calls_through_the_gateway(
    keen_home: Path, write_config: Callable[[dict[str, Any]], Path]
) -> None:
    path = write_config({"basic": IN_MEMORY, "extra": IN_MEMORY})
    asked: list[ApprovalRequest] = []
    audit: list[dict[str, Any]] = []
    seen: list[ServerStatus] = []

    def approve(request: ApprovalRequest) -> bool:
        asked.append(request)
        return request.tool != "fail"

    manager = _manager(path, basic=make_basic_server(), extra=make_basic_server(n_extra_tools=3))
    async with open_runtime(
        manager=manager, wait=30, sync=True, approval=approve, audit=audit.append, observers=[seen.append]
    ) as rt:
        assert rt.discovered is True
        # One pin guard per session: what the listing showed is what a call is checked against.
        assert rt.gateway.pins is rt.manager.trust
        assert [s.state for s in rt.manager.servers()] == [ServerState.CONNECTED] * 2
        assert rt.sync_report is not None
        assert {e.server: e.action for e in rt.sync_report.entries} == {
            "basic": "generated",
            "extra": "generated",
        }
        skill = keen_home / "skills" / "mcp:extra"
        assert len(list((skill / "schemas").glob("*.json"))) == 10
        result = await rt.gateway.call("basic", "add", {"a": 40, "b": 2})
        assert result.text == "42" and not result.is_error
        with pytest.raises(
            ApprovalDenied, match='the call to "basic/fail" was not approved, so nothing was sent'
        ):
            await rt.gateway.call("basic", "fail", {"message": "no"})
    assert [(r.server, r.tool) for r in asked] == [("basic", "add"), ("basic", "fail")]
    assert [(e["tool"], e["decision"]) for e in audit] == [("add", "allowed"), ("fail", "denied")]
    assert {s.name for s in seen if s.state is ServerState.CONNECTED} == {"basic", "extra"}


async def test_observers_are_unsubscribed_when_the_session_ends(
    write_config: Callable[[dict[str, Any]], Path],
) -> None:
    path = write_config({"basic": IN_MEMORY})
    seen: list[ServerStatus] = []
    manager = _manager(path, basic=make_basic_server())
    async with open_runtime(manager=manager, wait=30, observers=[seen.append]):
        pass
    count = len(seen)
    assert count >= 2  # connecting, connected
    manager._notify(manager.servers()[0])  # pyright: ignore[reportPrivateUsage]
    assert len(seen) == count


async def test_without_wait_discovery_runs_in_the_background(
    write_config: Callable[[dict[str, Any]], Path],
) -> None:
    path = write_config({"basic": IN_MEMORY})
    async with open_runtime(manager=_manager(path, basic=make_basic_server())) as rt:
        assert rt.discovered is False and rt.sync_report is None
        assert await rt.wait_for_discovery(30) is True
        assert rt.manager.status("basic").state is ServerState.CONNECTED


async def test_an_unparseable_config_starts_nothing(keen_home: Path) -> None:
    path = keen_home / "mcp" / "configs.json"
    path.parent.mkdir(parents=True)
    path.write_text('{"version": 1, "servers": {"bad name!": {"command": "x"}},}')
    with pytest.raises(ConfigError, match="line 1"):
        async with open_runtime(wait=5):
            pytest.fail("the body must not run")


async def test_an_error_in_the_body_closes_the_servers(
    write_config: Callable[[dict[str, Any]], Path],
) -> None:
    path = write_config({"basic": IN_MEMORY})
    manager = _manager(path, basic=make_basic_server())
    with pytest.raises(
        ServerNotConfigured, match=r'MCP server "nope" is not configured \(configured: basic\)'
    ):
        async with open_runtime(manager=manager, wait=30) as rt:
            rt.manager.status("nope")
    assert manager.status("basic").state is not ServerState.CONNECTED


@pytest.mark.parametrize("opened", ["sync", "start=False"])
async def test_the_bodys_keen_error_reaches_the_caller_as_it_was_raised(
    opened: str, keen_home: Path, write_config: Callable[[dict[str, Any]], Path]
) -> None:
    # With sync (its live skills' task group) or start=False (the Manager's host task), the
    # body's error came out wrapped in an ExceptionGroup: `except KeenError` missed it.
    path = write_config({"basic": IN_MEMORY})
    options: dict[str, Any] = {"wait": 30, "sync": True} if opened == "sync" else {"start": False}
    with pytest.raises(ServerNotConfigured, match=r'MCP server "nope" is not configured'):
        async with open_runtime(manager=_manager(path, basic=make_basic_server()), **options) as rt:
            await rt.start_servers()
            rt.manager.status("nope")


async def test_the_bodys_error_stays_in_the_group_when_a_background_task_fails_too(
    keen_home: Path, write_config: Callable[[dict[str, Any]], Path]
) -> None:
    # Left without the body's error, the live skills' task group raised the task's error
    # alone: the body's ServerNotConfigured was only the group's __context__.
    class WriterFailed(Exception):
        pass

    crashed = anyio.Event()

    async def crash() -> None:
        crashed.set()
        raise WriterFailed("the live skills writer failed")

    path = write_config({"basic": IN_MEMORY})
    with pytest.raises(ExceptionGroup, match="unhandled errors in a TaskGroup") as caught:
        async with open_runtime(manager=_manager(path, basic=make_basic_server()), wait=30, sync=True) as rt:
            assert rt.live is not None and rt.live._tg is not None
            rt.live._tg.start_soon(crash)
            with anyio.CancelScope(shield=True):  # the failed task cancels the body's scope
                await crashed.wait()
            rt.manager.status("nope")
    kinds = [type(e).__name__ for e in caught.value.exceptions]
    assert kinds == ["WriterFailed", "ServerNotConfigured"], caught.value.exceptions


async def test_a_skills_root_that_is_a_file_is_a_skill_error_at_the_sync(
    keen_home: Path, write_config: Callable[[dict[str, Any]], Path], tmp_path: Path
) -> None:
    # The sync's lock made the folder: a bare FileExistsError reached the caller.
    a_file = tmp_path / "skills.txt"
    a_file.write_text("not a folder", encoding="utf-8")
    path = write_config({"basic": IN_MEMORY})
    with pytest.raises(
        SkillError, match=rf"^cannot write skills in {re.escape(str(a_file))} \(File exists\); the"
    ):
        async with open_runtime(
            manager=_manager(path, basic=make_basic_server()), wait=30, sync=True, skills_root=a_file
        ):
            pytest.fail("the body must not run")
    assert a_file.read_text(encoding="utf-8") == "not a folder"


async def test_connect_regenerates_and_enables_a_disabled_skill(
    keen_home: Path, write_config: Callable[[dict[str, Any]], Path]
) -> None:
    path = write_config({"basic": IN_MEMORY, "other": IN_MEMORY})
    manager = _manager(path, basic=make_basic_server(), other=make_basic_server())
    async with open_runtime(manager=manager, wait=30, sync=True) as rt:
        config = SkillsConfig.load(keen_home / "skills" / "config.json")
        config.set_enabled("mcp:basic", False)
        config.set_enabled("mcp:other", False)
        config.save()
        outcome = await rt.connect("basic")
    assert outcome.status.state is ServerState.CONNECTED and outcome.enabled
    saved = json.loads((keen_home / "skills" / "config.json").read_text())
    assert saved["is_enabled"]["mcp:basic"] is True
    assert saved["is_enabled"]["mcp:other"] is False  # other skills are left alone


async def test_a_session_of_some_servers_syncs_only_those(
    keen_home: Path, write_config: Callable[[dict[str, Any]], Path]
) -> None:
    # open_runtime(only=..., sync=True): the servers left out were not started, so they are
    # `configured`; syncing them as such disabled their skills for every other session.
    path = write_config({"basic": IN_MEMORY, "other": IN_MEMORY})
    async with open_runtime(
        manager=_manager(path, basic=make_basic_server(), other=make_basic_server()), wait=30, sync=True
    ):
        pass
    manager = Manager(
        path,
        transports={"basic": in_memory_transport(make_basic_server()._mcp_server)},
        only={"basic"},
        trust=PinGuard(),
    )
    async with open_runtime(manager=manager, wait=30, sync=True) as rt:
        assert rt.sync_report is not None
        assert [e.server for e in rt.sync_report.entries] == ["basic"]
    saved = json.loads((keen_home / "skills" / "config.json").read_text()).get("is_enabled", {})
    assert saved.get("mcp:other", True) is True
    assert (keen_home / "skills" / "mcp:other" / "SKILL.md").is_file()


async def test_a_session_with_its_own_config_keeps_the_configured_servers_skills(
    keen_home: Path, write_config: Callable[[dict[str, Any]], Path]
) -> None:
    # open_runtime(config={"mcpServers": ...}, sync=True): the sync took the script's servers
    # for the whole configuration and deleted every generated skill of configs.json's servers.
    path = write_config({"basic": IN_MEMORY})
    async with open_runtime(manager=_manager(path, basic=make_basic_server()), wait=30, sync=True):
        pass
    adhoc = {
        "mcpServers": {
            "adhoc": {"command": sys.executable, "args": script_args(str(server_script("basic_stdio")))}
        }
    }
    async with open_runtime(config=adhoc, wait=30, sync=True) as rt:
        assert rt.sync_report is not None
        assert [(e.server, e.action) for e in rt.sync_report.entries] == [("adhoc", "generated")]
    assert (keen_home / "skills" / "mcp:basic" / "SKILL.md").is_file()
    assert (keen_home / "skills" / "mcp:adhoc" / "SKILL.md").is_file()


async def test_a_session_with_its_own_config_and_only_some_servers_syncs_only_those(
    keen_home: Path, write_config: Callable[[dict[str, Any]], Path]
) -> None:
    # open_runtime(config=..., only=..., sync=True): the session's own servers that it did
    # not start are `configured`; syncing them as such disabled a same-named skill that
    # configs.json's server had generated.
    path = write_config({"basic": IN_MEMORY})
    async with open_runtime(manager=_manager(path, basic=make_basic_server()), wait=30, sync=True):
        pass
    stdio = {"command": sys.executable, "args": script_args(str(server_script("basic_stdio")))}
    adhoc = {"mcpServers": {"adhoc": stdio, "basic": stdio}}
    async with open_runtime(config=adhoc, only={"adhoc"}, wait=30, sync=True) as rt:
        assert rt.sync_report is not None
        assert [(e.server, e.action) for e in rt.sync_report.entries] == [("adhoc", "generated")]
    saved = json.loads((keen_home / "skills" / "config.json").read_text()).get("is_enabled", {})
    assert saved.get("mcp:basic", True) is True
    assert (keen_home / "skills" / "mcp:basic" / "SKILL.md").is_file()


async def test_a_closed_harness_gives_the_gateway_its_approval_back(
    write_config: Callable[[dict[str, Any]], Path], tmp_path: Path
) -> None:
    # A harness once took over the gateway's approval while it ran, and after close() the
    # session's own approval was still replaced, so every direct call was refused. A harness
    # now lends the gateway nothing: the session's approval stays.
    path = write_config({"basic": IN_MEMORY})
    async with open_runtime(
        manager=_manager(path, basic=make_basic_server()), wait=30, approval=allow_all
    ) as rt:
        rt.harness(mode="auto", workspace=tmp_path).close()
        assert rt.gateway.approval is allow_all
        result = await rt.gateway.call("basic", "fail", {"message": "sent"})  # not read-only: asks
        assert result.is_error and result.text == "sent"


async def test_a_cancelled_direct_call_reaches_the_audit_callback(
    write_config: Callable[[dict[str, Any]], Path],
) -> None:
    # Library use (no harness): a call cancelled while the server runs it sent the
    # session's audit callback nothing, so it read as a call never made.
    started, release = anyio.Event(), anyio.Event()
    server = FastMCP("blocking")

    @server.tool(description="Block until the test releases it.")
    async def block() -> str:
        started.set()
        await release.wait()
        return "released"

    @server.tool(description="Answer at once.")
    def ping() -> str:
        return "pong"

    path = write_config({"blocking": IN_MEMORY})
    audit: list[dict[str, Any]] = []
    async with open_runtime(
        manager=_manager(path, blocking=server), wait=30, approval=allow_all, audit=audit.append
    ) as rt:
        with anyio.CancelScope() as scope:
            async with anyio.create_task_group() as tg:
                tg.start_soon(rt.gateway.call, "blocking", "block", {})
                await started.wait()  # the server is running the tool: the call is in flight
                scope.cancel()
        assert scope.cancelled_caught
        assert len(audit) == 1, audit
        event = audit[0]
        assert (event["server"], event["tool"], event["decision"]) == ("blocking", "block", "allowed")
        assert (event["outcome"], event["error_code"]) == ("cancelled", "cancelled")
        assert event["duration_ms"] >= 0
        # The session survives the cancelled call: the next one runs and is audited as ok.
        release.set()
        result = await rt.gateway.call("blocking", "ping", {})
        assert result.text == "pong"
        assert [e["outcome"] for e in audit] == ["cancelled", "ok"]


@pytest.mark.parametrize("first_closed", ["older", "newer"])
async def test_harnesses_leave_the_gateways_approval_alone_whatever_order_they_close_in(
    write_config: Callable[[dict[str, Any]], Path], tmp_path: Path, first_closed: str
) -> None:
    # Harnesses once lent the gateway their permission gate and gave it back on close, and
    # closing them out of order left a closed harness's gate in place. Approval is now an
    # argument of each call: a harness's calls are asked by its own permission stage, and a
    # direct gateway call by the session's approval, whatever harnesses are open.
    path = write_config({"basic": IN_MEMORY})
    async with open_runtime(
        manager=_manager(path, basic=make_basic_server()), wait=30, approval=allow_all
    ) as rt:
        older = rt.harness(mode="read-only", workspace=tmp_path)
        newer = rt.harness(mode="read-only", workspace=tmp_path)
        assert rt.gateway.approval is allow_all
        result = await rt.gateway.call("basic", "fail", {"message": "sent"})  # not read-only
        assert result.is_error and result.text == "sent"
        closing, remaining = (older, newer) if first_closed == "older" else (newer, older)
        closing.close()
        remaining.begin_step()
        refused = await remaining.call("call_mcp_tool", {"server": "basic", "tool": "fail", "arguments": {}})
        assert refused.denied == "visibility", "the open harness still judges its own calls"
        remaining.close()
        assert rt.gateway.approval is allow_all
        remaining.close()  # a second close changes nothing
        result = await rt.gateway.call("basic", "fail", {"message": "after"})
        assert result.is_error and result.text == "after"


async def test_the_harness_cuts_results_where_the_session_says(
    write_config: Callable[[dict[str, Any]], Path], tmp_path: Path
) -> None:
    # open_runtime(max_result_chars=...) bounded the gateway only: the harness (what an agent
    # calls through) kept its own 20,000, and its default was not README's 40,000.
    path = write_config({"basic": IN_MEMORY})
    async with open_runtime(
        manager=_manager(path, basic=make_basic_server()), wait=30, max_result_chars=50
    ) as rt:
        h = rt.harness(mode="auto", workspace=tmp_path)
        h.begin_step()
        await h.call("search_tools", {"query": "return the text unchanged"})
        h.begin_step()
        long = await h.call("mcp__basic__echo", {"text": "x" * 500})
        assert long.truncated_chars == 450 and long.text.startswith("x" * 50 + "\n[truncated"), long.text
        h.close()
    async with open_runtime(manager=_manager(path, basic=make_basic_server()), wait=30) as rt:
        h = rt.harness(mode="auto", workspace=tmp_path)
        assert h.max_result_chars == rt.gateway.max_result_chars == 40_000
        h.close()
        own = rt.harness(mode="auto", workspace=tmp_path, max_result_chars=10)
        assert own.max_result_chars == 10
        own.close()


async def test_remedies_are_worded_for_the_model_and_raise_for_error_raises(
    write_config: Callable[[dict[str, Any]], Path],
) -> None:
    path = write_config({"basic": IN_MEMORY})
    async with open_runtime(
        manager=_manager(path, basic=make_basic_server()), wait=30, approval=allow_all
    ) as rt:
        unknown = await rt.gateway.call_for_model("basic", "ad", {})
        assert unknown.is_error and unknown.error_code == "tool_not_found"
        assert unknown.text.endswith("Read the mcp:basic skill's SKILL.md for the tool names.")
        invalid = await rt.gateway.call_for_model("basic", "add", {"a": "x"})
        assert invalid.error_code == "invalid_arguments" and "inputSchema exactly" in invalid.text
        failed = await rt.gateway.call("basic", "fail", {"message": "boom 3"})
        assert failed.is_error
        with pytest.raises(RemoteToolError, match="boom 3") as caught:
            failed.raise_for_error()
        assert caught.value.result is failed and caught.value.code == "remote_tool_error"
        ok = await rt.gateway.call("basic", "echo", {"text": "fine"})
        assert ok.raise_for_error() is ok


async def test_a_runtime_opened_without_starting_lists_no_server_until_it_starts_them(
    keen_home: Path, write_config: Callable[[dict[str, Any]], Path]
) -> None:
    path = write_config({"basic": IN_MEMORY})
    manager = _manager(path, basic=make_basic_server())
    async with open_runtime(manager=manager, start=False) as rt:
        assert rt.servers_started is False
        assert rt.manager.servers() == []  # nothing launched: keen chat asks its model meanwhile
        async with anyio.create_task_group() as tg:  # two askers: one start, the other waits for it
            tg.start_soon(rt.start_servers)
            tg.start_soon(rt.start_servers)
        assert rt.servers_started is True
        status = await rt.manager.wait_attempt("basic", 30)
        assert status.state is ServerState.CONNECTED
        result = await rt.gateway.call("basic", "add", {"a": 40, "b": 2}, approval=allow_all)
        assert result.text == "42"
    assert rt.manager.servers()[0].state is not ServerState.CONNECTED  # closed with the runtime


async def test_a_runtime_never_started_closes_without_starting_anything(
    keen_home: Path, write_config: Callable[[dict[str, Any]], Path]
) -> None:
    path = write_config({"basic": IN_MEMORY})
    manager = _manager(path, basic=make_basic_server())
    async with open_runtime(manager=manager, start=False) as rt:
        pass
    assert rt.manager.servers() == []
    with pytest.raises(ValueError, match=r"start=False\) cannot wait for discovery or sync"):
        async with open_runtime(manager=_manager(path, basic=make_basic_server()), start=False, wait=5):
            pass


async def test_a_runtime_not_started_yet_says_to_start_its_servers_before_a_sync(
    keen_home: Path,
) -> None:
    # rt.sync() said "await manager.start()": run in the caller's task, that start entered the
    # Manager's task group there, and leaving open_runtime raised a bare RuntimeError (cancel
    # scope) and left the server process running.
    stdio = {"command": sys.executable, "args": script_args(str(server_script("basic_stdio")))}
    async with open_runtime(config={"mcpServers": {"local": stdio}}, start=False) as rt:
        for what, use in (
            ("sync", rt.sync),
            ("connect", lambda: rt.connect("local")),
            ("wait_for_discovery", lambda: rt.wait_for_discovery(20)),
        ):
            with pytest.raises(
                KeenError,
                match=rf"^Runtime\.{what}\(\) needs the servers started: this session was opened "
                r"with open_runtime\(start=False\); start them first with await rt\.start_servers\(\)\.$",
            ):
                await use()
        assert not (keen_home / "skills").exists()  # the refused sync wrote nothing
        await rt.start_servers()
        assert await rt.wait_for_discovery(20)
        report = await rt.sync()
        assert [(e.server, e.action) for e in report.entries] == [("local", "generated")]
    assert rt.manager.closed
    assert rt.manager.status("local").state is ServerState.DISCONNECTED


async def test_a_runtime_keeps_the_pins_folder_it_opened_with(
    keen_home: Path,
    write_config: Callable[[dict[str, Any]], Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Found once, as the skills' folder: every call looks at a pin file, and reading
    # KEEN_HOME at each look cost more than the look's stat. A pin written there (by
    # `keen mcp trust` in another process, say) is what the runtime's calls see.
    write_config({"basic": IN_MEMORY})
    async with open_runtime(start=False) as rt:
        guard = rt.manager.trust
        assert isinstance(guard, PinGuard)
        monkeypatch.setenv("KEEN_HOME", str(tmp_path / "elsewhere"))
        assert guard.store.path("basic") == keen_home / "mcp" / "pins" / "basic.json"
        assert guard.stamp("basic") is None  # no pin yet: nothing under the runtime's folder
        pin = keen_home / "mcp" / "pins" / "basic.json"
        pin.parent.mkdir(parents=True)
        pin.write_text("{}")
        assert guard.stamp("basic") is not None  # the file under the folder it opened with
