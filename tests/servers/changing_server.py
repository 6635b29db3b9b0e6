"""An MCP SDK server (``mcp.server.MCPServer``) whose tools change while a client runs.

Usage: ``python changing_server.py stdio|http [--port N] [--legacy] [--ttl-ms N] [--list-hold PATH] [--variant N]``

It serves both protocol eras (2026-07-28 and the 2025-11-25 handshake) unless ``--legacy``,
which refuses ``server/discover`` the way a handshake-only server does. Its tools:

- ``echo(text)``: returns ``text``; ``stats()``: ``{"lists": <tools/list requests served>}``;
- ``mutate(op, name, description, quiet)``: ``add`` a tool ``name`` (an echo under another
  name), ``remove`` it, ``change`` its description, ``header`` (mark its ``text`` argument
  ``x-mcp-header: Text``, so a 2026-07-28 HTTP call without ``Mcp-Param-Text`` is refused
  with HeaderMismatch) or ``reshape`` (``header`` plus a new optional ``mode`` property in
  its inputSchema); then, unless ``quiet``, announces the
  change: a ``ToolsListChanged`` event on ``subscriptions/listen`` streams (2026-07-28) and
  ``notifications/tools/list_changed`` on a handshake-era session;
- ``flood(count)``: sends ``count`` change announcements without changing anything.

``--ttl-ms N`` puts ``ttlMs: N`` on tools/list results (2026-07-28 caching hint);
``--list-hold PATH`` holds every tools/list after the first while the file ``PATH`` exists
(a slow server, for as long as the test wants: it removes the file), creating ``PATH.held``
when one is held; ``--variant 2`` starts with an extra tool ``extra`` and another ``echo`` description
(the same server "upgraded" between two runs).
"""

from __future__ import annotations

import argparse
from typing import Any

import anyio
from mcp.server.caching import CacheableMethod, CacheHint
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.subscriptions import InMemorySubscriptionBus, ToolsListChanged

LISTS = {"count": 0}


def build(ttl_ms: int, list_hold: str = "", variant: int = 1) -> MCPServer:
    bus = InMemorySubscriptionBus()
    hints: dict[CacheableMethod, CacheHint] | None = (
        {"tools/list": CacheHint(ttl_ms=ttl_ms)} if ttl_ms else None
    )

    async def middleware(ctx: Any, call_next: Any) -> Any:
        if ctx.method == "tools/list":
            LISTS["count"] += 1
            if list_hold and LISTS["count"] > 1:
                hold = anyio.Path(list_hold)
                await anyio.Path(list_hold + ".held").touch()  # tells the test a re-list is held
                with anyio.move_on_after(120):  # bounded, should a test never remove it
                    while await hold.exists():  # noqa: ASYNC110 (a file has no event to wait on)
                        await anyio.sleep(0.01)
        return await call_next(ctx)

    server = MCPServer("changing", instructions="Tools that change.", subscriptions=bus, cache_hints=hints)
    server._lowlevel_server.middleware.append(middleware)  # pyright: ignore[reportPrivateUsage]

    async def announce(ctx: Context) -> None:
        await bus.publish(ToolsListChanged())
        request = ctx.request_context
        if not request.protocol_version.startswith("2026"):
            await request.session.send_tool_list_changed()

    echo_description = (
        "Return the text unchanged." if variant == 1 else "Return the text unchanged, upper-cased."
    )

    @server.tool(description=echo_description)
    def echo(text: str) -> str:
        return text if variant == 1 else text.upper()

    if variant != 1:

        @server.tool(description="An extra tool of the upgraded server.")
        def extra() -> str:
            return "extra"

    @server.tool(description="How many tools/list requests this server answered.")
    def stats() -> dict[str, int]:
        return {"lists": LISTS["count"]}

    @server.tool(description="Add, remove or change a tool, then announce the change.")
    async def mutate(
        op: str,
        name: str,
        description: str = "Echo the text.",
        quiet: bool = False,
        ctx: Context = None,  # type: ignore[assignment]
    ) -> str:
        if op == "add":

            def added(text: str) -> str:
                return text

            server.add_tool(added, name=name, description=description)
        elif op == "remove":
            server.remove_tool(name)
        elif op == "change":
            tool = server._tool_manager.get_tool(name)  # pyright: ignore[reportPrivateUsage]
            assert tool is not None, name
            tool.description = description
        elif op in ("header", "reshape"):
            tool = server._tool_manager.get_tool(name)  # pyright: ignore[reportPrivateUsage]
            assert tool is not None, name
            tool.parameters["properties"]["text"]["x-mcp-header"] = "Text"
            if op == "reshape":
                tool.parameters["properties"]["mode"] = {"type": "string"}
        else:
            raise ValueError(f"unknown op {op!r}")
        if not quiet:
            await announce(ctx)
        return f"{op} {name}"

    @server.tool(description="Announce a change this many times without changing anything.")
    async def flood(count: int, ctx: Context = None) -> int:  # type: ignore[assignment]
        for _ in range(count):
            await announce(ctx)
        return count

    return server


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("transport", choices=["stdio", "http"])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--legacy", action="store_true")
    parser.add_argument("--ttl-ms", type=int, default=0)
    parser.add_argument("--list-hold", default="")
    parser.add_argument("--variant", type=int, default=1)
    args = parser.parse_args()
    server = build(args.ttl_ms, args.list_hold, args.variant)
    if args.transport == "stdio":
        from handshake_only import serve_stdio

        anyio.run(lambda: serve_stdio(server, handshake_only=args.legacy))
    else:
        import uvicorn

        app = server.streamable_http_app()
        # A client's open event stream would hold uvicorn's graceful shutdown until the
        # helper's SIGKILL (10 s later); one second is enough for any request in flight.
        uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning", timeout_graceful_shutdown=1)


if __name__ == "__main__":
    main()
