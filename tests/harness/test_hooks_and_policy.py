"""Pre-hooks and post-hooks in the pipeline (order as logged), the permission gate as the
second gate, and the policy inputs beyond mode and connection: touched paths (path-scoped
skills), the per-turn context budget and recent use. Against keen-demo over stdio."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from helpers.forkserver import launch_args
from keen import paths
from keen.capabilities import Catalog
from keen.demo import demo_server_entry
from keen.gateway import Gateway
from keen.harness import Harness, Observation, approvals, read_events, replay
from keen.mcp import Manager
from keen.mcp.types import ServerState
from keen.trust import PinGuard

pytestmark = pytest.mark.anyio

DEMO = "keen-demo"
ADD = "mcp__keen-demo__add_note"
DELETE = "mcp__keen-demo__delete_note"
CONVERT = "mcp__keen-demo__convert_units"
WORDS = "mcp__keen-demo__word_count"
FRONTEND_BODY = "Check the accessibility semantics before you update a snapshot."


@pytest.fixture
async def manager(keen_home: Path, write_config: Callable[..., Path]) -> AsyncIterator[Manager]:
    # keen-demo forked from the worker's warm process (tests/helpers/forkserver.py): the hooks
    # and gates are under test here, not the demo server's interpreter start (about 1.5 s of
    # CPU each; tests/demo/test_server.py starts it from its configs.json entry).
    entry = {**demo_server_entry(keen_home), "args": launch_args("-m", "keen.demo.server")}
    config = write_config({DEMO: entry})
    async with Manager(config, trust=PinGuard()) as m:
        assert await m.wait_ready(60)
        assert m.status(DEMO).state is ServerState.CONNECTED
        yield m


def harness(manager: Manager, workspace: Path, **options: Any) -> Harness:
    def catalog() -> Catalog:
        return Catalog.from_manager(manager, skills_root=paths.skills_dir(), cache=False)

    workspace.mkdir(exist_ok=True)
    return Harness(catalog, Gateway(manager), workspace=workspace, **options)


def log(h: Harness) -> list[dict[str, Any]]:
    return list(read_events(h.log.path))


def offered(tools: list[dict[str, Any]]) -> set[str]:
    return {t["name"] for t in tools}


async def notes(h: Harness) -> str:
    listed = await h.call("call_mcp_tool", {"server": DEMO, "tool": "list_notes", "arguments": {}})
    assert not listed.is_error, listed.text
    return listed.text


async def test_a_pre_hook_denies_a_call_with_an_observation_and_nothing_runs(
    manager: Manager, tmp_path: Path
) -> None:
    seen: list[tuple[str, dict[str, Any]]] = []

    def audit_args(cap_id: str, arguments: dict[str, Any]) -> str | None:
        seen.append((cap_id, arguments))
        return None

    def no_secrets_in_notes(cap_id: str, arguments: dict[str, Any]) -> str | None:
        if cap_id == ADD and "password" in json.dumps(arguments):
            return "notes must not hold passwords; leave the password out"
        return None

    def never_reached(cap_id: str, arguments: dict[str, Any]) -> str | None:
        raise AssertionError("a later pre-hook ran after a denial")

    h = harness(
        manager,
        tmp_path / "ws",
        mode="ask",
        approve=lambda _: True,
        pre_hooks=[audit_args, no_secrets_in_notes],
    )
    h.begin_step()
    await h.call("search_tools", {"query": "add a note", "limit": 1})
    await h.call("search_tools", {"query": "list notes", "limit": 1})
    assert {ADD, "mcp__keen-demo__list_notes"} <= offered(h.begin_step())
    assert CONVERT not in offered(h.begin_step())
    denied = await h.call(ADD, {"title": "wifi", "body": "the password is hunter2"})
    assert denied.is_error and denied.denied == "hook" and denied.code == "hook_denied"
    assert denied.text == "Denied (hook): notes must not hold passwords; leave the password out"
    assert "wifi" not in await notes(h), "a denied call never reaches the server"
    # The permission gate ran first (its verdict in the call's line), then the hooks, in order.
    events = [e for e in log(h) if e.get("call_id") == denied.call_id]
    assert [e["type"] for e in events] == ["call", "hook", "result"]
    assert (events[0]["decision"], events[0]["by"]) == ("allow", "user")
    assert (events[1]["stage"], events[1]["hook"].rsplit(".", 1)[-1]) == ("pre", "no_secrets_in_notes")
    assert events[1]["denied"] == "notes must not hold passwords; leave the password out"
    assert events[2]["stages"] == ["validate", "visibility", "mcp_checks", "pin_check", "permission", "audit"]
    assert events[2]["gate"] == "hook" and events[2]["outcome"] == "denied"
    # A call the hooks let through runs; hooks never see calls an earlier gate refused.
    ok = await h.call(ADD, {"title": "milk", "body": "buy milk"})
    assert not ok.is_error and "milk" in await notes(h)
    before = len(seen)
    await h.call(CONVERT, {"value": 1, "from_unit": "km", "to_unit": "m"})  # not visible
    await h.call(ADD, {"title": 5})  # schema-invalid: refused before the hooks
    assert len(seen) == before
    h.pre_hooks.append(never_reached)
    h.pre_hooks.insert(0, lambda cap_id, args: "frozen: no calls now")
    first = await h.call(ADD, {"title": "x", "body": "y"})
    assert first.text == "Denied (hook): frozen: no calls now"
    h.close()


async def test_a_post_hook_rewrites_the_observation_after_truncation(
    manager: Manager, tmp_path: Path
) -> None:
    seen: list[tuple[str, int]] = []

    def measure(obs: Observation) -> Observation:
        seen.append((obs.name, len(obs.text)))
        return obs

    def mask_numbers(obs: Observation) -> Observation:
        if obs.capability != WORDS:
            return obs
        return replace(obs, text="".join("#" if c.isdigit() else c for c in obs.text))

    h = harness(
        manager, tmp_path / "ws", mode="read-only", max_result_chars=300, post_hooks=[measure, mask_numbers]
    )
    h.begin_step()
    await h.call("search_tools", {"query": "count the words in a text", "limit": 1})
    assert WORDS in offered(h.begin_step())
    hidden = await h.call(CONVERT, {"value": 1, "from_unit": "km", "to_unit": "m"})
    assert hidden.denied == "visibility"
    assert [name for name, _ in seen] == ["search_tools"], "no hook runs for a refused call"
    counted = await h.call(WORDS, {"text": "one two three " * 200})
    assert not counted.is_error and "600" not in counted.text and "###" in counted.text, counted.text
    assert counted.raw is None, "the text was rewritten: front ends must not pass the raw result on"
    result = [e for e in log(h) if e["type"] == "result"][-1]
    assert result["text"] == counted.text, "the log keeps the text as the model saw it"
    assert result["stages"] == [
        "validate",
        "visibility",
        "mcp_checks",
        "pin_check",
        "permission",
        "pre_hooks",
        "execute",
        "truncate",
        "post_hooks",
        "audit",
    ]
    hooks = [e for e in log(h) if e["type"] == "hook"]
    assert [(e["stage"], e["hook"].rsplit(".", 1)[-1], e["call_id"]) for e in hooks] == [
        ("post", "mask_numbers", counted.call_id)
    ]
    # Truncation comes first: the post-hooks see the text already cut.
    (tmp_path / "ws" / "big.txt").write_text("x" * 5000)
    cut = await h.call("read_file", {"path": "big.txt"})
    assert cut.truncated_chars > 0 and seen[-1] == ("read_file", len(cut.text)) and len(cut.text) < 600
    # An unchanged MCP result keeps its raw form.
    h.post_hooks = [measure]
    plain = await h.call(WORDS, {"text": "alpha beta"})
    assert plain.raw is not None and plain.raw.structured_content is not None
    h.close()


async def test_the_permission_gate_refuses_what_the_mode_forbids_even_when_visible(
    manager: Manager, tmp_path: Path
) -> None:
    """Search is not authorization, and visibility is not permission: a tool visible this turn
    is still refused at call time by the mode in force (the user switched modes mid-turn)."""
    h = harness(manager, tmp_path / "ws", mode="ask", approve=lambda _: True)
    h.begin_step()
    found = await h.call("search_tools", {"query": "delete a note by id"})
    assert DELETE in found.text and "callable next step" in found.text
    assert DELETE in offered(h.begin_step())
    h.set_mode("auto")
    refused = await h.call(DELETE, {"note_id": 1})
    assert refused.denied == "permission" and refused.code == "approval_denied"
    assert "auto mode forbids destructive tools" in refused.text
    approval = approvals(log(h))[-1]
    assert (approval["decision"], approval["by"]) == ("deny", "policy")
    assert DELETE not in offered(h.begin_step())
    gone = [e for e in log(h) if e["type"] == "capability.diff"][-1]["removed"]
    assert {"name": DELETE, "reason": "auto mode hides destructive tools"}.items() <= gone[0].items()
    h.set_mode("read-only")
    hidden = await h.call("search_tools", {"query": "delete a note by id"})
    assert "delete_note" not in hidden.text, "read-only search returns none of the write tools' details"
    h.close()
    assert replay(h.log.path).ok


async def test_touched_paths_bring_in_a_path_scoped_skill(
    manager: Manager, keen_home: Path, tmp_path: Path
) -> None:
    skill = keen_home / "skills" / "frontend-component"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text(
        "---\nname: frontend-component\ndescription: Change UI components safely.\n"
        "paths:\n  - packages/ui/**\n---\n\n" + FRONTEND_BODY + "\n"
    )
    workspace = tmp_path / "ws"
    (workspace / "packages" / "ui").mkdir(parents=True)
    (workspace / "packages" / "api").mkdir(parents=True)
    (workspace / "packages" / "ui" / "Button.tsx").write_text("export const label = 'Save'\n")
    for i in range(25):
        (workspace / "packages" / "api" / f"m{i}.py").write_text(f"x = {i}\n")
    h = harness(manager, workspace, mode="read-only")
    h.begin_step()
    assert "frontend-component" not in h.skill_index()
    missing = await h.call("load_skill", {"name": "frontend-component"})
    assert missing.is_error and FRONTEND_BODY not in missing.text
    await h.call("list_dir", {"path": "packages"})  # a parent folder does not make it relevant
    h.begin_step()
    assert "frontend-component" not in h.skill_index()
    await h.call("read_file", {"path": "packages/ui/Button.tsx"})
    h.begin_step()
    assert "- frontend-component: Change UI components safely." in h.skill_index()
    added = [e for e in log(h) if e["type"] == "capability.diff"][-1]
    assert added["added"][0]["reason"] == "touched path packages/ui/Button.tsx matches packages/ui/**"
    assert "packages/ui/Button.tsx" in added["policy_inputs"]["touched_paths"]
    loaded = await h.call("load_skill", {"name": "frontend-component"})
    assert FRONTEND_BODY in loaded.text
    # Twenty other paths later the skill leaves the index again, with the reason.
    for i in range(20):
        await h.call("read_file", {"path": f"packages/api/m{i}.py"})
    h.begin_step()
    assert "frontend-component" not in h.skill_index()
    removed = [e for e in log(h) if e["type"] == "capability.diff"][-1]["removed"]
    assert removed == [
        {
            "id": "skill__frontend-component",
            "name": "skill__frontend-component",
            "kind": "skill",
            "reason": "no touched path matches its paths (packages/ui/**)",
        }
    ]
    h.close()
    assert replay(h.log.path).ok


async def test_the_context_budget_comes_from_each_turn_and_used_tools_win(
    manager: Manager, tmp_path: Path
) -> None:
    h = harness(manager, tmp_path / "ws", mode="read-only")
    h.begin_step()
    await h.call("search_tools", {"query": "convert units of measurement", "limit": 1})
    await h.call("search_tools", {"query": "count the words in a text", "limit": 1})
    both = offered(h.begin_step(context_budget=100_000))
    assert {CONVERT, WORDS} <= both
    sizes = {c.id: c.tokens_full for c in h.catalog or [] if c.id in (CONVERT, WORDS)}
    # No room at all: both leave, each with the budget as its reason, recorded as an input.
    assert {CONVERT, WORDS}.isdisjoint(offered(h.begin_step(context_budget=0)))
    diff = [e for e in log(h) if e["type"] == "capability.diff"][-1]
    assert diff["policy_inputs"]["context_budget_remaining"] == 0
    assert {e["name"] for e in diff["removed"]} == {CONVERT, WORDS}
    assert all("over the remaining budget" in e["reason"] for e in diff["removed"])
    # Room for one: the newest request (word_count) wins...
    one = max(sizes.values())
    assert WORDS in offered(h.begin_step(context_budget=one)) and CONVERT not in h._by_name  # pyright: ignore[reportPrivateUsage]
    # ...until the model uses convert_units: the tool in use outlives the unused hit.
    h.begin_step(context_budget=100_000)
    converted = await h.call(CONVERT, {"value": 2, "from_unit": "km", "to_unit": "m"})
    assert not converted.is_error and "2000" in converted.text, converted.text
    kept = offered(h.begin_step(context_budget=one))
    assert CONVERT in kept and WORDS not in kept
    # No budget given: the last one holds.
    assert offered(h.begin_step()) == kept
    with pytest.raises(ValueError, match="context_budget must be >= 0"):
        h.begin_step(context_budget=-1)
    h.close()
    assert replay(h.log.path).ok
