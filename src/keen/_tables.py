"""Listings for a person's terminal that read well from 80 columns up, as ``gh``,
``kubectl`` or ``docker`` print theirs (the CLI's tables, and the REPL's).

Every table Keen prints has three kinds of column (:class:`Col`):

- ``key``: what identifies a row (a server, a tool, a skill, a session id). Never wrapped
  and never cut; the table makes room for it by hiding other columns first. Only a key
  wider than most of the terminal (a server may name a tool with hundreds of characters)
  is folded onto more lines, never cropped.
- ``value``: short values (a state, a count, a date): one line each.
- ``text``: free text (a summary, a last error). It takes the room the other columns
  leave, up to its whole length on a wide terminal, and is cut to ``lines`` lines with an
  ellipsis (:class:`Clip`); a fix worth keeping whole (``then run: keen mcp connect X``)
  can ride at its end as a ``tail`` that is never cut.

On a narrow terminal the columns with the highest ``drop`` rank are hidden until the
rest fits. When a column is hidden or a text cut, one dim line under the table says so
and where the whole of it is (``--json``, or a detail command): nothing is lost.

rich has no "at most N lines" for a cell and no columns that hide by priority, so
those two pieces are here; widths, wrapping and borders stay rich's own.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from rich import box
from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, RenderResult
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

if TYPE_CHECKING:
    from rich.console import JustifyMethod
    from rich.containers import Lines

__all__ = ["Clip", "Col", "Listing", "error_in_row"]

ELLIPSIS = "…"
MIN_TEXT = 24
"""The width a text column is given before other columns are hidden to make room."""
MIN_HEAD = 16
"""A text shows at least this many characters before its tail, or the tail is cut too."""
KEY_SLACK = 24
"""A key wider than the terminal less this many cells folds, so its row keeps some text."""


@dataclass(frozen=True)
class Col:
    """One column of a :class:`Listing`.

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
    justify: JustifyMethod = "left"
    min_width: int = MIN_TEXT


