"""One pipeline for every front end's calls (keen.calls): each call runs ``Manager.check_call``
(the server, the tool and its JSON Schema validation) once, whichever front end sent it; who
is asked about a call is an argument of the call; the stages run in the one order.

The Manager is real, its server a FastMCP server in this process (the SDK's in-memory
transport); a counting wrapper around the Manager's own ``check_call`` records each run.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from helpers.http_servers import make_basic_server
from keen.calls import ApprovalRequest, Approver, Call, Pipeline, Refusal, Stage
from keen.capabilities import Capability, Catalog
from keen.errors import ApprovalDenied
from keen.gateway import allow_all
from keen.harness import approvals, read_events
from keen.mcp import Manager, in_memory_transport
from keen.runtime import Runtime, open_runtime
from keen.serve.calls import CallRouter
from keen.trust import PinGuard

pytestmark = pytest.mark.anyio

IN_MEMORY = {"transport": "stdio", "command": "unused-in-memory"}


@pytest.fixture
async def counted(
    write_config: Callable[[dict[str, Any]], Path], monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[tuple[Runtime, list[tuple[str, str]]]]:
    path = write_config({"basic": IN_MEMORY})
    manager = Manager(
        path, transports={"basic": in_memory_transport(make_basic_server()._mcp_server)}, trust=PinGuard()
    )
    checks: list[tuple[str, str]] = []
    real = manager.check_call

    def check_call(name: str, tool: str, arguments: Any) -> Any:
        checks.append((name, tool))
        return real(name, tool, arguments)

    monkeypatch.setattr(manager, "check_call", check_call)
    async with open_runtime(manager=manager, wait=30, approval=allow_all) as rt:
        yield rt, checks


async def test_an_agents_call_checks_once(
    counted: tuple[Runtime, list[tuple[str, str]]], tmp_path: Path
) -> None:
    rt, checks = counted
    h = rt.harness(mode="auto", workspace=tmp_path)
    h.requested.append("mcp__basic__echo")
    h.begin_step()
    obs = await h.call("call_mcp_tool", {"server": "basic", "tool": "echo", "arguments": {"text": "hi"}})
    assert not obs.is_error and obs.text == "hi", obs.text
    assert checks == [("basic", "echo")]
    named = await h.call("mcp__basic__echo", {"text": "again"})
    assert named.text == "again" and checks == [("basic", "echo")] * 2
    # An invalid call is refused by that one check, and nothing is checked twice.
    invalid = await h.call("mcp__basic__echo", {"text": 7})
    assert invalid.denied == "validate" and checks == [("basic", "echo")] * 3
    h.close()


async def test_a_served_call_checks_once(
    counted: tuple[Runtime, list[tuple[str, str]]], tmp_path: Path
) -> None:
    rt, checks = counted

    async def visible(cap: Capability, caller: str | None) -> str | None:
        return None

    router = CallRouter(
        lambda: Catalog.from_manager(rt.manager, cache=False), visible, tmp_path / "audit.jsonl"
    )
    router.open(rt)  # the runtime's harness, over its gateway: what keen serve opens
    obs = await router.call("basic", "add", {"a": 2, "b": 3}, caller="stdio:test")
    assert not obs.is_error and obs.text == "5", obs.text
    assert checks == [("basic", "add")]
    router.close()


async def test_a_visibility_callback_may_answer_without_an_awaitable(
    counted: tuple[Runtime, list[tuple[str, str]]], tmp_path: Path
) -> None:
    """keen serve's search mode knows at once that every upstream tool is visible: a plain
    callback's answer is used as it is, a hidden tool refused at visibility, nothing sent."""
    rt, checks = counted
    asked: list[tuple[str, str | None]] = []

    def visible(cap: Capability, caller: str | None) -> str | None:
        asked.append((cap.name, caller))
        return None if cap.name == "add" else f"{cap.name} is not for {caller}"

    router = CallRouter(
        lambda: Catalog.from_manager(rt.manager, cache=False), visible, tmp_path / "audit.jsonl"
    )
    router.open(rt)
    obs = await router.call("basic", "add", {"a": 2, "b": 3}, caller="stdio:test")
    assert not obs.is_error and obs.text == "5", obs.text
    hidden = await router.call("basic", "echo", {"text": "hi"}, caller="stdio:test")
    assert hidden.denied == "visibility" and hidden.text == "Denied (visibility): echo is not for stdio:test"
    assert asked == [("add", "stdio:test"), ("echo", "stdio:test")] and checks == [("basic", "add")]
    results = [e for e in read_events(tmp_path / "audit.jsonl") if e["type"] == "result"]
    assert [(e["tool"], e["outcome"], e["gate"]) for e in results] == [
        ("add", "ok", None),
        ("echo", "denied", "visibility"),
    ]
    router.close()


