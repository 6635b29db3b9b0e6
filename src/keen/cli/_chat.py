"""``keen chat -p``'s one turn, without typer (:mod:`keen.cli.chat_cmd` declares the
command's options for typer and calls :func:`one_shot`).

:func:`run_alone` runs the same :func:`one_shot` for a command line of ``keen chat`` with
``-p PROMPT`` and only its own options, written the plain way, before typer is imported:
the first turn's prompt is then ready without importing typer and building its click
command (about 80 ms of CPU). Anything else (``--help``, ``-v``, ``--opt=value``,
a repeated or unknown option, a value that begins with ``-``, a number typer would parse
differently, the interactive chat, shell completion) returns False and goes through typer,
so help, errors and completion stay typer's. The error boundary is
:func:`keen.cli._console.guarded`, the CLI's one (every command's, through
:class:`keen.cli._common.KeenGroup`).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from keen._gcfreeze import pause_collection, resume_collection
from keen.cli._console import EXIT_TOOL_ERROR, STARTED, err, fail, guarded, out, print_json
from keen.cli._wording import with_remedy

if TYPE_CHECKING:
    from keen.agent import Agent, Model, TurnResult
    from keen.agent.first import EarlyModel
    from keen.agent.resume import Restored
    from keen.agent.settings import ChatSettings
    from keen.gateway import ApprovalRequest
    from keen.harness import Observation
    from keen.mcpskills.sync import SyncEntry
    from keen.runtime import Runtime

__all__ = ["DEFAULT_DISCOVERY_TIMEOUT", "chosen_model", "one_shot", "plain_options", "run_alone"]

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
        self.line_open = False
        """stdout's last character is not a newline."""

    def text(self, delta: str) -> None:
        if self.stream and delta:
            # The model's text may carry what a page or a tool result put in it: known secrets
            # redacted and the rest escaped, as the REPL does; the end that could begin a
            # secret is held until the next chunk (or finish), so a split one is caught too.
            # (keen._redact is imported at the first text: not before the prompt is built.)
            from keen._redact import redactor

            now, self._held = redactor.stream(self._held, delta)
            self._write(now)
            self.streamed = True

    def finish(self) -> None:
        """Print what :meth:`text` held back."""
        held, self._held = self._held, ""
        self._write(held)

    def _write(self, text: str) -> None:
        if text:
            from keen.cli._terminal import terminal_text

            sys.stdout.write(terminal_text(text))
            sys.stdout.flush()
            self.line_open = not text.endswith("\n")

    def _end_step(self) -> None:
        """End the line of a step's text before its tool calls: the next step's text (the
        answer, or more) starts a line of its own instead of running on from this one."""
        self.finish()
        if self.line_open:
            self._write("\n")

    # Names, results and notices are the model's or a server's text: printed as rich Text,
    # so "[/x]" is literal instead of markup (an unmatched closing tag crashed the turn).
    def tool_call(self, name: str, arguments: dict[str, Any]) -> None:
        from rich.text import Text

        from keen.cli._terminal import terminal_text
        from keen.entry_tools import call_label

        shown = call_label(name, arguments)
        self._end_step()
        err.print(Text(f"> {terminal_text(shown)}", style="dim"), highlight=False)

    def observation(self, obs: Observation) -> None:
        if obs.is_error:
            from rich.text import Text

            from keen._text import shorten
            from keen.cli._terminal import terminal_text

            err.print(Text(f"  {terminal_text(shorten(obs.text, 200))}", style="dim"), highlight=False)

    def notice(self, line: str) -> None:
        from rich.text import Text

        from keen.cli._terminal import terminal_text

        self.notices.append(line)
        err.print(Text(terminal_text(line)), highlight=False)


def _settings(model: str | None, base_url: str | None, mode: str | None) -> ChatSettings:
    from keen.agent.settings import MODES, base_url_problem, load_settings

    if mode is not None and mode not in MODES:
        fail(f"--mode must be one of {', '.join(MODES)}, not {mode!r}")
    if base_url is not None and (problem := base_url_problem(base_url)):
        fail(f"--base-url {problem}")
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
    early: EarlyModel | None = None,
    restored: Restored | None = None,
) -> TurnResult:
    """One turn, its first request sent before the runtime opens when it was built
    (``early``, started by :func:`_run_early`; :mod:`keen.agent.first`: the session's own
    first request, when it asks the same). When the skills on disk cover the configuration
    (a second run), the model is asked first and the servers start behind its request;
    otherwise once the servers that start within a second are up (docs/chat.md "Startup").
    Servers still connecting join as they arrive, and a call to one waits for it. ``show``
    prints the result as soon as the turn ends; then the servers still connecting get up to
    ``timeout`` seconds in all, so their skills are on disk for the next run. ``restored``:
    the conversation the turn goes on with (``--resume``), said on stderr first."""
    import contextlib

    import anyio

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

    asking = early or model  # the early answer, when there is one; the session closes model

    async def approval_prompt(request: ApprovalRequest) -> Any:
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
        _remember_config(rt)
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

            behind = StartBehind(asking, start)
        agent = Agent(
            rt,
            behind or asking,
            mode=settings.mode,
            approval_prompt=approval_prompt,
            elicitor=elicitor,
            max_steps=max_steps,
            denial_note="" if yes else _NO_APPROVER,
        )
        if restored is not None:
            _resumed(agent, restored, rt)
        result: TurnResult | None = None
        async with anyio.create_task_group() as tg:
            if behind is None:
                tg.start_soon(joiner.run)
            else:
                tg.start_soon(behind.deadline)
            try:
                result = await agent.run_turn(prompt, view)
            except (anyio.get_cancelled_exc_class(), KeyboardInterrupt):
                # Ctrl-C, SIGTERM: the turn is in its session log, cancelled; without its id
                # (the line a finished turn ends with) nothing led there.
                with contextlib.suppress(OSError):  # after SIGHUP the terminal may be gone
                    err.print(f"[dim]session {agent.session_id} (keen sessions show {agent.session_id})[/]")
                raise
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


