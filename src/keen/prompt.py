"""The skills section of a system prompt and what it costs (``keen prompt [--stats]``).

The comparison of ``--stats``: with every MCP tool inline, an LLM API receives one tool
definition per tool (OpenAI function shape: name, description, parameters = the
inputSchema). With Keen it receives the catalog section (one line per enabled skill)
plus the tool definitions the host sends beside it (the one ``call_mcp_tool``
definition, passed in as data so this module stays below the gateway). Both sides cover
the same servers: those whose generated ``mcp:<server>`` skill is enabled. Tool
definitions are read back from the generated schema files, so no server is contacted.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from keen import paths
from keen._log import LazyLogger
from keen.entry_tools import call_tool_definition, search_tool_definition
from keen.mcpskills import SCHEMAS_DIR
from keen.skills import Skill, catalog_line, render_skills_section
from keen.skills.cache import DiscoveryCache
from keen.tokens import TokenCounter, token_counter

if TYPE_CHECKING:
    from keen.capabilities import BudgetedSection

__all__ = [
    "PromptStats",
    "ServerFootprint",
    "budgeted_prompt",
    "mcp_tool_definitions",
    "openai_tool_json",
    "prompt_stats",
    "skills_prompt",
]

# logging is imported only when something is logged (keen._log).
logger = LazyLogger(__name__)


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

    Raises:
        ValueError: ``budget`` < 0.
        SkillError: the skills directory cannot be read.
    """
    from keen.capabilities import budgeted_section

    root = skills_root or paths.skills_dir()
    if call_tool is None:
        call_tool = call_tool_definition("openai", skills_dir=str(root))
    found = DiscoveryCache(root).discover()
    return budgeted_section(
        found.enabled,
        budget,
        skills_root=root.absolute(),
        counter=counter or token_counter(),
        overhead=mcp_tool_definitions(call_tool),
        usefulness=usefulness,
    )


def openai_tool_json(name: str, description: str, input_schema: dict[str, Any]) -> str:
    """One tool definition as an LLM API receives it (OpenAI Chat Completions shape)."""
    definition = {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": input_schema or {"type": "object"},
        },
    }
    return json.dumps(definition, ensure_ascii=False, separators=(",", ":"))


@dataclass(frozen=True)
class ServerFootprint:
    name: str
    tool_count: int
    schema_tokens: int
    catalog_tokens: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "tool_count": self.tool_count,
            "schema_tokens": self.schema_tokens,
            "catalog_tokens": self.catalog_tokens,
        }


@dataclass(frozen=True)
class PromptStats:
    """``all_schemas_tokens``: every tool definition inline; ``catalog_tokens``: the skills
    section plus the ``call_mcp_tool`` definition; ``reduction``: 1 - catalog/all (0..1)."""

    all_schemas_tokens: int
    catalog_tokens: int
    tokenizer: str
    servers: list[ServerFootprint] = field(default_factory=lambda: list[ServerFootprint]())

    @property
    def reduction(self) -> float:
        if self.all_schemas_tokens <= 0:
            return 0.0
        return 1.0 - self.catalog_tokens / self.all_schemas_tokens

    def to_dict(self) -> dict[str, Any]:
        return {
            "all_schemas_tokens": self.all_schemas_tokens,
            "catalog_tokens": self.catalog_tokens,
            "reduction": round(self.reduction, 4),
            "tokenizer": self.tokenizer,
            "servers": [s.to_dict() for s in self.servers],
        }


def prompt_stats(
    skills_root: Path | None = None,
    *,
    tools: Sequence[Mapping[str, Any]],
    counter: TokenCounter | None = None,
    max_chars: int | None = None,
) -> PromptStats:
    """Measure the prompt with every enabled MCP server's tools inline vs Keen's catalog.

    Args:
        skills_root: the skills directory; default ``paths.skills_dir()``.
        tools: the tool definitions sent beside the catalog, as the LLM API receives them,
            e.g. ``[keen.gateway.tool_definition("openai", skills_dir=str(root))]``.
        counter: the token counter; default :func:`keen.tokens.token_counter`.
        max_chars: character budget for the catalog section (``None``: no budget).

    Returns:
        The figures, in tokens of ``counter``.
    """
    root = skills_root or paths.skills_dir()
    counter = counter or token_counter()
    found = DiscoveryCache(root).discover()
    section = render_skills_section(found.enabled, max_chars=max_chars)
    catalog_tokens = counter.count(section) + sum(
        counter.count(json.dumps(tool, separators=(",", ":"))) for tool in tools
    )
    servers: list[ServerFootprint] = []
    total = 0
    for skill in found.enabled:
        if not skill.managed or not skill.name.startswith("mcp:"):
            continue
        definitions = list(_tool_definitions(skill))
        tokens = sum(counter.count(d) for d in definitions)
        total += tokens
        servers.append(
            ServerFootprint(
                skill.name.removeprefix("mcp:"), len(definitions), tokens, counter.count(catalog_line(skill))
            )
        )
    return PromptStats(total, catalog_tokens, counter.name, servers)


def _tool_definitions(skill: Skill) -> Iterator[str]:
    for path in sorted((skill.path / SCHEMAS_DIR).rglob("*.json")):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as exc:
            logger.warning("skipping unreadable schema %s: %s", path, exc)
            continue
        yield openai_tool_json(
            str(data.get("name", path.stem)), str(data.get("description", "")), data.get("inputSchema") or {}
        )
