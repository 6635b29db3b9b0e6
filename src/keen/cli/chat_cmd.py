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

``--resume [SESSION]`` goes on with an earlier session's conversation, rebuilt from its log
(:mod:`keen.agent.resume`; docs/chat.md "Resuming a session"), in the REPL or with ``-p``:
SESSION is an id from ``keen sessions list`` (or its start); without it, this directory's
session written to last. The resumed session gets a log of its own naming its parent.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from keen.cli._chat import DEFAULT_DISCOVERY_TIMEOUT, chosen_model, one_shot
from keen.cli._common import fail, run

if TYPE_CHECKING:
    from keen.agent.resume import Restored

__all__ = ["register"]


def restored_session(session: str | None) -> Restored:
    """The conversation ``--resume [SESSION]`` goes on with, rebuilt from its log; a session
    that cannot be resumed fails the command (exit 2) with what to do, before anything starts."""
    from keen.agent.resume import SessionNotResumable, find_session, restore

    try:
        return restore(find_session(session, Path.cwd()))
    except SessionNotResumable as exc:
        fail(exc.message)


def chat(
    session: Annotated[
        str | None,
        typer.Argument(
            help="With --resume: the session to go on with (an id from `keen sessions list`, or its start).",
            show_default=False,
        ),
    ] = None,
    resume: Annotated[
        bool,
        typer.Option(
            "--resume",
            "-r",
            help="Go on with an earlier session's conversation: SESSION, or without it this directory's "
            "last session. Works with -p too.",
        ),
    ] = False,
    prompt: Annotated[
        str | None,
        typer.Option(
            "--prompt",
            "-p",
            help="Run one turn with this prompt and exit (one-shot); - reads it from standard input.",
        ),
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
            "--base-url",
            help="The model's endpoint: OpenAI-compatible (Ollama, vLLM, LM Studio, llama.cpp), or"
            " Anthropic-compatible for anthropic:NAME; a local one needs no API key.",
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
    if yes and deny:
        fail("--yes and --deny contradict each other; pass one")
    if prompt is None and (yes or deny or as_json):
        fail("--yes, --deny and --json are for one-shot mode; add -p PROMPT")
    if session is not None and not resume:
        # Most often the rest of an unquoted prompt (keen chat -p hello there), else a session id.
        fail(
            f'unexpected argument {session!r}: quote the prompt (-p "..."), or resume a session '
            "with keen chat --resume ID"
        )
    restored = restored_session(session) if resume else None
    if prompt is not None:
        code = one_shot(
            prompt,
            model=model,
            base_url=base_url,
            mode=mode,
            yes=yes,
            as_json=as_json,
            max_steps=max_steps,
            timeout=timeout,
            restored=restored,
        )
        if code:
            raise typer.Exit(code)
        return
    settings, chosen = chosen_model(model, base_url, mode)
    import importlib

    # keen.agent.repl is the REPL's own module (built beside this command); imported by
    # name so this command type-checks on its own.
    try:
        run_repl = importlib.import_module("keen.agent.repl").run_repl
    except ModuleNotFoundError as exc:
        if exc.name != "keen.agent.repl":
            raise
        fail("the interactive keen chat is not in this build; run one turn with keen chat -p PROMPT")

    run(
        lambda: run_repl(
            chosen, mode=settings.mode, max_steps=max_steps, discovery_timeout=timeout, restored=restored
        )
    )


def register(app: typer.Typer) -> None:
    app.command("chat")(chat)
