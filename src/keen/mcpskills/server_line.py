"""What a server is for, from its tools as a whole: the words of its catalog line.

A server's catalog line (``- mcp:<server>: <description>``) is all a model reads of it
until it opens the skill, so the line has to say what the server does as a whole. When
the server says nothing useful of itself (no instructions, or only boilerplate), the line
is built here from every tool's name and first sentence:

- :func:`distinctive_terms`: the words and two-word phrases its tools use most, where
  a word every MCP server uses ("get", "list", "data", "information") counts little;
  tool names count twice, since they are the densest description a server gives;
- :func:`summary_from_terms`: the best of them as a short phrase ("repository, commit,
  branch, diff, staged changes");
- :func:`tools_by_coverage`: tool names in the order that covers the most of those
  terms soonest, so a line cut short names the tools that show the range of the server,
  not the alphabetically first ones (``add_conditional_format`` for a spreadsheet
  server).

Measured in ``bench/search.py --lines`` (docs/search.md "Catalog lines").
"""

from __future__ import annotations

import functools
import re
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence

from keen._text import first_sentence

__all__ = ["distinctive_terms", "summary_from_terms", "tools_by_coverage"]

_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
_WORD = re.compile(r"[A-Za-z][A-Za-z0-9]+")

# Words that every kind of server uses: they say what a tool does to something, or that
# it is a tool, never what the server is about. They still count in a two-word phrase
# ("read file"), just not alone.
_GENERIC = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "by",
        "can",
        "do",
        "does",
        "for",
        "from",
        "get",
        "gets",
        "getting",
        "has",
        "have",
        "in",
        "into",
        "is",
        "it",
        "its",
        "list",
        "lists",
        "listing",
        "of",
        "on",
        "or",
        "that",
        "the",
        "this",
        "to",
        "use",
        "used",
        "uses",
        "using",
        "via",
        "will",
        "with",
        "without",
        "all",
        "any",
        "each",
        "every",
        "one",
        "two",
        "more",
        "most",
        "other",
        "some",
        "such",
        "new",
        "given",
        "specified",
        "provided",
        "specific",
        "optional",
        "current",
        "default",
        "based",
        "available",
        "multiple",
        "single",
        "several",
        "complete",
        "detailed",
        "existing",
        "their",
        "your",
        "ready",
        "described",
        "various",
        "simple",
        "basic",
        "full",
        "whole",
        "also",
        "how",
        "back",
        "about",
        "demonstrates",
        "example",
        "examples",
        "like",
        "when",
        "which",
        "what",
        "where",
        "there",
        "here",
        "then",
        "than",
        "only",
        "just",
        "add",
        "adds",
        "create",
        "creates",
        "delete",
        "deletes",
        "remove",
        "removes",
        "update",
        "updates",
        "set",
        "sets",
        "fetch",
        "fetches",
        "retrieve",
        "retrieves",
        "find",
        "finds",
        "search",
        "searches",
        "read",
        "reads",
        "write",
        "writes",
        "show",
        "shows",
        "return",
        "returns",
        "run",
        "runs",
        "make",
        "makes",
        "perform",
        "performs",
        "execute",
        "executes",
        "manage",
        "manages",
        "handle",
        "handles",
        "call",
        "calls",
        "check",
        "checks",
        "change",
        "changes",
        "apply",
        "applies",
        "open",
        "opens",
        "close",
        "closes",
        "start",
        "stop",
        "load",
        "save",
        "tool",
        "tools",
        "server",
        "servers",
        "mcp",
        "api",
        "apis",
        "service",
        "data",
        "info",
        "information",
        "details",
        "detail",
        "result",
        "results",
        "item",
        "items",
        "value",
        "values",
        "name",
        "names",
        "id",
        "ids",
        "type",
        "types",
        "string",
        "object",
        "objects",
        "response",
        "option",
        "options",
        "param",
        "params",
        "parameter",
        "parameters",
        "input",
        "inputs",
        "output",
        "outputs",
        "number",
        "numbers",
        "count",
        "true",
        "false",
        "null",
        "json",
        "format",
        "optionally",
        "e",
        "g",
        "eg",
        "i",
        "ie",
        "etc",
    ]
)
_MAX_WORDS_PER_SENTENCE = 24


@functools.cache
def _stem() -> Callable[[list[str]], list[str]]:
    import Stemmer  # PyStemmer: Snowball English, as ToolSearch's lexical signal uses

    return Stemmer.Stemmer("english").stemWords


def _words(text: str) -> list[str]:
    parts = re.split(r"[\s_\-./:]+", text)
    return [w.lower() for part in parts for w in _WORD.findall(_CAMEL.sub(" ", part))]


