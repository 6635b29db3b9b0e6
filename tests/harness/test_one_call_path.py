"""One pipeline for every front end's calls: each call runs ``Manager.check_call`` (the
server, the tool and its JSON Schema validation) once, whichever front end sent it.

The Manager is real, its server a FastMCP server in this process (the SDK's in-memory
transport); a counting wrapper around the Manager's own ``check_call`` records each run.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from helpers.http_servers import make_basic_server
from keen.capabilities import Capability, Catalog
from keen.gateway import allow_all
from keen.mcp import Manager, in_memory_transport
from keen.runtime import Runtime, open_runtime
from keen.serve.calls import CallRouter

pytestmark = pytest.mark.anyio

IN_MEMORY = {"transport": "stdio", "command": "unused-in-memory"}


@pytest.fixture
async def counted(
    write_config: Callable[[dict[str, Any]], Path], monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[tuple[Runtime, list[tuple[str, str]]]]:
    path = write_config({"basic": IN_MEMORY})
    manager = Manager(path, transports={"basic": in_memory_transport(make_basic_server()._mcp_server)})
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
    h.begin_turn()
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
        rt.manager, lambda: Catalog.from_manager(rt.manager, cache=False), visible, tmp_path / "audit.jsonl"
    )
    obs = await router.call("basic", "add", {"a": 2, "b": 3}, caller="stdio:test")
    assert not obs.is_error and obs.text == "5", obs.text
    assert checks == [("basic", "add")]
    router.close()


async def test_a_library_call_checks_once(counted: tuple[Runtime, list[tuple[str, str]]]) -> None:
    rt, checks = counted
    result = await rt.gateway.call("basic", "add", {"a": 1, "b": 1})
    assert result.text == "2" and checks == [("basic", "add")]
    shaped = await rt.gateway.handle_tool_call(
        {"server": "basic", "tool": "echo", "arguments": {"text": "x"}}
    )
    assert shaped.text == "x" and checks == [("basic", "add"), ("basic", "echo")]
