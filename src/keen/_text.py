"""Text made short: cut to a length, on one line, its first sentence, a long list named in
part. The one way every layer does it (a leaf: imports nothing of Keen), so a tool's summary
reads the same in SKILL.md, the capability catalog and ``keen serve``.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Sequence
from typing import TypeVar

__all__ = [
    "ELLIPSIS",
    "HIDDEN",
    "INVISIBLE_CHARS",
    "SUMMARY_CHARS",
    "closed",
    "first_sentence",
    "has_invisible",
    "hidden_at",
    "invisible",
    "near_names",
    "one_line",
    "sentences",
    "shorten",
    "some_of",
    "summary",
    "unsafe_char",
]

_T = TypeVar("_T")

ELLIPSIS = "…"
SUMMARY_CHARS = 120
"""How long a tool's one-line summary is, wherever it is shown (SKILL.md, ``keen serve``)."""

# Patterns compiled at their first use (re's own cache), not as this module loads: every
# start imports it (the skills config's messages), few split a sentence (1.9 M instructions).
_BOUNDARY = r"(?<=[.!?])\s+|(?<=[。！？])\s*"
"""Where a sentence may end: ``.``, ``!`` or ``?`` and a space, or a CJK full stop."""
_INITIALS = r"[(\[\"'`]?(?:[A-Za-z]\.)+"
"""One letter and a period, or several (``e.g.``, ``i.e.``, ``(U.S.``)."""
_ABBREVIATIONS = frozenset(
    {
        "etc.",
        "vs.",
        "cf.",
        "approx.",
        "incl.",
        "resp.",
        "no.",
        "nos.",
        "fig.",
        "dr.",
        "mr.",
        "mrs.",
        "ms.",
        "st.",
    }
)
_OPENING = "\"'`([“‘"


INVISIBLE_CHARS = (
    # Format characters (Unicode general category Cf) but the zero-width joiner and
    # non-joiner (U+200C, U+200D), which emoji sequences and Persian or Indic words need:
    # the soft hyphen, Arabic number signs, zero-width space, bidi marks, embeddings,
    # overrides and isolates, word joiner and invisible operators, deprecated format
    # controls, byte order mark, interlinear annotation, Egyptian hieroglyph and shorthand
    # format controls (U+13430-1343F: Unicode 14 and 15), musical symbol formatting, tags.
    "\u00ad\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891\u08e2\u180e\u200b\u200e\u200f"
    "\u202a-\u202e\u2060-\u2064\u2066-\u206f\ufeff\ufff9-\ufffb\U000110bd\U000110cd"
    "\U00013430-\U0001343f\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0000-\U000e007f"
    # Nonspacing marks drawn as nothing: the combining grapheme joiner and the variation
    # selectors (Mongolian, VS1-16, VS17-256: 256 of them spell any byte after a letter).
    "\u034f\u180b-\u180d\u180f\ufe00-\ufe0f\U000e0100-\U000e01ef"
    # Letters drawn as blank space: the Hangul fillers.
    "\u115f\u1160\u3164\uffa0"
)
"""The characters a reader cannot see (the body of a regular-expression character class):
the one definition of "invisible" that the terminal, ``--json`` output, SKILL.md, the trust
flags and :func:`skeleton <keen.trust.flags.skeleton>` use. Unicode Standard Annex #31
("Default Ignorable Code Points") and Unicode Technical Standard #39 list most of them."""

HIDDEN = f"(?![\ufe0e\ufe0f](?<=[^\x00-\x7f{INVISIBLE_CHARS}].)(?![{INVISIBLE_CHARS}]))[{INVISIBLE_CHARS}]"
"""A regular expression for one invisible character to show escaped: any of
:data:`INVISIBLE_CHARS` but a lone emoji presentation selector (U+FE0E, U+FE0F) right after
a visible non-ASCII character (``⚠️`` stays whole; a run of selectors does not)."""


def hidden_at(text: str, index: int) -> bool:
    """Is ``text[index]`` an invisible character to show escaped (:data:`HIDDEN`, which looks
    at the characters around it)?"""
    return re.compile(HIDDEN).match(text, index) is not None


def invisible(ch: str) -> bool:
    """Is ``ch`` one of :data:`INVISIBLE_CHARS`?"""
    return re.match(f"[{INVISIBLE_CHARS}]", ch) is not None


def has_invisible(text: str) -> bool:
    """Does ``text`` hold any of :data:`INVISIBLE_CHARS`? (``str.isprintable`` passes the
    variation selectors and Hangul fillers.)"""
    return re.search(f"[{INVISIBLE_CHARS}]", text) is not None


def unsafe_char(ch: str) -> bool:
    """A control, format (bidi overrides, zero-width), surrogate, private-use, unassigned or
    invisible (:data:`INVISIBLE_CHARS`) character, or a Unicode line or paragraph separator:
    none belongs on a shown line."""
    category = unicodedata.category(ch)
    return category[0] == "C" or category in ("Zl", "Zp") or invisible(ch)


