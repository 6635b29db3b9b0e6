"""``keen chat``'s interactive loop: read a line, run a slash command or a model turn, repeat.

The prompt is ready at once: the runtime opens without waiting for MCP discovery, which
goes on in the background (docs/chat.md "Startup"; :class:`keen.agent.servers.ServerWatch`).
When every server has settled, the skills are synced, the agent's catalog is reloaded
before the next turn, and one line per server that did not connect says why and what
fixes it. Later changes (a server crashing or reconnecting, its tools changing) get a line
and a reload too. A server that went away is reconnected by the next tool call that needs it
(or ``/mcp:SERVER``): one line says it is back, or still down and when Keen tries again
(:mod:`keen.agent.reconnect`); the attempts run in the session's task group, so Ctrl-C
stops the turn's wait, not the attempt.

Keys: Enter sends; Up/Down walk the history (``$KEEN_HOME/history``, 0600, known secrets
redacted); Tab completes slash commands, skill names and server names. Ctrl-C while the
model streams or a tool runs cancels that turn and comes back to the prompt; Ctrl-C at a
prompt with text clears it; Ctrl-C or Ctrl-D at an empty prompt ends the session
(docs/chat.md "Keys").

Why Ctrl-C works that way: while prompt_toolkit reads a line the terminal is in raw mode,
so Ctrl-C is a key (bound below); during a turn it is SIGINT, which the REPL receives
through anyio and turns into a cancel of the turn's scope only, never of the session.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
from rich.console import Console
from rich.text import Text

from keen import paths
from keen._redact import redactor
from keen._terminal import STILL_STOPPING, terminal_text
from keen.agent.asking import Asker
from keen.agent.reconnect import reconnect_line
from keen.agent.servers import ServerWatch
from keen.agent.slash import COMMANDS, SlashCommands, message_text, parse
from keen.agent.view import ConsoleView
from keen.errors import KeenError
from keen.mcp.types import ServerState

if TYPE_CHECKING:
    from prompt_toolkit import PromptSession
    from prompt_toolkit.completion import CompleteEvent, Completion
    from prompt_toolkit.document import Document

    from keen.agent.loop import Agent, TurnResult
    from keen.agent.models import Model
    from keen.agent.resume import Restored
    from keen.capabilities import PermissionMode
    from keen.mcp.types import ServerStatus
    from keen.runtime import Runtime

logger = logging.getLogger(__name__)

__all__ = ["DEFAULT_DISCOVERY_TIMEOUT", "PROMPT", "Repl", "run_repl"]

PROMPT = "keen> "
DEFAULT_DISCOVERY_TIMEOUT = 60.0
"""Seconds the background discovery waits for every server's first attempt."""


def _history_path() -> Path:
    return paths.keen_home() / "history"


def _history(path: Path) -> Any:
    """A prompt_toolkit file history that redacts known secrets and stays 0600."""
    from prompt_toolkit.history import FileHistory

    class RedactedHistory(FileHistory):
        def store_string(self, string: str) -> None:
            super().store_string(redactor.redact(string))

    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_CREAT | os.O_APPEND | os.O_WRONLY, 0o600)
    os.close(fd)
    return RedactedHistory(str(path))


