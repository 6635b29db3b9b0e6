"""Flags on tool text at discovery: shadowing, instruction overrides, secret grabs, hidden text.

A tool's description (and its title and the descriptions inside its inputSchema) is read
by the model as instructions. The attacks the MCP security literature calls "tool
poisoning" and "tool shadowing" put orders there. :func:`scan_tool` flags four kinds:

- ``shadowing``: the text names a tool of *another* configured server (only distinctive
  names count: with ``_``, ``-``, ``.``, or camelCase; the tool's own server's names only
  when another server defines that name too and the text prefers this one, "instead of",
  "rather than" ...), or a qualified ``server.tool`` / ``server/tool`` /
  ``mcp__server__tool``, or tells the model to use it instead of another configured server;
  or the tool itself has a name another server defines with another definition, or a
  name that only reads as another server's tool (:func:`skeleton`: ``ｓend_email``,
  ``Send_Email``, ``ѕend_email`` with a Cyrillic letter);
- ``override``: it tells the model to ignore, forget or override instructions, to act
  before or instead of other tools, or to keep something from the user;
- ``secrets``: it points at credential files (``~/.ssh``, ``id_rsa``, ``.env``,
  ``~/.aws/credentials``, MCP host configs ...) or asks to read, send or include tokens,
  keys or passwords;
- ``hidden``: zero-width, bidirectional-control, Unicode tag or other invisible format
  characters, control characters, or an HTML comment.

Each :class:`Flag` carries the field, the evidence span (``start``, ``end`` in that
field's text) and an excerpt around it escaped with :func:`escape_text`, so a flag can be
shown to a person without re-injecting what it found. The patterns are tuned on the
4,311 real tool descriptions of LiveMCPBench and ToolGym (``bench/flags_fp.py``).
"""

from __future__ import annotations

import collections
import functools
import logging
import re
import threading
import unicodedata
from collections.abc import Iterable, Iterator, Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, replace
from typing import Any, Literal, cast

from keen._text import HIDDEN, hidden_at, invisible, unsafe_char
from keen.mcp.listing.changes import ToolsChanged
from keen.mcp.types import Tool

__all__ = [
    "Flag",
    "FlagKind",
    "ShadowIndex",
    "escape_text",
    "flag_change",
    "flag_kinds",
    "scan_server",
    "scan_servers",
    "scan_text",
    "scan_tool",
    "skeleton",
]

FlagKind = Literal["shadowing", "override", "secrets", "hidden"]

logger = logging.getLogger(__name__)

_EXCERPT_CONTEXT = 40
_MAX_FIELDS = 500  # bound the walk of a hostile, huge inputSchema


@dataclass(frozen=True, slots=True)
class Flag:
    """One finding. ``evidence`` is the raw matched text (may hold hidden characters: show
    ``excerpt`` instead, which is escaped); ``reason`` says what it is in a few words."""

    kind: FlagKind
    field: str
    start: int
    end: int
    evidence: str
    excerpt: str
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "field": self.field,
            "start": self.start,
            "end": self.end,
            "excerpt": self.excerpt,
            "reason": self.reason,
        }


class _LazyPattern:
    """A regular expression compiled at its first use, not when this module is imported:
    the module is imported by every session that renders a skill (about 17 ms of CPU for its
    patterns), and most never scan a tool. After the first use, the compiled pattern's
    methods sit in the slots, so a call costs no more than on the pattern itself."""

    __slots__ = ("_args", "finditer", "fullmatch", "match", "search", "sub")

    def __init__(self, pattern: str, flags: int) -> None:
        self._args = (pattern, flags)

    def __getattr__(self, name: str) -> Any:
        # Only called for an unset slot: compile once, then fill every slot.
        if name == "_args":
            raise AttributeError(name)
        compiled = re.compile(*self._args)
        for attr in _LazyPattern.__slots__[1:]:
            setattr(self, attr, getattr(compiled, attr))
        return getattr(compiled, name)


