"""The budgeted MCP prompt section never exceeds its budget (1, 70 and 292 real servers)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from keen.capabilities import budgeted_section
from keen.capabilities.budget import MIN_DESCRIPTION_CHARS, tool_count
from keen.entry_tools import SEARCH_TOOL
from keen.gateway import tool_definition
from keen.mcp.types import ServerInfo, ServerState, ServerStatus, Tool
from keen.mcpskills import generate_skill
from keen.prompt import budgeted_prompt, mcp_tool_definitions
from keen.skills import Skill, discover, render_skills_section, section_header, shorten
from keen.tokens import TokenCounter, token_counter

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
            assert f"`{SEARCH_TOOL}`" in section.text
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
    with pytest.raises(ValueError, match="the token budget must be >= 0"):
        budgeted_section(skills, -1)


def _call_tool(skills_root: Path) -> dict[str, Any]:
    return tool_definition("openai", skills_dir=str(skills_root))


def _whole_text_fold(
    skills: Sequence[Skill], budget: int, root: Path, counter: TokenCounter, overhead: Sequence[str]
) -> tuple[str, list[str], int | None]:
    """The fold as it was made before the per-line sums: the whole section counted at every
    step (text, folded names, cap). A reference to compare with, for budgets that fold."""
    fixed = sum(counter.count(text) for text in overhead)
    enabled = sorted(skills, key=lambda s: s.name)
    header = section_header(enabled) + f"Each skill's instructions are in {root}/<name>/SKILL.md.\n"

    def render(kept: Sequence[Skill], cap: int | None, fold: str = "") -> str:
        lines = [f"- {s.name}: {s.description if cap is None else shorten(s.description, cap)}" for s in kept]
        return header + "\n".join([*lines, fold] if fold else lines) + "\n"

    def fits(text: str) -> bool:
        return counter.count(text) + fixed <= budget

    def best_cap(kept: Sequence[Skill], fold: str) -> int | bool | None:
        if fits(render(kept, None, fold)):
            return None
        if not fits(render(kept, MIN_DESCRIPTION_CHARS, fold)):
            return False
        low, high = MIN_DESCRIPTION_CHARS, max(max(len(s.description) for s in kept), MIN_DESCRIPTION_CHARS)
        while high - low > 1:
            mid = (low + high) // 2
            low, high = (mid, high) if fits(render(kept, mid, fold)) else (low, mid)
        return low

    order = sorted(enabled, key=lambda s: (not s.managed, float(tool_count(s)), s.name))

    def attempt(n: int) -> tuple[str, list[str], int | None] | None:
        folded = order[:n]
        # By name (a skill's folder, unique): `not in` compared whole records, about 10**6
        # field-by-field comparisons a test, most of the file's CPU.
        folded_names = {s.name for s in folded}
        kept = [s for s in enabled if s.name not in folded_names]
        names = [s.name.removeprefix("mcp:") for s in sorted(folded, key=lambda s: s.name)]
        count = len(names)

        def line(shown: int) -> str:
            body = f": {', '.join(names[:shown])}" + (f" and {count - shown} more" if shown < count else "")
            return (
                f"- {count} more MCP server{'s' if count != 1 else ''} not listed for space"
                f"{body if shown else ''}. Find their tools with `{SEARCH_TOOL}`."
            )

        if not fits(render(kept, MIN_DESCRIPTION_CHARS, line(0))):
            return None
        low, high = 0, count
        while low < high:
            mid = (low + high + 1) // 2
            low, high = (
                (mid, high) if fits(render(kept, MIN_DESCRIPTION_CHARS, line(mid))) else (low, mid - 1)
            )
        cap = best_cap(kept, line(low))
        assert cap is not False
        assert not isinstance(cap, bool)
        return render(kept, cap, line(low)), sorted(s.name for s in folded), cap

    low, high = 1, len(order)
    while low < high:
        mid = (low + high) // 2
        low, high = (low, mid) if attempt(mid) is not None else (mid + 1, high)
    found = attempt(low)
    assert found is not None
    return found


@pytest.mark.parametrize(("servers", "budgets"), [(70, (700, 1000, 1400)), (292, (1000, 2500, 4000))])
def test_per_line_sums_fold_the_same_servers_as_counting_the_whole_section(
    skills_292: Path, servers: int, budgets: tuple[int, ...]
) -> None:
    counter = token_counter()
    skills = sorted(discover(skills_292).enabled, key=lambda s: s.name)[:servers]
    overhead = mcp_tool_definitions(_call_tool(skills_292))
    for budget in budgets:
        section = budgeted_section(skills, budget, skills_root=skills_292, counter=counter, overhead=overhead)
        assert section.step == "folded", (servers, budget)
        text, folded, cap = _whole_text_fold(skills, budget, skills_292, counter, overhead)
        assert (section.text, sorted(section.folded), section.description_cap) == (text, folded, cap)


# Importing any of these means the prompt path loaded the MCP SDK, pydantic models or the
# search stack (a search index is never built for a prompt).
HEAVY = ("mcp", "pydantic", "numpy", "bm25s", "wordllama")
PROMPT_PATHS = {
    "keen prompt --budget": """
