"""The MCP part of a system prompt within a token budget.

:func:`budgeted_section` returns the skills section (one catalog line per enabled skill,
as ``keen.skills.render_skills_section`` writes it) whose tokens, plus those of the
tool definitions the caller sends with it (``overhead``: ``call_mcp_tool`` and
``search_tools``, :mod:`keen.entry_tools`), never exceed the budget, unless the overhead
alone does (step ``empty``, its ``tokens`` the overhead's; :func:`keen.prompt.budgeted_prompt`
raises ``BudgetTooSmall`` then). Steps, each taken only when the previous one does not fit:

1. ``full``: the catalog unchanged.
2. ``compact``: the skill path moves from every line into one header sentence
   (``<root>/<name>/SKILL.md``), then descriptions are cut longest first to a common
   cap no shorter than ``MIN_DESCRIPTION_CHARS``.
3. ``folded``: the least useful MCP servers (fewest tools, then name; or the caller's
   ``usefulness`` scores, e.g. use counts) leave the list for one line that names as
   many of them as fit and tells the model to find their tools with ``search_tools``;
   as few as needed are folded, and the kept lines get the longest cap that fits.
   User-written skills are folded last.
4. ``empty``: not even the header and the fold line fit: ``""``.

Tokens are counted with :func:`keen.tokens.token_counter` (o200k_base when its file is
local, else an estimate) unless a counter is passed.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from keen._record import FrozenRecord
from keen.capabilities import _section_store
from keen.entry_tools import SEARCH_TOOL
from keen.paths import WINDOWS_COLON
from keen.skills import (
    SKILL_FILE,
    Skill,
    catalog_line,
    read_marker,
    render_skills_section,
    section_header,
    shorten,
)
from keen.tokens import TokenCounter, token_counter

__all__ = [
    "MIN_DESCRIPTION_CHARS",
    "BudgetedSection",
    "budgeted_section",
]

MIN_DESCRIPTION_CHARS = 24
"""Below this a description says little more than the name; folding costs less then."""


class BudgetedSection(FrozenRecord):
    """What :func:`budgeted_section` produced. ``text``: the section (``""`` or ending in
    ``\\n``); ``tokens``: its tokens plus the overhead's; ``step``: ``full``, ``compact``,
    ``folded`` or ``empty``; ``listed``: skills with a line; ``folded``: skills folded
    into the search line; ``description_cap``: the cut applied (``None``: none). A frozen
    dataclass (:mod:`keen._record`; each list new when not given)."""

    text: str
    tokens: int
    budget: int
    overhead_tokens: int
    step: Literal["full", "compact", "folded", "empty"]
    tokenizer: str
    listed: list[str]
    folded: list[str]
    description_cap: int | None

    _fields = (
        "text",
        "tokens",
        "budget",
        "overhead_tokens",
        "step",
        "tokenizer",
        "listed",
        "folded",
        "description_cap",
    )
    _new_lists = ("listed", "folded")
    __match_args__ = _fields

    def __init__(
        self,
        text: str,
        tokens: int,
        budget: int,
        overhead_tokens: int,
        step: Literal["full", "compact", "folded", "empty"],
        tokenizer: str,
        listed: list[str] | None = None,
        folded: list[str] | None = None,
        description_cap: int | None = None,
    ) -> None:
        self._set(
            text=text,
            tokens=tokens,
            budget=budget,
            overhead_tokens=overhead_tokens,
            step=step,
            tokenizer=tokenizer,
            listed=[] if listed is None else listed,
            folded=[] if folded is None else folded,
            description_cap=description_cap,
        )

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
    """``tool_count`` from a generated skill's marker (0 for other skills or on error):
    :attr:`Skill.tool_count <keen.skills.Skill>`, which discovery read with the marker (and
    ``keen.skills.cache`` keeps in its store), else the marker file, read now
    (:func:`keen.skills.read_marker`, as discovery reads it)."""
    if skill.tool_count is not None:
        return skill.tool_count
    return read_marker(skill.path)[1]


def _fold_line(names: Sequence[str], room: Callable[[str], bool], most: int) -> str | None:
    """The fold line naming as many of ``names`` as ``room`` accepts (binary search), at
    most ``most`` of them (each name shown costs at least one token: a caller passes the
    tokens left, so the search never renders thousands of names it cannot show)."""
    count = len(names)
    noun = "MCP server" if count == 1 else "MCP servers"

    def line(shown: int) -> str:
        listed = ", ".join(names[:shown])
        more = f" and {count - shown} more" if shown < count else ""
        body = f": {listed}{more}" if shown else ""
        return f"- {count} more {noun} not listed for space{body}. Find their tools with `{SEARCH_TOOL}`."

    if not room(line(0)):
        return None
    low, high = 0, max(0, min(count, most))  # line(low) fits
    while low < high:
        mid = (low + high + 1) // 2
        low, high = (mid, high) if room(line(mid)) else (low, mid - 1)
    return line(low)


class _LineTokens:
    """Token counts of section lines, each distinct line counted once.

    The section is a header ending in a newline, then lines that each start with ``- ``
    and end with a newline. o200k_base's pre-tokenizer (``keen.tokens.O200K_PATTERN``)
    never joins a newline with a following ``-`` into one piece, so the section's count
    is the header's plus each line's (newline included): sums of per-line counts replace
    counting the whole section again at every step. The text returned is counted once
    more as a whole, and that exact count is what decides (module doc).
    """

    def __init__(self, counter: TokenCounter) -> None:
        self._count = counter.count
        self._memo: dict[str, int] = {}

    def __call__(self, text: str) -> int:
        tokens = self._memo.get(text)
        if tokens is None:
            tokens = self._memo[text] = self._count(text)
        return tokens

    def within(self, lines: Iterable[str], room: int) -> int | None:
        """The tokens of ``lines`` when they total at most ``room``, else None (stops
        counting at the first line past it: the cost is bounded by the budget)."""
        used = 0
        for text in lines:
            used += self(text)
            if used > room:
                return None
        return used


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

    The work is linear in the number of skills and otherwise bounded by the budget: lines
    are counted one by one, each once, and a sum stops at the first line past the room.
    """
    if budget < 0:
        raise ValueError("the token budget must be >= 0")
    enabled = sorted((s for s in skills if s.enabled), key=lambda s: s.name)
    if counter is not None or usefulness is not None or any(s.tool_count is None for s in enabled):
        # A caller's own counter or scores, or a tool count read from a marker now: computed.
        return _section(enabled, budget, skills_root, counter or token_counter(), overhead, usefulness)
    counter = token_counter()
    # The same inputs gave this section before (keen.capabilities._section_store).
    key = _section_store.section_key(
        [
            budget,
            list(overhead),
            None if skills_root is None else str(skills_root),
            counter.name,
            counter.source,
            [
                [s.name, s.description, str(s.path), str(s.skill_md), s.managed, list(s.paths), s.tool_count]
                for s in enabled
            ],
        ]
    )
    stored = _section_store.stored_section(key)
    if stored is not None:
        return BudgetedSection(**stored)
    section = _section(enabled, budget, skills_root, counter, overhead, None)
    if section.overhead_tokens <= budget:
        # A budget below the overhead holds no section: kept, each one a caller tried would
        # push a real one out of the store's few places.
        _section_store.keep_section(key, section._asdict())
    return section