async def test_a_library_call_checks_once(counted: tuple[Runtime, list[tuple[str, str]]]) -> None:
    rt, checks = counted
    result = await rt.gateway.call("basic", "add", {"a": 1, "b": 1})
    assert result.text == "2" and checks == [("basic", "add")]
    shaped = await rt.gateway.handle_tool_call(
        {"server": "basic", "tool": "echo", "arguments": {"text": "x"}}
    )
    assert shaped.text == "x" and checks == [("basic", "add"), ("basic", "echo")]


async def test_a_call_brings_its_own_approval(counted: tuple[Runtime, list[tuple[str, str]]]) -> None:
    # Approval is an argument of the call: the session's (here allow_all) is only the default.
    rt, _ = counted
    asked: list[ApprovalRequest] = []

    def no(request: ApprovalRequest) -> bool:
        asked.append(request)
        return False

    with pytest.raises(ApprovalDenied, match="was not approved"):
        await rt.gateway.call("basic", "fail", {"message": "x"}, approval=no)
    assert [(r.server, r.tool) for r in asked] == [("basic", "fail")]
    result = await rt.gateway.call("basic", "fail", {"message": "sent"})  # the session's allow_all
    assert result.is_error and result.text == "sent" and rt.gateway.approval is allow_all


async def test_a_harness_call_brings_its_own_approver(
    counted: tuple[Runtime, list[tuple[str, str]]], tmp_path: Path
) -> None:
    rt, _ = counted
    h = rt.harness(mode="ask", workspace=tmp_path)  # no approve: calls that need asking are denied
    h.requested.append("mcp__basic__fail")
    h.begin_step()
    call = {"server": "basic", "tool": "fail", "arguments": {"message": "m"}}
    denied = await h.call("call_mcp_tool", call)
    assert denied.denied == "permission" and "no one to ask" in denied.text
    ran = await h.call("call_mcp_tool", call, approver=Approver(allow_all, "the test"))
    assert ran.denied is None and ran.is_error and ran.text == "The tool reported an error: m"
    approved = approvals(read_events(h.log.path))
    assert [(e["decision"], e["by"]) for e in approved] == [("deny", "user"), ("allow", "the test")]
    h.close()


def test_a_call_built_by_position_keeps_each_field_in_its_place() -> None:
    # Call is a public dataclass: tool_call_id, added in the middle, shifted every later
    # field, so a call built by position sent its server name as the model's call id.
    approver = Approver(allow_all, "the test")
    call = Call("call_mcp_tool", {}, approver, "stdio:host", "0.1", "basic", "echo")
    assert (call.approver, call.caller, call.call_id) == (approver, "stdio:host", "0.1")
    assert (call.server, call.tool, call.tool_call_id) == ("basic", "echo", "")


async def test_the_pipeline_keeps_the_one_order() -> None:
    ran: list[str] = []

    def stage(name: str) -> Stage:
        async def run(call: Call) -> bool:
            ran.append(name)
            return True

        return Stage(name, run)

    audited: list[Call] = []
    pipeline = Pipeline([stage("execute"), stage("permission"), stage("validate")], audited.append)
    call = await pipeline.run(Call("t", {}))
    assert ran == ["validate", "permission", "execute"] and call.stages == [*ran, "audit"]
    assert audited == [call]
    with pytest.raises(ValueError, match="stages must be distinct names"):
        Pipeline([stage("validate"), stage("validate")], audited.append)
    with pytest.raises(ValueError, match="stages must be distinct names"):
        Pipeline([stage("send")], audited.append)


