"""A stdio MCP server that replays one server's recorded tool definitions from a catalog.

Usage: ``python bench/catalog_server.py --catalog PATH --server NAME [--impl sdk|lite]
[--page-size N]``

``PATH`` is a LiveMCPBench ``tools.json`` or a ToolGym ``tool_descriptions.ndjson`` (told
apart by content, see ``_catalog.py``); ``NAME`` is the server's recorded name
(LiveMCPBench ``name`` or its ``mcpServers`` key, ToolGym ``qualifiedName``).

- ``initialize``: ``serverInfo`` = the recorded server name and version (LiveMCPBench
  ``tools.{key}.server_name``/``version``; ToolGym: the qualified name), ``instructions`` =
  the recorded server description when there is one.
- ``tools/list``: exactly the recorded definitions (``name``, ``description``,
  ``inputSchema`` verbatim, ``annotations`` and ``outputSchema`` when present; ``null``
  fields left out), in recorded order; one page unless ``--page-size`` is given, then
  pages of that size with the next offset as the cursor.
- ``tools/call``: a text echo saying this is a replay, with the arguments. A tool that
  declares an ``outputSchema`` answers with ``isError: true`` (a replay has no structured
  result that could match it); an unknown tool likewise.

``--impl sdk`` (default) serves through the official SDK's low-level ``Server`` over
``mcp.server.stdio``. ``--impl lite`` answers the same messages with the standard library
only (newline-delimited JSON-RPC 2.0, like ``servers/tiny_stdio.py``): importing the SDK
costs ~1 s of CPU per process, which dominates when 70-292 of them start on 2 cores.
Both give the same ``tools/list`` (``tests/test_bench_catalog_server.py`` checks both).
A missing catalog or server exits with status 2 and a message on stderr.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from _catalog import CatalogError, RecordedServer, find_server

__all__ = ["echo_text", "main", "page", "serve_lite", "serve_sdk"]

LITE_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
INVALID_PARAMS = -32602
METHOD_NOT_FOUND = -32601


def page(cursor: str | None, total: int, size: int) -> tuple[int, int, str | None]:
    """``(start, end, next_cursor)`` of one ``tools/list`` page; ``size <= 0``: everything.
    Raises ValueError for a cursor this server did not hand out."""
    start = 0
    if cursor is not None:
        if not cursor.isdigit() or not 0 < int(cursor) < total:
            raise ValueError(f"unknown cursor {cursor!r}")
        start = int(cursor)
    end = total if size <= 0 else min(total, start + size)
    return start, end, (str(end) if end < total else None)


def echo_text(server: RecordedServer, tool: str, arguments: dict[str, Any] | None) -> tuple[str, bool]:
    """The ``tools/call`` reply: ``(text, is_error)``."""
    known = {t["name"]: t for t in server.tools}
    args = json.dumps(arguments or {}, ensure_ascii=False, sort_keys=True)
    if tool not in known:
        return f"replay of {server.name!r}: no recorded tool {tool!r}", True
    text = f"replay of {server.name!r}: recorded tool {tool!r} called with {args}; no live backend"
    if "outputSchema" in known[tool]:
        return text + " (the tool declares an outputSchema, which a replay cannot satisfy)", True
    return text, False


async def serve_sdk(server: RecordedServer, page_size: int) -> None:
    """Serve over stdio with the official SDK's low-level ``Server``."""
    import mcp_types as mt
    from mcp.server.context import ServerRequestContext
    from mcp.server.lowlevel import Server
    from mcp.server.stdio import stdio_server
    from mcp.shared.exceptions import MCPError

    tools = [mt.Tool.model_validate(t) for t in server.tools]

    async def list_tools(
        ctx: ServerRequestContext[Any], params: mt.PaginatedRequestParams | None
    ) -> mt.ListToolsResult:
        try:
            start, end, cursor = page(params.cursor if params else None, len(tools), page_size)
        except ValueError as exc:
            raise MCPError(INVALID_PARAMS, str(exc)) from exc
        return mt.ListToolsResult(tools=tools[start:end], next_cursor=cursor)

    async def call_tool(
        ctx: ServerRequestContext[Any], params: mt.CallToolRequestParams
    ) -> mt.CallToolResult:
        text, is_error = echo_text(server, params.name, params.arguments)
        return mt.CallToolResult(content=[mt.TextContent(text=text)], is_error=is_error)

    app: Server[Any] = Server(
        server.info_name,
        version=server.version,
        instructions=server.instructions,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )
    async with stdio_server() as (read_stream, write_stream):
        await app.run(read_stream, write_stream, app.create_initialization_options())


def _lite_result(server: RecordedServer, page_size: int, method: Any, params: dict[str, Any]) -> Any:
    if method == "initialize":
        asked = params.get("protocolVersion")
        info = {"name": server.info_name, "version": server.version}
        result: dict[str, Any] = {
            "protocolVersion": asked if asked in LITE_VERSIONS else LITE_VERSIONS[-1],
            "capabilities": {"tools": {}},
            "serverInfo": info,
        }
        if server.instructions:
            result["instructions"] = server.instructions
        return result
    if method == "ping":
        return {}
    if method == "tools/list":
        start, end, cursor = page(params.get("cursor"), len(server.tools), page_size)
        listed: dict[str, Any] = {"tools": server.tools[start:end]}
        if cursor is not None:
            listed["nextCursor"] = cursor
        return listed
    if method == "tools/call":
        text, is_error = echo_text(server, str(params.get("name")), params.get("arguments"))
        return {"content": [{"type": "text", "text": text}], "isError": is_error}
    raise LookupError(f"method not found: {method}")


def serve_lite(server: RecordedServer, page_size: int) -> None:
    """Serve over stdio with the standard library only (newline-delimited JSON-RPC 2.0)."""
    for line in sys.stdin:
        if not line.strip():
            continue
        request = json.loads(line)
        if not isinstance(request, dict) or "id" not in request:
            continue  # a notification (or a batch, which MCP 2025-06-18+ dropped)
        reply: dict[str, Any] = {"jsonrpc": "2.0", "id": request["id"]}
        try:
            reply["result"] = _lite_result(
                server, page_size, request.get("method"), request.get("params") or {}
            )
        except ValueError as exc:
            reply["error"] = {"code": INVALID_PARAMS, "message": str(exc)}
        except LookupError as exc:
            reply["error"] = {"code": METHOD_NOT_FOUND, "message": str(exc)}
        sys.stdout.write(json.dumps(reply, ensure_ascii=False) + "\n")
        sys.stdout.flush()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Replay one server's recorded MCP tools over stdio.")
    parser.add_argument("--catalog", type=Path, required=True, help="tools.json or tool_descriptions.ndjson")
    parser.add_argument("--server", required=True, help="the server's recorded name")
    parser.add_argument("--impl", choices=("sdk", "lite"), default="sdk", help="SDK server or stdlib loop")
    parser.add_argument("--page-size", type=int, default=0, help="tools per tools/list page (0: one page)")
    args = parser.parse_args(argv)
    try:
        server = find_server(args.catalog, args.server)
    except CatalogError as exc:
        parser.exit(2, f"catalog_server: {exc}\n")
    if args.impl == "lite":
        serve_lite(server, args.page_size)
        return
    import anyio

    anyio.run(serve_sdk, server, args.page_size)


if __name__ == "__main__":
    main()
