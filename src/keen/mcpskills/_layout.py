"""Where a generated skill keeps its files, relative to the skills directory: the one
definition the gateway's tool description, the prompt statistics and generation share
(docs/architecture.md "Generated skills"). Imports only the ``keen.paths`` leaf, so reading
it is free.
"""

from __future__ import annotations

from keen.paths import skill_dir_name

__all__ = ["SCHEMAS_DIR", "schema_path", "server_of_dir", "skill_dir", "skill_md_path", "skill_name"]

SCHEMAS_DIR = "schemas"
"""The directory, inside a generated skill, holding one ``<tool>.json`` per tool."""


def skill_name(server: str) -> str:
    """``mcp:<server>``: the name of a server's generated skill (its frontmatter ``name``)."""
    return f"mcp:{server}"


def skill_dir(server: str, platform: str | None = None) -> str:
    """The directory name of ``mcp:<server>``: the skill name, ``mcp_<server>`` on Windows
    (``platform`` as :func:`keen.paths.skill_dir_name` takes it)."""
    return skill_dir_name(skill_name(server), platform)


def server_of_dir(dir_name: str) -> str | None:
    """The server whose generated skill this platform keeps in ``dir_name``, else ``None``
    (the server name is not checked here)."""
    prefix = skill_dir("")
    return dir_name[len(prefix) :] if dir_name.startswith(prefix) and len(dir_name) > len(prefix) else None


def skill_md_path(skills_dir: str, server: str) -> str:
    """``<skills_dir>/mcp:<server>/SKILL.md`` (``mcp_<server>`` on Windows; placeholders such
    as ``<server>`` pass through)."""
    return f"{skills_dir}/{skill_dir(server)}/SKILL.md"


def schema_path(skills_dir: str, server: str, tool: str) -> str:
    """``<skills_dir>/mcp:<server>/schemas/<tool>.json`` (``mcp_<server>`` on Windows;
    placeholders pass through)."""
    return f"{skills_dir}/{skill_dir(server)}/{SCHEMAS_DIR}/{tool}.json"
