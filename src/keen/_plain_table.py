"""A listing written without rich, byte for byte as rich would print it, when its layout is
plain: every cell on one line at its whole width.

Importing rich's console and table costs more than the rest of a ``keen skills list``
(about 165 of its 307 million instructions; ``bench/cli_start.py``). When the listing's
every text is printable ASCII (one cell a character), and the widest layout of the columns
left after the narrow-terminal hiding (:class:`keen._tables.Listing`) fits, rich wraps,
folds and cuts nothing: each column is as wide as its widest cell, two spaces apart, the
title and the header bold, a rule of ``─`` under the header, the note on what was hidden
dim. :func:`write_listing` writes exactly that, having decided what rich's ``Console``
would (terminal or not, styled or not, how wide) from the same environment variables and
descriptors; anything else (another platform, an encoding that is not UTF, Jupyter, a
layout that wraps, text of other widths, markup or emoji codes in the title) returns False
and the caller prints with rich. ``tests/test_plain_table.py`` holds it to rich's output in
real terminals and pipes.
"""

from __future__ import annotations

import builtins
import os
import sys
from collections.abc import Mapping, Sequence
from typing import IO, Literal, NamedTuple

__all__ = ["KEY_SLACK", "MIN_TEXT", "Col", "console_layout", "write_listing"]

MIN_TEXT = 24
"""The width a text column is given before other columns are hidden to make room."""
KEY_SLACK = 24
"""A key wider than the terminal less this many cells folds, so its row keeps some text."""

_BOLD, _DIM, _RESET = "\x1b[1m", "\x1b[2m", "\x1b[0m"
_STD_STREAMS = (0, 1, 2)  # rich sizes the console from the first standard stream that is a terminal


class Col(NamedTuple):
    """One column of a listing (:class:`keen._tables.Listing`, :func:`write_listing`).

    Attributes:
        header: The column's heading.
        kind: ``key`` (identifies the row: whole, one line), ``value`` (short: one line) or
            ``text`` (free text: at most ``lines`` lines, cut with an ellipsis).
        lines: The line budget of a ``text`` column.
        drop: 0 for a column always shown; on a narrow terminal the column with the
            highest rank is hidden first (the last of equal ranks first).
        justify: ``left`` or ``right`` (numbers).
        min_width: A ``text`` column's narrowest width before other columns are hidden.
    """

    header: str
    kind: Literal["key", "value", "text"] = "value"
    lines: int = 2
    drop: int = 0
    justify: Literal["default", "left", "center", "right", "full"] = "left"
    min_width: int = MIN_TEXT


def console_layout(file: IO[str], environ: Mapping[str, str] | None = None) -> tuple[bool, int] | None:
    """What a default rich ``Console`` writing to ``file`` would do (rich 15's
    ``Console.is_terminal``, ``is_dumb_terminal``, ``size`` and ``_detect_color_system``):
    ``(styled, width)``, whether it writes style codes and its width in cells; ``None`` where
    this module does not follow rich (Windows, Jupyter, IDLE, an encoding that is not UTF).
    """
    env = os.environ if environ is None else environ
    if sys.platform == "win32" or hasattr(builtins, "get_ipython"):
        return None
    if getattr(sys.stdin, "__module__", "").startswith("idlelib"):
        return None
    if not (getattr(file, "encoding", "utf-8") or "utf-8").lower().startswith("utf"):
        return None  # rich draws the rule in ASCII then
    compatible = env.get("TTY_COMPATIBLE", "")
    force = env.get("FORCE_COLOR")
    if compatible in ("0", "1"):
        terminal = compatible == "1"
    elif force is not None:
        terminal = force != ""
    else:
        try:
            terminal = file.isatty()
        except ValueError:
            terminal = False
    dumb = terminal and env.get("TERM", "").lower() in ("dumb", "unknown")
    columns, lines = env.get("COLUMNS"), env.get("LINES")
    if columns is not None and columns.isdigit():
        width = int(columns)
        if dumb and not (lines is not None and lines.isdigit()):
            width = 80
    elif dumb:
        width = 80
    else:
        width = 0
        for fd in _STD_STREAMS:
            try:
                width = os.get_terminal_size(fd).columns
            except (AttributeError, ValueError, OSError):
                continue
            break
        width = width or 80
    # On POSIX every terminal but a dumb one has a colour system: bold and dim are written
    # (NO_COLOR removes colours, not attributes).
    return terminal and not dumb, width


