"""``keen chat``: talk to a model that uses the configured MCP servers through Keen.

Interactive without ``-p`` (the REPL, :func:`keen.agent.repl.run_repl`); one-shot with
``-p PROMPT``: one turn, the answer on stdout (or a JSON record with ``--json``), then exit

- 0: the model answered (and when it made MCP calls, at least one succeeded);
- 1: the model or its tools failed the turn (a provider error, the step limit, every MCP
  call failed or was denied);
- 2: a Keen error before the turn could run (no model chosen, missing key or SDK extra, a
  broken config).

In one-shot mode nobody can be asked: ``--yes`` approves every call the permission gate
would ask about and accepts servers' elicitation forms with their defaults; ``--deny``
(and the default) refuses them, and the model is told to rerun with ``--yes``. Every call
is recorded in the session log (``keen sessions show ID``).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import anyio
import typer

from keen._redact import redactor
from keen.cli._common import EXIT_TOOL_ERROR, STARTED, err, fail, out, print_json, run
from keen.cli._wording import with_remedy

if TYPE_CHECKING:
    from keen.agent import Model, TurnResult
    from keen.agent.settings import ChatSettings
    from keen.gateway import ApprovalRequest
    from keen.harness import Observation
    from keen.mcpskills.sync import SyncEntry

__all__ = ["register"]

DEFAULT_DISCOVERY_TIMEOUT = 60.0
_NO_APPROVER = "(one-shot mode asks no one: rerun with --yes to approve such calls, or tell the user so)"
_DENIED = "(the user denied such calls with --deny)"


class _OneShotView:
    """Streams the answer to stdout (unless JSON) and tool activity to stderr."""

    def __init__(self, stream: bool) -> None:
        self.stream = stream
        self.streamed = False
        self.notices: list[str] = []
        self._held = ""

    def text(self, delta: str) -> None:
        if self.stream and delta:
            # The model's text may carry what a page or a tool result put in it: known secrets
            # redacted and the rest escaped, as the REPL does; the end that could begin a
            # secret is held until the next chunk (or finish), so a split one is caught too.
            now, self._held = redactor.stream(self._held, delta)
            self._write(now)
            self.streamed = True

    def finish(self) -> None:
        """Print what :meth:`text` held back."""
        held, self._held = self._held, ""
        self._write(held)

    @staticmethod
    def _write(text: str) -> None:
        if text:
            from keen.cli._terminal import terminal_text

            sys.stdout.write(terminal_text(text))
            sys.stdout.flush()

    # Names, results and notices are the model's or a server's text: printed as rich Text,
    # so "[/x]" is literal instead of markup (an unmatched closing tag crashed the turn).
    def tool_call(self, name: str, arguments: dict[str, Any]) -> None:
        from rich.text import Text

        from keen.cli._terminal import terminal_text

        shown = f"{arguments.get('server')}/{arguments.get('tool')}" if name == "call_mcp_tool" else name
        err.print(Text(f"> {terminal_text(shown)}", style="dim"), highlight=False)

    def observation(self, obs: Observation) -> None:
        if obs.is_error:
            from rich.text import Text

            from keen.cli._terminal import terminal_text

            err.print(Text(f"  {terminal_text(obs.text[:200])}", style="dim"), highlight=False)

    def notice(self, line: str) -> None:
        from rich.text import Text

        from keen.cli._terminal import terminal_text

        self.notices.append(line)
        err.print(Text(terminal_text(line)), highlight=False)


def _settings(model: str | None, base_url: str | None, mode: str | None) -> ChatSettings:
    from keen.agent.settings import MODES, load_settings

    if mode is not None and mode not in MODES:
        fail(f"--mode must be one of {', '.join(MODES)}, not {mode!r}")
    settings = load_settings().override(model=model, base_url=base_url, mode=mode)
    if not settings.model:
        fail(
            "no model chosen; pass --model PROVIDER:NAME (e.g. openai:gpt-4.1-mini with OPENAI_API_KEY set, "
            "or openai:llama3.1 --base-url http://127.0.0.1:11434/v1), or set model in "
            f"{_settings_file()}"
        )
    return settings


def _settings_file() -> Path:
    from keen.agent.settings import settings_path

    return settings_path()


def _server_failed(server: str, hint: str, remedy: Any, manager: Any) -> None:
    """One stderr line for a server that did not connect: its error and the command that fixes it."""
    from rich.text import Text

    from keen.cli._terminal import terminal_text
    from keen.errors import KeenError

    try:
        why = manager.status(server).last_error
    except KeenError:
        why = ""
    text = why or hint
    err.print(
        Text.assemble(
            (f"server {server}:", "yellow"), " ", terminal_text(with_remedy(text, remedy, server=server))
        )
    )


async def _one_shot(
    model: Model,
    settings: ChatSettings,
    prompt: str,
    view: _OneShotView,
    *,
    yes: bool,
    max_steps: int,
    timeout: float,
    show: Callable[[TurnResult], None],
) -> TurnResult:
    """One turn. When the skills on disk cover the configuration (a second run), the model is
    asked first and the servers start behind its request; otherwise once the servers that
    start within a second are up (docs/chat.md "Startup"). Servers still connecting join as
    they arrive, and a call to one waits for it. ``show`` prints the result as soon as the
    turn ends; then the servers still connecting get up to ``timeout`` seconds in all, so
    their skills are on disk for the next run."""
    from keen.agent import Agent, accept_defaults, decline
    from keen.agent.models import close_model
    from keen.agent.servers import (
        FIRST_ANSWER_WAIT,
        JoinAsReady,
        StartBehind,
        connecting_line,
        on_disk,
        settle_first,
    )
    from keen.mcp.connection.elicitation import ElicitAnswer
    from keen.runtime import open_runtime

    async def approver(request: ApprovalRequest) -> Any:
        return "yes" if yes else "no"

    elicitor = accept_defaults if yes else decline

    async def page(server: str, message: str, url: str) -> ElicitAnswer:
        # Even --yes does not consent to a page: the person must open it (MCP URL mode).
        from keen.cli._terminal import terminal_text

        err.print(
            f"{terminal_text(server, one_line=True)} asked you to open a page ({url}); a one-shot "
            "run declines that. Run `keen chat` to go through it.",
            markup=False,
            highlight=False,
            soft_wrap=True,
        )
        return ElicitAnswer("decline")

    began = time.monotonic()
    async with open_runtime(
        wait=None, live=True, elicitation=elicitor, elicitation_url=page, start=False
    ) as rt:

        def failed(entry: SyncEntry) -> None:
            if not entry.enabled and entry.hint:
                _server_failed(entry.server, entry.hint, entry.remedy, rt.manager)

        covered = on_disk(rt)
        if covered is None:
            await rt.start_servers()
            # About a second after the command started, imports included (docs/chat.md "Startup").
            first = max(0.0, min(FIRST_ANSWER_WAIT, timeout) - (time.monotonic() - STARTED))
            pending, report = await settle_first(rt, first, new_wait=timeout)
            for entry in report.entries:
                failed(entry)
        else:
            pending = covered  # all of them: they start behind the first model request
        if pending:
            view.notice(connecting_line(pending))
        joiner = JoinAsReady(rt, pending, failed)
        behind: StartBehind | None = None
        if covered is not None:

            async def start() -> None:
                await rt.start_servers()
                tg.start_soon(joiner.run)

            behind = StartBehind(model, start)
        agent = Agent(
            rt,
            behind or model,
            mode=settings.mode,
            approver=approver,
            elicitor=elicitor,
            max_steps=max_steps,
            denial_note="" if yes else _NO_APPROVER,
        )
        result: TurnResult | None = None
        async with anyio.create_task_group() as tg:
            if behind is None:
                tg.start_soon(joiner.run)
            else:
                tg.start_soon(behind.deadline)
            try:
                result = await agent.run_turn(prompt, view)
            finally:
                agent.close()
                await close_model(model)
            show(result)
            if behind is not None:
                await behind.start()  # the turn ended before its answer began (a model error)
            if pending:
                with anyio.move_on_after(max(0.0, timeout - (time.monotonic() - began))):
                    await joiner.done.wait()
            tg.cancel_scope.cancel()
        if (pending or covered is not None) and not joiner.pending:
            await rt.sync()  # the whole configuration once, as a run with no late server does
        assert result is not None  # run_turn returned (or raised through the task group)
        return result


def _show(result: TurnResult, view: _OneShotView, as_json: bool) -> None:
    """The turn's outcome: the JSON record on stdout, or the answer's last newline, its error
    (unless a notice said it) and the session's id on stderr."""
    if as_json:
        # Redaction swaps a string for a string: the record stays exact but for the secrets.
        print_json(redactor.redact_json(result.to_dict()))
    else:
        view.finish()
        if not result.answer.endswith("\n"):
            sys.stdout.write("\n")
        # A model error was already a notice line ("model error: ..."): not said twice.
        if result.error and not any(result.error in line for line in view.notices):
            from rich.text import Text

            from keen.cli._terminal import terminal_text

            err.print(Text.assemble(("error:", "bold red"), " ", terminal_text(result.error)))
        err.print(f"[dim]session {result.session_id} (keen sessions show {result.session_id})[/]")
    out.file.flush()
    sys.stdout.flush()


