"""Startup sync: MCP server states -> generated skills and the skills config.

The rules of docs/architecture.md "Startup sync":

========================================  ===============================================
server (snapshot)                         skill
========================================  ===============================================
connected                                 generate/refresh; an explicit user disable stays
connected, in ``force_enable``            generate/refresh and enable (a manual reconnect)
``"enabled": false`` in configs.json      disable; files kept
disconnected, configured, connecting      disable; files kept, marker status updated
auth_required / auth_failed               same, with the remedy ``Remedy.SIGN_IN``
config_error                              same, with the remedy ``Remedy.FIX_CONFIG``
connected, lists no tools                 disable (marker status ``no_tools``); when the
                                          pins hold every tool, their note is the hint
an invalid server name                    reported, nothing on disk touched
not in the snapshots any more             forget in skills config, delete the managed dir;
                                          a user's own ``mcp:<x>`` dir is kept and reported
========================================  ===============================================

A failed tool listing arrives as a disconnected server, so its old files stay, disabled.

Sync-made disables are undone by sync. Writing ``false`` for every outage would hide a
server for good after one bad start, although the model should only miss the
skill until the server reconnects. So when sync disables a skill it records that, with
the value the user had before, in ``skills/.keen-mcp-sync.json``; when the server is
back (connected, or enabled again in configs.json) sync restores that value. A
``false`` that sync did not write is the user's and is never overridden, except by
``force_enable``. If the user changes the value while it is recorded, the record is
dropped and the user's value wins.
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

from keen._fs import BrokenLink, atomic_write_bytes, link_target
from keen._redact import redactor
from keen.errors import Remedy, SkillError
from keen.mcp import SERVER_NAME_RE, ServerInfo, ServerState, ServerStatus, Tool
from keen.mcpskills import _swap
from keen.mcpskills._layout import server_of_dir
from keen.mcpskills._models import AutoDisabled, SyncState, ValidationError
from keen.mcpskills._render import MAX_SKIPPED_LISTED, dump_json
from keen.mcpskills.generate import GenerationReport, generate_skill, skill_name
from keen.skills.config import SkillsConfig

__all__ = [
    "SYNC_STATE_FILE",
    "ServerSnapshot",
    "SyncAction",
    "SyncEntry",
    "SyncReport",
    "held_info",
    "sync_mcp_skills",
    "sync_server",
]

logger = logging.getLogger(__name__)

SYNC_STATE_FILE = ".keen-mcp-sync.json"
"""In the skills dir: ``{"format": 1, "auto_disabled": {"mcp:x": {"previous": bool|null, "reason": s}}}``."""

SyncAction = Literal["generated", "unchanged", "disabled", "removed", "kept_unmanaged", "error"]

# Versioned and build dirs of the atomic swap: a removed server may have left only these.
# ("mcp:" is "mcp_" on Windows: keen.paths.skill_dir_name.)
_DEBRIS_RE = re.compile(r"\.mcp[:_]([A-Za-z0-9_-]{1,64})\.[0-9a-f]{12}(?:\.tmp|\.link|\.old)?")
_AUTH_STATES = (ServerState.AUTH_REQUIRED, ServerState.AUTH_FAILED)


def held_info(view: object | None) -> bool:
    """Whether a server's view (``keen.mcp.listing.views.ToolsView``) holds what the server
    says of itself for review (Keen's trust: ``keen.trust.pins.PinnedView.held_info``); a
    view without it (a third-party trust) holds none."""
    return view is not None and getattr(view, "held_info", None) is not None


@dataclass(frozen=True)
class ServerSnapshot:
    """One configured server as the Manager sees it after startup: its status, its last
    tool list (empty unless connected) and its initialize info."""

    status: ServerStatus
    tools: list[Tool] = field(default_factory=lambda: list[Tool]())
    info: ServerInfo | None = None
    invalid: list[tuple[str, str]] = field(default_factory=lambda: list[tuple[str, str]]())
    """``(name, reason)`` of listed tools the MCP schema rejected (not in ``tools``)."""
    description: str | None = None
    """The server's ``description`` in configs.json: its catalog line when set."""
    held: str = ""
    """The pins' note on tools held for review (``keen.trust.pins.PinnedView.note``), or ""."""
    held_tools: tuple[str, ...] = ()
    """The names of those tools (``keen.mcp.listing.views.ToolsView.held``)."""
    config_name: str = "configs.json"
    """Where the server's entry is, as hints name it (``keen.mcp.Manager.config_name``: a
    config given in code is no configs.json)."""
    held_info: bool = False
    """Whether the server's info is held for review (``info`` is then as it was pinned):
    :func:`held_info`."""


@dataclass(frozen=True)
class SyncEntry:
    """The outcome for one server. ``state``: the server state, or ``removed``.
    ``enabled``: the skill's enabled flag after the sync. ``hint``: what the user can
    do, or ""; ``remedy``: the action a front end words as a command (sign in, reconnect,
    enable the skill), or ``None``. ``rejected``: display names of tools without a schema. ``error``: why
    generation failed (redacted), or ""."""

    server: str
    state: str
    action: SyncAction
    enabled: bool
    hint: str = ""
    skill_path: str | None = None
    rejected: list[str] = field(default_factory=lambda: list[str]())
    error: str = ""
    rejected_count: int = 0
    """How many tools got no schema; ``rejected`` names the first ``MAX_SKIPPED_LISTED``."""
    remedy: Remedy | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "server": self.server,
            "skill": skill_name(self.server),
            "state": self.state,
            "action": self.action,
            "enabled": self.enabled,
            "hint": self.hint,
            "skill_path": self.skill_path,
            "rejected": list(self.rejected),
            "rejected_count": max(self.rejected_count, len(self.rejected)),
            "error": self.error,
            "remedy": self.remedy.value if self.remedy else None,
        }


