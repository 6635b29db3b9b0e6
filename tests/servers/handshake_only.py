"""Serve an SDK server in the 2025-11-25 handshake era only (stdio, or HTTP as an ASGI app).

The SDK's server decides the era from a client's first request and serves 2026-07-28 to
a client that probes ``server/discover``. A handshake-only server answers that probe with
-32601 (method not found), as the npm reference servers do; :func:`serve_stdio` does so
before the SDK sees the request, so the client falls back to ``initialize``.
:func:`handshake_only_http` does the same for a server over Streamable HTTP (an ASGI app),
for the tests and ``bench/servers/sized_http.py``.
"""

from __future__ import annotations

import json
from typing import Any

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage
from mcp_types import METHOD_NOT_FOUND, ErrorData, JSONRPCError, JSONRPCRequest

__all__ = [
    "answering_posts",
    "handshake_only_http",
    "read_request",
    "refuse_discover",
    "replaying",
    "serve_stdio",
]


async def serve_stdio(server: MCPServer | Any, *, handshake_only: bool = True, options: Any = None) -> None:
    """Run ``server`` (an ``MCPServer``, or a low-level SDK ``Server`` such as FastMCP's
    ``_mcp_server``, with its initialization ``options``) on stdin/stdout; with
    ``handshake_only``, refuse ``server/discover``."""
    lowlevel = server._lowlevel_server if isinstance(server, MCPServer) else server  # pyright: ignore[reportPrivateUsage]
    options = options or lowlevel.create_initialization_options()
    async with stdio_server() as (read, write):
        if not handshake_only:
            await lowlevel.run(read, write, options)
            return
        send, receive = anyio.create_memory_object_stream[Any](100)
        async with anyio.create_task_group() as tg:
            tg.start_soon(refuse_discover, read, write, send)
            await lowlevel.run(receive, write, options)
            tg.cancel_scope.cancel()


async def refuse_discover(read: Any, write: Any, send: Any) -> None:
    """Pass what arrives on ``read`` to ``send``, answering ``server/discover`` on ``write``
    with -32601 instead, as a handshake-only server does; closes ``send`` at the end."""
    async with send:
        async for item in read:
            message = getattr(item, "message", None)
            if isinstance(message, JSONRPCRequest) and message.method == "server/discover":
                error = ErrorData(code=METHOD_NOT_FOUND, message="Method not found")
                await write.send(SessionMessage(JSONRPCError(jsonrpc="2.0", id=message.id, error=error)))
                continue
            await send.send(item)


def handshake_only_http(app: Any) -> Any:
    """Answer ``server/discover`` with -32601, as the npm reference servers do: the client
    falls back to ``initialize`` and the 2025-11-25 era, whose answers are event streams."""

    async def serve(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await app(scope, receive, send)
            return
        body = await read_request(receive)
        request = json.loads(body)
        if isinstance(request, dict) and request.get("method") == "server/discover":
            error = {
                "jsonrpc": "2.0",
                "id": request["id"],
                "error": {"code": -32601, "message": "Method not found"},
            }
            await send(
                {
                    "type": "http.response.start",
                    "status": 200,
                    "headers": [(b"content-type", b"application/json")],
                }
            )
            await send({"type": "http.response.body", "body": json.dumps(error).encode()})
            return
        await app(scope, replaying(body, receive), send)

    return serve


async def read_request(receive: Any) -> bytes:
    """The whole body of an ASGI HTTP request, read from ``receive``."""
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            return body


def replaying(body: bytes, receive: Any) -> Any:
    """An ASGI ``receive`` that gives ``body`` (read already, :func:`read_request`) once,
    then whatever ``receive`` gives (a disconnect)."""
    replayed = False

    async def replay() -> Any:
        nonlocal replayed
        if replayed:
            return await receive()
        replayed = True
        return {"type": "http.request", "body": body, "more_body": False}

    return replay


def answering_posts(answer: Any) -> Any:
    """ASGI middleware for a handshake-era test server over HTTP whose POSTs some test
    answers itself: ``await answer(request, receive, send)`` (``request`` the parsed JSON-RPC
    body) returns True when it answered; the rest reaches the MCP app, in the 2025-11-25 era
    (:func:`handshake_only_http`)."""

    def wrap(app: Any) -> Any:
        async def serve(scope: Any, receive: Any, send: Any) -> None:
            if scope["type"] != "http" or scope["method"] != "POST":
                await app(scope, receive, send)
                return
            body = await read_request(receive)
            if not await answer(json.loads(body), receive, send):
                await app(scope, replaying(body, receive), send)

        return serve

    return lambda app: wrap(handshake_only_http(app))