def write_listing(
    columns: Sequence[Col],
    rows: Sequence[Sequence[str]],
    *,
    title: str | None = None,
    whole: str = "",
    file: IO[str] | None = None,
    environ: Mapping[str, str] | None = None,
) -> bool:
    """Write the listing to ``file`` (stdout) as :class:`keen._tables.Listing` printed by a
    default rich ``Console`` would, when its layout is plain (module doc); else write
    nothing and return False.

    Args:
        columns: The columns, in order.
        rows: One string per column each, already escaped for a terminal and on one line
            (:func:`keen._terminal.terminal_text` with ``one_line``).
        title: A title above the table (left-aligned), or None.
        whole: Where the whole of every row is, named in the note printed when a column is
            hidden.
        file: Where to write; ``sys.stdout`` when None.
        environ: The environment rich reads (``os.environ`` when None).

    Returns:
        True when written.
    """
    out = sys.stdout if file is None else file
    layout = console_layout(out, environ)
    if layout is None:
        return False
    styled, width = layout
    # rich renders a title and the headers as markup with emoji codes: those are left to it.
    marked = [c.header for c in columns] + ([] if title is None else [title])
    if any("[" in t or ":" in t for t in marked) or any(c.justify not in ("left", "right") for c in columns):
        return False
    texts = marked + [cell for row in rows for cell in row]
    if not all(t.isascii() and t.isprintable() for t in texts) or any(len(r) != len(columns) for r in rows):
        return False
    cap = max(width - KEY_SLACK, width // 2, 1)
    if any(c.kind == "key" and len(row[i]) > cap for row in rows for i, c in enumerate(columns)):
        return False  # rich folds that key

    def narrowest(i: int) -> int:
        # Listing._narrowest's measures, clamped to the width as rich's Measurement.get is.
        col = columns[i]
        widths = [len(col.header)]
        for row in rows:
            value = row[i]
            if col.kind == "text":
                widths.append(min(len(value), width, col.min_width))
            elif col.kind == "key":
                widths.append(min(len(value), width))
            else:  # rich's minimum for a text: its longest word
                widths.append(min(max((len(word) for word in value.split()), default=len(value)), width))
        return max(widths)

    shown = list(range(len(columns)))
    droppable = sorted((i for i, c in enumerate(columns) if c.drop), key=lambda i: (columns[i].drop, i))
    least = {i: narrowest(i) for i in shown}
    while droppable and sum(least[i] for i in shown) + 2 * (len(shown) - 1) > width:
        shown.remove(droppable.pop())
    widths = {i: max([len(columns[i].header)] + [len(row[i]) for row in rows]) for i in shown}
    table_width = sum(widths.values()) + 2 * (len(shown) - 1)
    if table_width > width or (title is not None and len(title) > table_width):
        return False  # rich would wrap or cut
    hidden = [columns[i].header for i in range(len(columns)) if i not in shown]
    note = f"{', '.join(hidden)} hidden" + (f"; see {whole}" if whole else "") if hidden else ""
    if len(note) > width:
        return False  # rich wraps the note at words

    def styled_as(text: str, code: str) -> str:
        return f"{code}{text}{_RESET}" if styled else text

    def fit(text: str, i: int) -> str:
        return text.rjust(widths[i]) if columns[i].justify == "right" else text.ljust(widths[i])

    lines: list[str] = []
    if title is not None:
        lines.append(styled_as(title.ljust(table_width), _BOLD))
    head = [styled_as(fit(columns[i].header, i), _BOLD) for i in shown]
    lines.append(f"{styled_as(' ', _BOLD)} ".join(head))
    lines.append("─" * table_width)
    lines += ["  ".join(fit(row[i], i) for i in shown) for row in rows]
    if note:
        lines.append(styled_as(note, _DIM))
    out.write("\n".join(lines) + "\n")
    out.flush()
    return True
