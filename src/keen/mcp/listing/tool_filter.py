"""One bad tool never takes down a server's whole tool list.

The SDK validates a ``tools/list`` page as a whole: a single tool its models reject (an
``inputSchema`` without ``"type": "object"``, a name that is not a string) fails the page
and, with it, every tool of the server. :class:`ToolListFilter` sits on the session's
streams: it notes the ids of outgoing ``tools/list`` requests and, in each answer that
does not validate, drops the tools that do not validate on their own, recording each with
the reason. The rest of the list reaches the SDK intact and stays usable.

On the same read path, a 2026-07-28 result without ``resultType`` gets ``"complete"``: the
protocol has clients read an absent ``resultType`` as ``complete`` (SEP-2322), while the
SDK validates each result against that revision's schema, where the field is required, and
would fail the request instead.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import mcp_types as mt
from mcp.shared.message import SessionMessage
from mcp_types import methods as mt_methods
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError

from keen._text import one_line
from keen.mcp.listing.streams import StreamProxy

__all__ = ["InvalidTool", "ToolListFilter", "WriteWatch"]

_FALLBACK_VERSION = "2025-11-25"
_REASON_CHARS = 300


@dataclass(frozen=True, slots=True)
class InvalidTool:
    """A listed tool Keen could not use: ``name`` as sent (may be any JSON value, shown via
    ``repr`` when not a string) and why the MCP schema rejects it."""

    name: str
    reason: str


class ToolListFilter:
    """Drops invalid tools from ``tools/list`` answers; see the module docstring.

    ``version``: the negotiated protocol version (set after initialize); ``invalid``: the
    tools dropped from the latest listing, reset by :meth:`start_listing`.
    """

    def __init__(self) -> None:
        self.version: str | None = None
        self.invalid: list[InvalidTool] = []
        self._pending: set[Any] = set()

    def start_listing(self) -> None:
        self.invalid = []

    def outgoing(self, item: Any) -> None:
        message = getattr(item, "message", None)
        if isinstance(message, mt.JSONRPCRequest) and message.method == "tools/list":
            self._pending.add(message.id)

    def incoming(self, item: Any) -> Any:
        if not isinstance(item, SessionMessage):
            return item
        item = self._complete_by_default(item)
        message = item.message
        if not isinstance(message, mt.JSONRPCResponse | mt.JSONRPCError) or message.id not in self._pending:
            return item
        self._pending.discard(message.id)
        if not isinstance(message, mt.JSONRPCResponse):
            return item
        result = message.result
        tools = result.get("tools")
        # The whole page first: a valid one (nearly every page) is then validated once here.
        if not isinstance(tools, list) or self._valid(result) is None:
            return item
        if self._valid({**result, "tools": []}) is not None:
            return item  # the page itself is broken: the SDK reports that
        kept: list[Any] = []
        for tool in tools:  # pyright: ignore[reportUnknownVariableType]
            reason = self._valid({"tools": [tool]})
            if reason is None:
                kept.append(tool)
            else:
                self.invalid.append(InvalidTool(_name_of(tool), reason))
        fixed = mt.JSONRPCResponse(jsonrpc="2.0", id=message.id, result={**result, "tools": kept})
        return SessionMessage(message=fixed, metadata=item.metadata)

    def _complete_by_default(self, item: SessionMessage) -> SessionMessage:
        message = item.message
        if (
            self.version not in MODERN_PROTOCOL_VERSIONS
            or not isinstance(message, mt.JSONRPCResponse)
            or "resultType" in message.result
        ):
            return item
        fixed = mt.JSONRPCResponse(
            jsonrpc="2.0", id=message.id, result={**message.result, "resultType": "complete"}
        )
        return SessionMessage(message=fixed, metadata=item.metadata)

    def _valid(self, result: dict[str, Any]) -> str | None:
        """``None`` when ``result`` is a valid tools/list result, else a short reason."""
        try:
            mt_methods.parse_server_result("tools/list", self.version or _FALLBACK_VERSION, result)
        except (ValidationError, ValueError, KeyError, TypeError) as exc:
            return _reason(exc)
        return None


def _name_of(tool: Any) -> str:
    name = tool.get("name") if isinstance(tool, dict) else None
    return name if isinstance(name, str) else repr(name)[:80]


def _reason(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        first = exc.errors(include_url=False, include_input=False)[0]
        where = ".".join(str(p) for p in first["loc"][2:]) or "(tool)"
        text = f"{where}: {first['msg']}"
    else:
        text = str(exc)
    return one_line(text, _REASON_CHARS)


class WriteWatch(StreamProxy):
    """Write-stream proxy that shows every outgoing message to :meth:`ToolListFilter.outgoing`."""

    def __init__(self, inner: Any, tool_filter: ToolListFilter) -> None:
        super().__init__(inner)
        self._filter = tool_filter

    async def send(self, item: Any) -> None:
        self._filter.outgoing(item)
        await self._inner.send(item)