@dataclass(frozen=True)
class SyncReport:
    """All entries of one sync, sorted by server; ``to_dict()`` is the ``--json`` shape."""

    skills_root: Path
    entries: list[SyncEntry]

    def get(self, server: str) -> SyncEntry | None:
        return next((e for e in self.entries if e.server == server), None)

    def to_dict(self) -> dict[str, Any]:
        return {"skills_root": str(self.skills_root), "servers": [e.to_dict() for e in self.entries]}


class _AutoDisabled:
    """The record of skills sync disabled, with the user's value before (see module doc)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        state = SyncState()
        try:
            state = SyncState.model_validate_json(path.read_bytes())
        except FileNotFoundError:
            pass
        except (OSError, ValidationError) as exc:
            # Losing the record only means a sync-made disable looks like the user's.
            logger.warning("ignoring unreadable %s (%s)", path, _first_problem(exc))
        self.records: dict[str, AutoDisabled] = dict(state.auto_disabled)
        self._original = self._dump()

    def _dump(self) -> str:
        return json.dumps({k: v.model_dump() for k, v in self.records.items()}, sort_keys=True)

    def disable(self, config: SkillsConfig, name: str, reason: str) -> None:
        explicit = config.explicit(name)
        if explicit is False:
            if name in self.records:
                self.records[name].reason = reason
            return  # the user's own disable, or ours already
        self.records[name] = AutoDisabled(previous=explicit, reason=reason)
        config.set_enabled(name, False)

    def restore(self, config: SkillsConfig, name: str) -> None:
        record = self.records.pop(name, None)
        if record is None or config.explicit(name) is not False:
            return  # never ours, or the user changed it meanwhile
        previous = record.previous
        if previous is None:
            config.forget(name)
        else:
            config.set_enabled(name, bool(previous))

    def drop(self, name: str) -> None:
        self.records.pop(name, None)

    def save(self) -> None:
        if self._dump() == self._original:
            return
        state = SyncState(auto_disabled=dict(sorted(self.records.items())))
        atomic_write_bytes(self.path, dump_json(state.model_dump(mode="json")))


def _first_problem(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        first = exc.errors()[0]
        return f"{'.'.join(str(p) for p in first['loc']) or '(file)'}: {first['msg']}"
    return str(exc)


def _failure_hint(status: ServerStatus, config_name: str) -> tuple[str, Remedy | None]:
    if status.state in _AUTH_STATES:
        return "", status.remedy or Remedy.SIGN_IN
    if status.state == ServerState.CONNECTING:
        return "still connecting; the skill is enabled once it connects", None
    if status.state == ServerState.CONFIG_ERROR:
        return f"fix its entry in {config_name} as the error says", Remedy.FIX_CONFIG
    return "fix the server", Remedy.RECONNECT


_DISK_HINT = "check free space and permissions of the skills directory, then restart Keen"


def _mark(
    server: str, current: _swap.Current, changes: dict[str, Any], fsync: bool, batch: _swap.Batch | None
) -> None:
    """Update a managed skill's marker; a write failure only loses the status note, so log it."""
    try:
        if batch is None:
            _swap.update_marker(current, changes, fsync=fsync)
        else:
            batch.add_marker(server, current, changes)
    except OSError as exc:
        logger.warning("could not update %s: %s", current.path, exc)