def _resumed(agent: Agent, restored: Restored, rt: Runtime) -> None:
    """Give ``agent`` the resumed conversation and say on stderr what came back."""
    from rich.text import Text

    from keen.agent.resume import summary
    from keen.cli._terminal import terminal_text

    agent.resume(restored)
    # configs.json's entries, disabled ones too (the Manager's statuses leave them out).
    entries = rt.manager.config.servers
    configured = [*entries, *(status.name for status in rt.manager.servers())]
    disabled = [name for name, entry in entries.items() if not entry.enabled]
    for line in summary(restored, agent.session_id, configured, Path.cwd(), disabled):
        err.print(Text(terminal_text(line), style="dim"), highlight=False, soft_wrap=True)


def _remember_config(rt: Any) -> None:
    """Record configs.json as valid when its full validation (by :func:`on_disk`) found it
    so: the next start reads its servers before the prompt without the validation models
    (:mod:`keen.mcp.config.validated`)."""
    manager = rt.manager
    if manager.no_config_file():
        return
    from keen.mcp.config.validated import remember_valid

    remember_valid(manager.config_path, manager.config)


def _show(result: TurnResult, view: _OneShotView, as_json: bool) -> None:
    """The turn's outcome: the JSON record on stdout, or the answer's last newline, its error
    (unless a notice said it) and the session's id on stderr."""
    if as_json:
        # Redaction swaps a string for a string: the record stays exact but for the secrets.
        from keen._redact import redactor

        print_json(redactor.redact_json(result.to_dict()))
    else:
        view.finish()
        if view.line_open or not view.streamed:
            sys.stdout.write("\n")
        # A model error was already a notice line ("model error: ..."): not said twice.
        if result.error and not any(result.error in line for line in view.notices):
            from rich.text import Text

            from keen.cli._terminal import terminal_text

            err.print(Text.assemble(("error:", "bold red"), " ", terminal_text(result.error)))
        err.print(f"[dim]session {result.session_id} (keen sessions show {result.session_id})[/]")
    out.file.flush()
    sys.stdout.flush()


def _run(fn: Callable[[], Any]) -> Any:
    """:func:`keen.cli._common.run` without typer: SIGTERM and SIGHUP cancel like Ctrl-C."""
    from keen.cli._signals import run_until_signal

    return run_until_signal(fn)


def _run_early(early: EarlyModel, fn: Callable[[], Any]) -> Any:
    """:func:`_run` for a turn whose first request was built (``early``): it is sent first,
    in asyncio's own loop (``asyncio.run``: what ``anyio.run`` runs by default), and anyio
    (about 25 ms of CPU to import; not needed for the request), the signal watch and
    ``fn`` (the session) load and run while the model answers. ``early`` is stopped when
    ``fn`` ends, however it ends."""
    import asyncio

    async def main() -> Any:
        early.start()
        try:
            # The request goes out now: its task runs to its first wait on the network.
            await asyncio.sleep(0)
            resume_collection()
            from keen.cli._signals import until_signal

            return await until_signal(fn)
        finally:
            await early.stop()

    return asyncio.run(main())


def chosen_model(model: str | None, base_url: str | None, mode: str | None) -> tuple[ChatSettings, Model]:
    """The chat's settings (config file, then the options) and its model, opened."""
    from keen.agent import open_model

    settings = _settings(model, base_url, mode)
    assert settings.model is not None
    return settings, open_model(settings.model, base_url=settings.base_url, timeout=settings.model_timeout)


