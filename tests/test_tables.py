"""``keen._tables``: listings that fit the terminal, rendered by rich at a given width."""

from __future__ import annotations

import io

from rich.console import Console

from keen._tables import Clip, Col, Listing

ERROR = (
    'MCP server "hang" did not answer initialize within 1 s; check that it starts and speaks MCP, '
    'or raise "timeouts.connect" in configs.json; last stderr: hang_init: started, will not answer'
)
FIX = "then run: keen mcp connect hang"


def render(renderable: object, width: int) -> list[str]:
    # soft_wrap like the CLI's consoles (keen.cli._common).
    console = Console(file=io.StringIO(), width=width, color_system=None, soft_wrap=True)
    console.print(renderable)
    return [line.rstrip() for line in console.file.getvalue().splitlines()]  # type: ignore[attr-defined]


def test_a_clip_within_its_budget_is_whole() -> None:
    clip = Clip("Returns the sum of two numbers", lines=2)
    assert render(clip, 40) == ["Returns the sum of two numbers"]
    assert not clip.cut


def test_a_clip_over_its_budget_ends_in_an_ellipsis_and_keeps_its_tail_whole() -> None:
    clip = Clip(ERROR, tail=FIX, lines=2)
    lines = render(clip, 40)
    assert len(lines) == 2 and clip.cut
    flat = " ".join(lines)
    assert flat.startswith('MCP server "hang"') and flat.endswith(f"…; {FIX}"), lines
    plain = Clip(ERROR, lines=2)
    lines = render(plain, 40)
    assert len(lines) == 2 and lines[-1].endswith("…") and plain.cut


def test_a_tail_that_leaves_no_room_for_the_text_is_cut_too() -> None:
    clip = Clip(ERROR, tail=FIX, lines=1)
    (line,) = render(clip, 30)
    assert line.startswith("MCP server") and line.endswith("…"), line


def _servers() -> Listing:
    table = Listing(
        [
            Col("name", "key"),
            Col("transport", drop=2),
            Col("auth", drop=2),
            Col("state"),
            Col("MCP", drop=3),
            Col("last error", "text", min_width=40),
        ],
        whole="keen mcp list --json",
    )
    table.add_row(
        "github-enterprise-prod", "streamable_http", "oauth", "disconnected", "-", Clip(ERROR, tail=FIX)
    )
    table.add_row("demo", "stdio", "none", "connected", "2026-07-28", "")
    return table


def test_narrow_hides_the_highest_drop_ranks_first_and_says_so() -> None:
    table = _servers()
    lines = render(table, 80)
    assert lines[0].split() == ["name", "state", "last", "error"], lines
    assert lines[2].startswith("github-enterprise-prod  disconnected  MCP server")
    assert max(len(line) for line in lines[:-1]) <= 80
    assert table.hidden == ["transport", "auth", "MCP"] and table.cut
    assert lines[-1] == "transport, auth, MCP hidden, long text cut; see keen mcp list --json"
    mid = _servers()
    render(mid, 105)
    assert mid.hidden == ["MCP"], "the MCP version goes first, transport and auth only when needed"


def test_wide_shows_every_column_and_no_note() -> None:
    table = _servers()
    lines = render(table, 300)
    assert lines[0].split() == ["name", "transport", "auth", "state", "MCP", "last", "error"]
    assert not table.hidden and not table.cut and len(lines) == 4  # header, rule, two rows


def test_a_key_wider_than_the_terminal_folds_and_is_never_cut() -> None:
    table = Listing([Col("tool", "key"), Col("description", "text")])
    table.add_row("x" * 300, "Long-named tool.")
    lines = render(table, 80)
    assert "".join(lines).count("x") == 300 and "Long-named tool." in lines[2], lines


def test_the_note_wraps_at_words_on_a_soft_wrapping_console() -> None:
    table = Listing([Col("name", "key"), Col("text", "text")], whole="a command that is long " * 4)
    table.add_row("a", "word " * 100)
    lines = render(table, 40)
    assert all(len(line) <= 40 for line in lines), lines
