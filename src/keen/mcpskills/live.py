"""Live refresh: keep each server's generated skill in line with its tools while Keen runs.

:class:`LiveSkills` subscribes to a running :class:`~keen.mcp.Manager`'s tool changes
(``Manager.subscribe_changes``). For each change it regenerates that server's
``mcp:<server>`` skill with the sync rules (:func:`keen.mcpskills.sync.sync_server`),
atomically (a reader opens a whole old or a whole new skill, never a mix), in a worker
thread so the event loop keeps serving calls. Changes that arrive while a server's skill
is being written are coalesced: the next write takes the server's latest list. Other
servers' skills are never touched. ``on_synced(change, entry)`` is told after the skill
on disk follows the change (``keen mcp watch`` prints then).

What the server says of itself (``serverInfo`` and ``instructions``: SKILL.md and the
catalog line show them) is followed too: a reconnect that changes only that brings no tool
change, so at each (re)connect the info as shown (:func:`keen.mcp.Manager.server_info`, the
pins' view: under ``quarantine`` changed info stays as pinned, and is said to be held) is
compared with what the skill was last written from, and the skill regenerated when it
differs (``on_info_synced(server, entry)`` is told then).

Use it inside a task group::

    async with LiveSkills(manager, skills_root=root) as live:
        ...  # skills follow the servers until the block ends
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING

import anyio
import anyio.abc

from keen import paths
from keen._tasks import leave_task_group
from keen.errors import KeenError
from keen.mcp.listing.changes import ToolsChanged
from keen.mcp.manager import Manager
from keen.mcp.types import ServerState, ServerStatus, Tool

if TYPE_CHECKING:
    # The sync and its marker models (pydantic) load at the first write, not with this
    # module: `keen chat` enters LiveSkills before its first prompt.
    from keen.mcp.listing.views import ToolsView
    from keen.mcpskills.sync import ServerSnapshot, SyncEntry

__all__ = ["InfoSyncedObserver", "LiveSkills", "SyncedObserver", "disk_tools", "snapshot", "snapshot_from"]

logger = logging.getLogger(__name__)

SyncedObserver = Callable[[ToolsChanged, "SyncEntry | None"], None]
"""Told each change once its skill was written (``entry``; ``None`` when writing failed)."""
InfoSyncedObserver = Callable[[str, "SyncEntry | None"], None]
"""Told ``(server, entry)`` once a skill was written for a changed server info."""
_ShownInfo = tuple[str, str | None, str, str | None, bool]
"""What a skill shows of a server's info: name, title, version, instructions, and whether
it is held for review."""


def snapshot(manager: Manager, server: str) -> ServerSnapshot:
    """One server as the Manager sees it now: status, tools (when connected), info, description."""
    status = manager.status(server)
    view = manager.view(server) if status.state is ServerState.CONNECTED and status.enabled else None
    return snapshot_from(manager, status, view)


def snapshot_from(manager: Manager, status: ServerStatus, view: ToolsView | None) -> ServerSnapshot:
    """``status``'s server as a :class:`~keen.mcpskills.sync.ServerSnapshot`, with ``view``
    (the Manager's view of its tools through the trust, or ``None`` when it has no tools to
    show): the tools shown, the invalid ones, the user's description, what is held."""
    from keen.mcpskills.sync import ServerSnapshot, held_info

    server = status.name
    entry = manager.config.servers.get(server)
    return ServerSnapshot(
        status,
        list(view.tools) if view is not None else [],
        manager.server_info(server),
        [(t.name, t.reason) for t in manager.invalid_tools(server)],
        entry.description if entry is not None else None,
        view.note if view is not None else "",
        tuple(c.name for c in view.held) if view is not None else (),
        manager.config_name,
        held_info=held_info(view),
    )


def _info_shown_by(snap: ServerSnapshot) -> _ShownInfo | None:
    """What ``snap``'s skill shows of the server's info (``None``: it has none)."""
    info = snap.info
    if info is None:
        return None
    return info.name, info.title, info.version, info.instructions, snap.held_info


def disk_tools(skills_root: Path, server: str) -> list[Tool] | None:
    """The tools as ``server``'s generated skill on disk has them (from ``schemas/*.json``:
    name, title, description, inputSchema, annotations; no outputSchema), or ``None`` when
    there is no generated skill. Unreadable schema files are skipped."""
    from keen.mcpskills import _swap

    current = _swap.inspect(skills_root, server)
    if current.kind not in ("link", "dir") or current.target is None:
        return None
    tools: list[Tool] = []
    # Through the versioned dir the link points at: one whole version, even mid-swap.
    for path in sorted((current.target / "schemas").rglob("*.json")):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError):
            continue
        if isinstance(data, dict) and isinstance(data.get("name"), str):
            tools.append(
                Tool(
                    server=server,
                    name=data["name"],
                    description=str(data.get("description") or ""),
                    input_schema=data.get("inputSchema") or {},
                    title=data.get("title"),
                    annotations=data.get("annotations"),
                )
            )
    return tools


