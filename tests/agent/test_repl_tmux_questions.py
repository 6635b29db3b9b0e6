"""``keen chat`` in a real terminal (tmux): the questions it asks the person (approval,
an elicitation form, a page to open) and the keys that answer them (``helpers.chat_tmux``).
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from helpers.chat_tmux import Chat, call, say, search

pytestmark = [pytest.mark.timeout(180), pytest.mark.e2e, pytest.mark.slow_file]


def test_approval_an_elicitation_form_and_a_page_to_open(tmux_chat: Callable[..., Chat]) -> None:
    """One session (a keen chat, its server and a terminal cost about 2 s of CPU to start):
    the approval question (yes, no, Ctrl-C, always), then an elicitation form with defaults,
    then a page to open."""
    chat = tmux_chat(
        [
            search("write a note"),
            call("note", text="first"),
            say("Noted first."),
            call("note", text="second"),
            say("Not noted."),
            call("note", text="interrupted"),
            call("note", text="third"),
            call("note", text="fourth"),
            say("Noted both."),
            search("book a table"),
            call("book_table"),
            say("Booked."),
            call("book_table"),
            say("As you wish."),
            call("book_table"),
            say("Never mind."),
            search("connect account"),
            call("connect_account"),
            say("Connected."),
            call("connect_account"),
            say("Not now."),
        ]
    )
    t = chat.tmux
    chat.ready()

    at = chat.send("note first")
    t.wait_for(r"Allow chat/note\?", after=at)
    t.wait_for(r'"text": "first"', after=at)
    t.wait_for(r"\[y\]es / \[n\]o / \[a\]lways for chat/note this session:[ \t]*$", after=at)
    t.type("y")
    t.wait_for(r"<- noted: first\s+Noted first\.", after=at)

    at = chat.send("note second")
    t.wait_for(r'"text": "second"', after=at)
    t.wait_for(r"this session:[ \t]*$", after=at)
    t.type("n")
    t.wait_for(r"<- Denied \(permission\): the user did not approve this call", after=at)
    # The person's own no is not reported back as "error: every MCP tool call of this turn
    # failed or was denied" (a one-shot run's exit code counts it; the person knows).
    t.wait_for(r"Not noted\.\s+keen>[ \t]*$", after=at)

    # Ctrl-C at the question: no, and the turn stops (the model is not called again).
    at = chat.send("note this")
    t.wait_for(r'"text": "interrupted"', after=at)
    t.wait_for(r"this session:[ \t]*$", after=at)
    t.send("C-c")
    t.wait_for(r"denied; stopping the turn", after=at)
    t.wait_for(r"\(cancelled\)\s+keen>[ \t]*$", after=at)

    at = chat.send("note two more")
    t.wait_for(r'"text": "third"', after=at)
    t.wait_for(r"this session:[ \t]*$", after=at)
    t.type("a")
    t.wait_for(r"<- noted: fourth\s+Noted both\.", after=at)
    # "always" covered the fourth call: no question for it.
    assert t.count(r'^\s+"text": "fourth"$') == 0
    assert t.count(r"Allow chat/note\?") == 4

    # An elicitation form: the schema's defaults pre-filled, a bad entry asked again.
    at = chat.send("book a table")
    t.wait_for(r"Server chat asks:\s+│ Details for the booking\?", after=at)
    t.wait_for(r"Time \(1\) 18:00, 2\) 20:00\)", after=at)
    t.wait_for(r"\[a\]ccept \(fill in the form\) / \[d\]ecline / \[c\]ancel: a[ \t]*$", after=at)
    t.send("Enter")
    t.wait_for(r"Name: Ada[ \t]*$", after=at)  # the schema's default, pre-filled
    t.send("C-u")
    t.type("Grace")
    t.wait_for(r"Party: 2[ \t]*$", after=at)
    t.type("x")  # appended to the default: "2x" is not a number
    refused = t.wait_for(r"Party: type a whole number", after=at).end()
    t.wait_for(r"Party: 2[ \t]*$", after=refused)
    t.send("C-u")
    t.type("4")
    t.wait_for(r"Outdoor: no[ \t]*$", after=at)
    t.send("C-u")
    t.type("yes")
    t.wait_for(r"Time: 20:00[ \t]*$", after=at)
    t.send("Enter")
    t.wait_for(r"<- booked: name=Grace party=4 outdoor=True time=20:00\s+Booked\.", after=at)

    at = chat.send("book another")
    t.wait_for(r"\[c\]ancel: a[ \t]*$", after=at)
    t.send("C-u")
    t.type("d")
    t.wait_for(r"<- booking decline\s+As you wish\.", after=at)

    # Ctrl-C in the form: cancel (dismissed), and the call still returns to the model.
    at = chat.send("one more")
    t.wait_for(r"\[c\]ancel: a[ \t]*$", after=at)
    t.send("Enter")
    t.wait_for(r"Name: Ada[ \t]*$", after=at)
    t.send("C-c")
    t.wait_for(r"<- booking cancel\s+Never mind\.", after=at)

    # A page to open: its host and URL shown, opening it asked first.
    at = chat.send("connect my account")
    t.wait_for(r"Server chat asks you to open a page:\s+│ Sign in to Example Cloud", after=at)
    t.wait_for(r"host: auth\.example\.com", after=at)
    t.wait_for(r"https://auth\.example\.com/connect\?state=abc123", after=at)
    # Enter alone declines: opening a page takes an explicit "o".
    t.wait_for(r"\[o\]pen it \(I will go there\) / \[d\]ecline / \[c\]ancel: d[ \t]*$", after=at)
    t.send("C-u")
    t.type("o")
    opened = t.wait_for(r"open the link above in your browser", after=at).end()
    # The server reports the page done (notifications/elicitation/complete): one line says so.
    done = t.wait_for(r"chat: the page at auth\.example\.com is done", after=opened).end()
    t.wait_for(r"<- connect accept\s+Connected\.", after=done)

    at = chat.send("again")
    t.wait_for(r"\[c\]ancel: d[ \t]*$", after=at)
    t.send("C-u")
    t.type("x")  # not a choice: asked again, with the choices named
    refused = t.wait_for(r"type o, d or c", after=at).end()
    t.wait_for(r"\[c\]ancel: d[ \t]*$", after=refused)
    t.send("Enter")
    t.wait_for(r"<- connect decline\s+Not now\.", after=at)

    assert chat.leave() == 0
    assert chat.notes.read_text().splitlines() == ["first", "third", "fourth"]
