"""``tools/call`` in both protocol eras, including a server's questions back to the client.

In the handshake era (2025-11-25) a server that needs input mid-call (elicitation,
sampling, roots) sends the client a request, answered by the session's callbacks. In the
2026-07-28 era there is no such back channel: the call returns an ``InputRequiredResult``
carrying the requests, and the client calls again with the answers (MCP 2026-07-28,
"Multi round-trip requests"). :func:`call_tool` drives that loop the way the SDK's
``Client.call_tool`` does, through the *same* session callbacks, so a callback given to
the session serves both eras.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import mcp_types as mt
from mcp.client.session import ClientRequestContext, ClientSession
from mcp.shared.dispatcher import ProgressFnT

from keen.mcp.connection.sdk_private import DEFAULT_INPUT_REQUIRED_MAX_ROUNDS, run_input_required_driver
from keen.mcp.listing.tool_descriptions import description_required, fetch_descriptions

__all__ = ["call_tool"]


async def call_tool(
    session: ClientSession,
    tool: str,
    arguments: dict[str, Any],
    *,
    read_timeout_seconds: float | None,
    progress_callback: ProgressFnT | None = None,
    descriptions_uri: str | None = None,
) -> mt.CallToolResult:
    """``tools/call``, answering any ``InputRequiredResult`` rounds with the session's callbacks.

    ``read_timeout_seconds`` is the SDK's own per-request timeout: it cancels the request on
    the wire too. With ``descriptions_uri`` (a server with the ``tool_descriptions``
    extension), a ``TOOL_DESCRIPTION_REQUIRED`` answer (its authorization lapsed) fetches the
    tool's description and calls once more.

    Raises:
        MCPError: the server refused the call, or a callback declined an input request.
        InputRequiredRoundsExceededError: the server kept asking (more than 10 rounds).
    """

    # The first round is sent here, not through send(): most calls have no other, and each
    # coroutine between the caller and the SDK is resumed at every step of the call.
    raw = await session.call_tool(
        tool,
        arguments,
        read_timeout_seconds=read_timeout_seconds,
        progress_callback=progress_callback,
        allow_input_required=True,
    )
    if not isinstance(raw, mt.InputRequiredResult) and (
        descriptions_uri is None or not description_required(raw)
    ):
        return raw  # most calls: no function made for the rounds they never have
    send = partial(
        _send, session, tool, arguments, read_timeout_seconds=read_timeout_seconds, progress=progress_callback
    )
    if isinstance(raw, mt.InputRequiredResult):
        raw = await _rounds(session, raw, send)
    if descriptions_uri is not None and description_required(raw):
        await fetch_descriptions(session, descriptions_uri, [tool])
        raw = await send(None, None)
        if isinstance(raw, mt.InputRequiredResult):
            raw = await _rounds(session, raw, send)
    return raw


async def _send(
    session: ClientSession,
    tool: str,
    arguments: dict[str, Any],
    responses: mt.InputResponses | None,
    state: str | None,
    *,
    read_timeout_seconds: float | None,
    progress: ProgressFnT | None,
) -> Any:
    """A round of ``tools/call`` carrying the answers to the last round's requests."""
    return await session.call_tool(
        tool,
        arguments,
        read_timeout_seconds=read_timeout_seconds,
        progress_callback=progress,
        input_responses=responses,
        request_state=state,
        allow_input_required=True,
    )


async def _rounds(session: ClientSession, first: mt.InputRequiredResult, send: Any) -> mt.CallToolResult:
    """The rounds after ``first`` asked for input, answered with the session's callbacks."""

    async def dispatch(key: str, request: mt.InputRequest) -> mt.InputResponse | mt.ErrorData:
        meta = request.params.meta if request.params else None
        return await session.dispatch_input_request(
            ClientRequestContext(session=session, request_id=key, meta=meta), request
        )

    return await run_input_required_driver(
        first, dispatch=dispatch, retry=send, max_rounds=DEFAULT_INPUT_REQUIRED_MAX_ROUNDS
    )