_Outcome = GenerationReport | SkillError | OSError
"""What writing one server's skill came to: its report, or why it failed."""


_Step = Literal["bad_name", "off", "down", "no_tools", "write"]
"""What the sync does for one server: report an invalid name and touch nothing; disable
(server disabled in configs.json, not connected, or connected with no tools); or write
its skill."""


def _plan(snap: ServerSnapshot) -> _Step:
    """The rules of the module doc for one server, written once: pure (a snapshot is
    frozen), so the batch asks it which skills it writes (``"write"``) before any entry is
    made, and :func:`_entry` asks it again and gets the same answer."""
    status = snap.status
    if not SERVER_NAME_RE.fullmatch(status.name):
        return "bad_name"
    if not status.enabled:
        return "off"
    if status.state != ServerState.CONNECTED:
        return "down"
    if not snap.tools and not snap.invalid:
        return "no_tools"
    return "write"


def _generate(
    snap: ServerSnapshot, root: Path, now: datetime | None, fsync: bool, batch: _swap.Batch | None
) -> _Outcome:
    try:
        return generate_skill(
            root,
            snap.status,
            snap.tools,
            info=snap.info,
            now=now,
            fsync=fsync,
            invalid=snap.invalid,
            description=snap.description,
            held=snap.held,
            held_tools=snap.held_tools,
            held_info=snap.held_info,
            batch=batch,
        )
    except (SkillError, OSError) as exc:
        return exc


def _sync_one(
    snap: ServerSnapshot,
    step: _Step,
    root: Path,
    config: SkillsConfig,
    auto: _AutoDisabled,
    force: bool,
    now: datetime | None,
    fsync: bool,
    outcome: _Outcome | None = None,
    batch: _swap.Batch | None = None,
) -> SyncEntry:
    """``step``: :func:`_plan`'s answer for a valid name. ``outcome``: the skill already
    written (:func:`sync_mcp_skills`), else it is written here."""
    status = snap.status
    server, name = status.name, skill_name(status.name)
    link = str(_swap.link_path(root, server))
    if step == "off":
        auto.disable(config, name, f"server disabled in {snap.config_name}")
        current = _swap.inspect(root, server)
        _mark(server, current, {"configured": True, "status": "disabled"}, fsync, batch)
        return SyncEntry(
            server,
            status.state.value,
            "disabled",
            False,
            f"the server is disabled in {snap.config_name}",
            link if current.managed else None,
            remedy=Remedy.ENABLE_SERVER,  # worded by each front end: keen mcp enable in the CLI
        )
    reason = redactor.redact(status.last_error)
    if step == "down":
        auto.disable(config, name, status.state.value)
        current = _swap.inspect(root, server)
        changes = {
            "configured": True,
            "status": status.state.value,
            "last_error": reason,
        }
        _mark(server, current, changes, fsync, batch)
        path = link if current.managed else None
        hint, remedy = _failure_hint(status, snap.config_name)
        return SyncEntry(
            server, status.state.value, "disabled", False, hint, path, error=reason, remedy=remedy
        )
    if step == "no_tools":
        # No catalog line telling the model to read an empty skill.
        auto.disable(config, name, "no tools")
        current = _swap.inspect(root, server)
        # Every tool it lists may be held by the pins (new since pinned, or a pin file that
        # cannot be read): then the pins' note says what to do, and a reconnect would not.
        why = reason or snap.held
        _mark(server, current, {"configured": True, "status": "no_tools", "last_error": why}, fsync, batch)
        path = link if current.managed else None
        if snap.held and not reason:
            return SyncEntry(server, status.state.value, "disabled", False, snap.held, path)
        hint = reason or "connected, but it lists no tools"
        return SyncEntry(server, status.state.value, "disabled", False, hint, path, remedy=Remedy.RECONNECT)
    report = outcome if outcome is not None else _generate(snap, root, now, fsync, None)
    if isinstance(report, SkillError):
        exc = report
        if _swap.inspect(root, server).kind == "unmanaged":
            hint = f"rename {link} (not generated by Keen) so Keen can generate {name}"
            return SyncEntry(
                server,
                status.state.value,
                "kept_unmanaged",
                config.is_enabled(name),
                hint,
                link,
                [],
                str(exc),
            )
        return SyncEntry(server, status.state.value, "error", config.is_enabled(name), "", None, [], str(exc))
    if isinstance(report, _swap.NotDurableError):
        # Live but maybe not on disk: say so, and point at the skill that is there.
        error = redactor.redact(str(report))
        return SyncEntry(
            server, status.state.value, "error", config.is_enabled(name), _DISK_HINT, link, [], error
        )
    if isinstance(report, OSError):
        error = redactor.redact(f"cannot write the skill for {server}: {report}")
        if _swap.inspect(root, server).kind == "unmanaged":
            # Something not Keen's took the name while the skill was written: the same
            # outcome and fix as when the sync finds it there at the start.
            hint = f"rename {link} (not generated by Keen) so Keen can generate {name}"
            return SyncEntry(
                server, status.state.value, "kept_unmanaged", config.is_enabled(name), hint, link, [], error
            )
        return SyncEntry(
            server, status.state.value, "error", config.is_enabled(name), _DISK_HINT, None, [], error
        )
    if force:
        auto.drop(name)
        config.set_enabled(name, True)
    else:
        auto.restore(config, name)
    enabled = config.is_enabled(name)
    hint = "" if enabled else "you disabled this skill"
    rejected = [r.display for r in report.rejected[:MAX_SKIPPED_LISTED]]
    return SyncEntry(
        server,
        status.state.value,
        report.action,
        enabled,
        hint,
        link,
        rejected,
        rejected_count=len(report.rejected),
        remedy=None if enabled else Remedy.ENABLE_SKILL,
    )