def _compile(pattern: str, flags: int = 0) -> re.Pattern[str]:
    """``re.compile(pattern, flags)`` at the pattern's first use (:class:`_LazyPattern`)."""
    return cast("re.Pattern[str]", _LazyPattern(pattern, flags))


# -- escaping ----------------------------------------------------------------------------------

_HTML_COMMENT_OPEN = _compile(r"<!--")


def _invisible(ch: str, one_line: bool = False) -> bool:
    if ch in "\n\t":
        return one_line
    # keen._text.unsafe_char: controls (ESC, NUL, ...), format characters (zero-width, bidi,
    # tags, soft hyphen), private use and unassigned code points (nothing or a box), line
    # separators, and every other invisible character (variation selectors, Hangul fillers).
    return unsafe_char(ch)


def escape_text(text: str, *, one_line: bool = False) -> str:
    """``text`` with every invisible or control character written as ``\\uXXXX`` (or
    ``\\U000XXXXX``), and ``<!--`` as ``&lt;!--`` so a comment cannot hide in markdown.

    Newlines and tabs stay unless ``one_line`` (a name quoted inside a sentence, where a
    newline would start a line of the server's choosing). Visible text, including every
    script and emoji (and the joiners inside emoji sequences and Persian or Indic words), is
    unchanged.
    """
    if text.isascii() and text.isprintable() and "<!--" not in text:
        return text
    out: list[str] = []
    for index, ch in enumerate(text):
        if (
            _invisible(ch, one_line)
            and not _emoji_joiner(text, index, index + 1)
            and not _emoji_style(text, index)
        ):
            code = ord(ch)
            out.append(f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}")
        else:
            out.append(ch)
    return _HTML_COMMENT_OPEN.sub("&lt;!--", "".join(out))


def _excerpt(text: str, start: int, end: int) -> str:
    lo = max(0, start - _EXCERPT_CONTEXT)
    hi = min(len(text), end + _EXCERPT_CONTEXT)
    body = " ".join(escape_text(text[lo:hi]).split())
    return ("…" if lo else "") + body + ("…" if hi < len(text) else "")


# -- patterns ----------------------------------------------------------------------------------

_I = re.IGNORECASE
_ANY = r"(?:all|any|every|the|your|my|its|these|those|prior|previous|above|earlier|other|system|user'?s?|original|existing|\s)*"

_OVERRIDE: list[tuple[re.Pattern[str], str]] = [
    (
        _compile(
            rf"\b(?:ignore|disregard|forget)s?\b{_ANY}"
            r"(?:instructions?|directions?|prompts?|rules|guidelines|guardrails|system\s+messages?|"
            r"safety\s+(?:checks?|policies|rules))\b",
            _I,
        ),
        "tells the model to ignore instructions",
    ),
    (
        _compile(
            rf"\b(?:override|bypass|overrule|supersede)s?\b{_ANY}"
            r"(?:instructions?|system\s+(?:prompts?|messages?)|guidelines|guardrails|"
            r"safety\s+(?:checks?|policies|rules))\b",
            _I,
        ),
        "tells the model to override instructions",
    ),
    (
        _compile(
            r"\b(?:(?:do\s+not|don'?t|never|without)\s+(?:tell(?:ing)?|inform(?:ing)?|notify(?:ing)?|"
            r"mention(?:ing)?|reveal(?:ing)?|alert(?:ing)?|let(?:ting)?)\s+(?:this\s+|that\s+|it\s+|anything\s+)?"
            r"(?:to\s+)?(?:the\s+)?user|(?:hide|conceal|keep)\s+(?:this|it|that)\s+(?:secret\s+)?from\s+the\s+user)\b",
            _I,
        ),
        "tells the model to keep something from the user",
    ),
    (
        _compile(
            r"\b(?:before|instead\s+of|rather\s+than|in\s+place\s+of)\s+(?:using|calling|invoking|running)?\s*"
            r"(?:any|all|every)\s+(?:other|another)\s+(?:mcp\s+)?(?:tools?|servers?|functions?)\b",
            _I,
        ),
        "tells the model to act before or instead of other tools",
    ),
    (
        _compile(
            r"\b(?:never|do\s+not|don'?t)\s+(?:use|call|invoke)\s+(?:any\s+)?(?:the\s+)?(?:other|another)\s+"
            r"(?:mcp\s+)?(?:tools?|servers?)\b",
            _I,
        ),
        "tells the model not to use other tools",
    ),
    (
        _compile(r"<\s*/?\s*(?:important|system|instructions?|admin|override)\s*>", _I),
        "carries a pseudo-system tag",
    ),
    (
        _compile(r"\byou\s+are\s+now\b|\bnew\s+(?:system\s+)?instructions\s*:", _I),
        "tries to redefine the model's role",
    ),
]

