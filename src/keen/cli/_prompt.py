"""``keen prompt``'s work, without typer: the skills section of the system prompt, and
``--stats`` on its size.

:mod:`keen.cli.prompt_cmd` declares the command's options for typer and calls :func:`show`.
:func:`run_alone` runs the same :func:`show` for a command line of ``keen prompt`` with
only its own options, written the plain way, before typer is imported: a budgeted prompt
is then ready in the time it takes to build, not that plus importing typer and building
its click command (within 100 ms of CPU beyond the interpreter: ``bench/prompt_start.py``). Anything else
(``--help``, ``-v``, ``--budget=N``, a repeated or unknown option, a number typer would
parse differently, shell completion) returns False and goes through typer, so help,
errors and completion stay typer's, byte for byte. The error boundary is the CLI's
one, :func:`keen.cli._console.guarded`.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from keen import paths
from keen.cli._console import err, fail, guarded_reader, out, print_json

if TYPE_CHECKING:
    from keen.capabilities import BudgetedSection

__all__ = ["print_stats", "run_alone", "show"]

_FLAGS = {"--stats": "stats", "--json": "as_json"}
_NUMBERS = {"--budget": "budget_tokens", "--max-chars": "max_chars"}


def show(*, stats: bool, as_json: bool, max_chars: int, budget_tokens: int) -> None:
    """Print the skills section of the system prompt (from the skills on disk)."""
    if budget_tokens:
        _budgeted(budget_tokens, stats=stats, as_json=as_json)
        return
    from keen.prompt import skills_prompt

    budget = max_chars or None
    if not stats:
        text = skills_prompt(max_chars=budget)
        if budget is not None:
            _check_fits(text, budget)
        if as_json:
            print_json({"text": text, "chars": len(text)})
        elif not text:
            _nothing_yet()
        else:
            sys.stdout.write(text + "\n")
        return
    print_stats(max_chars=budget, as_json=as_json)


def _nothing_yet() -> None:
    """Say on stderr why there is no section (stdout stays empty for a script), and how to get one."""
    from keen.skills.cache import DiscoveryCache

    # Skills there, all disabled (their servers down or signed out, held, or a person's
    # choice): adding a server is not the way back.
    disabled = [s.name for s in DiscoveryCache(paths.skills_dir()).discover().skills if not s.enabled]
    if disabled:
        err.print(
            f"no enabled skills in {paths.skills_dir()}: {_names(disabled)} "
            f"{'is' if len(disabled) == 1 else 'are'} disabled; keen mcp sync says why (a server down, "
            "signed out or disabled, tools held for review), keen skills enable NAME turns one back on",
            highlight=False,
            markup=False,
        )
        return
    configured = configured_servers()
    enabled = [name for name, on in configured.items() if on]
    if enabled:
        # Servers added, never synced: adding one more is not the way to a section.
        err.print(
            f"no MCP skills in {paths.skills_dir()} yet: {paths.mcp_config_path()} configures {_names(enabled)}; "
            "generate the skills with keen mcp sync",
            highlight=False,
            markup=False,
        )
        return
    if configured:
        # Every server disabled: keen mcp sync writes no skill for one, so name the switch first.
        err.print(
            f"no MCP skills in {paths.skills_dir()} yet: {paths.mcp_config_path()} configures "
            f"{_names(list(configured))}, each disabled; turn one on with keen mcp enable NAME, then "
            "generate its skill with keen mcp sync",
            highlight=False,
            markup=False,
        )
        return
    err.print(
        f"no MCP skills in {paths.skills_dir()} yet: add a server (keen mcp add NAME -- COMMAND [ARGS...]), "
        "then generate its skill with keen mcp sync",
        highlight=False,
        markup=False,
    )


def _names(names: list[str]) -> str:
    """Up to five names for a hint, each escaped: configs.json's keys are anyone's text."""
    from keen._terminal import terminal_text

    shown = ", ".join(terminal_text(name, one_line=True) for name in names[:5])
    return shown + (f" and {len(names) - 5} more" if len(names) > 5 else "")


def configured_servers() -> dict[str, bool]:
    """The server names in configs.json as written (not validated: this only words a hint), in
    file order, each with whether it is enabled (``"enabled": false`` is off); none when the
    file is missing or cannot be parsed (the commands that use it say what is wrong with it)."""
    return {name: entry.get("enabled") is not False for name, entry in configured_entries().items()}


def configured_entries() -> dict[str, dict[str, Any]]:
    """Each server's configs.json entry as written (not validated: this only words a hint), in
    file order; an entry that is not an object reads as empty. None when the file is missing
    or cannot be parsed (the commands that use it say what is wrong with it)."""
    import json

    from keen._fs import BOM

    try:
        data = json.loads(paths.mcp_config_path().read_text(encoding="utf-8").removeprefix(BOM))
    except (OSError, UnicodeDecodeError, ValueError, RecursionError):
        return {}
    servers = data.get("servers") if isinstance(data, dict) else None
    if not isinstance(servers, dict):
        return {}
    return {str(name): entry if isinstance(entry, dict) else {} for name, entry in servers.items()}


def print_stats(*, max_chars: int | None = None, as_json: bool = False) -> None:
    """``keen prompt --stats`` (and the demo's step 5): per server, its tools' schemas inline
    against its catalog line, then the whole prompt both ways, for the skills on disk."""
    from keen._tables import Col, Listing
    from keen.entry_tools import call_tool_definition as tool_definition
    from keen.prompt_cost import prompt_stats

    root = paths.skills_dir()
    figures = prompt_stats(root, tools=[tool_definition("openai", skills_dir=str(root))], max_chars=max_chars)
    if as_json:
        print_json(figures.to_dict())
        return
    if not figures.servers:
        _nothing_yet()  # a "reduction" of nothing would be no figure at all
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
    from keen.errors import BudgetTooSmall
    from keen.prompt import budgeted_prompt
    from keen.tokens import token_counter

    root = paths.skills_dir()
    call_tool = tool_definition("openai", skills_dir=str(root))
    try:
        section = budgeted_prompt(tokens, root, call_tool=call_tool)
    except BudgetTooSmall as exc:
        section, overhead, held = None, exc.minimum, "cannot hold even"
    else:
        overhead, held = section.overhead_tokens, "holds only"
        if as_json:
            print_json({**section.to_dict(), "text": section.text})
            return
    if section is None or (section.step == "empty" and (section.listed or section.folded)):
        # The probes are computed, never kept: passing a counter skips the section store,
        # whose few places belong to the budgets the prompt is really built at.
        counter = token_counter()
        message = f"a budget of {tokens} tokens {held} the tool definitions ({overhead} tokens)"
        message += _advice(
            tokens, lambda budget: budgeted_prompt(budget, root, call_tool=call_tool, counter=counter)
        )
        if as_json:  # (a section that holds only the definitions was printed above)
            # A script asked for JSON: it gets JSON (and the exit code), not only stderr's words.
            print_json(
                {"error": BudgetTooSmall.code, "budget": tokens, "minimum": overhead, "message": message}
            )
        fail(message)
    if not stats:
        sys.stdout.write(section.text + "\n")
        return
    out.print(f"MCP part of the prompt: {section.tokens:,} of {tokens:,} tokens ({section.tokenizer})")
    out.print(f"  step: {section.step}; {len(section.listed)} skills listed, {len(section.folded)} folded")
    out.print(f"  tool definitions (call_mcp_tool, search_tools): {section.overhead_tokens:,} tokens")


def _advice(tokens: int, build: Callable[[int], BudgetedSection]) -> str:
    """What a budget of ``tokens`` that lists no skill should become, from prompts built at
    other budgets (``build``): the least that lists every server behind search_tools, and
    the least for the whole catalog (one figure when they are the same); with no skill
    enabled, the least that holds the definitions, and that there is nothing to list."""
    from keen.errors import BudgetTooSmall

    def fits(budget: int) -> BudgetedSection | None:
        try:
            return build(budget)
        except BudgetTooSmall:
            return None

    def step(budget: int) -> str:
        section = fits(budget)
        return "empty" if section is None else section.step

    least = _least_budget(tokens, lambda budget: step(budget) != "empty")
    at_least = fits(least)
    if at_least is not None and not at_least.listed and not at_least.folded:
        return f"; raise --budget to at least {least} (no skill is enabled, so there is no catalog to list)"
    room = ", with no room for the skills header and one line"
    if at_least is not None and at_least.step == "full":
        return f"{room}; raise --budget to at least {least} for the whole catalog"
    whole = _least_budget(least, lambda budget: step(budget) == "full")
    return (
        f"{room}; raise --budget to at least {least} (every server behind search_tools), "
        f"or {whole} for the whole catalog"
    )


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


def plain_options(args: Sequence[str]) -> dict[str, Any] | None:
    """The options of ``keen prompt ARGS...`` (``args`` without the program name) when the
    command line is ``prompt`` with only ``--stats``, ``--json``, ``--budget DIGITS`` and
    ``--max-chars DIGITS``, each at most once; else None (typer parses it)."""
    if not args or args[0] != "prompt":
        return None
    options: dict[str, Any] = {"stats": False, "as_json": False, "max_chars": 0, "budget_tokens": 0}
    seen: set[str] = set()
    rest = list(args[1:])
    while rest:
        option = rest.pop(0)
        if option in seen:
            return None
        seen.add(option)
        if option in _FLAGS:
            options[_FLAGS[option]] = True
        elif option in _NUMBERS and rest and rest[0].isascii() and rest[0].isdigit():
            # Plain ASCII digits read the same with int() as with click's INT (and --budget's
            # min=0 holds); "+5", " 5", "5_000" or "٥" go to typer.
            options[_NUMBERS[option]] = int(rest.pop(0))
        else:
            return None
    return options


def run_alone(args: Sequence[str]) -> bool:
    """Run ``keen ARGS`` here when it is a plain ``keen prompt`` (module doc) and return
    True; else False, having done nothing. Exits as typer would: 2 on a Keen error (its
    message on stderr), 130 on Ctrl-C, 1 on a closed stdout."""
    options = plain_options(args)
    if options is None or "_KEEN_COMPLETE" in os.environ:
        return False
    guarded_reader(lambda: show(**options))
    return True
