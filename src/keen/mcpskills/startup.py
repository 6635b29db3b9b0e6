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
from keen.mcpskills.generate import GenerationReport, generate_skill, skill_name
from keen.mcpskills.sync import ServerSnapshot, SyncReport, sync_mcp_skills
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
    """``status`` after the reconnect; ``generation`` when the skill was regenerated;
    ``enabled``: the skill's enabled flag now; ``skill_path``."""

    status: ServerStatus
    enabled: bool
    skill_path: Path
    generation: GenerationReport | None = None


async def connect_server(
    manager: Manager, server: str, *, skills_root: Path | None = None, interactive: bool = True
) -> ConnectOutcome:
    """Reconnect ``server``, then regenerate + enable its skill, or disable it on failure.

    Raises ``ServerNotConfigured``. ``interactive`` lets an OAuth server open the browser.
    """
    root = skills_root or paths.skills_dir()
    status = await manager.refresh(server, interactive=interactive)
    config = SkillsConfig.load(root / "config.json")
    name = skill_name(server)
    generation: GenerationReport | None = None
    if status.state is ServerState.CONNECTED:
        tools = manager.list_tools(server)
        info = manager.server_info(server)
        generation = await anyio.to_thread.run_sync(lambda: generate_skill(root, status, tools, info=info))
        config.set_enabled(name, True)
    else:
        config.set_enabled(name, False)
    await anyio.to_thread.run_sync(config.save)
    return ConnectOutcome(status, config.is_enabled(name), root / name, generation)
