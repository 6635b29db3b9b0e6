"""Keen as a client of a server with the tool_descriptions extension (here: keen serve
itself): full schemas for skills and checks, authorized before the first call, and a
refetch when the server's authorization lapses."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterable
from pathlib import Path

import pytest

from helpers.serve import StoreClock, http_in_process, write_upstream
from keen.errors import InvalidArguments
from keen.gateway import Gateway, allow_all
from keen.mcp.config import MCPConfig
from keen.mcp.manager import Manager
from keen.serve.store import MemoryStore
from keen.trust import PinGuard

pytestmark = pytest.mark.anyio


class GrantsKept(MemoryStore):
    """The front's store, keeping the clock's time of each authorization it grants (one per
    description read)."""

    def __init__(self, clock: StoreClock) -> None:
        super().__init__(clock=clock)
        self.clock = clock
        self.granted_at: list[float] = []

    async def authorize(self, scope: str, tools: Iterable[str], ttl: float) -> None:
        self.granted_at.append(self.clock())
        await super().authorize(scope, tools, ttl)


async def test_manager_reads_full_descriptions_and_calls(
    tmp_path: Path, keen_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    inner = tmp_path / "inner"
    inner.mkdir()
    write_upstream(inner)
    # Over HTTP in the 2026-07-28 era: no session, so --auth-ttl bounds the authorization
    # (a stdio connection's lasts as long as the connection). The front is keen serve's HTTP
    # front in this process (helpers.serve.http_in_process), its store on the test's clock;
    # its KEEN_HOME is the inner one only while it starts (its pins, audit log and skills).
    clock = StoreClock()
    store = GrantsKept(clock)
    async with contextlib.AsyncExitStack() as stack:
        monkeypatch.setenv("KEEN_HOME", str(inner))
        front = await stack.enter_async_context(
            http_in_process(inner, store=store, mode="extension", auth_ttl=1)
        )
        monkeypatch.setenv("KEEN_HOME", str(keen_home))
        config = MCPConfig.model_validate(
            {"version": 1, "servers": {"front": {"transport": "streamable_http", "url": front.url}}}
        )
        manager = await stack.enter_async_context(Manager(config=config, trust=PinGuard()))
        assert await manager.wait_ready(60)
        tools = {t.name: t for t in manager.list_tools("front")}
        add = tools["mcp__basic__add"]
        # Full schema and description, not the minimal {"type": "object", "additionalProperties": true}.
        assert add.input_schema["required"] == ["a", "b"]
        assert add.description == "Add two integers."
        gateway = Gateway(manager, approval=allow_all)
        first = await gateway.call("front", "mcp__basic__add", {"a": 2, "b": 2})
        assert not first.is_error and first.text == "4"
        # The front's authorization (1 s) lapses; the Manager refetches and retries once.
        clock.now += 1.3
        again = await gateway.call("front", "mcp__basic__add", {"a": 3, "b": 3})
        assert not again.is_error and again.text == "6"
        # The lapse was seen: descriptions read again at the moved clock. (How many reads came
        # before is not asserted: a list the front changed while its upstream connected is
        # read again too.)
        assert store.granted_at[0] < store.granted_at[-1] == clock.now, store.granted_at
        # Keen's own checks now use the full schema.
        with pytest.raises(
            InvalidArguments,
            match=re.escape(
                "invalid arguments for \"front/mcp__basic__add\": $.a: 'x' is not of type 'integer'"
            ),
        ):
            await gateway.call("front", "mcp__basic__add", {"a": "x", "b": 1})


async def test_servers_without_the_extension_are_unchanged(keen_home: Path, tmp_path: Path) -> None:
    write_upstream(tmp_path)
    from keen.mcp.config import load_config

    config = load_config(tmp_path / "mcp" / "configs.json")
    async with Manager(config=config, trust=PinGuard()) as manager:
        assert await manager.wait_ready(30)
        assert manager._connection("basic").descriptions_uri is None
        assert manager.list_tools("basic")
