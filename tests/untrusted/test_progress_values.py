"""An upstream's progress that is no number cannot reach a ``keen serve`` host as null.

JSON has no NaN or infinity, but a server may write ``NaN`` or ``1e999`` and the SDK parses
them as floats. ``keen serve`` relayed them to its host as ``null``: ``"progress": null``
breaks MCP's schema (a number), and ``"total": null`` read as progress of no known total
(the host's SDK showed ``(1.0, None)`` for the upstream's "1 of infinity"). Such progress is
now dropped; the upstream's finite progress still arrives. A real hostile stdio server
behind ``keen serve --transport stdio`` and the SDK's ``Client`` as the host.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from mcp.client.client import Client

from helpers.hostile import hostile_entry
from helpers.serve import stdio_params

pytestmark = pytest.mark.anyio


async def test_nan_and_infinite_progress_is_not_relayed_as_null(tmp_path: Path) -> None:
    spec = {
        "tools": [{"name": "work", "inputSchema": {"type": "object"}}],
        "progress_on_call": {
            "work": [
                {"progress": float("nan"), "total": 3},
                {"progress": 1, "total": float("inf")},
                {"progress": 2, "total": 3, "message": "half"},
            ]
        },
    }
    config = tmp_path / "mcp" / "configs.json"
    config.parent.mkdir(parents=True)
    servers = {"evil": hostile_entry(tmp_path / "spec.json", spec)}
    config.write_text(json.dumps({"version": 1, "servers": servers}))
    assert "NaN" in (tmp_path / "spec.json").read_text()  # what the server writes, as written
    got: list[tuple[float, float | None, str | None]] = []
    failures: list[str] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        got.append((progress, total, message))

    async def handler(message: Any) -> None:
        if isinstance(message, Exception):
            failures.append(str(message))

    params = stdio_params(tmp_path, ["--mode", "search"])
    async with Client(params, mode="legacy", cache=None, message_handler=handler) as client:
        call = {"server": "evil", "tool": "work", "arguments": {}}
        result = await client.call_tool("call_mcp_tool", call, progress_callback=on_progress)
    assert not result.is_error, result
    assert failures == []
    assert got == [(2.0, 3.0, "half")]