def chat(
    prompt: Annotated[
        str | None, typer.Option("--prompt", "-p", help="Run one turn with this prompt and exit (one-shot).")
    ] = None,
    model: Annotated[
        str | None,
        typer.Option(
            "--model",
            "-m",
            help="provider:name: openai:gpt-4.1-mini, anthropic:claude-sonnet-4-5, scripted:FILE.",
        ),
    ] = None,
    base_url: Annotated[
        str | None,
        typer.Option(
            "--base-url", help="An OpenAI-compatible endpoint (Ollama, vLLM, LM Studio, llama.cpp)."
        ),
    ] = None,
    mode: Annotated[
        str | None, typer.Option("--mode", help="Permission mode: read-only, ask (default) or auto.")
    ] = None,
    yes: Annotated[
        bool, typer.Option("--yes", "-y", help="One-shot: approve calls and accept elicitation defaults.")
    ] = False,
    deny: Annotated[
        bool, typer.Option("--deny", help="One-shot: deny every call that needs approval.")
    ] = False,
    as_json: Annotated[
        bool, typer.Option("--json", help="One-shot: print a JSON record of the turn.")
    ] = False,
    max_steps: Annotated[int, typer.Option("--max-steps", min=1, help="Model calls per turn at most.")] = 20,
    timeout: Annotated[
        float,
        typer.Option(
            "--timeout",
            help="Seconds MCP servers get to connect; the model is asked after 1 s at most, and slower "
            "servers join while it answers.",
        ),
    ] = DEFAULT_DISCOVERY_TIMEOUT,
) -> None:
    """Chat with a model that uses your MCP servers through skills, search and call_mcp_tool."""
    from keen.agent import open_model

    if yes and deny:
        fail("--yes and --deny contradict each other; pass one")
    if prompt is None and (yes or deny or as_json):
        fail("--yes, --deny and --json are for one-shot mode; add -p PROMPT")
    settings = _settings(model, base_url, mode)
    assert settings.model is not None
    chosen = open_model(settings.model, base_url=settings.base_url)
    if prompt is None:
        import importlib

        # keen.agent.repl is the REPL's own module (built beside this command); imported by
        # name so this command type-checks on its own.
        try:
            run_repl = importlib.import_module("keen.agent.repl").run_repl
        except ModuleNotFoundError as exc:
            if exc.name != "keen.agent.repl":
                raise
            fail("the interactive keen chat is not in this build; run one turn with keen chat -p PROMPT")

        run(lambda: run_repl(chosen, mode=settings.mode, max_steps=max_steps, discovery_timeout=timeout))
        return
    view = _OneShotView(stream=not as_json)
    result = run(
        lambda: _one_shot(
            chosen,
            settings,
            prompt,
            view,
            yes=yes,
            max_steps=max_steps,
            timeout=timeout,
            show=lambda done: _show(done, view, as_json),
        )
    )
    if not result.ok:
        raise typer.Exit(EXIT_TOOL_ERROR)


def register(app: typer.Typer) -> None:
    app.command("chat")(chat)
