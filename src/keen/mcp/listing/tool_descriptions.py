"""Client side of the ``tool_descriptions`` extension (progressive disclosure, v2.1).

A server that implements it lists minimal tools (``inputSchema`` often just
``{"type": "object", "additionalProperties": true}``) and a ``tool_descriptions``
resource; reading ``<uri>?tools=a,b`` returns the full descriptions and authorizes those
tools for the session. Keen needs full schemas for generated skills and argument checks,
so right after tools/list it reads the descriptions of every tool (in batches) and
replaces the minimal ones (with a secret Keen gave the server blanked, as in tools/list);
that read also authorizes the tools before the first call.
If the server later answers a call with ``TOOL_DESCRIPTION_REQUIRED`` (its authorization
expired), :func:`description_required` recognizes it so the caller can fetch and retry once.
"""

from __future__ import annotations

import json
import logging
from dataclasses import replace
from typing import Any
from urllib.parse import quote, urlsplit

import mcp_types as mt
from mcp.client.session import ClientSession

from keen._redact import redactor
from keen.mcp.types import Tool

__all__ = ["description_required", "fetch_descriptions", "find_resource", "with_full_descriptions"]

logger = logging.getLogger("keen.mcp")

_BATCH = 50
_MAX_PAGES = 100
_MAX_ENTRY_CHARS = 100_000
"""A full description larger than this (as JSON) is ignored: the minimal tool is kept."""


async def find_resource(session: ClientSession, capabilities: mt.ServerCapabilities | None) -> str | None:
    """The URI of the server's ``tool_descriptions`` resource, or None (no resources capability,
    or not listed). ``capabilities``: what the server announced at initialize or discover."""
    if capabilities is None or capabilities.resources is None:
        return None
    cursor: str | None = None
    for _ in range(_MAX_PAGES):
        params = mt.PaginatedRequestParams(cursor=cursor) if cursor else None
        page = await session.list_resources(params=params)
        for resource in page.resources:
            if urlsplit(str(resource.uri)).path.rstrip("/").endswith("tool_descriptions"):
                return str(resource.uri).split("?", 1)[0]
        cursor = page.next_cursor
        if not cursor:
            return None
    return None


async def fetch_descriptions(session: ClientSession, uri: str, names: list[str]) -> dict[str, dict[str, Any]]:
    """``{name: entry}`` for every name the server described (unknown names are left out)."""
    found: dict[str, dict[str, Any]] = {}
    for start in range(0, len(names), _BATCH):
        batch = names[start : start + _BATCH]
        query = ",".join(quote(n, safe="") for n in batch)
        result = await session.read_resource(f"{uri}?tools={query}")
        for content in result.contents:
            text = getattr(content, "text", None)
            if not text:
                continue
            try:
                body = json.loads(text)
            except ValueError:
                continue
            if isinstance(body, dict):
                for name, entry in body.items():
                    # The server chooses these bytes: bound them like any tools/list entry.
                    if (
                        name in batch
                        and isinstance(entry, dict)
                        and "error" not in entry
                        and len(json.dumps(entry, ensure_ascii=False)) <= _MAX_ENTRY_CHARS
                    ):
                        found[name] = entry
    return found


async def with_full_descriptions(
    session: ClientSession, capabilities: mt.ServerCapabilities | None, tools: list[Tool], server: str
) -> tuple[list[Tool], str | None]:
    """``(tools, uri)``: each description and inputSchema replaced by the full one when the server
    implements the extension (``uri`` is its resource); unchanged tools and ``None`` otherwise.
    A failure keeps the minimal tools (logged)."""
    uri: str | None = None
    try:
        uri = await find_resource(session, capabilities)
        if uri is None or not tools:
            return tools, uri
        full = await fetch_descriptions(session, uri, [t.name for t in tools])
    except Exception as exc:
        logger.debug("server %s: tool_descriptions not read: %r", server, exc)
        return tools, uri
    logger.debug("server %s: full descriptions for %d of %d tools", server, len(full), len(tools))
    out: list[Tool] = []
    for tool in tools:
        entry = full.get(tool.name)
        if entry is None:
            out.append(tool)
            continue
        # A secret the server quotes here is blanked as in its tools/list (tool_pages.to_tool).
        entry = redactor.redact_json(entry)
        schema = entry.get("inputSchema")
        description = entry.get("description")
        out.append(
            replace(
                tool,
                description=description if isinstance(description, str) else tool.description,
                input_schema=schema if isinstance(schema, dict) else tool.input_schema,
            )
        )
    return out, uri


def description_required(raw: mt.CallToolResult) -> bool:
    """True when a call result is the extension's ``TOOL_DESCRIPTION_REQUIRED`` error."""
    if not raw.is_error:
        return False
    structured = raw.structured_content
    if isinstance(structured, dict) and _code(structured) == "TOOL_DESCRIPTION_REQUIRED":
        return True
    for block in raw.content:
        text = getattr(block, "text", None)
        if text and "TOOL_DESCRIPTION_REQUIRED" in text:
            try:
                body = json.loads(text)
            except ValueError:
                continue
            if isinstance(body, dict) and _code(body) == "TOOL_DESCRIPTION_REQUIRED":
                return True
    return False


def _code(body: dict[str, Any]) -> Any:
    error = body.get("error")
    return error.get("code") if isinstance(error, dict) else None
