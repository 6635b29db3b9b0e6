"""What the harness offers besides MCP tools, and what a call returns.

- The entry tools every turn offers: ``search_tools`` (ToolSearch), ``load_skill`` and
  ``call_mcp_tool``, with their input schemas; the local read tools are in
  :mod:`keen.harness.local`.
- :class:`Observation`: one call's outcome as the model sees it.
- The hook and visibility callback types the pipeline takes.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from keen.capabilities import Capability, Risk, capability_id
from keen.gateway import CALL_MCP_TOOL, DEFAULT_MAX_RESULT_CHARS
from keen.mcp.types import ToolResult

__all__ = [
    "DEFAULT_BUDGET",
    "DEFAULT_MAX_RESULT_CHARS",
    "ENTRY_SCHEMAS",
    "GATE_CODES",
    "HANDLE_KINDS",
    "LOAD_SKILL",
    "READ_RESOURCE",
    "SEARCH_TOOLS",
    "Observation",
    "PostHook",
    "PreHook",
    "Visibility",
    "local_capability",
]

SEARCH_TOOLS = "search_tools"
LOAD_SKILL = "load_skill"
READ_RESOURCE = "read_resource"
HANDLE_KINDS = frozenset({"resource", "prompt"})
"""Capabilities listed in the resource index and read with ``read_resource``, not offered as tools."""
DEFAULT_BUDGET = 8_000

PreHook = Callable[[str, dict[str, Any]], str | None]
"""Called with (capability id, arguments) before execution; a returned string denies the call."""
PostHook = Callable[["Observation"], "Observation"]
"""Called with the truncated observation; returns it, possibly changed."""
Visibility = Callable[[Capability, "str | None"], Awaitable["str | None"]]
"""Called with (capability, caller); returns None when the caller may use it, else why not."""


ENTRY_SCHEMAS: dict[str, tuple[str, dict[str, Any]]] = {
    SEARCH_TOOLS: (
        "Search every connected MCP server's tools by what they do. Hits the current permission mode "
        'allows become callable on the next turn. With kinds ["resource", "prompt"] it searches '
        "the servers' resources and prompts instead; those hits join the resource index "
        "(read them with read_resource).",
        {
            "type": "object",
            "properties": {
                "query": {"type": "string"},
                "k": {"type": "integer", "minimum": 1, "maximum": 20},
                "kinds": {
                    "type": "array",
                    "items": {"enum": ["tool", "resource", "prompt"]},
                    "minItems": 1,
                    "uniqueItems": True,
                },
            },
            "required": ["query"],
            "additionalProperties": False,
        },
    ),
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
    CALL_MCP_TOOL: (
        "Call a visible MCP tool by server and tool name.",
        {
            "type": "object",
            "properties": {
                "server": {"type": "string"},
                "tool": {"type": "string"},
                "arguments": {"type": "object"},
            },
            "required": ["server", "tool"],
            "additionalProperties": False,
        },
    ),
}


GATE_CODES = {
    "validate": "invalid_arguments",
    "visibility": "not_visible",
    "permission": "approval_denied",
    "hook": "hook_denied",
}


def local_capability(name: str, description: str) -> Capability:
    """A tool the harness runs itself (``local__<name>``): read-only, no server."""
    return Capability(
        id=capability_id("local", name),
        kind="tool",
        name=name,
        title=name,
        summary=description,
        server=None,
        risk=Risk.reading(),
        tokens_index=0,
        tokens_full=0,
    )


@dataclass(frozen=True)
class Observation:
    """What the model sees of one call.

    Attributes:
        text: the result as the model sees it (truncated, post-hooks applied).
        denied: the gate that refused the call (``validate``, ``visibility``,
            ``permission``, ``hook``), None when it ran.
        code: a machine-readable reason for a refusal or failure (``invalid_arguments``,
            ``server_not_configured``, ``not_visible``, ``approval_denied``, ``hook_denied``,
            or a :class:`keen.errors.KeenError` code), None otherwise.
        server, tool: the MCP server and tool of an MCP call.
        raw: the MCP result exactly as the server sent it (content blocks, structured
            content), for a front end that passes results on; None once the harness changed
            the text (truncation or a post-hook) and for local tools.
    """

    call_id: str
    name: str
    text: str
    is_error: bool = False
    denied: str | None = None
    truncated_chars: int = 0
    capability: str = ""
    code: str | None = None
    server: str | None = None
    tool: str | None = None
    raw: ToolResult | None = field(default=None, repr=False)
