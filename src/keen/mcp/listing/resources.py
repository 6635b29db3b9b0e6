"""Resources, resource templates and prompts a server offers, listed at connect time
(every page).

Only servers that advertise the ``resources`` or ``prompts`` capability in their
initialize result are asked (MCP 2025-11-25 "Resources", which lists templates with
``resources/templates/list``, and "Prompts"), so a tools-only server costs nothing more. A failure to list either is logged and leaves that list empty:
resources and prompts are extras, never a reason to fail a connection whose tools work.
Items are kept in wire shape (JSON dicts) for the capability catalog.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

import mcp_types as mt
from mcp.client.session import ClientSession

from keen._redact import redactor

__all__ = ["list_prompts", "list_resource_templates", "list_resources"]

logger = logging.getLogger("keen.mcp")

_MAX_PAGES = 1_000
_MAX_ITEMS = 10_000


async def _all_pages(
    server: str,
    what: str,
    fetch: Callable[[mt.PaginatedRequestParams | None], Awaitable[Any]],
    items_of: Callable[[Any], list[Any]],
) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    seen: set[str] = set()
    cursor: str | None = None
    try:
        for _ in range(_MAX_PAGES):
            page = await fetch(mt.PaginatedRequestParams(cursor=cursor) if cursor else None)
            items += [
                _redacted(i.model_dump(by_alias=True, mode="json", exclude_none=True)) for i in items_of(page)
            ]
            cursor = page.next_cursor
            if not cursor or cursor in seen or len(items) >= _MAX_ITEMS:
                break
            seen.add(cursor)
    except Exception as exc:
        logger.debug("server %s: %s/list failed, none kept: %s", server, what, redactor.redact(repr(exc)))
        return []
    return items[:_MAX_ITEMS]


_KEPT = frozenset({"uri", "uriTemplate", "name", "arguments"})
"""What a read or a ``prompts/get`` must send back as the server wrote it."""


def _redacted(item: dict[str, Any]) -> dict[str, Any]:
    """``item`` with a secret Keen gave the server blanked in its text (description, title,
    annotations), as its tools are (``tool_pages.to_tool``; README "Secrets stay secret"):
    the capability catalog and ``keen serve``'s hosts read these lists. URIs and names stay:
    a read must send them; so do a prompt's arguments, but for their descriptions."""
    out = {k: v if k in _KEPT else redactor.redact_json(v) for k, v in item.items()}
    arguments = item.get("arguments")
    if isinstance(arguments, list):
        out["arguments"] = [
            {k: v if k == "name" else redactor.redact_json(v) for k, v in a.items()}
            if isinstance(a, dict)
            else a
            for a in arguments  # pyright: ignore[reportUnknownVariableType]
        ]
    return out


async def list_resources(
    server: str, session: ClientSession, capabilities: mt.ServerCapabilities | None
) -> list[dict[str, Any]]:
    """Every ``resources/list`` page (``[]`` without the capability or on failure).
    ``capabilities``: what the server announced at initialize or discover."""
    if capabilities is None or capabilities.resources is None:
        return []
    return await _all_pages(
        server, "resources", lambda p: session.list_resources(params=p), lambda page: list(page.resources)
    )


async def list_resource_templates(
    server: str, session: ClientSession, capabilities: mt.ServerCapabilities | None
) -> list[dict[str, Any]]:
    """Every ``resources/templates/list`` page (``[]`` without the resources capability or on
    failure). Each item has a ``uriTemplate`` (RFC 6570) instead of a ``uri``."""
    if capabilities is None or capabilities.resources is None:
        return []
    return await _all_pages(
        server,
        "resources/templates",
        lambda p: session.list_resource_templates(params=p),
        lambda page: list(page.resource_templates),
    )


async def list_prompts(
    server: str, session: ClientSession, capabilities: mt.ServerCapabilities | None
) -> list[dict[str, Any]]:
    """Every ``prompts/list`` page (``[]`` without the capability or on failure).
    ``capabilities``: what the server announced at initialize or discover."""
    if capabilities is None or capabilities.prompts is None:
        return []
    return await _all_pages(
        server, "prompts", lambda p: session.list_prompts(params=p), lambda page: list(page.prompts)
    )
