"""Bounded everything.

20,000 unusable tool names make a small SKILL.md and marker and one warning; a result's
structured content never carries more than the model limit; a 1 MB JSON-RPC error message
is cut; one tool the MCP schema rejects is skipped and named while the rest stay usable.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

from helpers.hostile import hostile_entry
from keen.errors import RemoteProtocolError
from keen.gateway import DEFAULT_MAX_RESULT_CHARS, Gateway, allow_all
from keen.mcp import Manager
from keen.mcp.types import ServerState, ServerStatus, Tool
from keen.mcpskills import generate_skill
from keen.mcpskills.startup import sync_from_manager
from keen.trust import PinGuard

pytestmark = pytest.mark.anyio


def test_twenty_thousand_rejected_names_stay_small(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    status = ServerStatus(name="flood", transport="stdio", auth="none", state=ServerState.CONNECTED)
    tools = [Tool("flood", f"../bad-{i:05d}-" + "x" * 60, "d", {}) for i in range(20_000)]
    tools += [Tool("flood", "good", "A good tool.", {"type": "object"})]
    caplog.set_level(logging.WARNING)
    report = generate_skill(tmp_path / "skills", status, tools, fsync=False)
    skill_md = (report.skill_path / "SKILL.md").read_bytes()
    marker = json.loads((report.skill_path / ".keen-generated-mcp.json").read_bytes())
    assert len(skill_md) < 30_000, len(skill_md)
    assert len(json.dumps(marker)) < 20_000
    assert marker["rejected_count"] == 20_000 and len(marker["rejected_tools"]) == 50
    assert b"and 19950 more (20000 skipped in all)" in skill_md
    warnings = [r for r in caplog.records if r.name == "keen.mcpskills.generate"]
    assert len(warnings) == 1 and "20000 tool(s)" in warnings[0].getMessage()
    assert len(report.rejected) == 20_000  # the library caller still gets all of them


def _tool(name: Any, schema: Any = None, **extra: Any) -> dict[str, Any]:
    return {"name": name, "inputSchema": {"type": "object"} if schema is None else schema, **extra}


@pytest.fixture
async def manager(write_config: Callable[..., Path], tmp_path: Path):  # type: ignore[no-untyped-def]
    huge = {"rows": ["r" * 1000] * 1000}  # ~1 MB of JSON
    spec = {
        "tools": [
            _tool("good"),
            _tool("no_type", {"properties": {}}),  # inputSchema without "type": rejected by the SDK
            _tool(5),  # a name that is not a string
            _tool("structured"),
            _tool("structured_only"),
            _tool("long_error"),
        ],
        "results": {
            "structured": {"content": [{"type": "text", "text": "summary"}], "structuredContent": huge},
            "structured_only": {"content": [], "structuredContent": huge},
        },
        "errors": {"long_error": {"code": -32050, "message": "e" * 1_000_000}},
    }
    path = write_config({"h": hostile_entry(tmp_path / "spec.json", spec)})
    async with Manager(path, trust=PinGuard()) as m:
        assert await m.wait_ready(20)
        yield m


async def test_one_invalid_tool_is_skipped_and_named(manager: Manager, keen_home: Path) -> None:
    assert manager.status("h").state is ServerState.CONNECTED, manager.status("h").last_error
    names = {t.name for t in manager.list_tools("h")}
    assert names == {"good", "structured", "structured_only", "long_error"}
    invalid = {t.name: t.reason for t in manager.invalid_tools("h")}
    assert set(invalid) == {"no_type", "5"}
    assert "type" in invalid["no_type"]
    assert (await Gateway(manager, approval=allow_all).call("h", "good", {})).text == "ok"
    report = await sync_from_manager(manager)
    skill_md = (Path(report.get("h").skill_path or "") / "SKILL.md").read_text()  # type: ignore[union-attr]
    assert "- no_type (its definition is invalid: " in skill_md


async def test_structured_content_obeys_the_model_limit(manager: Manager) -> None:
    gateway = Gateway(manager, approval=allow_all)
    with anyio.fail_after(30):
        with_text = await gateway.call_for_model("h", "structured", {})
        only = await gateway.call_for_model("h", "structured_only", {})
    for result in (with_text, only):
        shaped = json.dumps(result.to_dict(), ensure_ascii=False)
        assert len(shaped) < DEFAULT_MAX_RESULT_CHARS + 1_000, len(shaped)
        assert "structured_content" not in result.to_dict()
    assert with_text.text.startswith("summary\n[structuredContent left out: ")
    assert only.truncated_chars > 0
    assert with_text.result is not None and with_text.result.structured_content is not None


async def test_a_huge_error_message_is_cut(manager: Manager) -> None:
    with pytest.raises(
        RemoteProtocolError, match='MCP server "h" answered "long_error" with JSON-RPC error -32050: e'
    ) as info:
        await Gateway(manager, approval=allow_all).call("h", "long_error", {})
    assert len(info.value.message) < 3_000


async def test_a_flood_of_bad_and_duplicate_tools_is_two_warnings(
    write_config: Callable[..., Path], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    tools = [_tool("same") for _ in range(5_000)] + [_tool(f"bad{i}", {}) for i in range(5_000)]
    path = write_config({"h": hostile_entry(tmp_path / "spec.json", {"tools": [_tool("ok"), *tools]})})
    caplog.set_level(logging.WARNING)
    async with Manager(path, trust=PinGuard()) as manager:
        assert await manager.wait_ready(60)
        assert {t.name for t in manager.list_tools("h")} == {"ok", "same"}
        assert len(manager.invalid_tools("h")) == 5_000
    warnings = [r.getMessage() for r in caplog.records if r.name.startswith("keen")]
    assert len(warnings) == 2, warnings[:5]
    assert "4999 duplicate tool name(s)" in warnings[1] and "skipped 5000 invalid tool(s)" in warnings[0]
