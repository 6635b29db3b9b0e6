"""``keen._plain_table``: a listing written without rich is byte for byte what rich prints,
on real terminals (a pty of a given size) and pipes, whatever the environment variables rich
reads say; a layout rich would wrap, fold or cut is left to rich (nothing written)."""

from __future__ import annotations

import fcntl
import json
import os
import pty
import struct
import subprocess
import sys
import termios
from typing import Any

import pytest

# Run in a new interpreter on the terminal or pipe under test: write_listing first, then
# keen._tables.Listing printed by a default rich Console, a NUL line between; last, which
# of the two paths write_listing took.
_CHILD = """
import json, sys
from rich.console import Console
from rich.text import Text
from keen._plain_table import Col, write_listing
from keen._tables import Listing

spec = json.loads(sys.argv[1])
columns = [Col(*c) for c in spec["columns"]]
written = write_listing(columns, spec["rows"], title=spec["title"], whole=spec["whole"])
sys.stdout.write("\\0\\n")
sys.stdout.flush()
table = Listing(columns, title=spec["title"], whole=spec["whole"])
for row in spec["rows"]:
    table.add_row(*(Text(value) for value in row))
Console(highlight=False).print(table)
sys.stdout.write("\\0" + ("plain" if written else "rich"))
"""

SKILLS = [
    ["Name", "key", 2, 0, "left", 24],
    ["Enabled", "value", 2, 0, "left", 24],
    ["Managed", "value", 2, 1, "left", 24],
    ["Description", "text", 2, 0, "left", 30],
    ["Path", "value", 2, 2, "left", 24],
]
ROWS = [
    ["mcp:github", "yes", "yes", "Use the `github` MCP server.", "/home/ada/.keen/skills/mcp:github"],
    ["notes", "no", "no", "[draft] Take notes :office:.", "/home/ada/.keen/skills/notes"],
    ["x", "yes", "no", "", "/srv/elsewhere/x y"],
]
TITLE, WHOLE = "Skills in /home/ada/.keen/skills", "keen skills list --json"
# The variables rich reads, unset unless a case sets them.
RICH_ENV = ("COLUMNS", "LINES", "NO_COLOR", "FORCE_COLOR", "TTY_COMPATIBLE", "TERM", "COLORTERM")


def _env(extra: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in RICH_ENV}
    return {**env, "TERM": "xterm-256color", **extra}


def _on_pty(argv: list[str], env: dict[str, str], columns: int) -> bytes:
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 30, columns, 0, 0))
    try:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=slave, stderr=subprocess.PIPE, env=env)
    finally:
        os.close(slave)
    seen = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # the child closed the terminal (EIO on Linux)
            break
        if not chunk:
            break
        seen += chunk
    os.close(master)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err.decode()
    return seen.replace(b"\r\n", b"\n")


def _both(
    spec: dict[str, Any], *, columns: int | None, env: dict[str, str] | None = None
) -> tuple[str, str, str]:
    """(written without rich, printed by rich, which path) on a pty ``columns`` wide, or a pipe."""
    argv = [sys.executable, "-c", _CHILD, json.dumps(spec)]
    if columns is None:
        done = subprocess.run(
            argv, stdin=subprocess.DEVNULL, capture_output=True, env=_env(env or {}), timeout=60, check=True
        )
        out = done.stdout
    else:
        out = _on_pty(argv, _env(env or {}), columns)
    text = out.decode()
    plain, _, rest = text.partition("\0\n")
    printed, _, path = rest.rpartition("\0")
    return plain, printed, path


def _spec(
    rows: list[list[str]] = ROWS, columns: list[list[Any]] = SKILLS, title: str | None = TITLE
) -> dict[str, Any]:
    return {"columns": columns, "rows": rows, "title": title, "whole": WHOLE}


@pytest.mark.parametrize(
    ("columns", "env"),
    [
        (200, {}),  # every column
        (100, {}),
        (80, {}),  # Path hidden, and a dim note says so
        (60, {}),  # Managed and Path hidden
        (100, {"NO_COLOR": "1"}),  # still bold and dim: NO_COLOR removes colours
        (100, {"TERM": "dumb"}),  # no styles, 80 wide whatever the terminal
        (100, {"TERM": "dumb", "COLUMNS": "120", "LINES": "40"}),
        (100, {"TTY_COMPATIBLE": "0"}),  # a terminal rich is told is none
        (100, {"COLUMNS": "70"}),
        (None, {}),  # a pipe: 80 wide, no styles
        (None, {"COLUMNS": "150"}),
        (None, {"FORCE_COLOR": "1"}),  # a pipe styled
        (None, {"TTY_COMPATIBLE": "1", "COLUMNS": "90"}),
    ],
)
def test_a_plain_layout_is_written_as_rich_prints_it(columns: int | None, env: dict[str, str]) -> None:
    plain, printed, path = _both(_spec(), columns=columns, env=env)
    assert path == "plain", (plain, printed)
    assert plain == printed
    assert "mcp:github" in plain and "[draft] Take notes :office:." in plain


def test_right_justified_numbers_and_a_listing_without_title() -> None:
    columns = [["Server", "key", 2, 0, "left", 24], ["Tools", "value", 2, 0, "right", 24]]
    spec = _spec([["github", "41"], ["notes", "3"]], columns, title=None)
    for width in (100, None):
        plain, printed, path = _both(spec, columns=width, env={"FORCE_COLOR": "1"})
        assert (path, plain) == ("plain", printed)
        assert "github     41\nnotes       3\n" in plain, plain


@pytest.mark.parametrize(
    ("why", "spec", "columns"),
    [
        ("a description rich cuts", _spec([*ROWS, ["long", "yes", "no", "word " * 40, "/p"]]), 80),
        ("a description rich wraps", _spec([*ROWS, ["wide", "yes", "no", "word " * 25, "/p"]]), 100),
        ("text of other widths", _spec([*ROWS, ["wide", "yes", "no", "Grüße, 漢字", "/p"]]), 120),
        ("a key rich folds", _spec([*ROWS, ["k" * 70, "yes", "no", "d", "/p"]]), 80),
        ("markup in the title", _spec(title="Skills in /home/[bold]ada[/bold]"), 120),
        ("an emoji code in the title", _spec(title="Skills in /srv/:office:/skills"), 120),
    ],
)
def test_a_layout_rich_must_make_is_left_to_rich(why: str, spec: dict[str, Any], columns: int) -> None:
    plain, printed, path = _both(spec, columns=columns)
    assert (path, plain) == ("rich", ""), why
    assert printed.count("\n") > 3, printed
