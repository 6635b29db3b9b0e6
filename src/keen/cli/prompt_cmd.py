"""``keen prompt``: the skills section of the system prompt, and ``--stats`` on its size.

Its options as typer declares them (help, parsing, errors); the work is
:func:`keen.cli._prompt.show`, which a plain command line also reaches without typer."""

from __future__ import annotations

from typing import Annotated

import typer

from keen.cli._prompt import show

__all__ = ["register"]


def prompt(
    stats: Annotated[
        bool, typer.Option("--stats", help="Compare the prompt with every tool schema inline.")
    ] = False,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print JSON: the prompt text, or with --stats the figures.")
    ] = False,
    max_chars: Annotated[
        int, typer.Option("--max-chars", help="Character budget for the catalog (0: none).")
    ] = 0,
    budget_tokens: Annotated[
        int,
        typer.Option(
            "--budget",
            min=0,
            help="Token budget for the whole MCP part (catalog + call_mcp_tool + search_tools); 0: none.",
        ),
    ] = 0,
) -> None:
    """Print the skills section of the system prompt (from the skills on disk)."""
    show(stats=stats, as_json=as_json, max_chars=max_chars, budget_tokens=budget_tokens)


def register(app: typer.Typer) -> None:
    app.command("prompt")(prompt)