_SECRET_FILES = _compile(
    r"(?:~|\$HOME|%USERPROFILE%|/home/[\w.-]+|/root)?/?\.ssh\b(?:/[\w.-]*)?"
    r"|\bid_(?:rsa|dsa|ecdsa|ed25519)\b(?:\.pub)?"
    r"|(?<![\w/.-])\.env(?:\.[\w-]+)?(?![\w-])"
    r"|\.aws/credentials\b|\.netrc\b|\.pgpass\b|\.npmrc\b|\.pypirc\b|\.git-credentials\b"
    r"|\.docker/config\.json\b|\.kube/config\b|/etc/(?:passwd|shadow)\b"
    r"|\b(?:mcp|claude_desktop_config)\.json\b|\.cursor/|\.gnupg\b|\bwallet\.dat\b",
    _I,
)
_SECRET_VERB = _compile(
    r"\b(?:read|cat|open|send|forward|upload|post|transmit|exfiltrate|leak|include|append|attach|"
    r"embed|copy|paste|pass|collect|extract|dump|grab|print|output|contents?\s+of)\b",
    _I,
)
_SECRET_WINDOW = 80
_SECRET_ASK = _compile(
    r"\b(?:read|send|forward|upload|post|transmit|exfiltrate|leak|include|append|attach|embed|copy|"
    r"paste|pass|collect|extract|dump|grab)\b[^.;!?\n]{0,60}?"
    r"\b(?:the\s+user'?s?|all(?:\s+the)?|any|every|their|stored|saved)\s+(?:[\w-]+\s+){0,2}?"
    r"(?:api[\s_-]?keys?|(?:access|auth|bearer|session|refresh)?\s?tokens?|passwords?|credentials|"
    r"secrets|private\s+keys?|ssh\s+keys?|cookies|environment\s+variables|env\s+vars)\b",
    _I,
)


