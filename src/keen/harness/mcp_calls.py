"""The harness's side of the gateway: the approval it takes over, and the MCP calls it runs.

Approval lives once, in the harness (docs/architecture.md "The harness"). While a harness is
open, the gateway's approval callback is its gate, which says yes only for the call the
permission gate has just cleared in the same task (a context variable names that server and
tool), so nothing reaches ``tools/call`` around the harness's permission gate.
:class:`ApprovalHandover` lends the gateway's approval to a harness and gives it back when
the harness closes, right whatever order harnesses open on one gateway close in.

:func:`run_mcp_call` and :func:`read_handle_call` are the execute stage of MCP calls and of
resource reads: a Keen error becomes an ``is_error`` observation worded for the model.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import weakref
from collections.abc import Callable
from typing import Any

from keen.capabilities import Capability
from keen.errors import KeenError, ServerNotConfigured
from keen.gateway import Approval, ApprovalRequest, Gateway, result_text
from keen.harness.entries import Observation
from keen.harness.executors import read_handle

__all__ = [
    "ApprovalHandover",
    "cleared_approval",
    "mcp_checks",
    "parse_call_mcp_tool",
    "read_handle_call",
    "run_mcp_call",
]

_CLEARED = contextvars.ContextVar[tuple[str, str] | None]("keen_cleared", default=None)

RemedyWords = Callable[[KeenError, str], str]


def cleared_approval(request: ApprovalRequest) -> bool:
    """The gateway's approval under a harness: yes only for the call the permission gate
    just cleared (in this task)."""
    return _CLEARED.get() == (request.server, request.tool)


class ApprovalHandover:
    """A gateway's approval, lent to one harness's ``gate`` from construction to :meth:`give_back`.

    Harnesses open on one gateway stack up: the newest one's gate is installed, each keeping
    the approval it found. Giving back the newest puts back what it found; giving back an
    older one (a later one took over from it) hands what it found on to the one above it.
    Whatever the order, the gateway ends with the approval it had before the first, and an
    approval someone else installed meanwhile is left alone.
    """

    def __init__(self, gateway: Gateway, gate: Approval) -> None:
        self.gateway, self.gate, self.prior = gateway, gate, gateway.approval
        _HOLDERS.setdefault(gateway, []).append(self)
        gateway.approval = gate

    def give_back(self) -> None:
        """Give the gateway's approval back (or on to a later holder); safe to call twice."""
        holders = _HOLDERS.get(self.gateway, [])
        if self not in holders:
            return
        at = holders.index(self)
        del holders[at]
        if not holders:
            del _HOLDERS[self.gateway]
        if at < len(holders):
            holders[at].prior = self.prior  # the one that took over from us restores it
        elif self.gateway.approval == self.gate:
            self.gateway.approval = self.prior


_HOLDERS = weakref.WeakKeyDictionary[Gateway, list[ApprovalHandover]]()
"""Each gateway's open handovers, oldest first."""


def parse_call_mcp_tool(args: dict[str, Any]) -> tuple[str, str, dict[str, Any]] | None:
    """``call_mcp_tool``'s ``server``, ``tool`` and ``arguments`` (an object, or JSON text of
    one, as some models send it; the gateway takes it too), or ``None`` for another shape."""
    server, tool, inner = args.get("server"), args.get("tool"), args.get("arguments", {})
    if isinstance(inner, str):
        with contextlib.suppress(ValueError):
            inner = json.loads(inner)
    if not isinstance(server, str) or not isinstance(tool, str) or not isinstance(inner, dict):
        return None
    return server, tool, dict(inner)  # pyright: ignore[reportUnknownArgumentType]


def mcp_checks(
    gateway: Gateway, words: RemedyWords, server: str, tool: str, args: dict[str, Any]
) -> tuple[str, str] | None:
    """The gateway's MCP checks of a call (server configured, enabled and connected, tool
    listed, arguments valid against its inputSchema): ``None`` when they pass, else the
    refusal worded for the model and its code."""
    try:
        gateway.manager.check_call(server, tool, args)
    except KeenError as exc:
        return words(exc, server), exc.code
    return None


async def run_mcp_call(
    gateway: Gateway,
    words: RemedyWords,
    call_id: str,
    name: str,
    cap_id: str,
    server: str,
    tool: str,
    args: dict[str, Any],
) -> Observation:
    """Send a cleared call through the gateway; its result (or Keen error, worded by
    ``words``) as the model's observation. The remote ``isError`` result says so."""
    token = _CLEARED.set((server, tool))
    try:
        result = await gateway.call(server, tool, args)
    except KeenError as exc:
        text = f"Error: {words(exc, server)}"
        return Observation(
            call_id, name, text, True, capability=cap_id, code=exc.code, server=server, tool=tool
        )
    finally:
        _CLEARED.reset(token)
    text = result_text(result)
    if result.is_error:
        text = f"The tool reported an error: {text}"
    return Observation(
        call_id,
        name,
        text,
        is_error=result.is_error,
        capability=cap_id,
        code="tool_error" if result.is_error else None,
        server=server,
        tool=tool,
        raw=result,
    )


async def read_handle_call(
    gateway: Gateway | None,
    words: RemedyWords,
    call_id: str,
    name: str,
    cap: Capability,
    args: dict[str, Any],
) -> Observation:
    """Read a resource or get a prompt (both only bring text into context)."""
    try:
        if gateway is None:
            raise ServerNotConfigured("no MCP servers in this session", server=cap.server or "")
        text = await read_handle(gateway.manager, cap, args.get("arguments") or {})
    except KeenError as exc:
        text = f"Error: {words(exc, cap.server or '')}"
        return Observation(call_id, name, text, True, capability=cap.id, code=exc.code, server=cap.server)
    return Observation(call_id, name, text, capability=cap.id, server=cap.server)
