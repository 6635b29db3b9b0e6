"""Helpers of ``Manager.reload_server``: one server's entry read again from configs.json.

A session reads configs.json when it starts. A user who fixes an entry (a wrong
``command``, an unset ``${VAR}``), adds a server or removes one, then asks for a reconnect,
means the file as it is now: the Manager takes that one server's current entry and leaves
every other server as it was (docs/architecture.md "Servers and their states").
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Literal, TypeVar

from keen._redact import redactor
from keen.errors import Remedy, ServerNotConfigured
from keen.mcp.types import ServerState, ServerStatus

if TYPE_CHECKING:
    from keen.mcp.config.servers import MCPConfig

__all__ = ["EntryChange", "misconfigured_status", "no_longer_configured", "with_entry_of"]

EntryChange = Literal["unchanged", "changed", "added", "invalid"]
"""What reading a server's entry again found: the same entry; a different one (a fixed or
edited entry, an invalid one made valid) that the next connection attempt uses; a server new
to the session; an entry that is invalid now (state ``config_error``)."""

_V = TypeVar("_V")


def misconfigured_status(name: str, message: str, kinds: tuple[str, str] | None) -> ServerStatus:
    """The status of a server whose configs.json entry is invalid: state ``config_error``, the
    message (redacted: a key may sit in the field the message quotes) and the fix."""
    transport, auth = kinds or ("-", "-")
    return ServerStatus(
        name=name,
        transport=transport,
        auth=auth,
        state=ServerState.CONFIG_ERROR,
        last_error=redactor.redact(message),
        remedy=Remedy.FIX_CONFIG,
    )


def with_entry_of(config: MCPConfig, name: str, fresh: MCPConfig) -> MCPConfig:
    """``config`` with ``name``'s entry, valid or invalid, taken from ``fresh`` (dropped when
    ``fresh`` has none); every other server's entry stays as ``config`` has it. A copy, it
    has no :attr:`~MCPConfig.source_text`: no one text was validated to make it."""
    return config.model_copy(
        update={
            "servers": _put(config.servers, name, fresh.servers.get(name)),
            "invalid": _put(config.invalid, name, fresh.invalid.get(name)),
            "invalid_kinds": _put(config.invalid_kinds, name, fresh.invalid_kinds.get(name)),
        }
    )


def _put(entries: dict[str, _V], name: str, value: _V | None) -> dict[str, _V]:
    # A replaced entry keeps its place (status tables list servers in file order).
    out = {key: entry for key, entry in entries.items() if key != name or value is not None}
    if value is not None:
        out[name] = value
    return out


def no_longer_configured(name: str, path: Path) -> ServerNotConfigured:
    """The error for a server this session had that configs.json no longer lists."""
    return ServerNotConfigured(
        f'MCP server "{name}" is no longer in {path} (it was removed after this session read the '
        "file); add it back to connect it, or check the name.",
        server=name,
    )