async def test_a_stage_may_be_a_plain_function_or_hand_back_what_to_await() -> None:
    """A stage that never waits runs as a plain function (no coroutine per call); one that
    waits only sometimes hands back an awaitable then; both refuse and fail like any stage."""
    ran: list[str] = []

    def validate(call: Call) -> bool:
        ran.append("validate")
        return True

    def mcp_checks(call: Call) -> bool:
        ran.append("mcp_checks")
        return False  # nothing to do for this call: not recorded as passed

    async def waited(call: Call) -> bool:
        ran.append("permission (awaited)")
        return True

    def permission(call: Call) -> Any:
        return waited(call) if call.arguments.get("wait") else True

    def execute(call: Call) -> bool:
        ran.append("execute")
        if call.arguments.get("refuse"):
            raise Refusal("pre_hooks", "no, by a plain stage")
        return True

    stages = [
        Stage("execute", execute),
        Stage("permission", permission),
        Stage("mcp_checks", mcp_checks, gate="validate"),
        Stage("validate", validate),
    ]
    pipeline = Pipeline(stages, lambda call: None)
    call = await pipeline.run(Call("t", {"wait": True}))
    assert ran == ["validate", "mcp_checks", "permission (awaited)", "execute"]
    assert call.stages == ["validate", "permission", "execute", "audit"] and not call.is_error
    ran.clear()
    call = await pipeline.run(Call("t", {}))
    assert ran == ["validate", "mcp_checks", "execute"] and call.stages[-1] == "audit"
    refused = await pipeline.run(Call("t", {"refuse": True}))
    assert refused.denied == "pre_hooks" and refused.text == "Denied (pre_hooks): no, by a plain stage"
    assert refused.stages == ["validate", "permission", "execute", "audit"]


async def test_a_refusal_names_the_servers_trouble_without_checking_the_call(
    counted: tuple[Runtime, list[tuple[str, str]]], tmp_path: Path
) -> None:
    """A call outside the visible set is refused there; why its server cannot serve it is
    read from the server's state (Manager.unavailable), never by checking the call."""
    rt, checks = counted
    assert rt.manager.unavailable("basic") is None
    h = rt.harness(mode="auto", workspace=tmp_path)
    h.begin_step()
    obs = await h.call("call_mcp_tool", {"server": "nope", "tool": "echo", "arguments": {"text": "hi"}})
    assert obs.is_error and obs.denied == "visibility", obs.text
    assert "nope" in obs.text and "not configured" in obs.text, obs.text
    assert checks == []


async def test_a_served_call_looks_at_its_own_pin_file_once(
    write_config: Callable[[dict[str, Any]], Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import os

    from keen import paths
    from keen.mcp.types import Tool
    from keen.serve.server import KeenServer
    from keen.trust import PinStore, trust

    names = ("one", "two", "three")
    path = write_config({name: {**IN_MEMORY, "pinning": "quarantine"} for name in names})
    transports = {n: in_memory_transport(make_basic_server()._mcp_server) for n in names}
    manager = Manager(path, transports=transports, trust=PinGuard())
    looked: list[str] = []
    counting = False
    real_stat = os.stat

    def stat(target: Any, *args: Any, **kwargs: Any) -> os.stat_result:
        if counting and str(target).startswith(str(paths.pins_dir())):
            looked.append(Path(target).name)
        return real_stat(target, *args, **kwargs)

    async with KeenServer(manager, mode="search", audit_path=tmp_path / "audit.jsonl") as served:
        await manager.wait_ready(30)
        for _ in range(2):  # the first pins the server's tools (trust on first use)
            obs = await served.router.call("one", "echo", {"text": "hi"}, caller="stdio:test")
            assert obs.text == "hi", obs.text
        monkeypatch.setattr(os, "stat", stat)
        counting = True
        obs = await served.router.call("one", "echo", {"text": "again"}, caller="stdio:test")
        counting = False
        assert obs.text == "again" and looked == ["one.json"]
        # A pin written elsewhere (keen mcp trust in another process) counts at the next call.
        elsewhere = PinStore(tmp_path / "elsewhere")
        trust("one", [Tool(server="one", name="echo", description="Another echo.")], store=elsewhere)
        elsewhere.path("one").replace(PinStore().path("one"))
        refused = await served.router.call("one", "echo", {"text": "x"}, caller="stdio:test")
        assert refused.code == "tool_quarantined" and "keen mcp diff one" in refused.text, refused.text