class Clip:
    """Free text cut to a line budget with an ellipsis, keeping ``tail`` whole at its end.

    Rendered at the width its column gets; ``cut`` tells afterwards whether anything was
    left out (the :class:`Listing` then says where the whole text is).
    """

    def __init__(self, text: str | Text, *, tail: str | Text = "", lines: int | None = None) -> None:
        self.text = Text(text) if isinstance(text, str) else text
        self.tail = Text(tail) if isinstance(tail, str) else tail
        self.lines = lines
        self.cut = False

    def whole(self) -> Text:
        """The text and its tail joined as one sentence, as ``keen.errors.with_hint`` does."""
        if not self.tail.plain:
            return self.text
        if not self.text.plain:
            return self.tail
        return Text.assemble(_trimmed(self.text, " .;"), "; ", self.tail)

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        widest = max((cell_len(line) for line in self.whole().plain.splitlines()), default=0)
        return Measurement(min(widest, MIN_TEXT), widest)

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield from self.fit(console, options.max_width)

    def fit(self, console: Console, width: int) -> list[Text]:
        """The wrapped lines at ``width``: all of them within budget, else a cut version."""
        budget = max(self.lines or 2, 1)
        whole = self.whole()
        lines = list(_wrap(console, whole, width))
        self.cut = len(lines) > budget
        if not self.cut:
            return lines
        if self.tail.plain and self.text.plain:
            kept = self._keep_tail(console, width, budget)
            if kept is not None:
                return kept
        # No tail, or the tail alone is over budget: the first lines, the last one ending in "…".
        shown = lines[:budget]
        last = shown[-1]
        last.rstrip()
        last.append(ELLIPSIS)
        last.truncate(width, overflow="ellipsis")
        return shown

    def _keep_tail(self, console: Console, width: int, budget: int) -> list[Text] | None:
        """``head…; tail`` with as much of the head as fits the budget, cut after a word."""

        def attempt(keep: int) -> Lines:
            head = self.text[:keep]
            # Cut after a whole word when one ends near the cut: "check that it…", not "check th…".
            space = head.plain.rfind(" ")
            if keep < len(self.text.plain) and space > max(keep - 12, 0):
                head = head[:space]
            head = _trimmed(head, " ,.;:")
            return _wrap(console, Text.assemble(head, ELLIPSIS, "; ", self.tail), width)

        low, high = min(MIN_HEAD, len(self.text.plain) // 2), len(self.text.plain)
        if len(attempt(low)) > budget:  # too little of the text would show: cut it all instead
            return None
        while low < high:  # the longest head that fits: more head never takes fewer lines
            middle = (low + high + 1) // 2
            if len(attempt(middle)) <= budget:
                low = middle
            else:
                high = middle - 1
        return list(attempt(low))


class _Key:
    """A key cell: one line at its whole width, folded only when wider than the terminal
    allows (:data:`KEY_SLACK`), never cropped."""

    def __init__(self, text: Text, terminal: int) -> None:
        self.text = text
        # From the terminal's width: rich measures a cell again at its column's width.
        self.cap = max(terminal - KEY_SLACK, terminal // 2, 1)

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        widest = max((cell_len(line) for line in self.text.plain.splitlines()), default=0)
        return Measurement(min(widest, self.cap), min(widest, self.cap))

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield from _wrap(console, self.text, options.max_width)


def _trimmed(text: Text, chars: str) -> Text:
    """``text`` without the ``chars`` at its end (styles kept)."""
    text = text.copy()
    extra = len(text.plain) - len(text.plain.rstrip(chars))
    if extra:  # right_crop(0) would empty it
        text.right_crop(extra)
    return text


def _wrap(console: Console, text: Text, width: int) -> Lines:
    return text.wrap(console, max(width, 1), overflow="fold")


Cell = str | Text | Clip


class Listing:
    """A table that fits the terminal it is printed on (see the module docstring).

    Args:
        columns: The columns, in order.
        title: A title above the table (left-aligned), or None.
        whole: Where the whole of every row is, named in the note printed when a column is
            hidden or a text cut, e.g. ``keen mcp list --json``.
    """

    def __init__(self, columns: Sequence[Col], *, title: str | None = None, whole: str = "") -> None:
        self.columns = list(columns)
        self.title = title
        self.whole = whole
        self.rows: list[list[Cell]] = []
        self.hidden: list[str] = []
        self.cut = False

    def add_row(self, *cells: Cell) -> None:
        """One row: a ``str`` or ``Text`` per column (``Clip`` for a text with a tail)."""
        if len(cells) != len(self.columns):
            raise ValueError(f"{len(cells)} cells for {len(self.columns)} columns")
        self.rows.append(list(cells))

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        return Measurement.get(
            console, options, self._table(self._fitting(console, options), options.max_width)
        )

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        shown = self._fitting(console, options)
        self.hidden = [col.header for i, col in enumerate(self.columns) if i not in shown]
        clips: list[Clip] = []
        table = self._table(shown, options.max_width, clips)
        # rich renders what is yielded before asking for more: after this the clips know
        # whether they cut anything.
        yield table
        self.cut = any(clip.cut for clip in clips)
        note = self.note()
        if note:
            # Wrapped at words even on a soft-wrapping console (the CLI's): it is prose.
            yield Text(note, style="dim", no_wrap=False, overflow="fold")

    def note(self) -> str:
        """What the last rendering left out and where it all is ("" when nothing was)."""
        what = []
        if self.hidden:
            what.append(f"{', '.join(self.hidden)} hidden")
        if self.cut:
            what.append("long text cut")
        if not what:
            return ""
        where = f"; see {self.whole}" if self.whole else ""
        return f"{', '.join(what)}{where}"

    def _fitting(self, console: Console, options: ConsoleOptions) -> list[int]:
        """The indexes of the columns shown: all of them, less the highest ``drop`` ranks
        until the table's narrowest layout fits the width."""
        shown = list(range(len(self.columns)))
        droppable = sorted(
            (i for i, col in enumerate(self.columns) if col.drop),
            key=lambda i: (self.columns[i].drop, i),
        )
        narrowest = {i: self._narrowest(i, console, options) for i in shown}
        # Each column but the last has one cell of padding and the box's one-cell divider.
        while droppable and sum(narrowest[i] for i in shown) + 2 * (len(shown) - 1) > options.max_width:
            shown.remove(droppable.pop())
        return shown

    def _narrowest(self, index: int, console: Console, options: ConsoleOptions) -> int:
        """Column ``index``'s narrowest width: a key's or a value's whole width, a text's
        :data:`MIN_TEXT` (rich's own table measure reports widths already squeezed)."""
        col = self.columns[index]
        widths = [cell_len(col.header)]
        for row in self.rows:
            cell = self._cell(col, row[index], options.max_width)
            if isinstance(cell, Text):
                widths.append(max((cell_len(line) for line in cell.plain.splitlines()), default=0))
            elif isinstance(cell, Clip):
                widths.append(min(Measurement.get(console, options, cell).maximum, col.min_width))
            else:
                widths.append(Measurement.get(console, options, cell).minimum)
        return max(widths)

    def _table(self, shown: Iterable[int], width: int, clips: list[Clip] | None = None) -> Table:
        table = Table(
            title=self.title,
            title_justify="left",
            title_style="bold",
            box=box.SIMPLE_HEAD,
            show_edge=False,
            # Two spaces between columns (one of padding, the box's blank divider), none at
            # the edges: the layout of `kubectl get` and `gh ... list`.
            padding=(0, 1, 0, 0),
            pad_edge=False,
            expand=False,
        )
        indexes = list(shown)
        for i in indexes:
            col = self.columns[i]
            if col.kind == "value":
                # A value is never wrapped: its column is as wide as its widest value.
                widest = max([cell_len(_plain(row[i])) for row in self.rows] + [cell_len(col.header)])
                table.add_column(col.header, justify=col.justify, no_wrap=True, min_width=widest)
            else:
                # Keys and texts measure themselves (_Key, Clip); a key is not wrapped by rich.
                table.add_column(col.header, justify=col.justify, no_wrap=col.kind == "key")
        for row in self.rows:
            cells = [self._cell(self.columns[i], row[i], width) for i in indexes]
            table.add_row(*cells)
            if clips is not None:
                clips += [c for c in cells if isinstance(c, Clip)]
        return table

    @staticmethod
    def _cell(col: Col, value: Cell, width: int) -> Text | Clip | _Key:
        if col.kind == "text":
            clip = value if isinstance(value, Clip) else Clip(value)
            return clip if clip.lines is not None else Clip(clip.text, tail=clip.tail, lines=col.lines)
        text = value.whole() if isinstance(value, Clip) else Text(value) if isinstance(value, str) else value
        return _Key(text, width) if col.kind == "key" else text


def _plain(value: Cell) -> str:
    if isinstance(value, Clip):
        return value.whole().plain
    return value if isinstance(value, str) else value.plain


def error_in_row(error: str, server: str) -> str:
    """A server's error as its row in a servers' listing shows it: less a leading
    ``MCP server "NAME"``, which the row's name column already says, so a cut error keeps
    more of what went wrong (``--json`` keeps the sentence whole)."""
    for prefix in (f'MCP server "{server}": ', f'MCP server "{server}" '):
        if error.startswith(prefix):
            return error.removeprefix(prefix)
    return error