def _stale_servers(root: Path, config: SkillsConfig, auto: _AutoDisabled, configured: set[str]) -> list[str]:
    names = set(config.names()) | set(auto.records)
    try:
        for entry in root.iterdir():
            debris = _DEBRIS_RE.fullmatch(entry.name)
            server = debris.group(1) if debris else server_of_dir(entry.name)
            names.add(skill_name(server) if server else entry.name)
    except FileNotFoundError:
        pass
    stale: set[str] = set()
    for name in names:
        server = name.removeprefix("mcp:")
        if name.startswith("mcp:") and SERVER_NAME_RE.fullmatch(server) and server not in configured:
            stale.add(server)
    return sorted(stale)


def _remove_one(root: Path, server: str, config: SkillsConfig, auto: _AutoDisabled) -> SyncEntry:
    name = skill_name(server)
    current = _swap.inspect(root, server)
    if current.kind == "unmanaged":
        # A user's own skill that happens to be called mcp:<x>: its dir and its config stay.
        hint = f"{current.path} is not generated by Keen ({current.reason}); left as is"
        return SyncEntry(
            server, "removed", "kept_unmanaged", config.is_enabled(name), hint, str(current.path)
        )
    try:
        _swap.remove(root, server)
    except OSError as exc:
        error = f"cannot delete the generated skill {current.path}: {exc}"
        return SyncEntry(
            server, "removed", "error", config.is_enabled(name), _DISK_HINT, str(current.path), [], error
        )
    config.forget(name)
    auto.drop(name)
    return SyncEntry(server, "removed", "removed", False)


def _config_under_lock(root: Path, config: SkillsConfig | None) -> SkillsConfig:
    """The skills config as it is on disk now (call it holding the lock): loaded before the
    lock, a copy could miss a flag another writer saved meanwhile, and saving it would undo it."""
    if config is None:
        return SkillsConfig.load(root / "config.json")
    config.reload()
    return config


def _save(auto: _AutoDisabled, config: SkillsConfig, root: Path) -> None:
    # The record first: a crash in between then leaves a record the next sync drops,
    # never a sync-made ``false`` that looks like the user's.
    written = root
    try:
        auto.save()
        # A config.json linked to one's dotfiles is written in the folder of the file it
        # points to: that folder's permissions are the ones to check.
        with contextlib.suppress(BrokenLink):  # its save says so itself
            written = link_target(config.path).parent
        config.save()
    except OSError as exc:
        raise SkillError(
            f"cannot save the skills config {config.path}: {exc}; check the permissions of "
            f"{written} and run the sync again (the generated skills are already on disk)"
        ) from exc


def _entry(
    snap: ServerSnapshot,
    root: Path,
    config: SkillsConfig,
    auto: _AutoDisabled,
    force: bool,
    now: datetime | None,
    fsync: bool,
    outcome: _Outcome | None = None,
    batch: _swap.Batch | None = None,
) -> SyncEntry:
    server, status = snap.status.name, snap.status
    step = _plan(snap)
    if step == "bad_name":
        # An invalid name has no skill directory to mark: report it, touch nothing on disk.
        if status.state == ServerState.CONFIG_ERROR:  # the Manager's reason and fix, as for any broken entry
            hint, remedy = _failure_hint(status, snap.config_name)
            error = redactor.redact(status.last_error)
            return SyncEntry(
                server, status.state.value, "disabled", False, hint, None, error=error, remedy=remedy
            )
        error = f"{server!r} is not a valid server name; rename it in {snap.config_name}"
        return SyncEntry(server, status.state.value, "error", False, "", None, [], error)
    entry = _sync_one(snap, step, root, config, auto, force, now, fsync, outcome, batch)
    logger.debug("sync mcp:%s: %s -> %s (enabled=%s)", server, entry.state, entry.action, entry.enabled)
    return entry


