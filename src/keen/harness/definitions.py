"""The definitions of the tools the harness offers besides MCP tools, as data: the local
read tools (:mod:`keen.harness.local` runs them) and the entry tools (``search_tools`` and
``call_mcp_tool``, defined once in :mod:`keen.entry_tools`, ``load_skill`` and
``read_resource``), and :func:`first_step_tools`, what a new session's first step offers.

Nothing here imports the pipeline, the gateway or anyio: ``keen chat`` builds its first
model request from these before its runtime opens (docs/chat.md "Startup").
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from keen.entry_tools import CALL_TOOL, SEARCH_TOOL, call_tool_definition, search_tool_definition

__all__ = [
    "ENTRY_TOOLS",
    "LOAD_SKILL",
    "LOCAL_TOOLS",
    "READ_RESOURCE",
    "SEARCH_TOOLS",
    "entry_schema",
    "first_step_tools",
    "offered_definition",
]

SEARCH_TOOLS = SEARCH_TOOL
LOAD_SKILL = "load_skill"
READ_RESOURCE = "read_resource"


def _schema(properties: dict[str, Any], required: Sequence[str]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": list(required),
        "additionalProperties": False,
    }


_PATH = {"type": "string", "description": "Path relative to the workspace (or inside the skills directory)"}

LOCAL_TOOLS: dict[str, tuple[str, dict[str, Any]]] = {
    "read_file": (
        "Read a text file in the workspace or the skills directory (SKILL.md, schema files). "
        "Lines are numbered from 1; use offset and limit to page through a long file "
        "(a file over 2 MB is read only so, a slice at a time).",
        _schema(
            {
                "path": _PATH,
                "offset": {"type": "integer", "minimum": 1, "description": "First line to read (1-based)"},
                "limit": {"type": "integer", "minimum": 1, "description": "How many lines"},
            },
            ["path"],
        ),
    ),
    "list_dir": (
        "List a directory of the workspace or the skills directory (directories end with /).",
        _schema({"path": _PATH}, []),
    ),
    "glob": (
        "Find files by glob pattern (e.g. **/*.py) under a directory of the workspace.",
        _schema({"pattern": {"type": "string"}, "path": _PATH}, ["pattern"]),
    ),
    "grep": (
        "Search file contents with a regular expression; prints path:line: text for each match.",
        _schema(
            {
                "pattern": {"type": "string", "description": "Python regular expression"},
                "path": _PATH,
                "include": {"type": "string", "description": "Only files whose name matches this glob"},
            },
            ["pattern"],
        ),
    ),
}

_OWN_SCHEMAS: dict[str, tuple[str, dict[str, Any]]] = {
    READ_RESOURCE: (
        "Read an MCP resource, or get an MCP prompt, listed in the resource index, by its name there. "
        "A prompt, or a resource template (a URI with {variables}), takes its arguments as an object "
        "of strings.",
        {
            "type": "object",
            "properties": {
                "name": {"type": "string"},
                "arguments": {"type": "object", "additionalProperties": {"type": "string"}},
            },
            "required": ["name"],
            "additionalProperties": False,
        },
    ),
    LOAD_SKILL: (
        "Load a skill's full instructions (SKILL.md body) by name from the skill index.",
        {
            "type": "object",
            "properties": {"name": {"type": "string"}},
            "required": ["name"],
            "additionalProperties": False,
        },
    ),
}
ENTRY_TOOLS = (SEARCH_TOOLS, READ_RESOURCE, LOAD_SKILL, CALL_TOOL)
"""The tools every step offers besides the local read tools and the MCP tools."""


def entry_schema(name: str) -> tuple[str, dict[str, Any]]:
    """An entry tool's description and inputSchema: the search and call tools' shared
    definitions (:mod:`keen.entry_tools`; the call tool names ``$KEEN_HOME/skills`` as it is
    now), the harness's own for ``read_resource`` and ``load_skill``.

    Raises:
        KeyError: ``name`` is not an entry tool.
    """
    if name == SEARCH_TOOLS:
        found = search_tool_definition("mcp")
    elif name == CALL_TOOL:
        found = call_tool_definition("mcp")
    else:
        return _OWN_SCHEMAS[name]
    return found["description"], found["inputSchema"]


def offered_definition(name: str) -> dict[str, Any]:
    """A local or entry tool's definition as a step offers it (MCP ``name``/``description``/
    ``inputSchema`` shape).

    Raises:
        KeyError: ``name`` is neither a local nor an entry tool.
    """
    description, schema = LOCAL_TOOLS[name] if name in LOCAL_TOOLS else entry_schema(name)
    return {"name": name, "description": description, "inputSchema": schema}


def first_step_tools() -> list[dict[str, Any]]:
    """The tool definitions a new session's first step offers, in the order
    :meth:`keen.harness.Harness.begin_step` returns them: the local read tools and the
    entry tools by name, without ``read_resource`` (offered only while the resource index
    lists something, which it does only for what the model asked for, and a first step has
    asked for nothing; docs/architecture.md "The harness")."""
    names = sorted(n for n in (*LOCAL_TOOLS, *ENTRY_TOOLS) if n != READ_RESOURCE)
    return [offered_definition(n) for n in names]