class LiveSkills:
    """Regenerates a server's skill whenever its tools, or the info it shows, change; see
    the module docstring.

    Args:
        manager: a started Manager.
        skills_root: the skills directory; default ``$KEEN_HOME/skills``.
        on_synced: told ``(change, entry)`` after each change reached the disk.
        on_info_synced: told ``(server, entry)`` after a changed server info reached the disk.
    """

    def __init__(
        self,
        manager: Manager,
        *,
        skills_root: Path | None = None,
        on_synced: SyncedObserver | None = None,
        on_info_synced: InfoSyncedObserver | None = None,
    ) -> None:
        self.manager = manager
        self.skills_root = skills_root or paths.skills_dir()
        self.on_synced = on_synced
        self.on_info_synced = on_info_synced
        self._pending: dict[str, list[ToolsChanged]] = {}
        self._connected: set[str] = set()
        self._shown: dict[str, _ShownInfo | None] = {}
        """Per server, the info the skill was last written from: for a server connected when
        this starts, the info then (its skill is the startup sync's business); set by a write
        only once it succeeded, so a failed one is tried again at the next look. A server not
        here (down at start) gets its skill written at its first connect: the skill on disk
        may be from info it has since changed."""
        self._wake = anyio.Event()
        self._tg: anyio.abc.TaskGroup | None = None
        self._unsubscribe: list[Callable[[], None]] = []
        self.writes = 0
        """Skill writes begun (one per batch of coalesced changes), counted as each starts,
        before it waits on its thread: once every task is blocked, a write that is due has
        been counted."""

    async def __aenter__(self) -> LiveSkills:
        # The skills on disk were written from the info as it is now (the startup sync).
        for status in self.manager.servers():
            if status.state is ServerState.CONNECTED and status.enabled:
                try:
                    self._shown[status.name] = _info_shown_by(snapshot(self.manager, status.name))
                except KeenError:
                    continue
        self._tg = anyio.create_task_group()
        await self._tg.__aenter__()
        self._tg.start_soon(self._run, name="keen-live-skills")
        self._unsubscribe = [
            self.manager.subscribe_changes(self._changed),
            self.manager.subscribe(self._state),
        ]
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        for unsubscribe in self._unsubscribe:
            unsubscribe()
        assert self._tg is not None
        self._tg.cancel_scope.cancel()
        # The body's exception propagates as it was raised (a caller's `except KeenError`
        # around `open_runtime(sync=True)` matches it); with the writer's error, both.
        await leave_task_group(self._tg, exc)

    def _changed(self, change: ToolsChanged) -> None:
        self._pending.setdefault(change.server, []).append(change)
        self._wake.set()

    def _state(self, status: ServerStatus) -> None:
        # A (re)connect brings a new initialize: its info is looked at in the writer task,
        # after any tools change of the same reconnect (which writes it already).
        if status.state is ServerState.CONNECTED:
            self._connected.add(status.name)
            self._wake.set()

    def _look(self, server: str) -> bool:
        """Whether ``server``'s skill is to be written again for its info: the info it shows
        differs from the one the skill was last written from, or none was (a server down
        when this started, whose skill on disk may be older than its info). Records nothing:
        :meth:`_write` does, once the skill is written."""
        try:
            now = _info_shown_by(snapshot(self.manager, server))
        except KeenError:
            return False
        if server not in self._shown:
            return True
        return now is not None and self._shown[server] != now

    async def _run(self) -> None:
        while True:
            await self._wake.wait()
            self._wake = anyio.Event()
            while self._pending or self._connected:
                while self._pending:
                    server = next(iter(self._pending))
                    changes = self._pending.pop(server)
                    entry = await self._write(server)
                    for change in changes:
                        if self.on_synced is not None:
                            try:
                                self.on_synced(change, entry)
                            except Exception:
                                logger.exception("live skills: observer failed for %s", server)
                if self._connected:
                    server = self._connected.pop()
                    if not self._look(server):
                        continue
                    entry = await self._write(server)
                    # A first connect's write that found the skill as it was changed nothing to say.
                    if self.on_info_synced is not None and (entry is None or entry.action != "unchanged"):
                        try:
                            self.on_info_synced(server, entry)
                        except Exception:
                            logger.exception("live skills: observer failed for %s", server)

    async def _write(self, server: str) -> SyncEntry | None:
        try:
            snap = snapshot(self.manager, server)
        except KeenError as exc:
            logger.warning("live skills: %s not regenerated: %s", server, exc)
            return None
        root = self.skills_root
        from keen.mcpskills.sync import sync_server

        self.writes += 1
        try:
            entry = await anyio.to_thread.run_sync(
                lambda: sync_server(snap, skills_root=root)  # reads config.json under the lock
            )
        except (KeenError, OSError) as exc:  # the skills folder unwritable: said, tried at the next look
            logger.warning("live skills: %s not regenerated: %s", server, exc)
            return None
        if entry.action != "error":  # written (or found as it is): no need to write it again
            self._shown[server] = _info_shown_by(snap)
        logger.debug("live skills: mcp:%s %s", server, entry.action)
        return entry
