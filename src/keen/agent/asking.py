"""The REPL's questions in the middle of a turn: approve a tool call, fill a server's form
(docs/chat.md "Approval" and "Questions from servers").

:class:`Asker` holds one prompt_toolkit session for these questions (kept out of the chat
history) and the rich console they are drawn on.

* :meth:`Asker.approve` is the agent's approval prompt: it shows the server, the tool and the JSON
  arguments (redacted, :meth:`keen.gateway.ApprovalRequest.arguments_json`) and reads
  ``y`` (yes), ``n`` (no) or ``a`` (always: this tool, this session; the agent keeps that).
  Ctrl-C at the question answers no and stops the turn (``on_interrupt``).
* :meth:`Asker.elicit` answers a server's ``elicitation/create`` (form mode): it shows the
  server's message (untrusted text: escaped, each line behind a ``│`` bar so it cannot pass
  for Keen's own lines, wrapped to the console's width with the bar on every row, at most
  2,000 characters), asks accept / decline / cancel, then each
  field of the form (:mod:`keen.agent.form`) with the schema's default pre-filled. Ctrl-C
  anywhere in the form is cancel (MCP's "dismissed without a choice").
* :meth:`Asker.open_url` answers a URL-mode request (a page the person opens out of band,
  such as a third-party sign-in): it shows the server's message, the full URL and, apart,
  its host, and asks open / decline / cancel. Keen never opens or fetches the page; "open"
  tells the server the person consented and will go there (they copy or click the link).
  When the server then reports the page done (``notifications/elicitation/complete``), one
  line says so.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import anyio
import anyio.lowlevel
from rich.cells import cell_len
from rich.console import Console
from rich.text import Text

from keen._terminal import terminal_text
from keen._text import one_line
from keen.agent.form import MISSING, FormError, check_content, form_fields
from keen.mcp.connection.elicitation import ElicitAnswer

if TYPE_CHECKING:
    from prompt_toolkit import PromptSession

    from keen.agent.loop import ApprovalAnswer
    from keen.gateway import ApprovalRequest

__all__ = ["Asker"]

MESSAGE_CHARS = 2000
"""A server's message in a question is shown up to this many characters, then a note."""
_BAR = "  │ "
_SPACES = re.compile(r"(?<=\S)[ \t]{2,}")

_APPROVAL = {"y": "yes", "yes": "yes", "n": "no", "no": "no", "a": "always", "always": "always"}
_ACTION = {
    "a": "accept",
    "accept": "accept",
    "d": "decline",
    "decline": "decline",
    "c": "cancel",
    "cancel": "cancel",
}


_URL_ACTION = {
    "o": "accept",
    "open": "accept",
    "d": "decline",
    "decline": "decline",
    "c": "cancel",
    "cancel": "cancel",
}


