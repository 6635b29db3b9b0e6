"""The MCP part of a system prompt within a token budget, and the ToolSearch tool definition.

:func:`budgeted_section` returns the skills section (one catalog line per enabled skill,
as ``keen.skills.render_skills_section`` writes it) whose tokens, plus those of the
tool definitions the caller sends with it (``overhead``: ``call_mcp_tool`` and
``search_mcp_tools``), never exceed the budget. Steps, each taken only when the
previous one does not fit:

1. ``full``: the catalog unchanged.
2. ``compact``: the skill path moves from every line into one header sentence
   (``<root>/<name>/SKILL.md``), then descriptions are cut longest first to a common
   cap no shorter than ``MIN_DESCRIPTION_CHARS``.
3. ``folded``: the least useful MCP servers (fewest tools, then name; or the caller's
   ``usefulness`` scores, e.g. use counts) leave the list for one line that names as
   many of them as fit and tells the model to find their tools with ``search_mcp_tools``;
   as few as needed are folded, and the kept lines get the longest cap that fits.
   User-written skills are folded last.
4. ``empty``: not even the header and the fold line fit: ``""``.

Tokens are counted with :func:`keen.tokens.token_counter` (o200k_base when its file is
local, else an estimate) unless a counter is passed.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from keen.paths import WINDOWS_COLON
from keen.skills import MARKER_FILE, SKILL_FILE, Skill, render_skills_section, section_header, shorten
from keen.tokens import TokenCounter, token_counter

__all__ = [
    "MIN_DESCRIPTION_CHARS",
    "SEARCH_TOOL_NAME",
    "BudgetedSection",
    "budgeted_section",
    "search_tool_definition",
]

SEARCH_TOOL_NAME = "search_mcp_tools"
MIN_DESCRIPTION_CHARS = 24
"""Below this a description says little more than the name; folding costs less then."""

_SEARCH_DESCRIPTION = (
    "Search the tools of every connected MCP server (including servers not listed in the prompt) "
    "for a task. Returns the best matches: server, tool, one-line summary and the path of the "
    "tool's schema. Then read the schema and call call_mcp_tool."
)


def search_tool_definition(style: Literal["openai", "anthropic", "mcp"] = "openai") -> dict[str, Any]:
    """The ``search_mcp_tools`` tool (``query``, optional ``k`` and ``server``) in the
    shape an LLM API (``openai``: Chat Completions function; ``anthropic``: Messages
    tool) or MCP ``tools/list`` (``mcp``) expects."""
    schema = {
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": "What the tool should do, in a few words."},
            "k": {"type": "integer", "minimum": 1, "maximum": 20, "description": "How many results (5)."},
            "server": {"type": "string", "description": "Only this MCP server's tools."},
        },
        "required": ["query"],
        "additionalProperties": False,
    }
    if style == "openai":
        return {
            "type": "function",
            "function": {"name": SEARCH_TOOL_NAME, "description": _SEARCH_DESCRIPTION, "parameters": schema},
        }
    if style == "anthropic":
        return {"name": SEARCH_TOOL_NAME, "description": _SEARCH_DESCRIPTION, "input_schema": schema}
    return {
        "name": SEARCH_TOOL_NAME,
        "description": _SEARCH_DESCRIPTION,
        "inputSchema": schema,
        "annotations": {"readOnlyHint": True, "openWorldHint": False},
    }


@dataclass(frozen=True)
class BudgetedSection:
    """What :func:`budgeted_section` produced. ``text``: the section (``""`` or ending in
    ``\\n``); ``tokens``: its tokens plus the overhead's; ``step``: ``full``, ``compact``,
    ``folded`` or ``empty``; ``listed``: skills with a line; ``folded``: skills folded
    into the search line; ``description_cap``: the cut applied (``None``: none)."""

    text: str
    tokens: int
    budget: int
    overhead_tokens: int
    step: Literal["full", "compact", "folded", "empty"]
    tokenizer: str
    listed: list[str] = field(default_factory=lambda: list[str]())
    folded: list[str] = field(default_factory=lambda: list[str]())
    description_cap: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "tokens": self.tokens,
            "budget": self.budget,
            "overhead_tokens": self.overhead_tokens,
            "step": self.step,
            "tokenizer": self.tokenizer,
            "listed": len(self.listed),
            "folded": self.folded,
            "description_cap": self.description_cap,
        }


def tool_count(skill: Skill) -> int:
    """``tool_count`` from a generated skill's marker (0 for other skills or on error)."""
    try:
        marker = json.loads((skill.path / MARKER_FILE).read_text(encoding="utf-8"))
        return int(marker.get("tool_count", 0))
    except (OSError, ValueError, TypeError, AttributeError):
        return 0


