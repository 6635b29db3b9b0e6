"""The budgeted MCP prompt section never exceeds its budget (1, 70 and 292 real servers)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from keen.capabilities import SEARCH_TOOL_NAME, budgeted_section, search_tool_definition
from keen.gateway import tool_definition
from keen.mcp.types import ServerInfo, ServerState, ServerStatus, Tool
from keen.mcpskills import generate_skill
from keen.prompt import budgeted_prompt, mcp_tool_definitions
from keen.skills import discover, render_skills_section
from keen.tokens import token_counter

DATA = Path(__file__).resolve().parents[3] / "shared" / "data"
LIVEMCPBENCH = DATA / "livemcpbench" / "tools.json"
TOOLGYM = DATA / "toolgym" / "tool_descriptions.ndjson"
NOW = datetime(2026, 1, 2, tzinfo=UTC)


def _servers() -> list[tuple[str, str | None, list[dict]]]:
    """(name, instructions, tools) of the 292 recorded servers, LiveMCPBench first."""
    for path in (LIVEMCPBENCH, TOOLGYM):
        if not path.is_file():
            pytest.fail(f"{path} is missing: the shared data folder must sit beside the repo (../shared)")
    out = []
    for entry in json.loads(LIVEMCPBENCH.read_text(encoding="utf-8")):
        tools = [t for block in entry["tools"].values() for t in block["tools"]]
        out.append((entry["name"], entry.get("description"), tools))
    for line in TOOLGYM.read_text(encoding="utf-8").splitlines():
        if line.strip():
            entry = json.loads(line)
            out.append((entry["qualifiedName"], entry.get("description"), entry.get("tools") or []))
    return out


def _slug(name: str, taken: set[str]) -> str:
    base = "".join(ch if ch.isascii() and (ch.isalnum() or ch in "_-") else "-" for ch in name).strip("-")[
        :60
    ]
    slug, n = base or "server", 1
    while slug.lower() in taken:
        n += 1
        slug = f"{base}-{n}"
    taken.add(slug.lower())
    return slug


@pytest.fixture(scope="module")
def skills_292(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("budget") / "skills"
    taken: set[str] = set()
    for name, instructions, raw in _servers():
        server = _slug(name, taken)
        tools = [
            Tool(
                server,
                t["name"],
                t.get("description") or "",
                t.get("inputSchema") or {},
                annotations=t.get("annotations"),
            )
            for t in raw
        ]
        status = ServerStatus(server, "stdio", "none", ServerState.CONNECTED, last_refresh_at=NOW)
        generate_skill(
            root, status, tools, info=ServerInfo(name, "1", None, instructions), now=NOW, fsync=False
        )
    return root


@pytest.mark.parametrize("servers", [1, 70, 292])
def test_budget_is_never_exceeded(skills_292: Path, servers: int) -> None:
    counter = token_counter()
    skills = discover(skills_292).enabled
    order = sorted(skills, key=lambda s: s.name)[:servers]
    overhead = mcp_tool_definitions(tool_definition("openai", skills_dir=str(skills_292)))
    fixed = sum(counter.count(o) for o in overhead)
    full = counter.count(render_skills_section(order)) + fixed
    for budget in sorted({fixed, fixed + 40, fixed + 200, 1000, 2500, 4000, full - 1, full, full + 10}):
        if budget < 0:
            continue
        section = budgeted_section(order, budget, skills_root=skills_292, counter=counter, overhead=overhead)
        assert section.tokens <= budget or section.step == "empty", (servers, budget, section.step)
        if section.text:
            assert counter.count(section.text) + fixed == section.tokens
            # Every skill is either listed or folded behind the search tool, never lost.
            assert set(section.listed) | set(section.folded) == {s.name for s in order}
        if section.folded and section.text:
            assert f"`{SEARCH_TOOL_NAME}`" in section.text
        if budget >= full:
            assert section.step == "full" and section.text == render_skills_section(order)


def test_292_servers_fit_4000_tokens_with_the_least_useful_folded(skills_292: Path) -> None:
    counter = token_counter()
    section = budgeted_prompt(4000, skills_292, call_tool=_call_tool(skills_292), counter=counter)
    assert section.tokens <= 4000 and section.step == "folded"
    assert 0 < len(section.folded) < 292
    sizes = {s.name: s for s in discover(skills_292).enabled}
    counts = {
        name: json.loads((sizes[name].path / ".keen-generated-mcp.json").read_text())["tool_count"]
        for name in sizes
    }
    # Folded servers have no more tools than any listed one (default usefulness: tool count).
    assert max(counts[n] for n in section.folded) <= min(counts[n] for n in section.listed)
    # Caller-given usefulness wins: keep the folded ones, fold others.
    keep = {name: 1000.0 for name in section.folded[:5]}
    again = budgeted_prompt(
        4000, skills_292, call_tool=_call_tool(skills_292), counter=counter, usefulness=keep
    )
    assert again.tokens <= 4000 and not set(keep) & set(again.folded)


def test_budget_below_the_tool_definitions_gives_nothing(skills_292: Path) -> None:
    skills = discover(skills_292).enabled[:3]
    section = budgeted_section(skills, 10, counter=token_counter(), overhead=["x" * 400])
    assert section.text == "" and section.step == "empty"
    with pytest.raises(ValueError):
        budgeted_section(skills, -1)


def test_search_tool_definition_shapes() -> None:
    openai = search_tool_definition("openai")
    assert openai["function"]["name"] == SEARCH_TOOL_NAME
    assert search_tool_definition("anthropic")["input_schema"]["required"] == ["query"]
    assert search_tool_definition("mcp")["annotations"]["readOnlyHint"] is True


def _call_tool(skills_root: Path) -> dict[str, Any]:
    return tool_definition("openai", skills_dir=str(skills_root))
