"""Glue between a running :class:`~keen.mcp.Manager` and the generated skills.

``snapshots`` freezes every configured server's state and tools; ``sync_from_manager``
runs the startup sync (:mod:`keen.mcpskills.sync`) on them. ``keen.runtime`` calls it
for every front end; its ``connect_server`` reconnects one server and re-syncs its skill.
"""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path

import anyio

from keen import paths
from keen.errors import KeenError
from keen.mcp.manager import Manager
from keen.mcp.types import ServerState
from keen.mcpskills.live import snapshot_from
from keen.mcpskills.sync import ServerSnapshot, SyncReport, sync_mcp_skills, sync_server

__all__ = ["snapshots", "sync_from_manager"]


def snapshots(manager: Manager) -> list[ServerSnapshot]:
    """One snapshot per configured server: status, tools (when connected), initialize info."""
    out: list[ServerSnapshot] = []
    for status in manager.servers():
        view = manager.view(status.name) if status.state is ServerState.CONNECTED else None
        out.append(snapshot_from(manager, status, view))
    return out


async def sync_from_manager(
    manager: Manager,
    *,
    skills_root: Path | None = None,
    force_enable: frozenset[str] = frozenset(),
    servers: Collection[str] | None = None,
) -> SyncReport:
    """Run the startup sync for every configured server (file work off the event loop).

    A Manager started with ``only`` syncs just the servers it started: the others were not
    asked for (``configured``), so their skills are left as they are, neither disabled nor
    removed.

    Args:
        manager: a started Manager (servers still connecting are synced as not connected).
        skills_root: the skills directory; default ``$KEEN_HOME/skills``.
        force_enable: servers whose skill is enabled even if the user disabled it.
        servers: sync just these servers' skills and leave every other skill alone (a
            session whose config is not configs.json's); ``None``: the whole configuration.

    Returns:
        One entry per configured server and per removed one.

    Raises:
        SkillError: a skill or the skills config could not be written.
        KeenError: the Manager was never started, or was closed (nothing is written).
    """
    if manager.closed:
        # Its servers all read as disconnected: the sync disabled every skill.
        raise KeenError(
            "sync_from_manager() has no server to sync: this Manager was closed; sync while it "
            "runs (inside its async with), or make a new one (Manager(...))."
        )
    if not manager.started:
        # Before start() a Manager lists no server: the sync took every configured server's
        # skill for one whose server was removed, and deleted it.
        raise KeenError(
            "sync_from_manager() has no server to sync: this Manager has not started its servers; "
            "start it first (async with Manager(...) as manager, or await manager.start()), and "
            "wait for them (await manager.wait_ready(seconds))."
        )
    root = skills_root or paths.skills_dir()
    snaps = snapshots(manager)
    if manager.only is not None:
        # The servers left out were never started (``configured``): not this sync's to touch,
        # even when ``servers`` names them (a session's own config, opened with ``only``).
        started = {s.status.name for s in snaps if s.status.state is not ServerState.CONFIGURED}
        started |= manager.only
        servers = started if servers is None else started & set(servers)
    if servers is not None:
        chosen = [s for s in snaps if s.status.name in servers]
        return await anyio.to_thread.run_sync(
            lambda: SyncReport(
                root,
                [
                    sync_server(s, skills_root=root, force_enable=s.status.name in force_enable)
                    for s in chosen
                ],
            )
        )
    # The sync reads config.json itself, under the skills-dir lock (no update lost).
    return await anyio.to_thread.run_sync(
        lambda: sync_mcp_skills(snaps, skills_root=root, force_enable=force_enable)
    )
