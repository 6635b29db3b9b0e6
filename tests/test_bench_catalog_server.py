"""``bench/catalog_server.py`` replays a recorded server's tools exactly, over stdio, through
the Manager, from small catalogs written here in both formats (LiveMCPBench ``tools.json``
and ToolGym ``.ndjson``); and ``bench/_catalog.py`` maps catalog names to Keen names."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from helpers.forkserver import launch_args
from keen.mcp import Manager, ServerState
from keen.trust import PinGuard

BENCH = Path(__file__).resolve().parents[1] / "bench"
REPLAY = str(BENCH / "catalog_server.py")

SEARCH = {
    "name": "web_search",
    "description": "搜索网页 (search the web).",
    "inputSchema": {
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": "what to look for"},
            "lang": {"type": ["string", "null"], "default": None},
        },
        "required": ["query"],
        "additionalProperties": False,
        "$schema": "http://json-schema.org/draft-07/schema#",
    },
    "annotations": {"title": "Search", "readOnlyHint": True, "destructiveHint": None, "openWorldHint": True},
}
FETCH = {
    "name": "fetch_page",
    "description": "Fetch one page.",
    "inputSchema": {"type": "object", "properties": {"id": {"type": "integer", "minimum": 1}}},
    "annotations": None,
    "outputSchema": {"type": "object", "properties": {"html": {"type": "string"}}},
}
COUNT = {
    "name": "count",
    "description": "Count things.",
    "inputSchema": {"type": "object"},
    "annotations": None,
}
OTHER = {"name": "ping_host", "description": "Ping.", "inputSchema": {"type": "object"}, "annotations": None}
TOOLGYM_TOOLS = [
    {"name": "docs_search", "description": None, "inputSchema": {"type": "object", "properties": {}}},
    {"name": "docs_read", "description": "Read a doc.", "inputSchema": {"type": "object", "required": []}},
]
INSTRUCTIONS = "A search server.\nIt searches the web."


def _wire(tool: dict[str, Any]) -> dict[str, Any]:
    """What the replay must send for a recorded tool: its fields verbatim, nulls left out."""
    out = {k: v for k, v in tool.items() if v is not None}
    if "annotations" in out:
        out["annotations"] = {k: v for k, v in out["annotations"].items() if v is not None}
    return out


def _load(name: str) -> ModuleType:
    qualified = f"keen_bench_{name.lstrip('_')}"
    if qualified in sys.modules:
        return sys.modules[qualified]
    spec = importlib.util.spec_from_file_location(qualified, BENCH / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[qualified] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def catalogs(tmp_path: Path) -> tuple[Path, Path]:
    livemcpbench = tmp_path / "tools.json"
    livemcpbench.write_text(
        json.dumps(
            [
                {
                    "name": "Other MCP Server",
                    "description": "Unrelated.",
                    "tools": {"other": {"server_name": "other", "version": "9", "tools": [OTHER]}},
                },
                {
                    "name": "Search MCP Server (搜索)",
                    "description": INSTRUCTIONS,
                    "category": "Discovery",
                    "tools": {
                        "search-mcp": {
                            "server_name": "search-mcp",
                            "version": "0.3.1",
                            "tools": [SEARCH, FETCH, COUNT],
                        }
                    },
                },
            ],
            ensure_ascii=False,
        ),
        encoding="utf-8",
    )
    toolgym = tmp_path / "tool_descriptions.ndjson"
    lines = [
        {"qualifiedName": "@acme/docs", "status": "ok", "tools": TOOLGYM_TOOLS},
        {"qualifiedName": "@acme/docs-extra", "status": "ok", "tools": [OTHER]},
    ]
    toolgym.write_text("\n".join(json.dumps(line) for line in lines) + "\n", encoding="utf-8")
    return livemcpbench, toolgym


def _replay(catalog: Path, server: str, *extra: str) -> dict[str, Any]:
    """A config entry running the replay server in a fork of the worker's warm process
    (``tests/helpers/forkserver.py``: its SDK already imported, about 1.5 s of CPU a server
    otherwise): what it sends is under test here, not its interpreter's start."""
    return {
        "command": sys.executable,
        "args": launch_args(REPLAY, "--catalog", str(catalog), "--server", server, *extra),
    }


