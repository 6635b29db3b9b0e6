"""Reading a table as ``keen`` prints it (``keen._tables.Listing``): its rows, and the lines
each row takes, so a test can check what a person sees on a terminal of a given width."""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["header", "table_rows"]


def _rule(lines: list[str]) -> int:
    """The index of the rule under the header (a line of ``─``; ``┡━━╇━━┩`` in a boxed table)."""
    for index, line in enumerate(lines):
        if line.strip() and (set(line.strip()) == {"─"} or line.startswith("┡")):
            return index
    raise AssertionError("no table (no header rule) in:\n" + "\n".join(lines))


def _unboxed(line: str) -> str:
    """A boxed table's line read like a borderless one (so the checks say what is wrong
    with a boxed table's rows too): no left border, and a cell-less line ends the table."""
    if line.startswith(("└", "┗")):
        return ""
    if line.startswith(("│ ", "┃ ")):
        return line[2:].replace("│", " ").replace("┃", " ")
    return line


def header(text: str) -> str:
    """The header line of the first table in ``text``."""
    lines = text.splitlines()
    return _unboxed(lines[_rule(lines) - 1])


def table_rows(text: str, keys: Iterable[str]) -> dict[str, list[str]]:
    """Each row of the first table in ``text``, by its key: the lines the row takes.

    A row starts with its key (the first column) followed by two spaces; the lines after it
    that start with a space belong to it. The table ends at the first other line (a note).
    """
    lines = text.splitlines()
    by_length = sorted(keys, key=len, reverse=True)  # "http-ok" before "http"
    rows: dict[str, list[str]] = {}
    current: str | None = None
    for line in map(_unboxed, lines[_rule(lines) + 1 :]):
        if line.startswith(" ") and current is not None:
            rows[current].append(line)
            continue
        current = next((k for k in by_length if line.rstrip() == k or line.startswith(f"{k}  ")), None)
        if current is None:
            break
        rows[current] = [line]
    return rows