def shorten(text: str, limit: int, *, at_word: bool = False) -> str:
    """``text`` cut to at most ``limit`` characters, ending in ``…`` when cut.

    Args:
        text: any text.
        limit: the most characters returned (>= 1); the ellipsis counts as one.
        at_word: cut at the last space when there is one in the second half (and drop the
            punctuation before it), so no word is cut in two.

    Returns:
        ``text`` unchanged when it fits, else its head (trailing spaces dropped) and ``…``.
    """
    if len(text) <= limit:
        return text
    cut = text[: max(limit - 1, 0)]
    if not at_word:
        return cut.rstrip() + ELLIPSIS
    if (space := cut.rfind(" ")) >= limit // 2:
        cut = cut[:space]
    return cut.rstrip(" ,;:-") + ELLIPSIS


def some_of(items: Sequence[_T], limit: int, sep: str = ", ", say: Callable[[_T], str] = str) -> str:
    """The first ``limit`` of ``items`` joined by ``sep``, then how many are left out: a long
    list said in one line of a message (``"a; b; c; and 2 more"`` with ``sep="; "``).

    Args:
        items: what is named, in order (only the first ``limit`` are put into words, so a
            list of 20,000 costs what a list of ``limit`` does).
        limit: how many to name at the most.
        sep: what stands between two of them, and before ``and N more``.
        say: the words for one item.

    Returns:
        The named items, and ``{sep}and N more`` when ``N`` were left out.
    """
    shown = sep.join(say(item) for item in items[:limit])
    left = len(items) - limit
    return f"{shown}{sep}and {left} more" if left > 0 else shown


def near_names(name: str, names: Sequence[str], limit: int = 3) -> list[str]:
    """The ``names`` a mistyped ``name`` perhaps meant, best first, at most ``limit``: those
    containing it or contained in it, ignoring case (``weather`` for ``MCP-Weather-Free``),
    then the close spellings (:func:`difflib.get_close_matches`, ignoring case).

    For a message that cannot name every candidate (seventy configured servers): a list cut
    by :func:`some_of` may leave out the very one meant.
    """
    import difflib

    wanted = name.lower()
    lowered = {n.lower(): n for n in reversed(names)}  # the first spelling of each, in order
    near = [n for n in names if wanted and (wanted in n.lower() or n.lower() in wanted)]
    near += [lowered[n] for n in difflib.get_close_matches(wanted, list(lowered), n=limit)]
    return list(dict.fromkeys(near))[:limit]


def closed(message: str) -> str:
    """``message`` ending a sentence, so what follows starts its own: a message may end with
    a server's text (its last stderr line, a ``${VAR}`` fix) and no full stop."""
    return message if message.rstrip().endswith((".", "!", "?")) else message + "."


def one_line(text: str | None, limit: int) -> str:
    """``text`` with every run of whitespace (newlines too) made one space, then :func:`shorten`."""
    return shorten(" ".join((text or "").split()), limit)


def _ends_sentence(line: str, end: re.Match[str]) -> bool:
    """Whether the boundary ``end`` in ``line`` ends a sentence: not after an abbreviation or
    an initial (``e.g. a file``, ``Dr. Smith``), and not before a lower-case word."""
    if line[end.start() - 1] in "。！？":
        return True
    # The word before the boundary, found from it backwards: slicing the line up to it for
    # each boundary was quadratic in a long text (a server's instructions of 400 kB: 1.3 s).
    word = line[line.rfind(" ", 0, end.start()) + 1 : end.start()].lower()
    following = line[end.end() : end.end() + 1]
    if word.lstrip(_OPENING) in _ABBREVIATIONS or re.fullmatch(_INITIALS, word):
        return False
    return bool(following) and not following.islower()


def sentences(text: str) -> list[str]:
    """``text`` on one line (whitespace collapsed), split into sentences.

    A sentence ends at ``.``, ``!`` or ``?`` followed by a space and a word that does not
    start in lower case, unless the period ends an abbreviation or an initial (``e.g.``,
    ``i.e.``, ``vs.``, ``Dr.``); or at a CJK full stop. A period inside a word (``v1.2``,
    ``example.com/a.b``) ends nothing; the last sentence needs no period.
    """
    line = " ".join(text.split())
    out: list[str] = []
    start = 0
    for end in re.finditer(_BOUNDARY, line):
        if end.start() > start and end.end() < len(line) and _ends_sentence(line, end):
            out.append(line[start : end.start()].strip())
            start = end.end()
    rest = line[start:].strip()
    return [s for s in (*out, rest) if s]


def first_sentence(text: str) -> str:
    """The first of :func:`sentences` (``""`` for blank text)."""
    # Only the head matters; bounding it keeps a 100 kB description cheap.
    found = sentences(text[:2000])
    return found[0] if found else ""


def summary(text: str | None, limit: int = SUMMARY_CHARS, *, sentence: bool = True) -> str:
    """A description as one short line: its first non-blank line, unsafe characters made
    spaces, whitespace collapsed, its first sentence (when ``sentence``), cut at a word to at
    most ``limit`` characters. The one summary of a tool or server description everywhere
    (SKILL.md's table, the capability catalog, ``keen serve``'s minimal descriptions)."""
    line = next((ln for ln in (text or "").splitlines() if ln.strip()), "")
    line = line[: max(limit * 4, 2000)]
    if not line.isprintable():
        line = "".join(" " if unsafe_char(ch) else ch for ch in line)
    line = first_sentence(line) if sentence else " ".join(line.split())
    return shorten(line, limit, at_word=True)