@pytest.mark.anyio
async def test_replay_serves_recorded_tools_exactly(
    catalogs: tuple[Path, Path], write_config: Callable[[dict[str, Any]], Path]
) -> None:
    livemcpbench, toolgym = catalogs
    config = write_config(
        {
            "sdk-paged": _replay(livemcpbench, "Search MCP Server (搜索)", "--page-size", "2"),
            "lite-paged": _replay(
                livemcpbench, "Search MCP Server (搜索)", "--impl", "lite", "--page-size", "2"
            ),
            "sdk-by-key": _replay(livemcpbench, "search-mcp"),
            "toolgym-sdk": _replay(toolgym, "@acme/docs"),
            "toolgym-lite": _replay(toolgym, "@acme/docs", "--impl", "lite"),
            "missing": _replay(livemcpbench, "Search MCP Servr"),
        }
    )
    async with Manager(config, trust=PinGuard()) as manager:
        assert await manager.wait_ready(60)
        expected = [_wire(t) for t in (SEARCH, FETCH, COUNT)]
        for name in ("sdk-paged", "lite-paged", "sdk-by-key"):
            assert manager.status(name).state is ServerState.CONNECTED, manager.status(name).last_error
            assert [t.to_dict() for t in manager.list_tools(name)] == expected, name
            info = manager.server_info(name)
            assert info is not None
            assert (info.name, info.version, info.instructions) == ("search-mcp", "0.3.1", INSTRUCTIONS)
        for name in ("toolgym-sdk", "toolgym-lite"):
            assert [t.to_dict() for t in manager.list_tools(name)] == [
                {
                    "name": "docs_search",
                    "description": "",
                    "inputSchema": {"type": "object", "properties": {}},
                },
                _wire(TOOLGYM_TOOLS[1]),
            ]
            info = manager.server_info(name)
            assert info is not None
            assert (info.name, info.instructions) == ("@acme/docs", None)

        missing = manager.status("missing")
        assert missing.state is ServerState.DISCONNECTED
        assert "no server named 'Search MCP Servr'" in missing.last_error
        assert "Did you mean: Search MCP Server (搜索)" in missing.last_error

        for name in ("sdk-paged", "lite-paged"):
            echo = await manager.call_tool(name, "web_search", {"query": "mcp", "lang": None})
            assert not echo.is_error
            assert echo.text == (
                "replay of 'Search MCP Server (搜索)': recorded tool 'web_search' called with "
                '{"lang": null, "query": "mcp"}; no live backend'
            )
            typed = await manager.call_tool(name, "fetch_page", {"id": 3})
            assert typed.is_error
            assert "outputSchema" in typed.text


def test_keen_names_are_valid_unique_and_deterministic() -> None:
    catalog = _load("_catalog")
    raw = [
        "search-mcp",
        "Ant Design Components",
        "@docfork/mcp",
        "docfork-mcp",
        "鸣潮 MCP Server",
        "DOCFORK-MCP",
        "鸣潮",
    ]
    names = catalog.keen_names(raw)
    assert names == [
        "search-mcp",
        "Ant-Design-Components",
        "docfork-mcp",
        "docfork-mcp-2",
        "MCP-Server",
        "DOCFORK-MCP-3",
        "server",
    ]
    assert catalog.keen_names(raw) == names
    assert all(catalog.KEEN_NAME.match(n) for n in names)
    assert catalog.slugify("x" * 100) == "x" * 60


def test_unknown_catalog_format_is_a_clear_error(tmp_path: Path) -> None:
    catalog = _load("_catalog")
    bad = tmp_path / "tools.yaml"
    bad.write_text("servers: []\n", encoding="utf-8")
    with pytest.raises(catalog.CatalogError, match=r"neither a LiveMCPBench tools\.json"):
        catalog.load_catalog(bad)


@pytest.mark.parametrize("impl", ["sdk", "lite"])
def test_tools_list_pages_follow_the_cursor(catalogs: tuple[Path, Path], impl: str) -> None:
    livemcpbench, _ = catalogs
    init = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}
    messages = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}},
        {"jsonrpc": "2.0", "id": 3, "method": "tools/list", "params": {"cursor": "2"}},
        {"jsonrpc": "2.0", "id": 4, "method": "tools/list", "params": {"cursor": "nope"}},
    ]
    entry = _replay(livemcpbench, "search-mcp", "--impl", impl, "--page-size", "2")
    replies: dict[int, dict[str, Any]] = {}
    # Keep stdin open until every answer is in: a server may stop serving at EOF.
    with subprocess.Popen(
        [entry["command"], *entry["args"]], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    ) as proc:
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write("".join(json.dumps(m) + "\n" for m in messages))
        proc.stdin.flush()
        while len(replies) < 4:
            line = proc.stdout.readline()
            assert line, f"the {impl} server closed stdout after {sorted(replies)}"
            reply = json.loads(line)
            replies[reply["id"]] = reply
        proc.stdin.close()
        assert proc.wait(timeout=30) == 0
    assert [t["name"] for t in replies[2]["result"]["tools"]] == ["web_search", "fetch_page"]
    assert replies[2]["result"]["nextCursor"] == "2"
    assert [t["name"] for t in replies[3]["result"]["tools"]] == ["count"]
    assert "nextCursor" not in replies[3]["result"]
    assert replies[4]["error"]["code"] == -32602
    assert "unknown cursor" in replies[4]["error"]["message"]
