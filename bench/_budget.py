"""``footprint.py --budget``: the budgeted MCP prompt and what it costs in server recall.

For one synced ``KEEN_HOME``: the MCP part of the prompt within the budget
(``keen.prompt.budgeted_prompt``: catalog + ``call_mcp_tool`` + ``search_tools``),
and server-level recall@3 of LiveMCPBench task questions (a hit when the server of any
tool the task needs is among the top 3 servers) three ways:

- ``unbudgeted``: ranking the servers by their catalog lines, every line shown in full
  (what a model sees without Keen's budget and without search);
- ``budgeted lines``: the same over the lines the budgeted prompt shows (shortened,
  folded servers absent);
- ``budgeted + ToolSearch``: the servers of ToolSearch's top tools over every generated
  skill (what ``search_tools`` answers; the model calls it for any task the listed
  lines do not settle), then the budgeted lines' ranking for any place left;
- ``lines RRF ToolSearch``: the two rankings fused with reciprocal rank fusion (k=60), a
  model that trusts the lines as much as the search.

Lines are ranked with the same engine (a catalog of one ``skill`` capability per line),
so the comparison isolates what the prompt shows.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from keen.capabilities import Capability, Catalog, Risk
from keen.gateway import tool_definition
from keen.prompt import budgeted_prompt
from keen.skills import discover
from keen.tokens import TokenCounter

__all__ = ["budget_figures"]

RRF_K = 60
# Transformer vectors are cached by text across runs (bench/search.py uses the same folder).
_CACHE = Path(".bench/cache/toolsearch")
CUT = 3


def _line_catalog(lines: dict[str, str]) -> Catalog:
    caps = [
        Capability(f"skill__{name}", "skill", name, "", text, None, Risk.reading(), 0, 0, search_text=text)
        for name, text in lines.items()
    ]
    catalog = Catalog(caps, {}, cache_dir=_CACHE)
    catalog.wait_ready(None)  # every figure with the transformer signal, as a session settles to
    return catalog


def _rank_lines(catalog: Catalog, query: str) -> list[str]:
    return [h.tool for h in catalog.search(query, k=len(catalog))] if len(catalog) else []


def _rank_tools(catalog: Catalog, query: str) -> list[str]:
    ranking: list[str] = []
    for hit in catalog.search(query, k=100):
        if hit.server and hit.server not in ranking:
            ranking.append(hit.server)
    return ranking


def _fuse(*rankings: list[str]) -> list[str]:
    score: dict[str, float] = {}
    for ranking in rankings:
        for rank, name in enumerate(ranking):
            score[name] = score.get(name, 0.0) + 1.0 / (RRF_K + rank + 1)
    return sorted(score, key=lambda n: (-score[n], n))


def budget_figures(
    skills_root: Path, budget: int, counter: TokenCounter, tasks: list[tuple[str, set[str]]]
) -> dict[str, Any]:
    """Figures for one synced skills dir. ``tasks``: (question, Keen names of the servers
    of the tools it needs); tasks none of whose servers are configured are skipped."""
    t = time.perf_counter()
    call_tool = tool_definition("openai", skills_dir=str(skills_root))
    section = budgeted_prompt(budget, skills_root, call_tool=call_tool, counter=counter)
    render_s = time.perf_counter() - t
    skills = {s.name.removeprefix("mcp:"): s for s in discover(skills_root).enabled if s.managed}
    full = {name: s.description for name, s in skills.items()}
    shown: dict[str, str] = {}
    for line in section.text.splitlines():
        name, sep, text = line.removeprefix("- mcp:").partition(": ")
        if line.startswith("- mcp:") and sep:
            shown[name] = text.split(" → read ")[0]
    tools = Catalog.from_skills_dir(skills_root, cache_dir=_CACHE)
    tools.wait_ready(None)
    unbudgeted, lines_only, with_search = _line_catalog(full), _line_catalog(shown), tools
    relevant = [(q, servers) for q, servers in tasks if servers & set(skills)]
    hits = {"unbudgeted": 0, "budgeted_lines": 0, "budgeted_search": 0, "lines_rrf_search": 0}
    for question, servers in relevant:
        a = _rank_lines(unbudgeted, question)
        b = _rank_lines(lines_only, question)
        searched = _rank_tools(with_search, question)
        c = list(dict.fromkeys([*searched, *b]))
        hits["unbudgeted"] += bool(set(a[:CUT]) & servers)
        hits["budgeted_lines"] += bool(set(b[:CUT]) & servers)
        hits["budgeted_search"] += bool(set(c[:CUT]) & servers)
        hits["lines_rrf_search"] += bool(set(_fuse(b, searched)[:CUT]) & servers)
    n = max(len(relevant), 1)
    return {
        "budget": budget,
        **section.to_dict(),
        "folded": len(section.folded),
        "render_s": render_s,
        "tasks": len(relevant),
        f"server_recall@{CUT}": {key: value / n for key, value in hits.items()},
    }