from keen.cli import main
sys.argv = ["keen", "prompt", "--budget", "4000"]
try:
    main()
except SystemExit as exc:
    assert not exc.code, exc.code
""",
    "library budgeted_prompt": """
from pathlib import Path
from keen.gateway import tool_definition
from keen.prompt import budgeted_prompt
root = Path(os.environ["KEEN_HOME"]) / "skills"
section = budgeted_prompt(4000, root, call_tool=tool_definition("openai", skills_dir=str(root)))
assert section.step == "folded", section.step
""",
}


# What `keen prompt` leaves unloaded besides: OpenSSL's hashlib (keen._digest) and the log
# redactor (keen.cli._console's filter imports it at the first record). The library row's
# host imports the gateway, which loads both for its calls.
CLI_UNLOADED = ("hashlib", "keen._redact")


@pytest.mark.parametrize("path", sorted(PROMPT_PATHS))
def test_the_prompt_path_imports_no_mcp_sdk_pydantic_or_search(skills_292: Path, path: str) -> None:
    unloaded = HEAVY + (CLI_UNLOADED if path.startswith("keen prompt") else ())
    code = (
        "import os, sys\n"
        + PROMPT_PATHS[path]
        + f"\nprint('LOADED', sorted(set({unloaded!r}) & set(sys.modules)))\n"
    )
    env = {**os.environ, "KEEN_HOME": str(skills_292.parent)}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "LOADED []", done.stdout[-500:]


@pytest.mark.parametrize("path", sorted(PROMPT_PATHS))
def test_a_second_start_parses_no_skill_file(skills_292: Path, path: str) -> None:
    """The skills a start read are kept (keen.skills.cache's store): the next start of the
    same prompt path takes them from there and never imports a YAML parser; nor the
    vocabulary's parsers (gzip, base64: the token ranks come from their cache)."""
    loaded = "sorted({'yaml', 'gzip', 'base64'} & set(sys.modules)) or False"
    code = "import os, sys\n" + PROMPT_PATHS[path] + f"\nprint('LOADED', {loaded})\n"
    env = {**os.environ, "KEEN_HOME": str(skills_292.parent)}
    runs = [
        subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
        for _ in range(2)
    ]
    assert all(run.returncode == 0 for run in runs), [run.stderr for run in runs]
    assert runs[1].stdout.splitlines()[-1] == "LOADED False", runs[1].stdout[-500:]
    assert runs[0].stdout.splitlines()[:-1] == runs[1].stdout.splitlines()[:-1]


def test_tool_count_reads_the_whole_marker_and_counts_an_unreadable_one_as_zero(tmp_path: Path) -> None:
    def skill(name: str) -> Skill:
        path = tmp_path / name
        path.mkdir()
        return Skill(name, "d", path, path / "SKILL.md", managed=True)

    big = skill("big")  # past one 64 KiB read: the count sits after the padding
    (big.path / ".keen-generated-mcp.json").write_text(json.dumps({"pad": "x" * 200_000, "tool_count": 7}))
    assert tool_count(big) == 7
    assert tool_count(skill("missing")) == 0
    (skill("broken").path / ".keen-generated-mcp.json").write_text("{not json")
    (skill("latin").path / ".keen-generated-mcp.json").write_bytes(b'{"tool_count": 3, "x": "\xe9"}')
    (skill("folder").path / ".keen-generated-mcp.json").mkdir()
    (skill("listed").path / ".keen-generated-mcp.json").write_text("[1, 2]")
    unreadable = [
        Skill(n, "d", tmp_path / n, tmp_path / n / "SKILL.md")
        for n in ("broken", "latin", "folder", "listed")
    ]
    assert [tool_count(s) for s in unreadable] == [0, 0, 0, 0]


def test_a_section_comes_from_the_store_while_its_inputs_are_the_same(
    tmp_path: Path, keen_home: Path
) -> None:
    """A section computed once is kept (keen.capabilities._section_store): a new process
    with the same skills, budget, overhead and counter takes it from the store; any change
    of an input computes it again, and a store that is not one is ignored."""
    from keen.capabilities import _section_store

    def skill(name: str, description: str, tools: int = 3) -> Skill:
        path = tmp_path / name
        return Skill(name, description, path, path / "SKILL.md", managed=True, tool_count=tools)

    skills = [
        skill(f"mcp:s{i}", f"Server number {i} does things with files and notes. " * 3) for i in range(12)
    ]
    overhead = [json.dumps({"name": "call_mcp_tool", "inputSchema": {}})]
    first = budgeted_section(skills, 400, overhead=overhead)
    assert first.step in ("compact", "folded") and first.text
    computed = budgeted_section(skills, 400, overhead=overhead, counter=token_counter())
    assert first == computed  # through the store or not, the same section
    _section_store.save_sections()
    [file] = _section_store.store_dir().glob("*.json")

    def new_process() -> None:
        _section_store._made.clear()  # what this process computed: a new one starts without it

    # Changed on disk, the stored section is what a new start returns: it was not computed.
    stored = json.loads(file.read_text(encoding="utf-8"))
    stored["section"]["text"] = "- stored\n"
    file.write_text(json.dumps(stored), encoding="utf-8")
    new_process()
    again = budgeted_section(skills, 400, overhead=overhead)
    assert again.text == "- stored\n" and (again.step, again.listed, again.folded) == (
        first.step,
        first.listed,
        first.folded,
    )
    # Any input changed: computed again.
    for changed in (
        {"skills": [*skills[:-1], skill("mcp:s11", "Another description of what server eleven does.")]},
        {"skills": [*skills[:-1], skill("mcp:s11", skills[-1].description, tools=4)]},
        {"budget": 401},
        {"overhead": [*overhead, "{}"]},
    ):
        args: dict[str, Any] = {"skills": skills, "budget": 400, "overhead": overhead, **changed}
        made = budgeted_section(args.pop("skills"), args.pop("budget"), **args)
        assert made.text != "- stored\n" and made.text.startswith(section_header(skills))
    # A store file that is not a section's is ignored.
    for broken in ("{not json", json.dumps({**stored, "section": {**stored["section"], "tokens": "12"}})):
        file.write_text(broken, encoding="utf-8")
        new_process()
        assert budgeted_section(skills, 400, overhead=overhead) == first


def test_budgeted_prompt_keeps_its_section_for_the_next_start(skills_292: Path, keen_home: Path) -> None:
    """``budgeted_prompt`` without a counter of the caller's goes through the section store
    (``keen prompt`` and a host's prompt at every start): the next process with the same
    skills takes the section from there, and it is the one computed with the default counter."""
    from keen.capabilities import _section_store

    computed = budgeted_prompt(4000, skills_292, counter=token_counter())
    first = budgeted_prompt(4000, skills_292)
    assert first == computed
    _section_store.save_sections()
    [file] = _section_store.store_dir().glob("*.json")
    stored = json.loads(file.read_text(encoding="utf-8"))
    assert stored["section"]["text"] == computed.text
    stored["section"]["text"] = "- stored\n"
    file.write_text(json.dumps(stored), encoding="utf-8")
    _section_store._made.clear()  # what this process computed: a new one starts without it
    assert budgeted_prompt(4000, skills_292).text == "- stored\n"
