"""Glue between a running :class:`~keen.mcp.Manager` and the generated skills.

``sync_from_manager`` is the startup sync (seeds/001 "Startup synchronization");
``connect_server`` is ``keen mcp connect`` / ``/mcp connect`` (seeds/001 "Manual refresh
and authentication"): reconnect one server, then regenerate and enable its skill on
success, or disable it on failure, leaving every other server's skill alone.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import anyio

from keen import paths
from keen.errors import KeenError
from keen.mcp import Manager, ServerState, ServerStatus
from keen.mcp.auth import authorize_interactively
from keen.mcp.config import HttpServerConfig, OAuthAuth
from keen.mcpskills.sync import ServerSnapshot, SyncEntry, SyncReport, sync_mcp_skills, sync_server
from keen.skills.config import SkillsConfig

__all__ = ["ConnectOutcome", "connect_server", "snapshots", "sync_from_manager"]


def snapshots(manager: Manager) -> list[ServerSnapshot]:
    """One snapshot per configured server: status, tools (when connected), initialize info."""
    out: list[ServerSnapshot] = []
    for status in manager.servers():
        tools = manager.list_tools(status.name) if status.state is ServerState.CONNECTED else []
        invalid = [(t.name, t.reason) for t in manager.invalid_tools(status.name)]
        out.append(ServerSnapshot(status, tools, manager.server_info(status.name), invalid))
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
    manager: Manager,
    server: str,
    *,
    skills_root: Path | None = None,
    sign_in: bool = True,
    on_authorization_url: Callable[[str, bool], None] | None = None,
) -> ConnectOutcome:
    """Reconnect ``server``, then regenerate + enable its skill, or disable it on failure
    (seeds/001 "Manual refresh and authentication"); other skills are left alone.

    For an OAuth server with ``sign_in``, first clear its stored token and run the browser
    sign-in (``authorize_interactively``: ``on_authorization_url(url, opened)`` lets a CLI print the URL).
    Raises ``ServerNotConfigured``; a failed sign-in raises its ``AuthRequired`` /
    ``AuthFailed`` after the skill has been disabled.
    """
    root = skills_root or paths.skills_dir()
    config_entry = manager.config.servers.get(server)
    sign_in_error: KeenError | None = None
    if sign_in and isinstance(config_entry, HttpServerConfig) and isinstance(config_entry.auth, OAuthAuth):
        try:
            await authorize_interactively(server, config_entry, on_authorization_url=on_authorization_url)
        except KeenError as exc:
            sign_in_error = exc
    status = await manager.refresh(server)
    config = SkillsConfig.load(root / "config.json")
    tools = manager.list_tools(server) if status.state is ServerState.CONNECTED else []
    invalid = [(t.name, t.reason) for t in manager.invalid_tools(server)]
    snapshot = ServerSnapshot(status, tools, manager.server_info(server), invalid)
    entry = await anyio.to_thread.run_sync(
        lambda: sync_server(snapshot, skills_root=root, skills_config=config, force_enable=True)
    )
    if sign_in_error is not None and status.state is not ServerState.CONNECTED:
        raise sign_in_error
    return ConnectOutcome(status, entry)