def _section(
    enabled: list[Skill],
    budget: int,
    skills_root: Path | None,
    counter: TokenCounter,
    overhead: Sequence[str],
    usefulness: Mapping[str, float] | None,
) -> BudgetedSection:
    """:func:`budgeted_section` of the enabled skills, sorted by name, computed."""
    fixed = sum(counter.count(text) for text in overhead)
    tokens = _LineTokens(counter)
    room = budget - fixed

    def result(
        text: str,
        step: Any,
        listed: list[Skill],
        folded: list[Skill],
        cap: int | None,
        exact: int | None = None,
    ) -> BudgetedSection:
        return BudgetedSection(
            text,
            (counter.count(text) if exact is None else exact) + fixed if text else fixed,
            budget,
            fixed,
            step,
            counter.name,
            [s.name for s in listed],
            [s.name for s in folded],
            cap,
        )

    if not enabled:
        return result("", "full", [], [], None)
    # Lines are made as they are counted: past the room, the rest are never made.
    whole = itertools.chain((section_header(enabled),), (catalog_line(s) + "\n" for s in enabled))
    if tokens.within(whole, room) is not None:
        full = render_skills_section(enabled)
        exact = counter.count(full)
        if exact <= room:
            return result(full, "full", enabled, [], None, exact)
    root = skills_root or enabled[0].path.parent
    where = f"{root}/<name>/{SKILL_FILE}"
    if any(s.path.name != s.name for s in enabled):  # Windows: mcp:x lives in mcp_x (keen.paths)
        where += f" (a ':' of the name is '{WINDOWS_COLON}' in the folder name)"
    header = section_header(enabled) + f"Each skill's instructions are in {where}.\n"
    header_tokens = tokens(header)

    lines: dict[tuple[str, int | None], str] = {}

    def line(skill: Skill, cap: int | None) -> str:
        # Each skill's line at each cap is made once: the cap's binary search asks again.
        text = lines.get((skill.name, cap))
        if text is None:
            shown = skill.description if cap is None else shorten(skill.description, cap)
            text = lines[(skill.name, cap)] = f"- {skill.name}: {shown}\n"
        return text

    def render(kept: Sequence[Skill], cap: int | None, fold: str = "") -> str:
        return header + "".join(line(s, cap) for s in kept) + (fold + "\n" if fold else "")

    def best_cap(kept: Sequence[Skill], left: int) -> int | Literal[False] | None:
        """The largest description cap at which ``kept`` fits in ``left`` tokens (None:
        uncut), else False."""
        if tokens.within((line(s, None) for s in kept), left) is not None:
            return None
        if tokens.within((line(s, MIN_DESCRIPTION_CHARS) for s in kept), left) is None:
            return False
        longest = max((len(s.description) for s in kept), default=0)
        low, high = MIN_DESCRIPTION_CHARS, max(longest, MIN_DESCRIPTION_CHARS)
        while high - low > 1:
            mid = (low + high) // 2
            low, high = (
                (mid, high) if tokens.within((line(s, mid) for s in kept), left) is not None else (low, mid)
            )
        return low

    cap = best_cap(enabled, room - header_tokens)
    if cap is not False:
        text = render(enabled, cap)
        exact = counter.count(text)
        if exact <= room:
            return result(text, "compact", enabled, [], cap, exact)

    scores = dict(usefulness or {})
    # Least useful first: MCP servers by score, user skills after them.
    order = sorted(
        enabled,
        key=lambda s: (not s.managed, scores[s.name] if s.name in scores else float(tool_count(s)), s.name),
    )
    most_useful = order[::-1]
    # kept_min[k]: tokens of the k most useful skills' lines at the shortest cap, grown
    # only as far as a question needs (never past the room).
    kept_min = [0]

    def kept_within(k: int, left: int) -> bool:
        while len(kept_min) <= k and kept_min[-1] <= left:
            kept_min.append(
                kept_min[-1] + tokens(line(most_useful[len(kept_min) - 1], MIN_DESCRIPTION_CHARS))
            )
        return len(kept_min) > k and kept_min[k] <= left

    def bare_fold(n: int) -> str:
        return _fold_line(["?"] * n, lambda _: True, 0) or ""

    def feasible(n: int) -> bool:
        """Folding the ``n`` least useful leaves room for the fold line (no name shown)
        and the others at the shortest cap."""
        return kept_within(len(order) - n, room - header_tokens - tokens(bare_fold(n) + "\n"))

    def attempt(n: int) -> tuple[str, list[Skill], list[Skill], int | None] | None:
        folded = order[:n]
        folded_names = {s.name for s in folded}
        kept = [s for s in enabled if s.name not in folded_names]
        if not kept_within(len(kept), room - header_tokens):
            return None
        left = room - header_tokens - kept_min[len(kept)]
        names = [name.removeprefix("mcp:") for name in sorted(folded_names)]
        fold = _fold_line(names, lambda text: tokens(text + "\n") <= left, left)
        if fold is None:
            return None
        kept_cap = best_cap(kept, room - header_tokens - tokens(fold + "\n"))
        if kept_cap is False:
            return None
        return render(kept, kept_cap, fold), kept, folded, kept_cap

    # feasible(n) holds for every n above the least that does (fewer lines, same fold
    # line room): binary search that least n. The exact count of the text decides; were it
    # ever above the per-line sum, one more server is folded until it fits.
    if not feasible(len(order)):
        return result("", "empty", [], enabled, None)
    low, high = 1, len(order)
    while low < high:
        mid = (low + high) // 2
        low, high = (low, mid) if feasible(mid) else (mid + 1, high)
    for n in range(low, len(order) + 1):
        found = attempt(n)
        if found is None:
            continue
        text, kept, folded, kept_cap = found
        exact = counter.count(text)
        if exact <= room:
            return result(text, "folded", kept, folded, kept_cap, exact)
    return result("", "empty", [], enabled, None)
