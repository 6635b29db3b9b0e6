"""The REPL's TurnView: streamed text, call and result lines, escaping and redaction."""

from __future__ import annotations

import io

from rich.console import Console

from keen._redact import redactor
from keen.agent.view import ConsoleView
from keen.harness import Observation

SECRET = "tok-view-7d1c93b2e6a54f08"


def view() -> tuple[ConsoleView, io.StringIO]:
    buffer = io.StringIO()
    return ConsoleView(Console(file=buffer, width=200, color_system=None, highlight=False)), buffer


def test_a_secret_split_across_streamed_chunks_is_redacted_whole() -> None:
    redactor.add(SECRET)
    shown, buffer = view()
    chunks = ["Your key is ", SECRET[:5], SECRET[5:14], SECRET[14:], " and that is all."]
    for chunk in chunks:
        shown.text(chunk)
    assert SECRET[:5] not in buffer.getvalue()  # held back while it could begin the secret
    shown.finish()
    assert buffer.getvalue() == "Your key is [REDACTED] and that is all.\n"
    assert shown.streamed == "".join(chunks)


def test_a_held_back_tail_that_is_not_a_secret_is_printed_at_the_end() -> None:
    redactor.add(SECRET)
    shown, buffer = view()
    shown.text("ends with tok-vi")
    assert buffer.getvalue() == "ends with "
    shown.finish()
    assert buffer.getvalue() == "ends with tok-vi\n"


def test_calls_and_results_are_one_escaped_redacted_line() -> None:
    redactor.add(SECRET)
    shown, buffer = view()
    shown.text("Let me look.")
    shown.tool_call("call_mcp_tool", {"server": "gh", "tool": "search", "arguments": {"q": SECRET}})
    shown.observation(Observation("1.1", "call_mcp_tool", f"found\x1b[2J {SECRET}\nsecond line"))
    shown.observation(
        Observation("1.2", "call_mcp_tool", "Denied (permission): no", is_error=True, denied="permission")
    )
    lines = buffer.getvalue().splitlines()
    assert lines == [
        "Let me look.",
        '-> gh/search {"q": "[REDACTED]"}',
        "<- found\\x1b[2J [REDACTED] second line",
        "<- Denied (permission): no",
    ]


def test_a_call_mcp_tool_without_a_server_or_a_tool_is_shown_by_its_own_name() -> None:
    # It read "-> gh/None {}" (no tool given) and the one-shot printer "> None/None" (the
    # arguments were not JSON): a person saw a server and a tool nobody named.
    shown, buffer = view()
    shown.tool_call("call_mcp_tool", {"server": "gh", "arguments": {"q": "x"}})
    shown.tool_call("call_mcp_tool", {})
    assert buffer.getvalue().splitlines() == [
        '-> call_mcp_tool {"server": "gh", "arguments": {"q": "x"}}',
        "-> call_mcp_tool {}",
    ]


def test_unsafe_tail_counts_only_a_possible_secret_start() -> None:
    redactor.add(SECRET)
    assert redactor.unsafe_tail("abc tok-v") == len("tok-v")
    assert redactor.unsafe_tail("plain words.") == 0
    assert redactor.unsafe_tail("") == 0
