"""Requests over a server's published session, and what their failures become.

The Manager checks a call (configured, enabled, connected, known tool, valid arguments)
and picks the session; this module sends the request on it and turns every failure into
a :mod:`keen.errors` type at one place: the SDK's, translated by :mod:`keen.mcp._translate`,
an OAuth server's refusal refined by its provider (a step-up needs a wider scope), and a
transport that failed under the call marks the server disconnected for its owner task.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any

import anyio
from mcp.client.session import ClientSession
from mcp.shared.dispatcher import ProgressFnT

from keen.errors import (
    AuthFailed,
    AuthRequired,
    CallTimeout,
    InvalidArguments,
    MCPServerError,
    Remedy,
    ServerDisconnected,
)
from keen.mcp._input import call_tool as call_tool_any_era
from keen.mcp._runtime import ServerRuntime
from keen.mcp._stale import call_with_relist
from keen.mcp._translate import AUTH_STATUSES, sign_in_message, translate_call_error
from keen.mcp.auth import classify_auth_failure
from keen.mcp.changes import ToolsChanged
from keen.mcp.types import ServerState, ToolResult

__all__ = ["not_connected", "send_request", "send_tool_call"]


async def send_tool_call(
    runtime: ServerRuntime,
    session: ClientSession,
    tool: str,
    arguments: dict[str, Any],
    *,
    limit: float,
    progress: ProgressFnT | None,
    relist: Callable[[], Awaitable[ToolsChanged | None]],
) -> ToolResult:
    """``tools/call`` of an already checked call on ``session`` (``limit``: seconds).

    A refusal that says the tool list is stale re-lists once (``relist``) and resends once
    (:mod:`keen.mcp._stale`). Raises ``CallTimeout``, ``ServerDisconnected``, ``AuthFailed``,
    ``AuthRequired``, ``UserActionRequired``, ``RemoteProtocolError``, ``InvalidArguments``,
    ``ToolNotFound`` or ``ToolChanged``.
    """
    name = runtime.name
    uri = runtime.descriptions_uri
    send = partial(call_tool_any_era, session, tool, arguments, read_timeout_seconds=limit)
    try:
        raw = await call_with_relist(
            partial(send, progress_callback=progress, descriptions_uri=uri),
            relist=relist,
            current=lambda: runtime.tools_by_name.get(tool),
            before=runtime.tools_by_name.get(tool),
            server=name,
            tool=tool,
        )
    except Exception as exc:
        error = translate_call_error(
            exc, server=name, tool=tool, timeout=limit, http_status=runtime.http_status
        )
        if runtime.config.auth_type == "oauth" and not isinstance(error, CallTimeout | InvalidArguments):
            # The OAuth provider knows why (e.g. a step-up: the tool needs a wider scope).
            found = classify_auth_failure(
                exc,
                server=name,
                auth=runtime.auth,
                status_code=runtime.http_status if runtime.http_status in AUTH_STATUSES else None,
            )
            if found is not None:
                error = found
        if isinstance(error, ServerDisconnected):
            runtime.connection_lost(error.message)
        raise error from exc
    data = raw.model_dump(by_alias=True, mode="json", exclude_none=True)
    return ToolResult(
        server=name,
        tool=tool,
        content=data.get("content", []),
        structured_content=data.get("structuredContent"),
        is_error=bool(raw.is_error),
    )


async def send_request(
    runtime: ServerRuntime,
    session: ClientSession,
    what: str,
    limit: float,
    send: Callable[[ClientSession], Awaitable[Any]],
) -> Any:
    """``send(session)`` within ``limit`` seconds (``what`` names it in errors: ``resource
    URI``, ``prompt NAME``). Raises ``CallTimeout``, ``ServerDisconnected`` or
    ``RemoteProtocolError``."""
    try:
        with anyio.fail_after(limit):
            return await send(session)
    except Exception as exc:
        error = translate_call_error(
            exc, server=runtime.name, tool=what, timeout=limit, http_status=runtime.http_status
        )
        if isinstance(error, ServerDisconnected):
            runtime.connection_lost(error.message)
        raise error from exc


def not_connected(runtime: ServerRuntime) -> MCPServerError:
    """The error a request to a server that is not connected meets, by its state, with the
    remedy its status gives."""
    name, state = runtime.name, runtime.state
    detail = f" Last error: {runtime.last_error}" if runtime.last_error else ""
    remedy = runtime.status().remedy
    if state is ServerState.AUTH_REQUIRED:
        return AuthRequired(f"{sign_in_message(name)}.{detail}", server=name, remedy=remedy)
    if state is ServerState.AUTH_FAILED:
        return AuthFailed(
            f'MCP server "{name}" rejected its credentials; fix them.{detail}', server=name, remedy=remedy
        )
    if state in (ServerState.CONNECTING, ServerState.CONFIGURED):
        return ServerDisconnected(
            f'MCP server "{name}" is still connecting; try again in a moment.', server=name
        )
    return ServerDisconnected(
        f'MCP server "{name}" is disconnected.{detail}', server=name, remedy=remedy or Remedy.RECONNECT
    )
