"""How a turn looks in the terminal: streamed model text, tool calls, observations, notices.

:class:`ConsoleView` is the REPL's :class:`~keen.agent.loop.TurnView`. Model tokens are
printed as they arrive; each tool call is one dim line (``-> server/tool {arguments}``)
and each observation one short line (``<- first line of the result``; errors and refusals
in red). Everything that came from a model or a server is escaped before it reaches the
terminal (:func:`keen._terminal.terminal_text`): a tool result cannot clear the screen or
write the clipboard. Call and result lines also go through the redactor, so a known secret
the model puts in arguments (or a server echoes) is shown as ``[REDACTED]``.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.text import Text

from keen._redact import redactor
from keen._terminal import terminal_text
from keen._text import one_line

if TYPE_CHECKING:
    from keen.harness import Observation

__all__ = ["ConsoleView"]

CALL_PREVIEW = 160
"""Characters of a call's arguments shown on its line."""
RESULT_PREVIEW = 240
"""Characters of an observation shown on its line."""


class ConsoleView:
    """A :class:`~keen.agent.loop.TurnView` on a rich console.

    Attributes:
        streamed: the model text printed so far in this turn (the REPL prints the final
            answer only when nothing was streamed).
        notices: the notices shown in this turn (the REPL does not repeat them).
    """

    def __init__(self, console: Console) -> None:
        self.console = console
        self.streamed = ""
        self.notices: list[str] = []
        self._held = ""
        self._mid_line = False

    def _end_line(self) -> None:
        if self._held:
            held, self._held = self._held, ""
            self._print_text(redactor.redact(held))
        if self._mid_line:
            self.console.print()
            self._mid_line = False

    def text(self, delta: str) -> None:
        """Print streamed model text as it comes, without a line break.

        Known secrets are redacted; the few characters at the end that could begin one are
        held back until the next chunk (or :meth:`finish`), so a secret split across chunks
        is still caught.
        """
        if not delta:
            return
        self.streamed += delta
        now, self._held = redactor.stream(self._held, delta)
        self._print_text(now)

    def _print_text(self, text: str) -> None:
        if text:
            self.console.print(Text(terminal_text(text)), end="", soft_wrap=True)
            self._mid_line = not text.endswith("\n")

    def tool_call(self, name: str, arguments: dict[str, Any]) -> None:
        """One line per proposed call: the MCP server/tool for ``call_mcp_tool``."""
        from keen.entry_tools import call_label  # loaded by then: the model saw its definition

        self._end_line()
        shown = call_label(name, arguments)
        args: Any = arguments if shown == name else arguments.get("arguments", {})
        payload = one_line(redactor.redact(json.dumps(args, ensure_ascii=False, default=str)), CALL_PREVIEW)
        self.console.print(
            Text(terminal_text(f"-> {shown} {payload}", one_line=True), style="dim"), soft_wrap=True
        )

    def observation(self, obs: Observation) -> None:
        """One line per result: refusals and errors in red, the rest dim."""
        self._end_line()
        first = one_line(redactor.redact(obs.text), RESULT_PREVIEW)
        style = "red" if obs.is_error else "dim"
        self.console.print(Text(terminal_text(f"<- {first}", one_line=True), style=style), soft_wrap=True)

    def notice(self, line: str) -> None:
        """A line from Keen itself (a server that failed, tools that changed)."""
        self._end_line()
        self.notices.append(line)
        self.console.print(Text(terminal_text(line), style="yellow"), soft_wrap=True)

    def finish(self) -> None:
        """End the turn's output on a fresh line."""
        self._end_line()