def _completer(repl: Repl) -> Any:
    """Completion of slash commands, ``/<skill>``, skill names after ``/skills enable|disable``
    and server names after ``/mcp connect``; the names are read when a prompt opens."""
    from prompt_toolkit.completion import Completer, Completion

    commands = sorted(
        {usage.split()[0] for usage in COMMANDS if "SERVER" not in usage and "SKILL" not in usage}
    )

    class ChatCompleter(Completer):
        def get_completions(self, document: Document, complete_event: CompleteEvent) -> Iterable[Completion]:
            text = document.text_before_cursor
            if not text.startswith("/") or text.startswith("//"):
                return
            words = text.split()
            typing_new = text.endswith(" ")
            if len(words) <= 1 and not typing_new:
                candidates = [*commands, "/mcp connect", *(f"/{n}" for n in repl.skills)]
                word = words[0] if words else "/"
            elif (
                words[0] == "/skills"
                and len(words) == (2 if typing_new else 3)
                and words[1] in ("enable", "disable")
            ):
                candidates, word = repl.skills, ("" if typing_new else words[-1])
            elif words[0] == "/skills" and len(words) == (1 if typing_new else 2):
                candidates, word = ["list", "enable", "disable", "reload"], ("" if typing_new else words[-1])
            elif words[0] == "/mcp" and len(words) == (2 if typing_new else 3) and words[1] == "connect":
                candidates, word = repl.servers, ("" if typing_new else words[-1])
            else:
                return
            for candidate in candidates:
                if candidate.startswith(word) and candidate != word:
                    yield Completion(candidate, start_position=-len(word))

    return ChatCompleter()


