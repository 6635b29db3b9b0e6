"""The skills section of a system prompt within a token budget (``keen prompt``, a host's
:func:`budgeted_prompt`).

The tool definitions sent beside it (the one ``call_mcp_tool`` definition) are passed in as
data, so this module stays below the gateway. ``keen prompt --stats``'s comparison with
every tool inline (:func:`prompt_stats`, :class:`PromptStats`, :class:`ServerFootprint`,
:func:`openai_tool_json`) lives in :mod:`keen.prompt_cost` and is re-exported here lazily
(PEP 562), so building a prompt does not define its classes.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from keen import paths
from keen._lazy import exports_from, lazy_module_attrs
from keen.entry_tools import call_tool_definition, search_tool_definition
from keen.errors import BudgetTooSmall
from keen.skills import render_skills_section
from keen.skills.cache import DiscoveryCache
from keen.tokens import TokenCounter, token_counter

if TYPE_CHECKING:
    from keen.capabilities import BudgetedSection
    from keen.prompt_cost import PromptStats, ServerFootprint, openai_tool_json, prompt_stats

__all__ = [
    "PromptStats",
    "ServerFootprint",
    "budgeted_prompt",
    "mcp_tool_definitions",
    "openai_tool_json",
    "prompt_stats",
    "skills_prompt",
]

__getattr__, __dir__ = lazy_module_attrs(
    __name__,
    exports_from("keen.prompt_cost", ("PromptStats", "ServerFootprint", "openai_tool_json", "prompt_stats")),
)


def skills_prompt(skills_root: Path | None = None, *, max_chars: int | None = None) -> str:
    """The skills section for a system prompt (docs/architecture.md "The prompt catalog").

    Args:
        skills_root: the skills directory; default ``paths.skills_dir()``.
        max_chars: a character budget for the section (``None``: no budget); lines are
            shortened, then dropped with a closing note, to fit.

    Returns:
        The section: a header and one catalog line per enabled skill.

    Raises:
        SkillError: the skills config is broken.
    """
    found = DiscoveryCache(skills_root or paths.skills_dir()).discover()
    return render_skills_section(found.enabled, max_chars=max_chars)


def mcp_tool_definitions(call_tool: Mapping[str, Any]) -> list[str]:
    """The tool definitions sent with the MCP section every turn, as compact JSON (OpenAI
    shape): ``call_tool`` and ``search_tools`` (:mod:`keen.entry_tools`).

    Args:
        call_tool: the ``call_mcp_tool`` definition, passed as data so this module stays
            below the gateway: ``keen.gateway.tool_definition("openai", skills_dir=...)``.
    """
    return [
        json.dumps(definition, separators=(",", ":"), ensure_ascii=False)
        for definition in (call_tool, search_tool_definition("openai"))
    ]


def budgeted_prompt(
    budget: int,
    skills_root: Path | None = None,
    *,
    call_tool: Mapping[str, Any] | None = None,
    counter: TokenCounter | None = None,
    usefulness: dict[str, float] | None = None,
) -> BudgetedSection:
    """The skills section whose tokens plus those of :func:`mcp_tool_definitions` stay
    within ``budget`` (o200k tokens when the tokenizer file is local): the whole catalog
    when it fits, else shortened lines, else the least useful servers folded behind
    ``search_tools`` (see ``keen.capabilities.budget``).

    Args:
        budget: tokens for the whole MCP part of the prompt.
        skills_root: the skills directory; default ``paths.skills_dir()``.
        call_tool: the ``call_mcp_tool`` definition (see :func:`mcp_tool_definitions`);
            default ``keen.entry_tools.call_tool_definition("openai", skills_dir=...)`` for
            ``skills_root``, the one ``keen prompt`` and ``keen.gateway.tool_definition``
            give, so a host that only builds its prompt imports no gateway.
        counter: the token counter; default :func:`keen.tokens.token_counter`.
        usefulness: per-server weights deciding which servers fold first.

    Returns:
        The section, its ``tokens`` never above ``budget``. Its ``step`` is ``empty`` when
        the budget holds the two definitions but not the skills header and one line: the
        text is ``""`` and every skill is in ``folded`` (``keen prompt --budget`` names the
        least budget that lists them).

    Raises:
        ValueError: ``budget`` < 0.
        BudgetTooSmall: ``budget`` is below the two definitions' own tokens, which are sent
            with any prompt: no section fits. Its ``minimum`` is their count, the least
            budget that can be met (a ``ValueError`` too).
        SkillError: the skills directory cannot be read.
    """
    from keen.capabilities import budgeted_section

    if budget < 0:
        raise ValueError("the token budget must be >= 0")
    root = skills_root or paths.skills_dir()
    if call_tool is None:
        call_tool = call_tool_definition("openai", skills_dir=str(root))
    overhead = mcp_tool_definitions(call_tool)
    # Weighed before a section is built: built, it would be kept in the section store, whose
    # few places (the newest 16) belong to budgets a prompt is really built at.
    minimum = sum((counter or token_counter()).count(text) for text in overhead)
    if minimum > budget:
        # Returned, the section (step "empty") cost more than was asked and said nothing: a
        # host sent a prompt over its budget, believing it within.
        raise BudgetTooSmall(
            f"a budget of {budget} tokens is below the {minimum} tokens of the tool "
            "definitions sent with the prompt (call_mcp_tool and search_tools), so no prompt fits it; "
            f"give at least {minimum} tokens, more to list the skills",
            budget=budget,
            minimum=minimum,
        )
    found = DiscoveryCache(root).discover()
    return budgeted_section(
        found.enabled,
        budget,
        skills_root=root.absolute(),
        counter=counter,
        overhead=overhead,
        usefulness=usefulness,
    )
