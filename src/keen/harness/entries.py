"""What the harness offers besides MCP tools, and what a call returns.

- The entry tools every step offers: ``search_tools`` (ToolSearch) and ``call_mcp_tool``
  (defined once for every front end in :mod:`keen.entry_tools`), ``load_skill`` and
  ``read_resource``; their definitions, and the local read tools', are data in
  :mod:`keen.harness.definitions`.
- :class:`Observation`: one call's outcome as the model sees it.
- The hook and visibility callback types the pipeline takes.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from keen.capabilities import Capability, Risk, capability_id
from keen.gateway import DEFAULT_MAX_RESULT_CHARS
from keen.harness.definitions import ENTRY_TOOLS, LOAD_SKILL, READ_RESOURCE, SEARCH_TOOLS, entry_schema
from keen.mcp.types import ToolResult

__all__ = [
    "DEFAULT_BUDGET",
    "DEFAULT_MAX_RESULT_CHARS",
    "ENTRY_TOOLS",
    "GATE_CODES",
    "HANDLE_KINDS",
    "LOAD_SKILL",
    "READ_RESOURCE",
    "SEARCH_TOOLS",
    "Observation",
    "PostHook",
    "PreHook",
    "Visibility",
    "entry_schema",
    "local_capability",
]

HANDLE_KINDS = frozenset({"resource", "prompt"})
"""Capabilities listed in the resource index and read with ``read_resource``, not offered as tools."""
DEFAULT_BUDGET = 8_000

PreHook = Callable[[str, dict[str, Any]], str | None]
"""Called with (capability id, arguments) before execution; a returned string denies the call."""
PostHook = Callable[["Observation"], "Observation"]
"""Called with the truncated observation; returns it, possibly changed."""
Visibility = Callable[[Capability, "str | None"], "str | Awaitable[str | None] | None"]
"""Called with (capability, caller); returns (or resolves to) None when the caller may use
it, else why not. A callback that knows at once answers without an awaitable: every call asks.
The answer is told apart by type: ``None`` or a ``str`` is used as it is, anything else awaited."""


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
        declined: refused at ``permission`` by the approver asked, who said no: not by the
            permission mode's policy, nor for an approver that failed.
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
    declined: bool = False
