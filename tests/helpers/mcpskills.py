"""Shared builders for the tests of ``keen.mcpskills`` (tests/mcpskills): statuses, tools, trees."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from keen.mcp.types import ServerState, ServerStatus, Tool

NOW = datetime(2026, 5, 21, 12, 0, 0, tzinfo=UTC)
LIVEMCPBENCH = Path(__file__).resolve().parents[3] / "shared" / "data" / "livemcpbench" / "tools.json"


def status(
    name: str,
    state: ServerState = ServerState.CONNECTED,
    *,
    enabled: bool = True,
    last_error: str = "",
    tool_count: int = 0,
) -> ServerStatus:
    return ServerStatus(
        name=name,
        transport="stdio",
        auth="none",
        state=state,
        enabled=enabled,
        last_connected_at=NOW if state == ServerState.CONNECTED else None,
        last_refresh_at=NOW if state == ServerState.CONNECTED else None,
        last_error=last_error,
        tool_count=tool_count,
    )


def simple_tools(server: str, count: int, *, tag: str = "") -> list[Tool]:
    """``count`` tools ``tool_0000``... with a two-property schema; ``tag`` varies descriptions."""
    return [
        Tool(
            server=server,
            name=f"tool_{i:04d}",
            description=f"Tool number {i}{tag}. Does thing {i} with a query.",
            input_schema={
                "type": "object",
                "properties": {"query": {"type": "string"}, "limit": {"type": "integer", "default": 10}},
                "required": ["query"],
            },
        )
        for i in range(count)
    ]


def realistic_tools(server: str, count: int) -> list[Tool]:
    """``count`` tools built from the real LiveMCPBench catalog, repeated with unique names."""
    entries: list[dict[str, Any]] = []
    for srv in json.loads(LIVEMCPBENCH.read_text(encoding="utf-8")):
        for block in srv["tools"].values():
            entries.extend(block["tools"])
    return [
        Tool(
            server=server,
            name=f"{entries[i % len(entries)]['name']}_{i:05d}",
            description=entries[i % len(entries)].get("description") or "",
            input_schema=entries[i % len(entries)].get("inputSchema") or {},
            annotations=entries[i % len(entries)].get("annotations") or None,
        )
        for i in range(count)
    ]


def read_tree(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` (symlinks followed at the top), keyed by POSIX relative path."""
    base = root.resolve()
    return {p.relative_to(base).as_posix(): p.read_bytes() for p in sorted(base.rglob("*")) if p.is_file()}
