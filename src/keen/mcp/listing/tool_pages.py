"""Every page of a server's ``tools/list``, followed to the end (MCP 2025-11-25 "Tools >
Listing Tools", "Pagination").

The SDK's ``call_tool`` re-lists only the first page when its cache is cold, so the owner
task lists every page itself before it publishes a session. A repeated cursor or more than
10,000 pages is a broken server (``RemoteProtocolError``); a name listed twice keeps its
first definition. The 2026-07-28 caching hints (``ttlMs``, ``cacheScope``) of the pages
are folded into one pair: the whole list is as fresh as its stalest page.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

import mcp_types as mt
from mcp.client.session import ClientSession

from keen._redact import redactor
from keen._text import shorten, some_of
from keen.errors import RemoteProtocolError
from keen.mcp.listing.tool_filter import InvalidTool, ToolListFilter
from keen.mcp.types import Tool

__all__ = ["MAX_PAGES", "ToolPages", "list_all_tools", "to_tool"]

logger = logging.getLogger(__name__)

MAX_PAGES = 10_000


@dataclass(frozen=True, slots=True)
class ToolPages:
    """One complete ``tools/list``.

    Attributes:
        tools: the valid tools in listing order, one per name.
        ttl_ms: the smallest ``ttlMs`` of the pages (``None``: no page sent one).
        cache_scope: ``private`` when any page said so, else ``public``; ``None`` without hints.
        invalid: the tools the MCP schema rejects (skipped; the others are usable).
    """

    tools: list[Tool]
    ttl_ms: int | None
    cache_scope: str | None
    invalid: list[InvalidTool]


async def list_all_tools(
    session: ClientSession,
    server: str,
    tool_filter: ToolListFilter,
    on_page: Callable[[int], None] | None = None,
) -> ToolPages:
    """List every ``tools/list`` page of ``session`` (``tool_filter`` sees the raw pages and
    drops the invalid tools). ``on_page`` hears how many pages came so far after each page
    that names a next one, and ``0`` at the last (a caller's time limit can then say the
    listing did not end, not that nothing came). Raises ``RemoteProtocolError`` for broken pagination."""
    tools: list[Tool] = []
    seen_names: set[str] = set()
    seen_cursors: set[str] = set()
    duplicates: list[str] = []
    tool_filter.start_listing()
    cursor: str | None = None
    ttls: list[int] = []
    scopes: set[str] = set()
    for _ in range(MAX_PAGES):
        params = mt.PaginatedRequestParams(cursor=cursor) if cursor else None
        page = await session.list_tools(params=params)
        if "ttl_ms" in page.model_fields_set:
            # 2026-07-28 caching hints (the SDK drops them on older sessions).
            ttls.append(page.ttl_ms)
            scopes.add(page.cache_scope)
        for raw in page.tools:
            if raw.name in seen_names:
                duplicates.append(raw.name)
                continue
            seen_names.add(raw.name)
            tools.append(to_tool(server, raw))
        cursor = page.next_cursor
        if not cursor:
            if on_page is not None:
                on_page(0)  # the listing ended
            invalid = list(tool_filter.invalid)
            _report(server, invalid, duplicates)
            return ToolPages(
                tools,
                ttl_ms=min(ttls) if ttls else None,
                cache_scope=("private" if "private" in scopes else "public") if scopes else None,
                invalid=invalid,
            )
        if cursor in seen_cursors:
            raise RemoteProtocolError(
                f'MCP server "{server}" repeated tools/list cursor {shorten(repr(redactor.redact(cursor)), 80)}: its '
                "pagination is broken; check its version and logs",
                server=server,
            )
        seen_cursors.add(cursor)
        if on_page is not None:
            on_page(len(seen_cursors))
    raise RemoteProtocolError(
        f'MCP server "{server}" sent more than {MAX_PAGES} tools/list pages', server=server
    )


def _report(server: str, invalid: list[InvalidTool], duplicates: list[str]) -> None:
    # One line per server for each kind, however many: a flood is one warning.
    if invalid:
        shown = some_of(invalid, 3, "; ", lambda t: f"{t.name!r} ({t.reason})")
        logger.warning(
            "server %s: skipped %d invalid tool(s) from tools/list, the others are usable: %s",
            server,
            len(invalid),
            redactor.redact(shown),
        )
    if duplicates:
        logger.warning(
            "server %s: %d duplicate tool name(s) in tools/list, e.g. %s; keeping the first of each",
            server,
            len(duplicates),
            ", ".join(repr(name) for name in duplicates[:3]),
        )


def to_tool(server: str, raw: mt.Tool) -> Tool:
    """A listed ``mt.Tool`` as Keen's :class:`~keen.mcp.types.Tool` (wire-shape schemas).

    A secret Keen gave the server (its ``env``, a header, a key) that the server quotes in
    its tool's description, title, schemas or annotations is replaced here, where the tool
    enters Keen, by ``[REDACTED]``: the skill files, pins, search index, prompts and
    ``keen serve`` then never hold it (README "Secrets stay secret"). Only registered
    secrets are replaced, not pattern matches, so a schema's regex or example stays as the
    server wrote it. The tool's name is kept: a call must send it.
    """
    data = redactor.redact_json(raw.model_dump(by_alias=True, mode="json", exclude_none=True))
    return Tool(
        server=server,
        name=raw.name,
        description=data.get("description") or "",
        input_schema=data.get("inputSchema") or {},
        title=data.get("title"),
        annotations=data.get("annotations"),
        output_schema=data.get("outputSchema"),
    )
