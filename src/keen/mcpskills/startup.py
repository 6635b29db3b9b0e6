"""Glue between a running :class:`~keen.mcp.Manager` and the generated skills.

``sync_from_manager`` is the startup sync (seeds/001 "Startup synchronization");
``connect_server`` is ``keen mcp connect`` / ``/mcp connect`` (seeds/001 "Manual refresh
and authentication"): reconnect one server, then regenerate and enable its skill on
success, or disable it on failure, leaving every other server's skill alone.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import anyio

from keen import paths
from keen.mcp import Manager, ServerState, ServerStatus
from keen.mcpskills.sync import ServerSnapshot, SyncEntry, SyncReport, sync_mcp_skills, sync_server
from keen.skills.config import SkillsConfig

__all__ = ["ConnectOutcome", "connect_server", "snapshots", "sync_from_manager"]


def snapshots(manager: Manager) -> list[ServerSnapshot]:
    """One snapshot per configured server: status, tools (when connected), initialize info."""
    out: list[ServerSnapshot] = []
    for status in manager.servers():
        tools = manager.list_tools(status.name) if status.state is ServerState.CONNECTED else []
        out.append(ServerSnapshot(status, tools, manager.server_info(status.name)))
    return out


async def sync_from_manager(
    manager: Manager, *, skills_root: Path | None = None, force_enable: frozenset[str] = frozenset()
) -> SyncReport:
    """Run the startup sync for every configured server (file work off the event loop)."""
    root = skills_root or paths.skills_dir()
    config = SkillsConfig.load(root / "config.json")
    snaps = snapshots(manager)
    return await anyio.to_thread.run_sync(
        lambda: sync_mcp_skills(snaps, skills_root=root, skills_config=config, force_enable=force_enable)
    )


@dataclass(frozen=True)
class ConnectOutcome:
    """``status`` after the reconnect; ``entry``: what happened to the skill (generated and
    enabled, or disabled with a hint)."""

    status: ServerStatus
    entry: SyncEntry

    @property
    def enabled(self) -> bool:
        return self.entry.enabled


async def connect_server(
    manager: Manager, server: str, *, skills_root: Path | None = None, interactive: bool = True
) -> ConnectOutcome:
    """Reconnect ``server``, then regenerate + enable its skill, or disable it on failure
    (seeds/001 "Manual refresh and authentication"); other skills are left alone.

    Raises ``ServerNotConfigured``. ``interactive`` lets an OAuth server open the browser.
    """
    root = skills_root or paths.skills_dir()
    status = await manager.refresh(server, interactive=interactive)
    config = SkillsConfig.load(root / "config.json")
    tools = manager.list_tools(server) if status.state is ServerState.CONNECTED else []
    snapshot = ServerSnapshot(status, tools, manager.server_info(server))
    entry = await anyio.to_thread.run_sync(
        lambda: sync_server(snapshot, skills_root=root, skills_config=config, force_enable=True)
    )
    return ConnectOutcome(status, entry)
