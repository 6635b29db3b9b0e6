"""The skills catalog in the system prompt (docs/architecture.md "The prompt catalog").

One line per *enabled* skill, in this shape::

    - mcp:github: Use this skill to interact with the `github` MCP server. → read /h/mcp:github/SKILL.md

The path is the absolute skill directory (not ``~``: the model passes it to a file
tool verbatim). The prompt grows with the number of skills, not of tools.

Budget (``max_chars``, counted in characters of the returned text, newlines
included; the result never exceeds it):

1. If every line fits, nothing changes.
2. Otherwise descriptions are shortened **longest first**: a common cap ``C`` is
   found so that every description longer than ``C`` is cut to ``C`` characters
   ending in ``…`` and the total fits, with ``C`` as large as possible. Short
   descriptions stay whole; only the long ones pay. ``C`` never goes below
   ``min_description_chars``.
3. Only if the lines do not fit even at that minimum are lines dropped, from the end
   of the name order, and one last line says how many skills were left out and to
   run ``keen skills list``. The kept lines are then shortened as in step 2 within
   what is left.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from keen._text import shorten
from keen.skills.discover import SKILL_FILE, Skill

__all__ = [
    "DEFAULT_MIN_DESCRIPTION_CHARS",
    "catalog_line",
    "omitted_line",
    "render_catalog",
    "render_skills_section",
    "section_header",
    "shorten",
]

# Below about a dozen characters a description says nothing the name does not; at
# that point dropping a line (and saying so) costs less than keeping noise.
DEFAULT_MIN_DESCRIPTION_CHARS = 12

_HEADER = (
    "## Skills\nSkills are listed by name. When one is relevant, read its SKILL.md first and follow it.\n"
)
_MCP_HEADER = (
    "mcp:<server> skills list an MCP server's tools: read the tool's schema file, "
    "then call `call_mcp_tool` with server, tool and arguments.\n"
)


def _parts(skill: Skill) -> tuple[str, str]:
    return f"- {skill.name}: ", f" → read {skill.path}/{SKILL_FILE}"


def catalog_line(skill: Skill, description: str | None = None) -> str:
    """The catalog line for ``skill`` (optionally with a shortened ``description``)."""
    head, tail = _parts(skill)
    return f"{head}{skill.description if description is None else description}{tail}"


def omitted_line(count: int) -> str:
    """The closing line when ``count`` skills did not fit the budget."""
    noun = "skill" if count == 1 else "skills"
    return f"- ({count} more {noun} not listed for space; run `keen skills list` to see all)"


def _fit(skills: Sequence[Skill], budget: int, min_chars: int) -> list[str] | None:
    """Lines for ``skills`` within ``budget`` characters, shortening longest first; None if impossible."""
    if not skills:
        return []
    fixed = sum(len(h) + len(t) for h, t in map(_parts, skills)) + len(skills) - 1
    lengths = [len(s.description) for s in skills]
    room = budget - fixed
    if sum(lengths) <= room:
        return [catalog_line(s) for s in skills]

    def used(cap: int) -> int:
        return sum(min(n, cap) for n in lengths)

    if used(min_chars) > room:
        return None
    low, high = min_chars, max(lengths)  # used(low) fits, used(high) does not
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (mid, high) if used(mid) <= room else (low, mid)
    return [catalog_line(s, shorten(s.description, low)) for s in skills]


def render_catalog(
    skills: Iterable[Skill],
    *,
    max_chars: int | None = None,
    min_description_chars: int = DEFAULT_MIN_DESCRIPTION_CHARS,
) -> str:
    """Catalog lines (joined by ``\\n``, no trailing newline) for the enabled ``skills``, sorted by name.

    Disabled skills are left out. ``max_chars`` (characters) applies the budget rules
    of this module's docstring; ``""`` when nothing is enabled or not even the
    "left out" line fits. Raises ``ValueError`` if ``min_description_chars`` < 1.
    """
    if min_description_chars < 1:
        raise ValueError("min_description_chars must be at least 1")
    enabled = sorted((s for s in skills if s.enabled), key=lambda s: s.name)
    if max_chars is None:
        return "\n".join(catalog_line(s) for s in enabled)
    lines = _fit(enabled, max_chars, min_description_chars)
    if lines is not None:
        return "\n".join(lines)
    # Keep the longest prefix (by name) whose lines fit at their minimal length
    # together with the note; prefix sums make this one pass even for 1000 skills.
    minimal = [
        len(head) + len(tail) + min(len(s.description), min_description_chars)
        for s, (head, tail) in zip(enabled, map(_parts, enabled), strict=True)
    ]
    prefix = [0]
    for n in minimal:
        prefix.append(prefix[-1] + n + 1)  # +1: the newline after each kept line
    for keep in range(len(enabled) - 1, -1, -1):
        note = omitted_line(len(enabled) - keep)
        if prefix[keep] + len(note) <= max_chars:
            kept = _fit(enabled[:keep], max_chars - len(note) - (1 if keep else 0), min_description_chars)
            if kept is not None:
                return "\n".join([*kept, note])
    return ""


def section_header(skills: Iterable[Skill]) -> str:
    """The header of the skills section for these (enabled) skills: the skills sentence,
    plus the MCP sentence when one of them is a managed MCP skill. Ends with ``\\n``."""
    return _HEADER + (_MCP_HEADER if any(s.managed for s in skills) else "")


def render_skills_section(
    skills: Iterable[Skill],
    *,
    max_chars: int | None = None,
    min_description_chars: int = DEFAULT_MIN_DESCRIPTION_CHARS,
) -> str:
    """The whole skills section of a system prompt: a short header plus :func:`render_catalog`.

    The MCP sentence (read the schema, call ``call_mcp_tool``) appears only when an
    enabled skill is a managed MCP skill. ``max_chars`` bounds the whole section; the
    header is kept and the catalog gets the rest. Returns ``""`` when no skill is
    enabled or the budget cannot hold the header and one catalog line. Ends with ``\\n``.
    """
    enabled = [s for s in skills if s.enabled]
    if not enabled:
        return ""
    header = section_header(enabled)
    budget = None if max_chars is None else max_chars - len(header) - 1
    if budget is not None and budget <= 0:
        return ""
    catalog = render_catalog(enabled, max_chars=budget, min_description_chars=min_description_chars)
    return f"{header}{catalog}\n" if catalog else ""
