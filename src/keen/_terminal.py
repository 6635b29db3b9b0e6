"""Server text on the user's terminal: escaped, literal, bounded.

Tool names, descriptions, results, errors and stderr tails are written by a server, which
is untrusted (MCP specification, "Security Best Practices"). A terminal executes the
control sequences in what it prints: OSC 52 writes the clipboard, ``ESC [2J`` clears the
screen, bidi overrides reorder what the user reads. So every piece of server text the CLI
renders goes through :func:`terminal_text` (control characters become visible escapes
such as ``\\x1b``, and so do the invisible ones that would hide text from the reader),
tables get :func:`cell` (a ``rich.text.Text``: no markup, no
``:emoji:`` codes), ``--json`` output goes through :func:`safe_json` (still exact JSON),
and a long result is cut by :func:`cap` with a note on how to get all of it.
"""

from __future__ import annotations

import json
import re
import shlex
from typing import TYPE_CHECKING, Any

from keen._text import HIDDEN, shorten

if TYPE_CHECKING:
    from rich.text import Text

__all__ = [
    "HUMAN_OUTPUT_CHARS",
    "NAME_CHARS",
    "STILL_STOPPING",
    "cap",
    "cell",
    "human_result",
    "name_in_message",
    "safe_json",
    "shell_word",
    "terminal_text",
    "visible_json",
]

HUMAN_OUTPUT_CHARS = 64_000
"""Human (non ``--json``) output of one result is cut after this many characters."""

STILL_STOPPING = b"keen: still stopping the MCP servers (up to about 10 s)\n"
"""What a second Ctrl-C writes to stderr while the first one's shutdown stops the servers
(README "Stopping servers"): raw bytes, written from a signal handler with ``os.write``."""

NAME_CHARS = 128
"""How much of a server's name for something (a tool, a prompt) an error message quotes: a
name MCP says to use fits whole (2025-11-25, "Tools > Tool Names": 1 to 128 characters)."""

# C0 controls but tab and newline, DEL, C1 controls (0x9b is a one-byte CSI) and the Unicode
# line/paragraph separators; with them, every character a terminal draws as nothing or that
# reorders what is read (keen._text.HIDDEN: bidi controls, Unicode tags spelling out ASCII a
# model reads and a person never sees, zero-width spaces, variation selectors, Hangul fillers).
# A lone surrogate (JSON's "\ud800" escape without its pair) has no UTF-8 form: written raw,
# it stops the output with UnicodeEncodeError; shown as its escape, it is the same text.
_CONTROLS = "\x7f-\x9f\u2028\u2029\ud800-\udfff"
_UNSAFE = re.compile(f"[\x00-\x08\x0b-\x1f{_CONTROLS}]|{HIDDEN}")
_UNSAFE_IN_LINE = re.compile(f"[\x00-\x1f{_CONTROLS}]|{HIDDEN}")
# What json.dumps(ensure_ascii=False) leaves raw that a terminal would act on or not show.
_UNSAFE_IN_JSON = re.compile(f"[{_CONTROLS}]|{HIDDEN}")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    if code == 0x09:
        return "\\t"
    if code == 0x0A:
        return "\\n"
    if code > 0xFFFF:
        return f"\\U{code:08x}"
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def terminal_text(text: str, *, one_line: bool = False) -> str:
    """``text`` with every control character a terminal would act on, and every character it
    would draw as nothing (a Unicode tag, a zero-width space), shown as an escape (``\\x1b``,
    ``\\x00``, ``\\u202e``, ``\\U000e0041``); tabs and newlines kept unless ``one_line``."""
    return (_UNSAFE_IN_LINE if one_line else _UNSAFE).sub(_escape, text)


def name_in_message(name: str, limit: int = NAME_CHARS) -> str:
    """``name`` as an error message quotes it: on one line with every control or invisible
    character escaped (:func:`terminal_text`), cut to ``limit`` characters with ``…``.

    A tool or prompt name is the server's (untrusted, MCP specification "Security Best
    Practices"), as is one a model gives: a hostile 10,000-character name would otherwise fill
    a log line and a model's context, and a newline in it would start a line of its own. The
    exception keeps the whole name on its attributes (``tool``)."""
    # Escaped before the cut, so the bound holds for what is shown; only a head is escaped.
    return shorten(terminal_text(name[: limit * 2], one_line=True), limit)


def shell_word(text: str) -> str:
    """``text`` as one shell word, safe to print and to paste: :func:`shlex.quote`, or, when
    it holds control characters, the ``$'...'`` form (bash, zsh, ksh) with each one written
    as the escape :func:`terminal_text` shows (``$'evil\\x1b]52;...'``)."""
    if not _UNSAFE_IN_LINE.search(text):
        return shlex.quote(text)
    body = text.replace("\\", "\\\\").replace("'", "\\'")
    return "$'" + _UNSAFE_IN_LINE.sub(_shell_escape, body) + "'"


def _shell_escape(match: re.Match[str]) -> str:
    # In $'...' a \xHH is one byte: a C1 control (U+0080-U+009F) is written \u00HH instead.
    code = ord(match.group())
    return f"\\u{code:04x}" if 0x80 <= code <= 0xFF else _escape(match)


def cell(text: str | None, *, style: str = "") -> Text:
    """A table cell for server text: one line, escaped, printed literally (no markup, no emoji)."""
    # rich is imported here, for a table: the MCP layer imports this module for shell_word.
    from rich.text import Text

    return Text(terminal_text(text or "", one_line=True), style=style)


def _json_escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    if code > 0xFFFF:  # JSON spells a character past the BMP as its UTF-16 surrogate pair
        code -= 0x10000
        return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"
    return f"\\u{code:04x}"


def visible_json(text: str) -> str:
    """JSON text (``json.dumps`` with ``ensure_ascii=False``) with DEL, C1 controls, bidi
    marks and invisible characters written as ``\\uXXXX`` escapes: the same value, which a
    terminal cannot act on and a reader sees all of. JSON outside strings is ASCII, so only
    strings change form."""
    return _UNSAFE_IN_JSON.sub(_json_escape, text)


def safe_json(data: Any, *, indent: int | None = 2) -> str:
    """``data`` as JSON that a terminal cannot act on: the same value as ``json.dumps``
    (non-ASCII text stays readable), through :func:`visible_json`."""
    return visible_json(json.dumps(data, indent=indent, ensure_ascii=False, default=str))


def cap(text: str, limit: int = HUMAN_OUTPUT_CHARS) -> tuple[str, int]:
    """``(shown, cut)``: ``text`` cut to ``limit`` characters, and how many were cut."""
    if len(text) <= limit:
        return text, 0
    return text[:limit], len(text) - limit


def human_result(text: str, limit: int = HUMAN_OUTPUT_CHARS) -> str:
    """A tool result for a person: escaped, cut to ``limit`` characters of the original with
    a note saying how much was left out and how to get all of it; ends with a newline."""
    shown, cut = cap(text, limit)
    rendered = terminal_text(shown)
    if cut:
        rendered += (
            f"\n[{cut:,} more characters not shown ({len(text):,} in all); rerun with --json, or "
            "--output FILE to save the whole result]"
        )
    return rendered if rendered.endswith("\n") else rendered + "\n"
