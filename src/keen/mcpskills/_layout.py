"""Where a generated skill keeps its files, relative to the skills directory: the one
definition the gateway's tool description, the prompt statistics and generation share
(docs/architecture.md "Generated skills"). Imports nothing, so reading it is free.
"""

from __future__ import annotations

__all__ = ["SCHEMAS_DIR", "schema_path", "skill_md_path", "skill_name"]

SCHEMAS_DIR = "schemas"
"""The directory, inside a generated skill, holding one ``<tool>.json`` per tool."""


def skill_name(server: str) -> str:
    """``mcp:<server>``: the name (and directory name) of a server's generated skill."""
    return f"mcp:{server}"


def skill_md_path(skills_dir: str, server: str) -> str:
    """``<skills_dir>/mcp:<server>/SKILL.md`` (placeholders such as ``<server>`` pass through)."""
    return f"{skills_dir}/{skill_name(server)}/SKILL.md"


def schema_path(skills_dir: str, server: str, tool: str) -> str:
    """``<skills_dir>/mcp:<server>/schemas/<tool>.json`` (placeholders pass through)."""
    return f"{skills_dir}/{skill_name(server)}/{SCHEMAS_DIR}/{tool}.json"