def _grams(words: list[str], stems: list[str], phrases: bool) -> list[tuple[str, ...]]:
    """The stems (``stems``, of ``words``) of words that are not generic and, with
    ``phrases``, two-word phrases of them ("pull request", "pivot table", "knowledge graph").
    Phrases come from tool names only: in prose most neighbouring words are no phrase
    ("echoes back")."""
    keep = [w not in _GENERIC for w in words]
    out: list[tuple[str, ...]] = [(s,) for s, k in zip(stems, keep, strict=True) if k]
    if phrases:
        out += [(stems[i], stems[i + 1]) for i in range(len(words) - 1) if keep[i] and keep[i + 1]]
    return out


def distinctive_terms(
    names: Sequence[str], descriptions: Sequence[str], server: str = ""
) -> list[tuple[str, float, frozenset[int]]]:
    """The server's terms, best first, as ``(surface form, score, tools using it)``.

    A term is a stemmed word or two-word phrase of a tool's name (weight 2) or a word of
    the first sentence of its description (weight 1); its score is its weight summed over the
    tools, times 1.5 for a phrase. Generic words (:data:`_GENERIC`) and the server's own
    name are left out: the line names the server already.
    """
    own = set(_stem()(_words(server))) if server else set()
    score: defaultdict[tuple[str, ...], float] = defaultdict(float)
    users: defaultdict[tuple[str, ...], set[int]] = defaultdict(set)
    surface: defaultdict[tuple[str, ...], Counter[str]] = defaultdict(Counter)
    for i, (name, description) in enumerate(zip(names, descriptions, strict=True)):
        seen: dict[tuple[str, ...], float] = {}
        for weight, words in (
            (2.0, _words(name)),
            (1.0, [w.lower() for w in _WORD.findall(first_sentence(description))][:_MAX_WORDS_PER_SENTENCE]),
        ):
            stems = _stem()(words) if words else []
            forms = dict(zip(stems, words, strict=True))
            for gram in _grams(words, stems, phrases=weight > 1):
                if any(s in own for s in gram) or len("".join(gram)) < 3:
                    continue
                seen[gram] = max(seen.get(gram, 0.0), weight * (1.5 if len(gram) == 2 else 1.0))
                surface[gram][" ".join(forms.get(s, s) for s in gram)] += 1
        for gram, value in seen.items():
            score[gram] += value
            users[gram].add(i)
    ranked = sorted(score.items(), key=lambda kv: (-kv[1], kv[0]))
    return [(surface[g].most_common(1)[0][0], s, frozenset(users[g])) for g, s in ranked]


def summary_from_terms(terms: Sequence[tuple[str, float, frozenset[int]]], limit: int) -> str:
    """The best terms joined by ``, `` within ``limit`` characters, a phrase's words not
    repeated alone (``pull request`` then not ``request``), first letter capitalised;
    ``""`` when there are none. Terms that only one tool uses come last: they describe
    that tool, not the server (unless the server has one tool)."""
    tools = set().union(*(t for _, _, t in terms)) if terms else set()
    if not terms:
        return ""
    many = len(tools) > 1
    order = sorted(terms, key=lambda t: (many and len(t[2]) < 2, -t[1]))
    picked: list[str] = []
    for form, _, _ in order:
        words = set(form.split())
        if any(words <= set(p.split()) or set(p.split()) <= words for p in picked):
            # "request" after "pull request", or "pull request" after "request": keep the phrase
            picked = [p for p in picked if not set(p.split()) <= words] if len(words) > 1 else picked
            if any(words <= set(p.split()) for p in picked):
                continue
        candidate = ", ".join([*picked, form])
        if len(candidate) > limit:
            if picked:
                break
            continue
        picked.append(form)
    text = ", ".join(picked)
    return text[:1].upper() + text[1:]


def tools_by_coverage(
    names: Sequence[str], terms: Sequence[tuple[str, float, frozenset[int]]], limit: int = 16
) -> list[str]:
    """``names`` reordered so that each of the first ``limit`` tools adds the most score
    of terms not yet covered by the tools before it (ties: name order); the rest follow
    in name order (a catalog line names a handful; this keeps a 1,000-tool server cheap)."""
    uses: list[list[int]] = [[] for _ in names]
    gain = [0.0] * len(names)  # score of the terms a tool uses that are not covered yet
    for index, (_, score, tools) in enumerate(terms):
        for tool in tools:
            uses[tool].append(index)
            gain[tool] += score
    left = set(range(len(names)))
    covered: set[int] = set()
    order: list[str] = []
    # Gains kept as terms are covered, not summed again for every tool at each pick (a
    # 292-server catalog spent 0.3 s there). Scores are sums of halves: exact in any order.
    while left and len(order) < limit:
        best = min(left, key=lambda i: (-gain[i], names[i]))
        order.append(names[best])
        left.remove(best)
        for index in uses[best]:
            if index not in covered:
                covered.add(index)
                score = terms[index][1]
                for tool in terms[index][2]:
                    gain[tool] -= score
    return order + sorted(names[i] for i in left)
