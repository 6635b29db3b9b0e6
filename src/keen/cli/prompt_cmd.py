"""``keen prompt``: the skills section of the system prompt, and ``--stats`` on its size."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Annotated

import typer

from keen import paths
from keen.cli._common import fail, out, print_json

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
    if budget_tokens:
        _budgeted(budget_tokens, stats=stats, as_json=as_json)
        return
    from keen.prompt import prompt_stats, skills_prompt

    budget = max_chars or None
    if not stats:
        text = skills_prompt(max_chars=budget)
        if budget is not None:
            _check_fits(text, budget)
        if as_json:
            print_json({"text": text, "chars": len(text)})
        else:
            sys.stdout.write(text + "\n")
        return
    from keen._tables import Col, Listing
    from keen.gateway import tool_definition

    root = paths.skills_dir()
    figures = prompt_stats(root, tools=[tool_definition("openai", skills_dir=str(root))], max_chars=budget)
    if as_json:
        print_json(figures.to_dict())
        return
    table = Listing(
        [Col("server", "key")]
        + [Col(c, justify="right") for c in ("tools", "schema tokens", "catalog tokens")],
        title=f"prompt size ({figures.tokenizer})",
    )
    for s in figures.servers:
        table.add_row(s.name, str(s.tool_count), f"{s.schema_tokens:,}", f"{s.catalog_tokens:,}")
    out.print(table)
    out.print(f"every tool schema inline: {figures.all_schemas_tokens:,} tokens")
    out.print(f"Keen catalog + call_mcp_tool: {figures.catalog_tokens:,} tokens")
    out.print(f"reduction: {figures.reduction:.1%}")


def _check_fits(text: str, max_chars: int) -> None:
    """Fail when the budget left out every enabled skill: an empty catalog is no answer."""
    from keen.prompt import skills_prompt
    from keen.skills import discover

    names = [skill.name for skill in discover(paths.skills_dir()).enabled]
    if names and not any(f"- {name}" in text for name in names):
        whole = len(skills_prompt())
        fail(
            f"--max-chars {max_chars} is too small for one catalog line (the whole catalog is "
            f"{whole:,} characters); raise it"
        )


def _budgeted(tokens: int, *, stats: bool, as_json: bool) -> None:
    # keen.gateway.tool_definition is this function; the gateway's pipeline is not needed here.
    from keen.entry_tools import call_tool_definition as tool_definition
    from keen.prompt import budgeted_prompt

    root = paths.skills_dir()
    call_tool = tool_definition("openai", skills_dir=str(root))
    section = budgeted_prompt(tokens, root, call_tool=call_tool)
    if as_json:
        print_json({**section.to_dict(), "text": section.text})
        return
    if section.step == "empty" and (section.listed or section.folded):
        held = "cannot hold even" if section.overhead_tokens > tokens else "holds only"
        fits = lambda budget: budgeted_prompt(budget, root, call_tool=call_tool).step  # noqa: E731
        least = _least_budget(tokens, lambda budget: fits(budget) != "empty")
        whole = _least_budget(least, lambda budget: fits(budget) == "full")
        fail(
            f"a budget of {tokens} tokens {held} the tool definitions ({section.overhead_tokens} tokens), "
            f"with no room for the skills header and one line; raise --budget to at least {least} "
            f"(every server behind search_tools), or {whole} for the whole catalog"
        )
    if not stats:
        sys.stdout.write(section.text + "\n")
        return
    out.print(f"MCP part of the prompt: {section.tokens:,} of {tokens:,} tokens ({section.tokenizer})")
    out.print(f"  step: {section.step}; {len(section.listed)} skills listed, {len(section.folded)} folded")
    out.print(f"  tool definitions (call_mcp_tool, search_tools): {section.overhead_tokens:,} tokens")


def _least_budget(low: int, enough: Callable[[int], bool]) -> int:
    """The smallest budget above ``low`` tokens that is ``enough`` (which grows with the
    budget): doubled until it is, then bisected; a few dozen prompt builds at most."""
    high = max(low, 64) * 2
    while not enough(high):
        if high > 10_000_000:
            return high  # never reached for a real catalog; stops a runaway loop
        low, high = high, high * 2
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (low, middle) if enough(middle) else (middle, high)
    return high


def register(app: typer.Typer) -> None:
    app.command("prompt")(prompt)
