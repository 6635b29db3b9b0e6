"""Keen's own views of MCP objects: plain, frozen, JSON-ready.

The SDK's pydantic models stay inside ``keen.mcp``; callers see these.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any

from keen._terminal import name_in_message
from keen.errors import Remedy, RemoteToolError

__all__ = [
    "SERVER_NAME_RE",
    "ServerInfo",
    "ServerState",
    "ServerStatus",
    "Tool",
    "ToolResult",
    "TransportFactory",
    "media_type",
    "named_type",
    "tools_hash",
]

SERVER_NAME_RE = re.compile(r"[A-Za-z0-9_-]{1,64}")
"""A valid server name (use ``fullmatch``): what configs.json accepts and what fits an
``mcp:<server>`` skill name and a file name on every platform."""

TransportFactory = Callable[[], AbstractAsyncContextManager[Any]]
"""Opens one connection's ``(read_stream, write_stream)`` pair, as the SDK's transports yield it:
what :class:`keen.mcp.Manager` uses instead of a server's configured transport when given one
(an in-process server, see :func:`keen.mcp.in_memory_transport`)."""


class ServerState(StrEnum):
    """Runtime state of one configured server (docs/architecture.md "Servers and their states")."""

    CONFIGURED = "configured"
    CONNECTING = "connecting"
    CONNECTED = "connected"
    DISCONNECTED = "disconnected"
    AUTH_REQUIRED = "auth_required"
    AUTH_FAILED = "auth_failed"
    CONFIG_ERROR = "config_error"
    """Its configs.json entry is invalid (``last_error`` says what to fix); never connects."""


# A media type as RFC 6838 section 4.2 names one (type "/" subtype), parameters cut off.
_MEDIA_TYPE = re.compile(r"[\w.+-]+/[\w.+-]+", re.ASCII)


def media_type(mime: object) -> str | None:
    """The media type of a content block's ``mimeType``, lower-cased, its parameters
    (``; charset=...``) and surrounding spaces cut as a host reads it (RFC 9110 section
    8.3.1), or ``None`` when it is not a string or not ``type/subtype``."""
    if not isinstance(mime, str):
        return None
    head = mime.split(";", 1)[0].strip().lower()
    return head if _MEDIA_TYPE.fullmatch(head) else None


def named_type(mime: object) -> str:
    """A server's ``mimeType`` as Keen's text names it: a plain ``type/subtype`` as it is,
    anything else as a short escaped repr, so it can neither run long nor read as a line of
    Keen's own."""
    if isinstance(mime, str) and _MEDIA_TYPE.fullmatch(mime):
        return mime
    if isinstance(mime, str) and len(mime) > 40:
        return ascii(mime[:40]) + "..."
    return ascii(mime)


@dataclass(frozen=True, slots=True)
class ServerInfo:
    """What a server said of itself at initialize: ``serverInfo`` and ``instructions``."""

    name: str = ""
    version: str = ""
    title: str | None = None
    instructions: str | None = None
    protocol_version: str | None = None


@dataclass(frozen=True, slots=True)
class ServerStatus:
    """A snapshot of one server. ``last_error`` is already redacted; times are UTC."""

    name: str
    transport: str
    auth: str
    state: ServerState
    enabled: bool = True
    url: str | None = None
    last_connected_at: datetime | None = None
    last_refresh_at: datetime | None = None
    last_error: str = ""
    tool_count: int = 0
    info: ServerInfo | None = None
    """What the server said at initialize as it sent it, unvetted: what a model or host may
    read of it is ``Manager.server_info`` (under pinning, as pinned)."""
    remedy: Remedy | None = None
    """What would bring the server back (sign in, reconnect, enable it), or ``None``."""
    list_ttl_ms: int | None = None
    """The last tools/list's ``ttlMs`` (2026-07-28 caching hint; ``None`` when the server gave none)."""
    cache_scope: str | None = None
    """The last tools/list's ``cacheScope``: ``public`` or ``private`` (2026-07-28), else ``None``."""

    @property
    def protocol_version(self) -> str | None:
        """The negotiated MCP protocol version (``2026-07-28``, ``2025-11-25``, ...), or ``None``
        when the server never connected."""
        return self.info.protocol_version if self.info else None

    def to_dict(self) -> dict[str, Any]:
        """The ``keen mcp list --json`` object: name, transport, auth, state, tool_count, last_error,
        enabled, the two timestamps (ISO 8601 or null), protocol_version, and the tool list's
        2026-07-28 caching hints ``ttl_ms`` and ``cache_scope`` (null when absent)."""
        return {
            "name": self.name,
            "transport": self.transport,
            "auth": self.auth,
            "state": self.state.value,
            "tool_count": self.tool_count,
            "last_error": self.last_error,
            "enabled": self.enabled,
            "last_connected_at": _iso(self.last_connected_at),
            "last_refresh_at": _iso(self.last_refresh_at),
            "protocol_version": self.protocol_version,
            "ttl_ms": self.list_ttl_ms,
            "cache_scope": self.cache_scope,
        }


