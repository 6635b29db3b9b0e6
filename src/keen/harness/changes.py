"""What the session log records of servers' tools changing under a running session.

:class:`ChangeLog` subscribes to the Manager's tool changes (``Manager.subscribe_changes``)
and writes each as a ``capability.diff`` with ``source: "mcp.refresh"`` (attribution only:
the visible set follows in the next step's own diff), and, once per server and session, a
``capability.flags`` event naming the tools whose text raised flags (``keen.trust.flags``,
escaped excerpts), so a replay shows what the model was offered.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from keen.harness.events import EventLog
from keen.mcp.listing.changes import ToolsChanged

if TYPE_CHECKING:
    from keen.mcp.manager import Manager

__all__ = ["ChangeLog"]


class ChangeLog:
    """Writes tool changes and first-seen flags to ``log``; ``step()`` gives the current step."""

    def __init__(self, log: EventLog, manager: Manager | None, step: Callable[[], int]) -> None:
        self.log = log
        self.manager = manager
        self._step = step
        self._flagged: set[str] = set()
        self._unsubscribe = manager.subscribe_changes(self._changed) if manager is not None else None

    def _changed(self, change: ToolsChanged) -> None:
        self.log.emit(**{**change.to_dict(), "step": self._step()})

    def log_flags(self, connected: tuple[str, ...]) -> None:
        """A ``capability.flags`` event for each newly connected server with flagged tools."""
        fresh = [name for name in connected if name not in self._flagged]
        if self.manager is None or not fresh:
            return
        from keen.trust.flags import scan_servers

        self._flagged.update(fresh)
        found = scan_servers({name: self.manager.list_tools(name) for name in connected})
        for server in fresh:
            if server in found:
                flags = {tool: [f.to_dict() for f in fl] for tool, fl in sorted(found[server].items())}
                self.log.emit("capability.flags", step=self._step(), server=server, flags=flags)

    def close(self) -> None:
        """Stop listening (safe to call twice)."""
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None
