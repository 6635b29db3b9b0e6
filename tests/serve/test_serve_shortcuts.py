"""What a served call keeps from the last call of the same tool (the pin check that passed, the
capability the visibility lookup found, the permission verdict known without asking) is
used only while what it followed from is the same: a pin written elsewhere, an authorization
that lapsed and a permission change are each seen by the very next call (docs/architecture.md
"The data flow of one call").

The upstream is Keen's demo server over stdio, started by the Manager; the calls go through
``keen serve``'s pipeline (``CallRouter``) as a host's would.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from helpers.forkserver import launch_args
from keen.calls import Approver, allow_all
from keen.gateway import CALL_MCP_TOOL
from keen.harness import Observation, approvals, read_events
from keen.mcp import Manager
from keen.serve.calls import HOST_APPROVES
from keen.serve.server import KeenServer
from keen.serve.store import MemoryStore
from keen.trust import PinGuard
from keen.trust.pins import trust

pytestmark = pytest.mark.anyio

# Forked from the warm process (tests/helpers/forkserver.py): the demo server's calls are
# under test here, not its interpreter's start (about 1 s of CPU each of the three).
DEMO = {"command": sys.executable, "args": launch_args("-m", "keen.demo.server")}
WORDS = {"text": "one two three"}


async def test_a_pin_written_elsewhere_counts_at_the_next_call(
    write_config: Callable[[dict[str, Any]], Path], tmp_path: Path
) -> None:
    manager = Manager(write_config({"demo": {**DEMO, "pinning": "quarantine"}}), trust=PinGuard())
    async with KeenServer(manager, mode="search", audit_path=tmp_path / "audit.jsonl") as served:
        await manager.wait_ready(30)

        async def count() -> Observation:
            return await served.router.call("demo", "word_count", WORDS, caller="stdio:test")

        for _ in range(3):  # the first call pins the tools; the next ones pass the same way
            done = await count()
            assert not done.is_error and '"words":3' in done.text.replace(" ", ""), done.text

        # Pins written as `keen mcp trust` would, from a definition the server no longer
        # sends: the live tool is now a changed one, held under quarantine.
        live = manager.live_tools("demo")
        stale = [
            dataclasses.replace(t, description="An older text.") if t.name == "word_count" else t
            for t in live
        ]
        trust("demo", stale)
        held = await count()
        assert held.code == "tool_quarantined" and "nothing was sent" in held.text, held.text

        # Trusted again as it is: the next call runs.
        trust("demo", live)
        again = await count()
        assert not again.is_error, again.text


async def test_a_lapsed_authorization_refuses_the_next_call(
    write_config: Callable[[dict[str, Any]], Path], tmp_path: Path
) -> None:
    now = [1000.0]
    manager = Manager(write_config({"demo": DEMO}), trust=PinGuard())
    store = MemoryStore(clock=lambda: now[0])
    async with KeenServer(
        manager, mode="extension", store=store, auth_ttl=60, audit_path=tmp_path / "audit.jsonl"
    ) as served:
        await manager.wait_ready(30)
        exposed = served.catalog().find("demo", "word_count")
        assert exposed is not None
        caller = "principal:test"

        async def count() -> Observation:
            return await served.router.call("demo", "word_count", WORDS, caller=caller)

        refused = await count()
        assert refused.denied == "visibility", refused.text
        await store.authorize(caller, [exposed.name], 60)
        for _ in range(2):
            done = await count()
            assert not done.is_error, done.text
        now[0] += 61  # the authorization lapses (the store's clock, not the wall's)
        lapsed = await count()
        assert lapsed.denied == "visibility" and exposed.name in lapsed.text, lapsed.text


async def test_a_permission_change_counts_at_the_next_call(
    write_config: Callable[[dict[str, Any]], Path], tmp_path: Path, keen_home: Path
) -> None:
    audit = tmp_path / "audit.jsonl"
    manager = Manager(write_config({"demo": DEMO}), trust=PinGuard())
    async with KeenServer(manager, mode="search", audit_path=audit) as served:
        await manager.wait_ready(30)
        harness = served.router.harness

        async def add(approver: Approver) -> Observation:
            note = {"server": "demo", "tool": "add_note", "arguments": {"title": "t", "body": "a note"}}
            return await harness.call(CALL_MCP_TOOL, note, caller="stdio:test", approver=approver)

        for _ in range(2):  # ask mode, the host approves: allowed, the second time too
            done = await add(HOST_APPROVES)
            assert not done.is_error, done.text

        # Another approver for the same tool is asked: its no refuses the call.
        asked: list[str] = []

        def no(request: Any) -> bool:
            asked.append(request.tool)
            return False

        refused = await add(Approver(no, "user"))
        assert refused.denied == "permission" and asked == ["add_note"], refused.text
        allowed = await add(Approver(allow_all, "--yes"))
        assert not allowed.is_error, allowed.text

        # The mode changes: the next call of the same tool, with the same approver, follows it.
        harness.set_mode("read-only")
        refused = await add(HOST_APPROVES)
        assert refused.denied == "permission" and "read-only mode" in refused.text, refused.text
        harness.set_mode("auto")
        allowed = await add(HOST_APPROVES)
        assert not allowed.is_error, allowed.text

    decided = [(e["decision"], e["by"]) for e in approvals(read_events(audit))]
    assert decided == [
        ("allow", "MCP host"),
        ("allow", "MCP host"),
        ("deny", "user"),
        ("allow", "--yes"),
        ("deny", "policy"),
        ("allow", "policy"),
    ]