def _fold_line(names: Sequence[str], room: Callable[[str], bool]) -> str | None:
    """The fold line naming as many of ``names`` as ``room`` accepts (binary search)."""
    count = len(names)
    noun = "MCP server" if count == 1 else "MCP servers"

    def line(shown: int) -> str:
        listed = ", ".join(names[:shown])
        more = f" and {count - shown} more" if shown < count else ""
        body = f": {listed}{more}" if shown else ""
        return (
            f"- {count} more {noun} not listed for space{body}. Find their tools with `{SEARCH_TOOL_NAME}`."
        )

    if not room(line(0)):
        return None
    low, high = 0, count  # line(low) fits
    while low < high:
        mid = (low + high + 1) // 2
        low, high = (mid, high) if room(line(mid)) else (low, mid - 1)
    return line(low)


def budgeted_section(
    skills: Sequence[Skill],
    budget: int,
    *,
    skills_root: Path | None = None,
    counter: TokenCounter | None = None,
    overhead: Sequence[str] = (),
    usefulness: Mapping[str, float] | None = None,
) -> BudgetedSection:
    """The skills section for the enabled ``skills`` within ``budget`` tokens (module doc).

    ``overhead``: texts sent with the section every turn (tool definitions as JSON);
    their tokens count against the budget. ``skills_root``: the directory named in the
    compact header (default: the parent of the first skill). ``usefulness``: skill name
    -> score, higher kept longer (default: tool count). Raises ValueError if ``budget`` < 0.
    """
    if budget < 0:
        raise ValueError("the token budget must be >= 0")
    counter = counter or token_counter()
    enabled = sorted((s for s in skills if s.enabled), key=lambda s: s.name)
    fixed = sum(counter.count(text) for text in overhead)

    def result(
        text: str, step: Any, listed: list[Skill], folded: list[Skill], cap: int | None
    ) -> BudgetedSection:
        return BudgetedSection(
            text,
            counter.count(text) + fixed if text else fixed,
            budget,
            fixed,
            step,
            counter.name,
            [s.name for s in listed],
            [s.name for s in folded],
            cap,
        )

    full = render_skills_section(enabled)
    if not enabled or counter.count(full) + fixed <= budget:
        return result(full, "full", enabled, [], None)
    root = skills_root or enabled[0].path.parent
    where = f"{root}/<name>/{SKILL_FILE}"
    if any(s.path.name != s.name for s in enabled):  # Windows: mcp:x lives in mcp_x (keen.paths)
        where += f" (a ':' of the name is '{WINDOWS_COLON}' in the folder name)"
    header = section_header(enabled) + f"Each skill's instructions are in {where}.\n"

    def render(kept: Sequence[Skill], cap: int | None, fold: str = "") -> str:
        lines = [f"- {s.name}: {s.description if cap is None else shorten(s.description, cap)}" for s in kept]
        if fold:
            lines.append(fold)
        return header + "\n".join(lines) + "\n"

    def fits(text: str) -> bool:
        return counter.count(text) + fixed <= budget

    def best_cap(kept: Sequence[Skill], fold: str = "") -> int | Literal[False] | None:
        """The largest description cap at which ``kept`` fits (None: uncut), else False."""
        if fits(render(kept, None, fold)):
            return None
        longest = max((len(s.description) for s in kept), default=0)
        if not fits(render(kept, MIN_DESCRIPTION_CHARS, fold)):
            return False
        low, high = MIN_DESCRIPTION_CHARS, max(longest, MIN_DESCRIPTION_CHARS)
        while high - low > 1:
            mid = (low + high) // 2
            low, high = (mid, high) if fits(render(kept, mid, fold)) else (low, mid)
        return low

    cap = best_cap(enabled)
    if cap is not False:
        return result(render(enabled, cap), "compact", enabled, [], cap)

    scores = dict(usefulness or {})
    order = sorted(  # least useful first: MCP servers by score, user skills after them
        enabled,
        key=lambda s: (not s.managed, scores.get(s.name, float(tool_count(s))), s.name),
    )

    def attempt(n: int) -> tuple[str, list[Skill], list[Skill], int | None] | None:
        folded = order[:n]
        kept = [s for s in enabled if s not in folded]
        names = [s.name.removeprefix("mcp:") for s in sorted(folded, key=lambda s: s.name)]
        fold = _fold_line(names, lambda line: fits(render(kept, MIN_DESCRIPTION_CHARS, line)))
        if fold is None:
            return None
        kept_cap = best_cap(kept, fold)
        if kept_cap is False:
            return None
        return render(kept, kept_cap, fold), kept, folded, kept_cap

    # attempt(n) fits for every n above the least that fits (fewer lines, same fold line
    # room): binary search that least n.
    if attempt(len(order)) is None:
        return result("", "empty", [], enabled, None)
    low, high = 1, len(order)
    while low < high:
        mid = (low + high) // 2
        low, high = (low, mid) if attempt(mid) is not None else (mid + 1, high)
    found = attempt(low)
    assert found is not None
    text, kept, folded, kept_cap = found
    return result(text, "folded", kept, folded, kept_cap)