class Asker:
    """Asks the person at the terminal, between the chat's own prompts.

    Args:
        console: where questions are drawn.
        on_interrupt: called when Ctrl-C answers an approval question (the REPL cancels
            the running turn).

    Attributes:
        chat_prompt_open: set by the REPL while its own prompt waits for a line; a server
            that asks then (outside any call of this session) is declined, since two
            prompts cannot share the terminal.
    """

    def __init__(self, console: Console, *, on_interrupt: Callable[[], None] | None = None) -> None:
        self.console = console
        self.on_interrupt = on_interrupt
        self.chat_prompt_open = False
        self._session: PromptSession[str] | None = None
        # One question at a time: two servers asking at once wait their turn.
        self._lock = anyio.Lock()

    def _prompt_session(self) -> PromptSession[str]:
        if self._session is None:
            from prompt_toolkit import PromptSession

            self._session = PromptSession()
        return self._session

    async def ask(self, question: str, *, default: str = "") -> str:
        """One line from the person; ``default`` is pre-filled and editable.

        Raises:
            KeyboardInterrupt: Ctrl-C.
            EOFError: Ctrl-D.
        """
        # handle_sigint=False: the REPL's own SIGINT handler (cancel the turn) stays in place.
        return await self._prompt_session().prompt_async(question, default=default, handle_sigint=False)

    async def _choose(self, question: str, choices: dict[str, str], default: str = "") -> str:
        """Ask ``question`` until the answer is a key of ``choices``; its value. Ctrl-C and
        Ctrl-D propagate (:meth:`ask`)."""
        letters = [key for key in choices if len(key) == 1]
        while True:
            answer = choices.get((await self.ask(question, default=default)).strip().lower())
            if answer is not None:
                return answer
            self._show(f"type {', '.join(letters[:-1])} or {letters[-1]}", "yellow")

    def _show(self, text: str, style: str = "") -> None:
        self.console.print(Text(terminal_text(text), style=style), soft_wrap=True)

    def _quote(self, message: str) -> None:
        """A server's message, each line behind a bar: its text cannot pass for Keen's own
        lines (a ``host:`` line, a prompt) and is cut past :data:`MESSAGE_CHARS`."""
        text = message.strip()
        cut = len(text) - MESSAGE_CHARS
        lines = (text[:MESSAGE_CHARS] if cut > 0 else text).splitlines() or [""]
        if cut > 0:
            lines.append(f"[{cut:,} more characters of the server's message not shown]")
        # Wrapped here, each row behind its own bar: a line the terminal wrapped itself would
        # go on at the left edge, where a padded "host: ..." reads as Keen's own line.
        width = max(self.console.width - cell_len(_BAR), 8)
        rows: list[Text] = []
        for line in lines:
            # Runs of spaces inside a line are padding, never the server's meaning.
            text = Text(terminal_text(_SPACES.sub(" ", line)))
            rows.extend(text.wrap(self.console, width, overflow="fold", no_wrap=False) or [Text()])
        for row in rows:
            self.console.print(Text(_BAR) + row, soft_wrap=True)

    # -- approval -------------------------------------------------------------------------------

    async def approve(self, request: ApprovalRequest) -> ApprovalAnswer:
        """Ask whether the call may run (an :class:`~keen.agent.loop.ApprovalPrompt`)."""
        async with self._lock:
            return await self._approve(request)

    async def _approve(self, request: ApprovalRequest) -> ApprovalAnswer:
        where = f"{request.server}/{request.tool}"
        self.console.print(
            Text.assemble(("Allow ", "bold yellow"), (terminal_text(where, one_line=True), "bold"), "?")
        )
        if request.description:
            self._show(one_line(request.description.strip().splitlines()[0], 200), "dim")
        self._show(request.arguments_json())
        try:
            answer = await self._choose(f"[y]es / [n]o / [a]lways for {where} this session: ", _APPROVAL)
        except (KeyboardInterrupt, EOFError):
            self._show("denied; stopping the turn", "yellow")
            if self.on_interrupt is not None:
                self.on_interrupt()
                # Deliver the cancel here: the turn may not reach another await
                # before it would call the model again.
                await anyio.lowlevel.checkpoint()
            return "no"
        return answer  # type: ignore[return-value]

    # -- elicitation ----------------------------------------------------------------------------

    async def elicit(self, server: str, message: str, requested_schema: dict[str, Any]) -> ElicitAnswer:
        """Ask the person for what ``server`` wants (a :data:`~keen.mcp.connection.elicitation.ElicitationCallback`)."""
        if self.chat_prompt_open:
            self._show(f"declined a question from {server}: it came while no call was running", "yellow")
            return ElicitAnswer("decline")
        async with self._lock:
            return await self._elicit(server, message, requested_schema)

    async def _elicit(self, server: str, message: str, requested_schema: dict[str, Any]) -> ElicitAnswer:
        self.console.print(
            Text.assemble(("Server ", "bold cyan"), (terminal_text(server, one_line=True), "bold"), " asks:")
        )
        self._quote(message)
        try:
            fields = form_fields(requested_schema)
        except FormError as exc:
            self._show(f"declined: Keen cannot show this form ({exc})", "yellow")
            return ElicitAnswer("decline")
        for f in fields:
            extra = f" ({f.hint()})" if f.hint() else ""
            need = " *" if f.required else ""
            # One line each, cut: the schema's words are the server's too.
            line = f"{f.title}{need}{extra}" + (f": {f.description}" if f.description else "")
            self._show("  " + one_line(line, 300), "dim")
        try:
            action = await self._choose("[a]ccept (fill in the form) / [d]ecline / [c]ancel: ", _ACTION, "a")
            if action != "accept":
                return ElicitAnswer(action)  # type: ignore[arg-type]
            content = await self._fill(fields, requested_schema)
        except (KeyboardInterrupt, EOFError):
            self._show("cancelled", "yellow")
            return ElicitAnswer("cancel")
        return ElicitAnswer("accept", content)

    async def open_url(self, server: str, message: str, url: str) -> ElicitAnswer:
        """Ask the person to open ``url`` for ``server`` (a
        :data:`~keen.mcp.connection.elicitation.UrlElicitationCallback`; ``url`` already passed
        :func:`~keen.mcp.connection.elicitation.check_url`)."""
        if self.chat_prompt_open:
            self._show(f"declined a page from {server}: it came while no call was running", "yellow")
            return ElicitAnswer("decline")
        async with self._lock:
            self.console.print(
                Text.assemble(
                    ("Server ", "bold cyan"),
                    (terminal_text(server, one_line=True), "bold"),
                    " asks you to open a page:",
                )
            )
            self._quote(message)
            host = urlsplit(url).hostname or ""
            self._show(f"  host: {host}", "bold")
            if "xn--" in host:
                self._show("  warning: the host is punycode, which can imitate another name", "bold yellow")
            # Printed whole and unstyled, so the terminal can make it a link to click or copy.
            self.console.print(Text("  " + url), soft_wrap=True)
            try:
                action = await self._choose(
                    "[o]pen it (I will go there) / [d]ecline / [c]ancel: ", _URL_ACTION, "d"
                )
            except (KeyboardInterrupt, EOFError):
                self._show("cancelled", "yellow")
                return ElicitAnswer("cancel")
            if action != "accept":
                return ElicitAnswer(action)  # type: ignore[arg-type]
            self._show("open the link above in your browser; the server goes on when you finish there", "dim")
            # The server may report the page done (notifications/elicitation/complete).
            done = f"{server}: the page at {host} is done"
            return ElicitAnswer("accept", on_complete=lambda: self._show(done, "green"))

    async def _fill(self, fields: list[Any], requested_schema: dict[str, Any]) -> dict[str, Any]:
        """Ask each field until its text parses; then check the whole answer against the schema."""
        while True:
            content: dict[str, Any] = {}
            for f in fields:
                while True:
                    title = terminal_text(one_line(f.title, 80), one_line=True)
                    text = await self.ask(f"{title}: ", default=f.initial_text())
                    try:
                        value = f.parse(text)
                    except ValueError as exc:
                        self._show(str(exc), "yellow")
                        continue
                    if value is not MISSING:
                        content[f.name] = value
                    break
            problem = check_content(requested_schema, content)
            if problem is None:
                return content
            self._show(f"the server's schema refuses this answer ({problem}); once more", "yellow")