def _iso(value: datetime | None) -> str | None:
    return value.isoformat().replace("+00:00", "Z") if value else None


@dataclass(frozen=True, slots=True)
class Tool:
    """One tool from ``tools/list``. ``input_schema`` is ``{}`` when the server gave none.

    ``annotations_trusted`` is Keen's judgement, not a wire field: False when the server's
    annotations are claims only (``keen.trust.pins.pinned_view``), so a ``readOnlyHint``
    grants nothing (MCP 2025-11-25 "Tool annotations").
    """

    server: str
    name: str
    description: str = ""
    input_schema: dict[str, Any] = field(default_factory=dict)
    title: str | None = None
    annotations: dict[str, Any] | None = None
    output_schema: dict[str, Any] | None = None
    annotations_trusted: bool = True

    @property
    def read_only(self) -> bool:
        """True when the tool may run as read-only: annotated ``readOnlyHint`` by a server
        whose annotations are trusted."""
        return self.annotations_trusted and bool((self.annotations or {}).get("readOnlyHint"))

    def to_dict(self) -> dict[str, Any]:
        """MCP wire shape: name, title, description, inputSchema, annotations, outputSchema."""
        out: dict[str, Any] = {"name": self.name}
        if self.title:
            out["title"] = self.title
        out["description"] = self.description
        out["inputSchema"] = self.input_schema
        if self.annotations:
            out["annotations"] = self.annotations
        if self.output_schema:
            out["outputSchema"] = self.output_schema
        return out


def tools_hash(tools: list[Tool]) -> str:
    """``sha256:<hex>`` of the canonical JSON of a tool list (order-independent)."""
    import hashlib  # here: loading OpenSSL costs every CLI start otherwise

    canon = sorted(json.dumps(t.to_dict(), sort_keys=True, separators=(",", ":")) for t in tools)
    return "sha256:" + hashlib.sha256("\n".join(canon).encode()).hexdigest()


def _resource_note(uri: object) -> str:
    # The URI is the server's: a line break in it would close Keen's bracket and go on in
    # Keen's voice, and it may run to megabytes. A block without one says so by saying none.
    return f"[resource {name_in_message(str(uri))}]" if uri else "[resource]"


@dataclass(frozen=True, slots=True)
class ToolResult:
    """A ``tools/call`` result. ``content`` items are MCP content blocks as dicts
    (``{"type": "text", "text": ...}``, image, audio, resource_link, resource)."""

    server: str
    tool: str
    content: list[dict[str, Any]] = field(default_factory=list)
    structured_content: Any = None
    is_error: bool = False

    @property
    def text(self) -> str:
        """Text blocks joined by newlines; other blocks summarized as ``[image/png, 1234 bytes]``."""
        parts: list[str] = []
        for block in self.content:
            kind = block.get("type")
            if kind == "text":
                parts.append(str(block.get("text", "")))
            elif kind in ("image", "audio"):
                size = len(block.get("data", "")) * 3 // 4
                parts.append(f"[{kind} {named_type(block.get('mimeType', ''))}, {size} bytes]")
            elif kind == "resource_link":
                parts.append(_resource_note(block.get("uri")))
            elif kind == "resource":
                res = block.get("resource", {})
                parts.append(str(res["text"]) if "text" in res else _resource_note(res.get("uri")))
        return "\n".join(parts)

    def to_dict(self) -> dict[str, Any]:
        """MCP wire shape: content, structuredContent (when present), isError."""
        out: dict[str, Any] = {"content": self.content, "isError": self.is_error}
        if self.structured_content is not None:
            out["structuredContent"] = self.structured_content
        return out

    def raise_for_error(self) -> ToolResult:
        """Raise :class:`~keen.errors.RemoteToolError` when the tool reported ``isError``.

        Calls return a failed tool's result (the model reads it); a program that would rather
        get an exception calls this, as with ``httpx.Response.raise_for_status``.

        Returns:
            ``self`` when the call succeeded.

        Raises:
            RemoteToolError: the tool ran and reported failure (``result`` is this object).
        """
        if self.is_error:
            raise RemoteToolError(
                f'"{self.server}/{name_in_message(self.tool)}" reported an error: {self.text or "(no text)"}',
                server=self.server,
                tool=self.tool,
                result=self,
            )
        return self