def sync_mcp_skills(
    snapshots: list[ServerSnapshot],
    *,
    skills_root: Path,
    skills_config: SkillsConfig | None = None,
    force_enable: set[str] | frozenset[str] = frozenset(),
    now: datetime | None = None,
    fsync: bool = True,
) -> SyncReport:
    """Bring generated skills and ``skills_config`` in line with ``snapshots`` (the rules in
    the module doc). ``snapshots`` must cover every configured server; a ``mcp:<x>`` skill
    (config entry or managed dir) whose server is not among them is removed.
    ``force_enable``: servers whose skill is enabled if they are connected (``keen mcp
    connect``). ``now``: the generated timestamp (default: current UTC time).

    Holds the skills-dir lock (:mod:`keen.skills.lock`) throughout and reads the skills
    config under it (``skills_config``, when given, is read again from its file then, so a
    change another writer saved is never overwritten; default ``skills_root/config.json``);
    saves the sync record and then the config once, at the end. One server's failure is an ``error`` entry, never an exception.
    Raises ``SkillError`` only when the skills config cannot be read or saved.
    """
    seen: dict[str, ServerSnapshot] = {}
    for snap in snapshots:
        if snap.status.name in seen:
            logger.warning("sync: server %r listed twice; using the first snapshot", snap.status.name)
            continue
        seen[snap.status.name] = snap
    with _swap.locked(skills_root):
        skills_config = _config_under_lock(skills_root, skills_config)
        auto = _AutoDisabled(skills_root / SYNC_STATE_FILE)
        # The skills first, as one batch (one listing, one flush: keen.mcpskills._swap), so
        # a server whose swap failed is an error before its flags are touched; then the
        # flags, and the markers of the servers not written, as a second batch.
        batch = _swap.Batch(skills_root, fsync=fsync)
        ordered = [seen[server] for server in sorted(seen)]
        try:
            outcomes = {
                s.status.name: _generate(s, skills_root, now, fsync, batch)
                for s in ordered
                if _plan(s) == "write"
            }
            outcomes.update(batch.commit())
            entries = [
                _entry(
                    s,
                    skills_root,
                    skills_config,
                    auto,
                    s.status.name in force_enable,
                    now,
                    fsync,
                    outcomes.get(s.status.name),
                    batch,
                )
                for s in ordered
            ]
            marker_failures = batch.commit()
        except BaseException:
            # Anything (a bug, Ctrl-C, a cancelled task) between a write and its commit: the
            # batch's marker temporary files sit inside live skill dirs, where no cleanup looks.
            batch.abort()
            raise
        for server, exc in marker_failures.items():
            logger.warning("could not update the marker of %s: %s", skill_name(server), exc)
        for server in _stale_servers(skills_root, skills_config, auto, set(seen)):
            entries.append(_remove_one(skills_root, server, skills_config, auto))
        _save(auto, skills_config, skills_root)
    entries.sort(key=lambda e: e.server)
    return SyncReport(skills_root, entries)


def sync_server(
    snapshot: ServerSnapshot,
    *,
    skills_root: Path,
    skills_config: SkillsConfig | None = None,
    force_enable: bool = False,
    now: datetime | None = None,
    fsync: bool = True,
) -> SyncEntry:
    """The same rules for one server, leaving every other skill alone (no removal pass).

    For ``keen mcp connect`` (``force_enable=True``: on success the skill is generated and
    enabled; on failure it is disabled the way sync disables, so the next sync that finds
    the server connected enables it again) and for a state change seen after startup.
    Reads and saves the skills config under the lock like :func:`sync_mcp_skills`, and
    the sync record. Raises ``SkillError`` only when the skills config cannot be read or saved.
    """
    with _swap.locked(skills_root):
        skills_config = _config_under_lock(skills_root, skills_config)
        auto = _AutoDisabled(skills_root / SYNC_STATE_FILE)
        entry = _entry(snapshot, skills_root, skills_config, auto, force_enable, now, fsync)
        _save(auto, skills_config, skills_root)
    return entry