class Repl:
    """One interactive chat session over an open runtime and its agent.

    Args:
        runtime: the session's runtime (opened without waiting for discovery).
        agent: the agent whose turns the REPL runs.
        console: where everything is drawn.
        asker: the approval and elicitation questions (shares ``console``).
    """

    def __init__(self, runtime: Runtime, agent: Agent, console: Console, asker: Asker) -> None:
        self.runtime = runtime
        self.agent = agent
        self.console = console
        self.asker = asker
        self.slash = SlashCommands(runtime, agent, console, on_authorization_url=self._authorization_url)
        self.watch = ServerWatch(
            runtime, self.notice, reconnector=agent.reconnector, connect_command=agent.connect_command
        )
        agent.on_reconnect = self.reconnected
        self.skills: list[str] = []
        self.servers: list[str] = []
        self._turn_scope: anyio.CancelScope | None = None
        self._session: PromptSession[str] | None = None

    # -- output ---------------------------------------------------------------------------------

    def notice(self, line: str, style: str = "yellow") -> None:
        """One line from Keen (escaped: it may quote a server)."""
        self.console.print(Text(terminal_text(line), style=style), soft_wrap=True)

    def reconnected(self, status: ServerStatus, retry_in: float, waited: float = 0.0) -> None:
        """One line after an on-demand reconnect (the watch does not repeat it; when the
        attempt goes on in the background, the watch reports how it ends)."""
        self.watch.told(status)
        back = status.state is ServerState.CONNECTED
        line = reconnect_line(status, retry_in, self.agent.connect_command, waited)
        if status.state is ServerState.CONNECTING:
            line += "; a line here says when it is back, or why not"
        self.notice(
            line, "green" if back else ("yellow" if status.state is ServerState.CONNECTING else "red")
        )

    def _authorization_url(self, url: str, opened: bool) -> None:
        how = "opened in your browser" if opened else "open this URL in a browser"
        self.notice(f"Sign in ({how}): {url}", "cyan")

    # -- turns ----------------------------------------------------------------------------------

    def interrupt(self) -> None:
        """Cancel the running turn, if any (Ctrl-C during a turn)."""
        if self._turn_scope is not None:
            self._turn_scope.cancel()

    async def _watch_sigint(self) -> None:
        with anyio.open_signal_receiver(signal.SIGINT) as signals:
            async for _ in signals:
                self.interrupt()

    async def turn(self, text: str) -> None:
        """Run one model turn; Ctrl-C cancels it and the session goes on."""
        if self.watch.catalog_stale:
            self.watch.catalog_stale = False
            self.agent.reload_catalog()
        view = ConsoleView(self.console)
        result = None
        with anyio.CancelScope() as scope:
            self._turn_scope = scope
            try:
                result = await self.agent.run_turn(text, view)
            except KeenError as exc:
                view.finish()
                self.notice(f"error: {exc.message}", "red")
                return
            except Exception as exc:  # a bug must not end the session and lose the conversation
                logger.exception("the turn failed")
                view.finish()
                self.notice(
                    f"error: the turn failed ({type(exc).__name__}: {exc}); the session goes on", "red"
                )
                return
            finally:
                self._turn_scope = None
        view.finish()
        if scope.cancelled_caught or result is None:
            self.notice("(cancelled)")
            return
        if result.answer and not view.streamed.strip():
            self.console.print(Text(terminal_text(redactor.redact(result.answer))), soft_wrap=True)
        if not result.ok and result.error and not any(result.error in n for n in view.notices):
            if _only_declined(result):
                return  # the person said no to each call: their answer, not an error to report
            self.notice(f"error: {result.error}", "red")

    # -- the loop -------------------------------------------------------------------------------

    def _refresh_names(self) -> None:
        self.skills = self.slash.skill_names()
        self.servers = [s.name for s in self.runtime.manager.servers()]

    def _prompt_session(self) -> PromptSession[str]:
        if self._session is None:
            from prompt_toolkit import PromptSession
            from prompt_toolkit.key_binding import KeyBindings

            bindings = KeyBindings()

            @bindings.add("c-c")
            def _(event: Any) -> None:
                buffer = event.app.current_buffer
                if buffer.text:
                    buffer.reset()
                else:
                    event.app.exit(exception=KeyboardInterrupt())

            self._session = PromptSession(
                history=_history(_history_path()),
                completer=_completer(self),
                complete_while_typing=False,
                key_bindings=bindings,
            )
        return self._session

    async def read_line(self) -> str | None:
        """The next line, or None when the person leaves (Ctrl-C/Ctrl-D at an empty prompt)."""
        from prompt_toolkit.patch_stdout import patch_stdout

        self._refresh_names()
        try:
            # patch_stdout: notices printed while the prompt waits appear above it.
            with patch_stdout(raw=True):
                self.asker.chat_prompt_open = True
                return await self._prompt_session().prompt_async(PROMPT, handle_sigint=False)
        except (KeyboardInterrupt, EOFError):
            return None
        finally:
            self.asker.chat_prompt_open = False

    async def loop(self) -> None:
        """Read lines until ``/exit``, Ctrl-D or Ctrl-C at an empty prompt."""
        while True:
            line = await self.read_line()
            if line is None:
                return
            if not line.strip():
                continue
            command = parse(line)
            if command is None:
                await self.turn(message_text(line))
                continue
            async with self.watch.lock:  # what a command prints about servers is not repeated
                outcome = await self.slash.run(command)
                self.watch.settle()
            if outcome.exit:
                return
            if outcome.turn is not None:
                await self.turn(outcome.turn)

    async def run(self, discovery_timeout: float = DEFAULT_DISCOVERY_TIMEOUT) -> None:
        """Greet, start discovery and the Ctrl-C watch in the background, run :meth:`loop`."""
        self.console.print(
            Text.assemble(
                ("keen chat", "bold"),
                f" ({terminal_text(getattr(self.agent.model, 'name', ''), one_line=True)}). ",
                "/help lists commands; Ctrl-D leaves.",
            )
        )
        try:
            async with anyio.create_task_group() as tg:
                self.agent.reconnector.task_group = tg
                tg.start_soon(self.watch.run, discovery_timeout)
                if sys.platform != "win32":
                    tg.start_soon(self._watch_sigint)
                await self.loop()
                tg.cancel_scope.cancel()
        finally:
            self.agent.reconnector.task_group = None
            self.watch.close()


