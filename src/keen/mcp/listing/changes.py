"""What changed in a server's tool list between two listings: the ``capability.diff`` event.

When a server's tools are listed again (a change notice, an expired ``ttlMs``, an
explicit refresh, a reconnect), the Manager compares the new list with the previous one
by tool name and tells its change observers with a :class:`ToolsChanged`:

- ``added``: names only in the new list;
- ``removed``: names only in the old list;
- ``changed``: names in both whose definition differs, each with the MCP fields that
  differ (``title``, ``description``, ``inputSchema``, ``outputSchema``, ``annotations``).

A rename is a removal plus an addition here; the pins (``keen.trust.pins``) recognise a
rename with an identical definition by its fingerprint.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

from keen.mcp.types import Tool

__all__ = [
    "CHANGE_FIELDS",
    "ChangeObserver",
    "RefreshReason",
    "ToolChange",
    "ToolsChanged",
    "diff_tools",
]

RefreshReason = Literal["notification", "ttl", "refresh", "reconnect", "sync"]
"""Why the tools were listed again: a change notice from the server (``notifications/tools/
list_changed`` or a ``subscriptions/listen`` event), an expired ``ttlMs``, an explicit
refresh (``Manager.refresh_tools``, ``keen mcp refresh``), a new session after a
reconnect (or after a failed start: every tool added), or a comparison with the skill on disk (``keen mcp refresh``/``watch`` at start)."""

CHANGE_FIELDS = ("title", "description", "inputSchema", "outputSchema", "annotations")
"""The fields of a tool definition compared, in MCP's spelling (tools/list)."""


@dataclass(frozen=True, slots=True)
class ToolChange:
    """One tool whose definition changed: its name and the fields that differ."""

    name: str
    fields: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"tool": self.name, "fields": list(self.fields)}


@dataclass(frozen=True, slots=True)
class ToolsChanged:
    """One server's tool list changed. Names are sorted; ``at`` is UTC.

    ``flags`` maps an added or changed tool's name to the kinds of flags its new text
    raised (``keen.trust.flags``: ``shadowing``, ``override``, ``secrets``, ``hidden``),
    when the emitter scanned it; empty otherwise.
    """

    server: str
    reason: RefreshReason
    added: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    changed: tuple[ToolChange, ...] = ()
    tool_count: int = 0
    protocol_version: str | None = None
    at: datetime = field(default_factory=lambda: datetime.now(UTC))
    flags: dict[str, tuple[str, ...]] = field(default_factory=lambda: dict[str, tuple[str, ...]]())

    def __bool__(self) -> bool:
        return bool(self.added or self.removed or self.changed)

    def to_dict(self) -> dict[str, Any]:
        """The ``capability.diff`` event as ``keen mcp watch --json`` prints it (one line each)."""
        return {
            "type": "capability.diff",
            "source": "mcp.refresh",
            "server": self.server,
            "reason": self.reason,
            "added": list(self.added),
            "removed": list(self.removed),
            "changed": [c.to_dict() for c in self.changed],
            "flags": {name: list(kinds) for name, kinds in sorted(self.flags.items())},
            "tool_count": self.tool_count,
            "protocol_version": self.protocol_version,
            "at": self.at.isoformat().replace("+00:00", "Z"),
        }

    def summary(self) -> str:
        """One line for a person: ``github: +create_label -old_tool ~search (description)``."""
        parts = [f"+{n}" for n in self.added] + [f"-{n}" for n in self.removed]
        parts += [f"~{c.name} ({', '.join(c.fields)})" for c in self.changed]
        flagged = ", ".join(f"{n}: {'/'.join(k)}" for n, k in sorted(self.flags.items()))
        tail = f" [flagged {flagged}]" if flagged else ""
        return f"{self.server}: {' '.join(parts)} ({self.reason}){tail}"


ChangeObserver = Callable[[ToolsChanged], None]
"""Called (in the event loop, synchronously) with each non-empty :class:`ToolsChanged`."""


def _fields(tool: Tool) -> dict[str, Any]:
    return {
        "title": tool.title or None,
        "description": tool.description or "",
        "inputSchema": tool.input_schema or {},
        "outputSchema": tool.output_schema or None,
        "annotations": tool.annotations or None,
    }


def diff_tools(
    server: str,
    before: Iterable[Tool],
    after: Iterable[Tool],
    reason: RefreshReason,
    *,
    protocol_version: str | None = None,
) -> ToolsChanged:
    """Compare two listings of ``server`` by tool name (see the module docstring).

    Returns:
        A :class:`ToolsChanged`; false (``bool()``) when nothing changed.
    """
    old = {t.name: t for t in before}
    new = {t.name: t for t in after}
    changed: list[ToolChange] = []
    for name in sorted(old.keys() & new.keys()):
        a, b = _fields(old[name]), _fields(new[name])
        differ = tuple(f for f in CHANGE_FIELDS if a[f] != b[f])
        if differ:
            changed.append(ToolChange(name, differ))
    return ToolsChanged(
        server=server,
        reason=reason,
        added=tuple(sorted(new.keys() - old.keys())),
        removed=tuple(sorted(old.keys() - new.keys())),
        changed=tuple(changed),
        tool_count=len(new),
        protocol_version=protocol_version,
    )