def _secret_files(text: str) -> Iterator[tuple[int, int]]:
    """Secret file paths with a verb of reading or sending near them."""
    for match in _SECRET_FILES.finditer(text):
        before = text[max(0, match.start() - _SECRET_WINDOW) : match.start()]
        after = text[match.end() : match.end() + _SECRET_WINDOW // 2]
        if _SECRET_VERB.search(before) or re.match(
            r"[\s`'\"]*(?:contents?|and\s+(?:send|pass))\b", after, _I
        ):
            yield match.start(), match.end()


# The invisible characters (keen._text.HIDDEN: zero-width, bidi, tags, variation selectors,
# Hangul fillers...), the joiners (a lone one in a word or emoji is let through by
# _emoji_joiner) and the controls.
_HIDDEN_CHARS = _compile(f"(?:[\u200c\u200d\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]|{HIDDEN})+")
_HTML_COMMENT = _compile(r"<!--.*?(?:-->|$)", re.DOTALL)


# Cyrillic and Greek letters a reader takes for Latin ones (after case folding): a subset of
# Unicode Technical Standard #39's confusables, the ones tool names are spoofed with.
_LOOKALIKES = str.maketrans(
    "аерсуохѕіјԁһԛԝӏɡοαρνικτυχ",
    "aepcyoxsijdhqwlgoapvikt" + "ux",
)


def skeleton(name: str) -> str:
    """``name`` as a reader takes it: NFKC (fullwidth and other compatibility forms become
    ASCII), without invisible characters (:data:`keen._text.INVISIBLE_CHARS`: a zero-width
    space, a variation selector, a Hangul filler) nor joiners, case folded, and
    Cyrillic or Greek look-alikes of Latin letters mapped to those (``ѕend_Еmail`` reads as
    ``send_email``). Two tool names with one skeleton name the same tool to a model or a person."""
    folded = unicodedata.normalize("NFKC", name).casefold().translate(_LOOKALIKES)
    if folded.isascii():
        return folded
    return "".join(ch for ch in folded if not invisible(ch) and ch not in "\u200c\u200d")


def _emoji_joiner(text: str, start: int, end: int) -> bool:
    """A lone ZWJ/ZWNJ between two letters or symbols of one script (emoji sequences,
    Persian, Indic) is ordinary writing, not hiding."""
    if end - start != 1 or text[start] not in "\u200c\u200d" or start == 0 or end >= len(text):
        return False
    before, after = text[start - 1], text[end]
    if before.isascii() or after.isascii():
        return False
    cats = unicodedata.category(before)[0] + unicodedata.category(after)[0]
    return cats in ("SS", "LL", "ML", "LM", "MM", "SM", "MS")


def _emoji_style(text: str, index: int) -> bool:
    """A lone emoji presentation selector (U+FE0E, U+FE0F) right after a visible non-ASCII
    character (``⚠️``) is ordinary writing, as :data:`keen._text.HIDDEN` has it."""
    return text[index] in "\ufe0e\ufe0f" and not hidden_at(text, index)


def _hidden(text: str) -> Iterator[tuple[int, int, str]]:
    for match in _HIDDEN_CHARS.finditer(text):
        if _emoji_joiner(text, match.start(), match.end()):
            continue
        names = sorted({unicodedata.name(ch, f"U+{ord(ch):04X}") for ch in match.group()})
        yield match.start(), match.end(), "hidden characters: " + ", ".join(names[:3]).lower()
    for match in _HTML_COMMENT.finditer(text):
        yield match.start(), match.end(), "an HTML comment (invisible when rendered)"


_DISTINCTIVE = _compile(r"[_\-.]|[a-z][A-Z]")


def _distinctive(name: str) -> bool:
    return len(name) >= 4 and bool(_DISTINCTIVE.search(name.strip("_-.")))


_TOKEN = _compile(r"[A-Za-z0-9_][A-Za-z0-9_.:/-]*")
_NAME = _compile(r"[A-Za-z0-9_-]+")
_MCP_PREFIX = "mcp__"  # Claude Code's mcp__<server>__<tool>
_CURSOR = "mcp_tool_"  # Cursor's prefix: mcp_tool_<name>


def _compound(token: str) -> bool:
    """May ``token`` be qualified (``server.tool``, ``server/tool``, ``server:tool``,
    ``mcp__server__tool``) or prefixed (``mcp_tool_x``)? Plain ``in`` tests: this runs for
    every distinct token of every text."""
    return "." in token or "/" in token or ":" in token or "__" in token or token.startswith(_CURSOR)


_CACHED_TEXTS = 65_536


@dataclass(frozen=True, slots=True)
class _Split:
    """A text's name-like tokens (trailing ``.:/-`` cut): where each starts, in order of
    first appearance; all of them as a set; those that may be qualified or prefixed."""

    starts: dict[str, tuple[int, ...]]
    tokens: frozenset[str]
    compound: tuple[str, ...]


@functools.lru_cache(maxsize=_CACHED_TEXTS)
def _split(text: str) -> _Split:
    """``text`` split into tokens, cached per text: a server's tools are scanned again
    whenever the set of servers changes, and their texts rarely do."""
    places: dict[str, list[int]] = {}
    for match in _TOKEN.finditer(text):
        places.setdefault(match.group().rstrip(".:/-"), []).append(match.start())
    compound = tuple(t for t in places if _compound(t))
    return _Split({t: tuple(s) for t, s in places.items()}, frozenset(places), compound)


_PREFER = _compile(
    r"\b(?:instead\s+of|rather\s+than|in\s+place\s+of|in\s+preference\s+to|prefer(?:red)?\s+(?:over|to)|"
    r"replaces?|supersedes?|(?:do\s+not|don'?t|never)\s+(?:use|call)|not\s+the\s+one)\b",
    re.IGNORECASE,
)
_PREFER_WINDOW = 60


class ShadowIndex:
    """Every configured server's tools, indexed once for the shadowing check.

    A bare name counts only when distinctive (see the module docstring); a qualified
    ``server.tool``, ``server/tool``, ``server:tool`` or ``mcp__server__tool`` counts when
    ``tool`` is one of that server's names; Cursor's ``mcp_tool_<name>`` counts as the name.
    Text is split into name-like tokens and each is looked up, so the cost is linear in the
    text, whatever the number of configured tools.

    ``configured`` maps each server to its tool names, or to its :class:`Tool` objects:
    with those, :meth:`redefined` also finds a tool another server defines otherwise under
    the same name.
    """

    def __init__(self, configured: Mapping[str, Iterable[str | Tool]]) -> None:
        self.tools: dict[str, set[str]] = {}
        # skeleton -> server -> its tools with that skeleton: a server may list several
        # (Send_Email beside send_email), and each is compared.
        self._definitions: dict[str, dict[str, list[Tool]]] = {}
        for server, items in configured.items():
            names = self.tools.setdefault(server, set())
            for item in items:
                if isinstance(item, Tool):
                    names.add(item.name)
                    self._definitions.setdefault(skeleton(item.name), {}).setdefault(server, []).append(item)
                else:
                    names.add(item)
        owners: dict[str, list[str]] = {}
        for server, names in self.tools.items():
            for name in names:
                if _distinctive(name):
                    owners.setdefault(name, []).append(server)
        # Sorted once here: a lookup takes the first owner that is not the asking server.
        self._owners: dict[str, tuple[str, ...]] = {name: tuple(sorted(o)) for name, o in owners.items()}
        # A token that is none of these, nor qualified or prefixed, names nothing here.
        self._known = frozenset(self._owners) | frozenset(self.tools)

    def _other_owner(self, name: str, server: str | None) -> str | None:
        """The first (by name) server other than ``server`` that defines the distinctive ``name``."""
        owners = self._owners.get(name)
        if not owners:
            return None
        if owners[0] != server:
            return owners[0]
        return owners[1] if len(owners) > 1 else None  # each server is there once

    def find(self, text: str, *, server: str | None, own: AbstractSet[str]) -> Iterator[tuple[int, int, str]]:
        """Spans of ``text`` naming a tool of a server other than ``server``: not one of ``own``
        unless another server defines that name too and the text prefers this one to it."""
        if not self.tools:
            return
        found: list[tuple[int, int, str]] = []
        # Only the tokens that may name something are looked up (the split is cached per
        # text, the intersection runs in C), each once, then its places are checked.
        split = _split(text)
        for token in (split.tokens & self._known).union(split.compound):
            starts = split.starts[token]
            end_of = len(token)
            reason = self._lookup(token, server=server, own=own)
            if reason is not None:
                found += [(start, start + end_of, reason) for start in starts]
            elif token in self.tools and token != server:
                reason = f'tells the model to use it instead of the server "{token}"'
                found += [(start, start + end_of, reason) for start in starts if _prefers(text, start)]
            elif token in own:
                # An own name another server also defines: "use this send_email, not the other".
                other = self._other_owner(token, server)
                if other is not None:
                    reason = f'tells the model to use it instead of "{token}" of the server "{other}"'
                    found += [
                        (start, start + end_of, reason)
                        for start in starts
                        if _prefers(text, start, start + end_of)
                    ]
        found.sort(key=lambda span: span[0])
        yield from found

    def redefined(self, tool: Tool) -> Tool | None:
        """The tool of another server than ``tool.server`` named ``tool.name`` with another
        definition, or one whose name ``tool.name`` only imitates (:func:`skeleton`:
        ``ｓend_email``, ``Send_Email`` and ``ѕend_email`` with a Cyrillic letter all read as
        ``send_email``, which is not flagged for them); None when there is none. Only servers
        given as :class:`Tool` objects are compared."""
        from keen.trust.fingerprint import body_fingerprint

        defined = self._definitions.get(skeleton(tool.name), {})
        others = [t for s, listed in sorted(defined.items()) if s != tool.server for t in listed]
        if not others:
            return None
        mine = body_fingerprint(tool)
        for other in others:
            if other.name == tool.name and body_fingerprint(other) != mine:
                return other
        # A look-alike name is the spoof, not the plain one it imitates (send_email stays unflagged).
        if skeleton(tool.name) != tool.name:
            for other in others:
                if other.name != tool.name:
                    return other
        return None

    def _lookup(self, token: str, *, server: str | None, own: AbstractSet[str]) -> str | None:
        names = (token, token.removeprefix(_CURSOR)) if token.startswith(_CURSOR) else (token,)
        for name in names:
            if name in own:
                return None
            other = self._other_owner(name, server)
            if other is not None:
                return f'names the tool "{name}" of the server "{other}"'
        qualified = _qualified(token) if _compound(token) else None
        if qualified is not None:
            other, tool = qualified
            if other != server and tool in self.tools.get(other, ()):
                return f'names the tool "{tool}" of the server "{other}"'
        return None


def _qualified(token: str) -> tuple[str, str] | None:
    """``token`` as ``(server, tool)`` when it reads ``[mcp__]server<sep>tool``, else None.

    ``sep`` is one of ``.``, ``/``, ``:`` or ``__``; both names are ``[A-Za-z0-9_-]+``; the
    server is the shortest that fits, as the regular expression
    ``(?:mcp__)?(?P<server>[A-Za-z0-9_-]+?)(?:[./:]|__)(?P<tool>[A-Za-z0-9_-]+)`` would
    fullmatch it. Split by hand: that expression backtracks over every ``__`` of a token
    with a stray ``.`` at its end, quadratic in the token (16,000 characters: 2 s).
    """
    for start in (len(_MCP_PREFIX), 0) if token.startswith(_MCP_PREFIX) else (0,):
        body = token[start:]
        # The tool holds none of ./:, so the separator is the first of them when there is one.
        cut = min((i for i in (body.find("."), body.find("/"), body.find(":")) if i >= 0), default=-1)
        if cut >= 0:
            server, tool = body[:cut], body[cut + 1 :]
        else:
            cut = body.find("__", 1)
            if cut < 0:
                continue
            server, tool = body[:cut], body[cut + 2 :]
        if _NAME.fullmatch(server) and _NAME.fullmatch(tool):
            return server, tool
    return None


def _prefers(text: str, start: int, end: int | None = None) -> bool:
    """A phrase of preference ("instead of", "rather than", "do not use" ...) just before
    ``start`` in ``text`` (or just after ``end``, when given: "use this X instead of ...")."""
    after = text[end : end + _PREFER_WINDOW] if end is not None else ""
    return _PREFER.search(text[max(0, start - _PREFER_WINDOW) : start] + " " + after) is not None


# -- scanning ----------------------------------------------------------------------------------


def scan_text(
    text: str,
    *,
    field: str = "description",
    shadow: ShadowIndex | None = None,
    server: str | None = None,
    own: Iterable[str] = (),
) -> list[Flag]:
    """Flags in one piece of tool text.

    Args:
        text: the text (description, title, parameter description).
        field: where it came from, recorded in each flag (``description``,
            ``inputSchema.properties.path.description`` ...).
        shadow: the configured servers' tool names (for shadowing); none: no shadowing check.
        server: the server the text belongs to (its own names never count as shadowing).
        own: this server's own tool names (never shadowing, even if another server has them).

    Returns:
        Flags in order of kind, then position; one per kind and reason (the first span).
    """
    if not text:
        return []
    found: list[Flag] = []

    def add(kind: FlagKind, start: int, end: int, reason: str) -> None:
        found.append(Flag(kind, field, start, end, text[start:end], _excerpt(text, start, end), reason))

    if shadow is not None:
        own_set = own if isinstance(own, set | frozenset) else set(own)
        for start, end, reason in shadow.find(text, server=server, own=own_set):
            add("shadowing", start, end, reason)
    for kind, start, end, reason in _text_findings(text):
        add(kind, start, end, reason)
    # One flag per finding per field: a tag opened and closed, or a name said twice, is one.
    seen: set[tuple[str, str]] = set()
    unique = []
    for flag in found:
        key = (flag.kind, flag.reason)
        if key not in seen:
            seen.add(key)
            unique.append(flag)
    return unique


@functools.lru_cache(maxsize=_CACHED_TEXTS)
def _text_findings(text: str) -> tuple[tuple[FlagKind, int, int, str], ...]:
    """The findings of ``text`` that depend on it alone (override, secrets, hidden), in order
    of kind, then position. Cached per text, so a tool scanned again costs only the
    shadowing check, which depends on the other servers."""
    found: list[tuple[FlagKind, int, int, str]] = []
    for pattern, reason in _OVERRIDE:
        for match in pattern.finditer(text):
            found.append(("override", match.start(), match.end(), reason))
    for start, end in _secret_files(text):
        found.append(("secrets", start, end, "asks to read or send a credential or secret file"))
    for match in _SECRET_ASK.finditer(text):
        found.append(("secrets", match.start(), match.end(), "asks to read or send credentials"))
    for start, end, reason in _hidden(text):
        found.append(("hidden", start, end, reason))
    return tuple(found)


def _texts(tool: Tool) -> Iterator[tuple[str, str]]:
    if tool.title:
        yield "title", tool.title
    yield "description", tool.description
    budget = [_MAX_FIELDS]

    def walk(node: Any, path: str) -> Iterator[tuple[str, str]]:
        if budget[0] <= 0:
            return
        if isinstance(node, dict):
            for key, value in node.items():
                budget[0] -= 1
                sub = f"{path}.{key}"
                if key in ("description", "title") and isinstance(value, str):
                    yield sub, value
                elif isinstance(value, dict | list):
                    yield from walk(value, sub)
        elif isinstance(node, list):
            for index, value in enumerate(node):
                budget[0] -= 1
                yield from walk(value, f"{path}[{index}]")

    yield from walk(tool.input_schema, "inputSchema")


def _enum_words(schema: Any, budget: int = _MAX_FIELDS) -> set[str]:
    words: set[str] = set()
    stack = [schema]
    while stack and budget > 0:
        node = stack.pop()
        budget -= 1
        if isinstance(node, dict):
            enum = node.get("enum")
            if isinstance(enum, list):
                words.update(v for v in enum if isinstance(v, str))
            stack.extend(v for v in node.values() if isinstance(v, dict | list))
        elif isinstance(node, list):
            stack.extend(v for v in node if isinstance(v, dict | list))
    return words


def scan_tool(tool: Tool, *, shadow: ShadowIndex | None = None, own: Iterable[str] = ()) -> list[Flag]:
    """Flags in a tool's title, description and inputSchema descriptions/titles.

    ``shadow`` holds the configured servers' tool names (the tool's own server is skipped);
    ``own`` is the tool's own server's tool names (default: just this tool's name).
    """
    texts, enum_words = _parts(tool)
    # The tool's own enum values are its vocabulary (operation="get_stats"), not a reference.
    own_set = own if isinstance(own, set | frozenset) else set(own)
    extra = enum_words | {tool.name}
    own_names = own_set if extra <= own_set else own_set | extra  # scan_server's own: no copy per tool
    flags: list[Flag] = []
    other = shadow.redefined(tool) if shadow is not None else None
    if other is not None:
        name = tool.name
        if other.name == name:
            reason = f'defines "{name}", a tool the server "{other.server}" defines otherwise'
        else:
            reason = f'defines "{name}", which reads as "{other.name}", a tool of the server "{other.server}"'
        flags.append(Flag("shadowing", "name", 0, len(name), name, _excerpt(name, 0, len(name)), reason))
    for field, text in texts:
        flags.extend(scan_text(text, field=field, shadow=shadow, server=tool.server, own=own_names))
    return flags


_CACHED_TOOLS = 65_536
_tool_parts: collections.OrderedDict[int, tuple[Tool, tuple[tuple[str, str], ...], frozenset[str]]] = (
    collections.OrderedDict()
)
_tool_parts_lock = threading.Lock()


def _parts(tool: Tool) -> tuple[tuple[tuple[str, str], ...], frozenset[str]]:
    """``tool``'s texts by field and its enum words, walked once per tool object (a Tool is
    frozen and a re-list makes new ones). The entry keeps its tool, so its ``id`` is not
    reused while cached; the least recently used go past ``_CACHED_TOOLS``."""
    with _tool_parts_lock:
        hit = _tool_parts.get(id(tool))
        if hit is not None and hit[0] is tool:
            _tool_parts.move_to_end(id(tool))
            return hit[1], hit[2]
    texts, words = tuple(_texts(tool)), frozenset(_enum_words(tool.input_schema))
    with _tool_parts_lock:
        _tool_parts[id(tool)] = (tool, texts, words)
        if len(_tool_parts) > _CACHED_TOOLS:
            _tool_parts.popitem(last=False)
    return texts, words


def scan_server(
    server: str, tools: Iterable[Tool], configured: Mapping[str, Iterable[str | Tool]] | ShadowIndex
) -> dict[str, list[Flag]]:
    """Flags of every tool of ``server``, by tool name (flagged tools only).

    ``configured`` maps every configured server (this one may be included; it is skipped)
    to its tool names or tools, or is a :class:`ShadowIndex` built from such a map.
    """
    tools = list(tools)
    own = {t.name for t in tools}
    shadow = configured if isinstance(configured, ShadowIndex) else ShadowIndex(configured)
    result: dict[str, list[Flag]] = {}
    for tool in tools:
        flags = scan_tool(tool, shadow=shadow, own=own)
        if flags:
            result[tool.name] = flags
    return result


def scan_servers(tools: Mapping[str, Iterable[Tool]]) -> dict[str, dict[str, list[Flag]]]:
    """Flags of every server's tools, each server's shadowing checked against all the others.

    Args:
        tools: server name -> its tools (e.g. every connected server's latest tools/list).

    Returns:
        server -> tool name -> flags, flagged tools only (servers without any are left out).
    """
    listed = {server: list(found) for server, found in tools.items()}
    shadow = ShadowIndex(listed)
    result: dict[str, dict[str, list[Flag]]] = {}
    for server, found in listed.items():
        flagged = scan_server(server, found, shadow)
        if flagged:
            result[server] = flagged
    return result


def flag_kinds(flags: Mapping[str, list[Flag]]) -> dict[str, list[str]]:
    """tool name -> the sorted kinds of its flags: the compact form ``keen mcp list --json`` shows."""
    return {name: sorted({f.kind for f in found}) for name, found in sorted(flags.items())}


def flag_change(
    change: ToolsChanged, tools_by_name: Mapping[str, Tool], others: Mapping[str, Iterable[str | Tool]]
) -> ToolsChanged:
    """``change`` with the flags its added and changed tools raise (the ``flags`` of a
    ``capability.diff`` event: :class:`keen.mcp.ToolsChanged`).

    Args:
        change: what a re-list found.
        tools_by_name: the server's current tools.
        others: the other servers' tools or tool names (the shadowing index).
    """
    touched = set(change.added) | {c.name for c in change.changed}
    if not touched:
        return change
    shadow, own = ShadowIndex(others), set(tools_by_name)
    flags: dict[str, tuple[str, ...]] = {}
    try:
        for name in sorted(touched):
            tool = tools_by_name.get(name)
            found = scan_tool(tool, shadow=shadow, own=own) if tool is not None else []
            if found:
                flags[name] = tuple(sorted({f.kind for f in found}))
    except Exception:  # a flag scan must never keep the change from being told
        logger.exception("flag scan failed for %s", change.server)
    return replace(change, flags=flags) if flags else change