async def run_repl(
    model: Model,
    *,
    mode: PermissionMode = "ask",
    workspace: Path | None = None,
    max_steps: int = 20,
    session_id: str | None = None,
    discovery_timeout: float = DEFAULT_DISCOVERY_TIMEOUT,
    console: Console | None = None,
    restored: Restored | None = None,
) -> None:
    """Run ``keen chat`` interactively until the person leaves; then one line names the
    session and how to go on with it.

    Args:
        model: the model to talk to (:func:`keen.agent.providers.open_model`).
        mode: the permission mode (read-only | ask | auto).
        workspace: the local tools' root; default the current directory.
        max_steps: model calls per turn at most.
        session_id: the event log's id; default a new one.
        discovery_timeout: seconds the background discovery waits for the servers.
        console: where to draw; default a rich console on stdout.
        restored: a conversation to go on with (``keen chat --resume``,
            :func:`keen.agent.resume.restore`); what came back is said before the prompt.

    Raises:
        KeenError: stdin or stdout is not a terminal (nothing was started).
        ConfigError: ``configs.json`` cannot be used (before the prompt opens).
    """
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        raise KeenError(
            "keen chat without -p needs a terminal to talk to; for scripts and pipes run one turn "
            "with keen chat -p PROMPT (--json for a record of it)"
        )
    from keen.agent.loop import Agent
    from keen.agent.models import close_model
    from keen.runtime import open_runtime

    console = console or Console(highlight=False)
    repl: list[Repl] = []
    asker = Asker(console, on_interrupt=lambda: repl[0].interrupt() if repl else None)
    # live=True: the REPL syncs skills in the background (servers.py), so the live refresh
    # that keeps generated skills in line with tool-list changes must be asked for.
    with _ctrl_c_says_stopping() as session_over:
        async with open_runtime(
            wait=None, live=True, elicitation=asker.elicit, elicitation_url=asker.open_url
        ) as runtime:
            agent = Agent(
                runtime,
                model,
                mode=mode,
                approval_prompt=asker.approve,
                elicitor=asker.elicit,
                workspace=workspace,
                max_steps=max_steps,
                session_id=session_id,
                connect_command="/mcp connect {server}",
            )
            try:
                if restored is not None:
                    from keen.agent.resume import summary

                    agent.resume(restored)
                    configured = [status.name for status in runtime.manager.servers()]
                    for line in summary(restored, agent.session_id, configured, Path.cwd()):
                        console.print(Text(terminal_text(line), style="dim"), soft_wrap=True)
                repl.append(Repl(runtime, agent, console, asker))
                await repl[0].run(discovery_timeout)
            finally:
                session_over()
                agent.close()
                await close_model(model)
            console.print(
                Text(
                    f"session {agent.session_id}: keen chat --resume {agent.session_id} goes on with it",
                    style="dim",
                ),
                soft_wrap=True,
            )


def _only_declined(result: TurnResult) -> bool:
    """Every MCP call of the turn was refused by the person asked (they answered no): the
    turn "failed" only as far as a script's exit code is concerned. A policy's no (the
    read-only mode on a write, the auto mode on a destructive tool), or an approval prompt
    that failed, is an error to report."""
    from keen.entry_tools import CALL_TOOL

    mcp = [call for call in result.tool_calls if call["name"] == CALL_TOOL]
    return bool(mcp) and all(call["outcome"] == "denied" and call.get("declined") for call in mcp)


@contextlib.contextmanager
def _ctrl_c_says_stopping() -> Iterator[Callable[[], None]]:
    """Yield ``session_over``: once it is called, until the block ends, a Ctrl-C writes that
    Keen is still stopping the servers (README "Stopping servers") instead of raising
    ``KeyboardInterrupt``.

    While the session runs, :meth:`Repl._watch_sigint` takes Ctrl-C (it cancels a turn);
    once it ends, its receiver's close leaves Python's default handler, and a Ctrl-C while
    the runtime stopped the servers raised ``KeyboardInterrupt`` into that shielded stop:
    keen hung, and a server that ignores EOF and SIGTERM kept running.
    """
    previous = signal.getsignal(signal.SIGINT)
    main = threading.current_thread() is threading.main_thread() and sys.platform != "win32"

    def say_stopping(signum: int, frame: object) -> None:
        with contextlib.suppress(OSError):
            os.write(2, STILL_STOPPING)

    def session_over() -> None:
        if main:
            signal.signal(signal.SIGINT, say_stopping)

    try:
        yield session_over
    finally:
        if main and signal.getsignal(signal.SIGINT) is say_stopping:
            signal.signal(signal.SIGINT, previous)
