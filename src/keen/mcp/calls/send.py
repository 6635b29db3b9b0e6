"""Requests over a server's published session, and what their failures become.

The Manager checks a call (configured, enabled, connected, known tool, valid arguments;
the server checks here: :func:`connected`; the tool and its arguments:
:class:`keen.mcp.listing.views.ToolViews`) and picks the session; this
module sends the request on it and turns every failure into
a :mod:`keen.errors` type at one place: the SDK's, translated by :mod:`keen.mcp.connection.translate`,
an OAuth server's refusal refined by its provider (a step-up needs a wider scope), and a
transport that failed under the call marks the server disconnected for its owner task.

A call refused with ``-32042`` (URL elicitation required) may be sent once more when the
person accepted every page and the server reported each done (:func:`pages_done`; MCP
2025-11-25 "Elicitation > URL Mode > URL Elicitation Required Error").
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any

import anyio
import mcp_types as mt
from mcp.client.session import ClientSession
from mcp.shared.dispatcher import ProgressFnT
from pydantic_core import to_jsonable_python

from keen._terminal import name_in_message
from keen._text import closed
from keen.errors import (
    AuthFailed,
    AuthRequired,
    CallTimeout,
    InvalidArguments,
    MCPServerError,
    Remedy,
    ServerDisabled,
    ServerDisconnected,
    UserActionRequired,
)
from keen.mcp.calls._input import call_tool as call_tool_any_era
from keen.mcp.calls._stale import call_with_relist
from keen.mcp.connection.elicitation import UrlElicitationCallback
from keen.mcp.connection.server import ServerConnection
from keen.mcp.connection.translate import (
    AUTH_STATUSES,
    CallFacts,
    call_facts,
    sign_in_message,
    translate_call_error,
    unsendable_arguments,
)
from keen.mcp.listing.changes import ToolsChanged
from keen.mcp.types import ServerState, ToolResult

__all__ = [
    "LAST_ERROR",
    "connected",
    "not_connected",
    "pages_done",
    "send_request",
    "send_tool_call",
    "wire_parts",
]

logger = logging.getLogger(__name__)


async def send_tool_call(
    connection: ServerConnection,
    session: ClientSession,
    tool: str,
    arguments: dict[str, Any],
    *,
    limit: float,
    progress: ProgressFnT | None,
    relist: Callable[[str], Awaitable[ToolsChanged | None]],
    pages: tuple[UrlElicitationCallback | None, float] = (None, 0.0),
) -> ToolResult:
    """``tools/call`` of an already checked call on ``session`` (``limit``: seconds).

    A refusal that says the tool list is stale re-lists once (``relist``, given the server's
    name) and resends once
    (:mod:`keen.mcp.calls._stale`). A ``-32042`` is sent once more when :func:`pages_done` says so
    (``pages``: who is asked, seconds to wait). Raises ``CallTimeout``,
    ``ServerDisconnected``, ``AuthFailed``, ``AuthRequired``, ``UserActionRequired``,
    ``RemoteProtocolError``, ``InvalidArguments``, ``ToolNotFound`` or ``ToolChanged``.
    """
    try:
        return await _send_tool_call(connection, session, tool, arguments, limit, progress, relist)
    except UserActionRequired as error:
        if not await pages_done(connection, error, *pages):
            raise
    if connection.session is None:  # it went away while the person was at the page
        raise not_connected(connection)
    return await _send_tool_call(connection, connection.session, tool, arguments, limit, progress, relist)


async def _send_tool_call(
    connection: ServerConnection,
    session: ClientSession,
    tool: str,
    arguments: dict[str, Any],
    limit: float,
    progress: ProgressFnT | None,
    relist: Callable[[str], Awaitable[ToolsChanged | None]],
) -> ToolResult:
    name = connection.name
    # One partial, and the connection itself for the tool's definition before and after a
    # re-list: every call passes here, and each closure or partial more is made per call.
    send = partial(
        call_tool_any_era,
        session,
        tool,
        arguments,
        read_timeout_seconds=limit,
        progress_callback=progress,
        descriptions_uri=connection.descriptions_uri,
    )
    with call_facts() as facts:
        try:
            raw = await call_with_relist(send, relist=relist, listing=connection, tool=tool)
        except Exception as exc:
            raise _call_error(connection, session, tool, arguments, limit, exc, facts) from exc
    content, structured = wire_parts(raw)
    return _tool_result(name, tool, content, structured, bool(raw.is_error))


def _tool_result(
    server: str, tool: str, content: list[dict[str, Any]], structured: Any, is_error: bool
) -> ToolResult:
    """``ToolResult(server=..., tool=..., ...)`` made without its frozen dataclass's ``__init__``.

    Every call makes one, and that ``__init__``, called with keywords, cost about as much as
    the rest of the result's handling (its arguments gathered into a dict, each field set
    through ``object.__setattr__``). Its slots' own setters make the same object: the
    dataclass has no ``__post_init__``, and its fields are these five
    (tests/mcp/test_wire_parts.py)."""
    result = _new(ToolResult)
    _set_server(result, server)
    _set_tool(result, tool)
    _set_content(result, content)
    _set_structured(result, structured)
    _set_is_error(result, is_error)
    return result


_new = object.__new__
# The slots' member descriptors: setting through them is what the frozen class forbids only
# by its __setattr__, which they do not go through.
_set_server = ToolResult.server.__set__  # pyright: ignore[reportAttributeAccessIssue, reportUnknownMemberType]
_set_tool = ToolResult.tool.__set__  # pyright: ignore[reportAttributeAccessIssue, reportUnknownMemberType]
_set_content = ToolResult.content.__set__  # pyright: ignore[reportAttributeAccessIssue, reportUnknownMemberType]
_set_structured = ToolResult.structured_content.__set__  # pyright: ignore[reportAttributeAccessIssue, reportUnknownMemberType]
_set_is_error = ToolResult.is_error.__set__  # pyright: ignore[reportAttributeAccessIssue, reportUnknownMemberType]


def wire_parts(raw: mt.CallToolResult) -> tuple[list[dict[str, Any]], Any]:
    """A result's ``content`` blocks and ``structuredContent`` in wire shape: what
    ``raw.model_dump(by_alias=True, mode="json", exclude_none=True)`` has under those keys
    (``None`` for no structured content), made for less.

    Every call's result passes here, and dumping the whole result model cost about as much as
    the rest of Keen's call path: a text block with no annotations and no ``_meta`` (most
    results' only block) is its type and text, the structured content is converted as the
    dump converts a value of no declared type (:func:`pydantic_core.to_jsonable_python`), and
    a result with any other block is dumped whole as before."""
    content: list[dict[str, Any]] = []
    for block in raw.content:  # one pass, no comprehension's frame: most results have one block
        if block.__class__ is not _TEXT or block.annotations is not None or block.meta is not None:  # pyright: ignore[reportAttributeAccessIssue]
            data = raw.model_dump(by_alias=True, mode="json", exclude_none=True)
            return data.get("content", []), data.get("structuredContent")
        content.append({"type": "text", "text": block.text})  # pyright: ignore[reportAttributeAccessIssue]
    structured = raw.structured_content
    if structured is None:
        return content, None
    # As the JSON-mode dump converts it: NaN and infinities (which pydantic's JSON parser
    # accepts on the wire) become null, and a nested model leaves out its None fields.
    return content, to_jsonable_python(structured, exclude_none=True, inf_nan_mode="null")


_TEXT = mt.TextContent


def _call_error(
    connection: ServerConnection,
    session: ClientSession,
    tool: str,
    arguments: dict[str, Any],
    limit: float,
    exc: Exception,
    facts: CallFacts,
) -> Exception:
    """Keen's error for ``exc``, raised by a call of ``tool``; ``facts``: what the endpoint
    answered to this call's own requests (another call's answer may have come since)."""
    name = connection.name
    http_status = facts.status_or(connection.http_status)
    error = unsendable_arguments(exc, arguments, server=name, tool=tool) or translate_call_error(
        exc,
        server=name,
        tool=tool,
        timeout=limit,
        http_status=http_status,
        config_name=connection.config_name,
    )
    if connection.config.auth_type == "oauth" and not isinstance(error, CallTimeout | InvalidArguments):
        # The OAuth provider knows why (e.g. a step-up: the tool needs a wider scope).
        # Imported here: the OAuth modules (and the SDK's OAuth client) are nothing a
        # session without an OAuth server loads.
        from keen.mcp.auth import classify_auth_failure

        found = classify_auth_failure(
            exc,
            server=name,
            auth=connection.auth,
            status_code=http_status if http_status in AUTH_STATUSES else None,
        )
        if found is not None:
            error = found
    if isinstance(error, ServerDisconnected):
        error = _ended_by_keen(session, error, f'"{name}/{name_in_message(tool)}"') or _lost(
            connection, error
        )
    return error


async def send_request(
    connection: ServerConnection,
    session: ClientSession,
    what: str,
    limit: float,
    send: Callable[[ClientSession], Awaitable[Any]],
    *,
    listed_by: str,
) -> Any:
    """``send(session)`` within ``limit`` seconds (``what`` names it in errors: ``resource
    URI`` for a ``resources/read``, ``prompt NAME`` for a ``prompts/get``). Raises ``CallTimeout``, ``ServerDisconnected`` or
    ``RemoteProtocolError``; ``InvalidArguments`` for params the server refuses (``-32602``),
    its message ending with ``listed_by`` (where the valid ones are listed) and no remedy:
    a resource or a prompt has no inputSchema or schema file to read."""
    with call_facts() as facts:
        try:
            with anyio.fail_after(limit):
                return await send(session)
        except Exception as exc:
            http_status = facts.status_or(connection.http_status)
            error = translate_call_error(
                exc,
                server=connection.name,
                tool=what,
                timeout=limit,
                http_status=http_status,
                config_name=connection.config_name,
                method=_METHODS.get(what.partition(" ")[0], "this request"),
            )
            if isinstance(error, ServerDisconnected):
                doing = f'{name_in_message(what)} of MCP server "{connection.name}"'
                error = _ended_by_keen(session, error, doing) or _lost(connection, error)
            elif isinstance(error, InvalidArguments):
                error = InvalidArguments(
                    f"{closed(error.message)} {listed_by}",
                    server=error.server,
                    tool=error.tool,
                    errors=error.errors,
                    remedy=None,
                )
            raise error from exc


_METHODS = {"resource": "resources/read", "prompt": "prompts/get"}
"""The request :func:`send_request` sends, by the first word of its ``what``."""


def _ended_by_keen(
    session: ClientSession, error: ServerDisconnected, doing: str
) -> ServerDisconnected | None:
    """The error of a request cut short because Keen ended its session itself (the Manager
    closed, the server dropped from its config, a reconnect asked for:
    :attr:`~keen.mcp.connection.session.CheckedSession.ended_by`), which says so; ``None``
    when the server ended it. No remedy: the server did nothing to fix, and the connection's
    state is its owner's (a reconnect's new session must not be marked lost)."""
    ended_by = getattr(session, "ended_by", "")
    if not ended_by:
        return None
    return ServerDisconnected(
        f"{doing} did not finish: {ended_by}", server=error.server, tool=error.tool, remedy=None
    )


def _lost(connection: ServerConnection, error: ServerDisconnected) -> ServerDisconnected:
    """``error``, with why the session ended when it ended on a message over a bound
    (:attr:`ServerConnection.closed_why`: recorded before the session sees its stream end, by
    its message handler on stdio, by the response hook on HTTP+SSE), recorded as the
    connection's loss."""
    if connection.closed_why:
        error = ServerDisconnected(
            f"{error.message}: {connection.closed_why}",
            server=error.server,
            tool=error.tool,
            remedy=error.remedy,
        )
    connection.connection_lost(error.message)
    return error


