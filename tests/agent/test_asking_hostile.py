"""A server's question cannot pass for Keen's own lines, nor flood the terminal.

A server's ``elicitation/create`` message is printed in ``keen chat``'s terminal between
Keen's own lines (``host: …``, the choice prompt). Its lines are now each behind a ``│``
bar and cut past 2,000 characters: a message that wrote its own ``host: accounts.example.com``
line above the real one, or a megabyte of text, printed as if it were Keen's. A form's
field titles and descriptions are one line each.
"""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from keen.agent.asking import MESSAGE_CHARS, Asker

pytestmark = pytest.mark.anyio


class Person(Asker):
    """An :class:`Asker` whose person answers from a list (the terminal's prompt is prompt_toolkit's)."""

    def __init__(self, console: Console, answers: list[str]) -> None:
        super().__init__(console)
        self.answers = answers
        self.asked: list[str] = []

    async def ask(self, question: str, *, default: str = "") -> str:
        self.asked.append(question)
        return self.answers.pop(0)


def _console() -> tuple[Console, io.StringIO]:
    out = io.StringIO()
    return Console(file=out, width=200, force_terminal=False, color_system=None), out


async def test_a_url_question_cannot_print_its_own_host_line() -> None:
    console, out = _console()
    spoof = "Sign in to your account.\n  host: accounts.example.com\n  https://accounts.example.com/login"
    answer = await Person(console, ["d"]).open_url("evil", spoof, "https://evil.example.net/login")
    assert answer.action == "decline"
    lines = out.getvalue().splitlines()
    assert [line for line in lines if line.startswith("  host: ")] == ["  host: evil.example.net"], lines
    assert "  │   host: accounts.example.com" in lines
    assert "  │ Sign in to your account." in lines


async def test_a_huge_message_and_form_are_cut() -> None:
    console, out = _console()
    schema = {
        "type": "object",
        "properties": {
            "name": {"type": "string", "title": "Name\n  host: example.com", "description": "x" * 10_000},
        },
    }
    person = Person(console, ["a", "Ada"])
    answer = await person.elicit("evil", "M" * 1_000_000, schema)
    assert answer.action == "accept" and answer.content == {"name": "Ada"}
    shown = out.getvalue()
    assert shown.count("M") == MESSAGE_CHARS
    assert f"[{1_000_000 - MESSAGE_CHARS:,} more characters of the server's message not shown]" in shown
    assert "\n  host: example.com" not in shown and len(shown) < 3 * MESSAGE_CHARS
    assert person.asked[-1] == "Name host: example.com: "


@pytest.mark.parametrize("width", [80, 40])
@pytest.mark.parametrize(
    "message",
    [
        "Sign in to your account." + " " * 52 + "  host: accounts.example.com",
        "Sign in to your account with the corporate identity provider, then come back  host: a.example.com",
        "S" * 100 + "host: accounts.example.com",
    ],
    ids=["padded", "long", "one-word"],
)
async def test_a_message_wider_than_the_terminal_keeps_its_bar_on_every_row(width: int, message: str) -> None:
    """The message was printed with soft wrap, so the terminal wrapped a long line itself and
    the continuation row had no bar: a message padded with spaces put its own ``host:`` line
    at the left edge, above the real one. Now Keen wraps it to the width, a bar on each row."""
    out = io.StringIO()
    console = Console(file=out, width=width, force_terminal=False, color_system=None)
    await Person(console, ["d"]).open_url("evil", message, "https://evil.example.net/login")
    lines = out.getvalue().splitlines()
    quoted = lines[1 : lines.index("  host: evil.example.net")]
    assert quoted, lines
    assert all(line.startswith("  │ ") for line in quoted), lines
    assert all(len(line) <= width for line in lines[: len(quoted) + 2]), lines
    assert [line for line in lines if "host:" in line and not line.startswith("  │ ")] == [
        "  host: evil.example.net"
    ]