def one_shot(
    prompt: str,
    *,
    model: str | None,
    base_url: str | None,
    mode: str | None,
    yes: bool,
    as_json: bool,
    max_steps: int,
    timeout: float,
    restored: Restored | None = None,
) -> int:
    """Run one turn (module doc of :mod:`keen.cli.chat_cmd`), going on with ``restored``
    when given (``--resume``); returns the exit code."""
    # The settings first: a missing model is said before standard input is read (a pipe
    # that takes long to write, or a terminal waiting for Ctrl-D, for nothing).
    settings = _settings(model, base_url, mode)
    if prompt == "-":  # as `keen mcp import -`: a prompt piped in (a file, another command)
        if sys.stdin is None:  # started with no standard input at all (its descriptor closed)
            fail(
                "cannot read the prompt from standard input: there is none; pipe the prompt in, or pass -p TEXT"
            )
        try:
            prompt = sys.stdin.read().strip()
        except (OSError, UnicodeDecodeError) as exc:
            fail(f"cannot read the prompt from standard input ({exc}); pipe in UTF-8 text, or pass -p TEXT")
    if not prompt.strip():
        # An empty message was sent to the model (a request paid for, an answer to nothing);
        # `-p -` was sent as the text "-".
        fail("the prompt is empty; pass -p TEXT, or -p - to read it from standard input")
    # The collector waits until the first request is out (keen._gcfreeze), however this ends.
    pause_collection()
    try:
        from keen.agent import open_model
        from keen.agent.first import EarlyModel, plan

        assert settings.model is not None
        # The prompt from the skills on disk, before the provider's module, the event loop and
        # the runtime load (docs/chat.md "Startup"); a model that cannot be opened still fails
        # before anything is printed or sent.
        # A resumed conversation is not in the early request (it holds the prompt alone).
        first = plan(prompt) if restored is None else None
        chosen = open_model(settings.model, base_url=settings.base_url, timeout=settings.model_timeout)
        view = _OneShotView(stream=not as_json)
        early = None if first is None else EarlyModel(chosen, first)
        if early is None:
            resume_collection()  # the session builds its first request itself, as ever

        async def turn() -> TurnResult:
            return await _one_shot(
                chosen,
                settings,
                prompt,
                view,
                yes=yes,
                max_steps=max_steps,
                timeout=timeout,
                show=lambda done: _show(done, view, as_json),
                early=early,
                restored=restored,
            )

        result = _run(turn) if early is None else _run_early(early, turn)
    finally:
        resume_collection()
    return 0 if result.ok else EXIT_TOOL_ERROR


_VALUES = {"-p": "prompt", "--prompt": "prompt", "-m": "model", "--model": "model"}
_VALUES |= {"--base-url": "base_url", "--mode": "mode"}
_FLAGS = {"-y": "yes", "--yes": "yes", "--deny": "deny", "--json": "as_json"}


def plain_options(args: Sequence[str]) -> dict[str, Any] | None:
    """The options of ``keen chat ARGS...`` (``args`` without the program name) when the
    command line is ``chat -p PROMPT`` with only the command's own options, each once, as
    separate words, no value beginning with ``-``, ``--max-steps`` and ``--timeout`` plain
    ASCII digits, and no contradiction; else None (typer parses it, and says what is wrong)."""
    if not args or args[0] != "chat":
        return None
    options: dict[str, Any] = {
        "prompt": None,
        "model": None,
        "base_url": None,
        "mode": None,
        "yes": False,
        "deny": False,
        "as_json": False,
        "max_steps": 20,
        "timeout": DEFAULT_DISCOVERY_TIMEOUT,
    }
    seen: set[str] = set()
    rest = list(args[1:])
    while rest:
        option = rest.pop(0)
        key = _VALUES.get(option) or _FLAGS.get(option)
        if option in ("--max-steps", "--timeout"):
            key = option[2:].replace("-", "_")
        if key is None or key in seen:
            return None
        seen.add(key)
        if option in _FLAGS:
            options[key] = True
            continue
        if not rest or rest[0].startswith("-"):
            return None
        value = rest.pop(0)
        if key in ("max_steps", "timeout"):
            # Plain ASCII digits read the same with int()/float() as with click's INT and
            # FLOAT (and --max-steps's min=1 holds); anything else goes to typer.
            if not (value.isascii() and value.isdigit()) or (key == "max_steps" and int(value) < 1):
                return None
            options[key] = int(value) if key == "max_steps" else float(value)
        else:
            options[key] = value
    if options["prompt"] is None or (options["yes"] and options["deny"]):
        return None
    return options


def run_alone(args: Sequence[str]) -> bool:
    """Run ``keen ARGS`` here when it is a plain ``keen chat -p`` (module doc) and return
    True; else False, having done nothing. Exits as typer would: 0, 1 when the turn failed,
    2 on a Keen error (its message on stderr), 130 on Ctrl-C."""
    import os

    options = plain_options(args)
    if options is None or "_KEEN_COMPLETE" in os.environ:
        return False
    del options["deny"]  # the default: refusing is what a one-shot run does without --yes
    code = guarded(lambda: one_shot(**options))
    if code:
        raise SystemExit(code)
    return True