async def pages_done(
    connection: ServerConnection, error: UserActionRequired, ask: UrlElicitationCallback | None, wait: float
) -> bool:
    """Whether a call that met ``error`` (``-32042``) may be sent once more now.

    The session expects the pages' ``elicitationId``s from here on (so a caller can
    ``Manager.wait_user_action`` after it shows the pages itself). With ``ask``, each page
    is put to the person as a URL-mode elicitation is; when they accept every one, this
    waits up to ``wait`` seconds for the server's completion notice of each.

    Returns:
        True when every page was accepted and reported done; False when there is nothing
        to track (pages without ids, a 2026-07-28 session, which has no such notice), no
        ``ask``, a page not accepted (or ``ask`` failed), or the time ran out.
    """
    tracker, ids = connection.elicitations, error.elicitation_ids
    if tracker is None or not ids or not connection.completion_notices:
        return False
    tracker.expect(ids)
    if ask is None:
        return False
    for (message, url), elicitation_id in zip(error.pages, ids, strict=True):
        try:
            answer = await ask(connection.name, message, url)
        except Exception as exc:  # a broken front end must not break the call's error
            logger.warning(
                "%s: the URL elicitation callback failed (%s)", connection.name, type(exc).__name__
            )
            return False
        if answer.action != "accept":
            return False
        tracker.accepted(elicitation_id, answer.on_complete)
    return await tracker.wait(ids, wait)


def connected(connection: ServerConnection) -> ServerConnection:
    """``connection`` when its server is enabled and connected. Raises ``ServerDisabled``, or
    :func:`not_connected`'s error."""
    if not connection.config.enabled:
        raise ServerDisabled(
            f'MCP server "{connection.name}" is {connection.disabled_note}',
            server=connection.name,
            remedy=Remedy.ENABLE_SERVER,
        )
    if connection.state is not ServerState.CONNECTED or connection.session is None:
        raise not_connected(connection)
    return connection


LAST_ERROR = " Last error: "
"""What starts the server's last error in :func:`not_connected`'s messages: everything after
it is that error (a command's path, a URL, the server's stderr), which a front end for a
remote caller (``keen serve``) leaves out."""


def not_connected(connection: ServerConnection) -> MCPServerError:
    """The error a request to a server that is not connected meets, by its state, with the
    remedy its status gives; the server's last error follows :data:`LAST_ERROR`."""
    name, state = connection.name, connection.state
    detail = f"{LAST_ERROR}{connection.last_error}" if connection.last_error else ""
    remedy = connection.status().remedy
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
