"""What the MCP part of a prompt costs with every tool inline and with Keen (``keen prompt --stats``).

With every MCP tool inline, an LLM API receives one tool definition per tool (OpenAI
function shape: name, description, parameters = the inputSchema). With Keen it receives the
catalog section (one line per enabled skill) plus the tool definitions the host sends beside
it (the one ``call_mcp_tool`` definition, passed in as data so this module stays below the
gateway). Both sides cover the same servers: those whose generated ``mcp:<server>`` skill is
enabled. Tool definitions are read back from the generated schema files, so no server is
contacted.

A module of its own, re-exported by :mod:`keen.prompt` lazily (PEP 562), so a host or
``keen prompt`` that only builds its prompt does not define these classes: a frozen
dataclass compiles its generated methods when it is defined, about 7 million instructions
for these two (callgrind), 2-3% of a budgeted prompt's start (``bench/prompt_start.py``).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from keen import paths
from keen._log import LazyLogger
from keen.mcpskills import SCHEMAS_DIR
from keen.skills import Skill, catalog_line, render_skills_section
from keen.skills.cache import DiscoveryCache
from keen.tokens import TokenCounter, token_counter

__all__ = ["PromptStats", "ServerFootprint", "openai_tool_json", "prompt_stats"]

# logging is imported only when something is logged (keen._log).
logger = LazyLogger(__name__)


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
