"""A ``tools/call`` refused because Keen's copy of the server's tool list is stale.

Between two listings a server may change a tool. Two refusals say Keen called with an
out-of-date view:

- ``HeaderMismatch`` (JSON-RPC ``-32020``, 2026-07-28 over HTTP): the tool's ``inputSchema``
  now marks arguments with ``x-mcp-header``, so the call lacks the ``Mcp-Param-*`` headers
  the server expects. The client "SHOULD call tools/list to check for changes to the
  tool's inputSchema, then retry" (MCP 2026-07-28, Transports, Streamable HTTP, "Custom
  Headers").
- An unknown tool: JSON-RPC ``-32602`` "Unknown tool: NAME" (MCP 2026-07-28, Tools, "Error
  Handling"), or the ``isError`` result "Unknown tool: NAME" some SDK servers answer with.

:func:`call_with_relist` then re-lists that server once (``Manager.refresh_tools``, so
skills, catalogs and ``keen serve``'s hosts hear of the change too) and:

- the tool is gone: :class:`~keen.errors.ToolNotFound` naming the removal;
- its definition changed (``title``, ``description``, ``inputSchema``, ``outputSchema``,
  ``annotations``; ``x-mcp-header`` marks aside, which change how a call is carried, not
  what it means): :class:`~keen.errors.ToolChanged` naming the fields. Not retried: the
  arguments were checked, and the call approved, against the old definition;
- unchanged: the call is sent once more, and its outcome is final.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import replace
from typing import Any, Protocol

import mcp_types as mt
from mcp.shared.exceptions import MCPError
from mcp_types import HEADER_MISMATCH, INVALID_PARAMS

from keen._terminal import name_in_message
from keen.errors import Remedy, ToolChanged, ToolNotFound, exception_leaves
from keen.mcp.listing.changes import ToolsChanged, diff_tools
from keen.mcp.types import Tool

__all__ = ["Listing", "call_with_relist", "definition_changes", "stale_refusal"]

_X_MCP_HEADER = "x-mcp-header"


def _unknown_tool(text: str, tool: str) -> bool:
    match = re.fullmatch(r"\s*unknown tool:?\s*['\"]?(.+?)['\"]?\s*", text, flags=re.IGNORECASE)
    return match is not None and match.group(1) == tool


def stale_refusal(outcome: BaseException | mt.CallToolResult, tool: str) -> str | None:
    """Why a call's outcome says the tool list is stale (``"header_mismatch"`` or
    ``"unknown_tool"``), or ``None`` when it does not."""
    if isinstance(outcome, mt.CallToolResult):
        if outcome.is_error and len(outcome.content) == 1:
            block = outcome.content[0]
            if isinstance(block, mt.TextContent) and _unknown_tool(block.text, tool):
                return "unknown_tool"
        return None
    for leaf in exception_leaves(outcome):
        if isinstance(leaf, MCPError):
            if leaf.code == HEADER_MISMATCH:
                return "header_mismatch"
            if leaf.code == INVALID_PARAMS and _unknown_tool(leaf.message, tool):
                return "unknown_tool"
    return None


def _without_headers(schema: Any) -> Any:
    if isinstance(schema, dict):
        return {k: _without_headers(v) for k, v in schema.items() if k != _X_MCP_HEADER}  # pyright: ignore[reportUnknownVariableType]
    if isinstance(schema, list):
        return [_without_headers(v) for v in schema]  # pyright: ignore[reportUnknownVariableType]
    return schema


def definition_changes(before: Tool, after: Tool) -> tuple[str, ...]:
    """The MCP fields of a tool definition that differ, ``x-mcp-header`` marks ignored."""
    old = replace(before, input_schema=_without_headers(before.input_schema))
    new = replace(after, input_schema=_without_headers(after.input_schema))
    change = diff_tools(before.server, [old], [new], "refresh")
    return change.changed[0].fields if change.changed else ()


class Listing(Protocol):
    """Where a call's tool is defined: the server's name and its latest tools/list by name
    (a re-list replaces the mapping, so it is read again after one)."""

    @property
    def name(self) -> str: ...

    @property
    def tools_by_name(self) -> Mapping[str, Tool]: ...


async def call_with_relist(
    send: Callable[[], Awaitable[mt.CallToolResult]],
    *,
    relist: Callable[[str], Awaitable[ToolsChanged | None]],
    listing: Listing,
    tool: str,
) -> mt.CallToolResult:
    """``send()`` the call; on a stale-view refusal re-list once (``relist(server)``) and
    resend once (module docstring). ``listing`` is the server's connection: the tool as
    listed before the call, and after the re-list.

    Raises:
        ToolNotFound: the re-list no longer has the tool.
        ToolChanged: its definition changed since Keen listed it.
        Exception: ``send``'s own error otherwise (also when the re-list failed).
    """
    before = listing.tools_by_name.get(tool)
    try:
        raw = await send()
    except Exception as exc:
        if before is None or stale_refusal(exc, tool) is None:
            raise
        if await relist(listing.name) is None:
            raise  # no fresh list to judge by: the server's own refusal stands
        _check_unchanged(before, listing.tools_by_name.get(tool), listing.name, tool)
        return await send()
    if before is None or stale_refusal(raw, tool) is None:
        return raw
    if await relist(listing.name) is None:
        return raw
    _check_unchanged(before, listing.tools_by_name.get(tool), listing.name, tool)
    return await send()


def _check_unchanged(before: Tool, after: Tool | None, server: str, tool: str) -> None:
    if after is None:
        raise ToolNotFound(
            f'MCP server "{server}" no longer has tool "{name_in_message(tool)}": it left the server\'s tools/list since '
            "Keen last listed it, and the call was not run. Pick another tool from its latest list.",
            server=server,
            tool=tool,
            remedy=Remedy.READ_SKILL,
        )
    fields = definition_changes(before, after)
    if fields:
        raise ToolChanged(
            f'MCP server "{server}" changed tool "{name_in_message(tool)}" since Keen last listed it '
            f"({', '.join(fields)}), and the call was not run: read its new definition and call again.",
            server=server,
            tool=tool,
            changed_fields=fields,
        )
