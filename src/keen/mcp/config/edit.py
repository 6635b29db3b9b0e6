"""Edits of Keen's configs.json: merge an import, add one server, remove one (``keen mcp
import|add|remove``).

Every edit reads the file, changes the raw JSON (``${VAR}`` references stay as written)
and writes it back atomically with mode 0600 (:func:`keen.mcp.config.save_config`), under
an exclusive lock on ``configs.json.lock`` beside it (beside the file a symlink points to:
:func:`keen.mcp.config.servers.config_file`; ``filelock``: flock on POSIX, msvcrt
on Windows) so two edits at once never lose one another. Nothing is merged into a file that
cannot be parsed; one invalid server entry is no reason to refuse an edit of another.
New entries go through the same conversion and checks as ``keen mcp import``
(:mod:`keen.mcp.config.importer`), so ``Authorization: Bearer KEY`` becomes ``api_key`` auth.
"""

from __future__ import annotations

import contextlib
import copy
import json
import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import filelock

from keen._fs import BOM
from keen.errors import ConfigError
from keen.mcp.config.importer import (
    KEEN_SETTINGS,
    ImportResult,
    import_mcp_file,
    import_mcp_servers,
    suggest_name,
)
from keen.mcp.config.load import load_config, warn_if_others_read_secrets
from keen.mcp.config.servers import (
    SERVER_NAME_PATTERN,
    config_file,
    declared_kinds,
    nested_too_deep,
    object_pairs,
    repeated_keys,
    save_config,
    too_deep,
)

__all__ = [
    "ImportOutcome",
    "add_server",
    "import_into_config",
    "merge_into_config",
    "remove_server",
    "server_entry",
    "set_enabled",
]

_LOCK_TIMEOUT_SECONDS = 10.0


@contextlib.contextmanager
def _locked(config_path: Path) -> Iterator[dict[str, Any] | None]:
    """Hold the configs.json lock; yields its raw JSON (``None``: no file yet), checked first.

    A file other users can read that holds a key in clear is warned of when the block is
    done, and only if it still is: an edit that saved it wrote it 0600."""
    # Beside the file a symlink points to: two KEEN_HOMEs linking one dotfiles configs.json
    # take one lock, or each would write the file under its own and lose the other's entry.
    # First: a folder link to nothing on the way is named, not made a "file in its place".
    real = config_file(config_path)
    config_path.parent.mkdir(parents=True, exist_ok=True)
    lock = filelock.FileLock(real.with_name(real.name + ".lock"), timeout=_LOCK_TIMEOUT_SECONDS)
    try:
        lock.acquire()
    except filelock.Timeout:
        raise ConfigError(
            f"{config_path} is being edited by another keen command (waited {_LOCK_TIMEOUT_SECONDS:g} s); "
            "try again when it is done",
            path=str(config_path),
        ) from None
    checked = False
    try:
        existing: dict[str, Any] | None = None
        if real.exists():
            # Raises only for a file that cannot be used at all; the warning waits for the save.
            load_config(config_path, strict=False, warn_readable=False)
            text = config_path.read_text(encoding="utf-8").removeprefix(BOM)  # written back without it
            existing = json.loads(text, object_pairs_hook=object_pairs) if text.strip() else None
            where = _not_finite(existing)
            if where is not None:
                # json.dumps would write it back as NaN or Infinity, which is no JSON.
                raise ConfigError(
                    f"{config_path} holds a number JSON cannot write back at {where} (NaN, Infinity, or "
                    "one too large, such as 1e400); write a plain number there first",
                    path=str(config_path),
                )
            twice = repeated_keys((existing or {}).get("servers"))
            if twice:
                # Writing the file back would keep only the last entry of each: refuse, lose nothing.
                raise ConfigError(
                    f"{config_path} defines server {twice[0]!r} twice; remove one of the two entries "
                    "first (an edit would silently keep only the last)",
                    path=str(config_path),
                    server=twice[0],
                )
        checked = True
        yield existing
    finally:
        lock.release()
        if checked:
            warn_if_others_read_secrets(config_path)


def _not_finite(value: Any, where: str = "") -> str | None:
    """Where in parsed JSON a number is NaN or infinite (``servers.a.timeouts.connect``), or None."""
    if isinstance(value, float) and not math.isfinite(value):
        return where or "the top level"
    children = (
        value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    )  # pyright: ignore[reportUnknownMemberType, reportUnknownArgumentType, reportUnknownVariableType]
    for key, child in children:  # pyright: ignore[reportUnknownVariableType]
        found = _not_finite(child, f"{where}.{key}".lstrip("."))
        if found is not None:
            return found
    return None


def merge_into_config(
    existing_raw: dict[str, Any] | None, result: ImportResult, *, overwrite: bool = False
) -> tuple[dict[str, Any], list[str]]:
    """Add ``result.servers`` to raw configs.json data; returns ``(merged_raw, conflicts)``.

    ``existing_raw`` (``None`` = no file yet) is not modified; its servers keep their
    order and the new ones follow. ``conflicts`` lists imported names that already
    existed (also in another case: names may not differ only in case) and were
    therefore left as they were; with ``overwrite`` they are replaced
    in place and ``conflicts`` is empty. Raises ``ConfigError`` when ``existing_raw`` is
    not a configs.json object.
    """
    merged = copy.deepcopy(existing_raw) if existing_raw is not None else {"version": 1, "servers": {}}
    if not isinstance(merged, dict):
        raise ConfigError('configs.json must be an object like {"version": 1, "servers": {}}')
    merged.setdefault("version", 1)
    servers = merged.setdefault("servers", {})
    if not isinstance(servers, dict):
        raise ConfigError(
            'configs.json: "servers" must be an object mapping names to server entries', field="servers"
        )
    conflicts: list[str] = []
    for name, entry in result.servers.items():
        same_but_case = any(k != name and k.lower() == name.lower() for k in servers)
        if (name in servers and not overwrite) or same_but_case:
            # A name differing only in case would share its skill dir on macOS and Windows.
            conflicts.append(name)
            continue
        servers[name] = copy.deepcopy(entry)
    return merged, conflicts


@dataclass
class ImportOutcome:
    """What :func:`import_into_config` did.

    Attributes:
        result: the conversion (``refused`` and ``notes`` say what was left out and why).
        imported: names written to configs.json.
        conflicts: names skipped because configs.json has them differently (and ``overwrite``
            was off), or has a name differing only in letter case (see ``case_conflicts``).
        written: the configs.json path when anything was written, else ``None``.
        unchanged: names configs.json already has exactly as imported (a re-import is a no-op).
    """

    result: ImportResult
    imported: list[str]
    conflicts: list[str]
    written: Path | None
    unchanged: list[str] = field(default_factory=lambda: list[str]())
    case_conflicts: dict[str, str] = field(default_factory=lambda: dict[str, str]())
    """Skipped name -> the configured name it differs from only in letter case (``overwrite``
    does not replace those: rename the import)."""


def import_into_config(
    file: Path,
    config_path: Path,
    *,
    rename: Mapping[str, str] | None = None,
    overwrite: bool = False,
    include_projects: bool = False,
) -> ImportOutcome:
    """Convert ``file`` and merge its servers into ``config_path`` (written 0600, atomically).

    An existing configs.json is validated first: nothing is merged into a broken file.

    Args:
        file: another host's ``{"mcpServers": {...}}`` file.
        config_path: Keen's configs.json (created when missing).
        rename: ``{old: new}`` to import server ``old`` under the name ``new``.
        overwrite: replace servers that already exist instead of skipping them.
        include_projects: also import Claude Code's project-scoped servers (``~/.claude.json``).

    Raises:
        ConfigError: ``file`` cannot be read or converted, or configs.json is invalid.
    """
    result = import_mcp_file(file, rename=rename, include_projects=include_projects)
    return _merge_result(result, config_path, overwrite=overwrite)


def _merge_result(result: ImportResult, config_path: Path, *, overwrite: bool) -> ImportOutcome:
    with _locked(config_path) as existing:
        have = (existing or {}).get("servers") or {}
        unchanged = [name for name, entry in result.servers.items() if have.get(name) == entry]
        merged, conflicts = merge_into_config(existing, result, overwrite=overwrite)
        conflicts = [name for name in conflicts if name not in unchanged]
        imported = [name for name in result.servers if name not in conflicts and name not in unchanged]
        case_conflicts = {
            name: other
            for name in conflicts
            for other in have
            if other != name and other.lower() == name.lower()
        }
        if imported:
            save_config(merged, config_path)
    return ImportOutcome(
        result, imported, conflicts, config_path if imported else None, unchanged, case_conflicts
    )


def add_server(
    config_path: Path, name: str, entry: Mapping[str, Any], *, overwrite: bool = False
) -> list[str]:
    """Add server ``name`` to configs.json, as ``claude mcp add`` adds one.

    Args:
        config_path: Keen's configs.json (created when missing, written 0600).
        name: the server name (``^[A-Za-z0-9_-]{1,64}$``).
        entry: in the ``mcpServers`` shape other hosts use: ``{"command", "args", "env"}`` for
            a stdio server, ``{"url", "headers", "oauth": true}`` for a remote one, with an
            optional ``description``; converted as :mod:`keen.mcp.config.importer` converts it,
            except that Keen's own :data:`KEEN_SETTINGS` are kept as given.
        overwrite: replace a server of that name instead of refusing: only what ``entry``
            gives changes; the old entry's other fields stay (``timeouts`` key by key,
            ``description``, ``env``, ``enabled``...). A new ``command`` comes with its own
            ``args``; a change of transport drops the old transport's fields.

    Returns:
        Notes on the conversion (what was changed, dropped or kept); never secret values.

    Raises:
        ConfigError: the name is invalid or taken (also in another letter case), the entry
            cannot be converted (the reason says what to change), or configs.json cannot be
            used at all.
    """
    if not SERVER_NAME_PATTERN.fullmatch(name):
        raise ConfigError(
            f"{name!r} is not a valid server name: use 1-64 letters, digits, '_' or '-', "
            f"e.g. {suggest_name(name)!r}",
            server=name,
            field="name",
        )
    if nested_too_deep(entry):
        raise ConfigError(too_deep(f"server {name!r}"), server=name)
    # Keen's own settings, typed by the user: kept as given (an import from another host's
    # file does not take them: importer._DROPPED_WHY), checked with the rest of the entry.
    own = {key: entry[key] for key in KEEN_SETTINGS if key in entry}
    plain = {key: value for key, value in entry.items() if key not in own}
    result = import_mcp_servers(
        {"mcpServers": {name: plain}}, source="the new server", settings=own, typed=True
    )
    for _, reason in result.refused:
        raise ConfigError(f"cannot add {name!r}: {reason}", server=name)
    with _locked(config_path) as existing:
        servers = (existing or {}).get("servers") or {}
        taken = next((other for other in servers if other.lower() == name.lower()), None)
        if taken is not None and taken != name:
            # --overwrite cannot help: it replaces a server of the same name, not another one.
            raise ConfigError(
                f"{name!r} differs from the configured server {taken!r} only in letter case, and server "
                f"names may not (each names a skill directory, and macOS and Windows disks ignore case); "
                f"choose another name, or replace {taken!r} with keen mcp add {taken} --overwrite",
                path=str(config_path),
                server=name,
            )
        if taken is not None and not overwrite:
            raise ConfigError(
                f"{taken!r} is already configured in {config_path}; remove it first "
                f"(keen mcp remove {taken}) or add it again with --overwrite",
                path=str(config_path),
                server=name,
            )
        notes = [note for _, note in result.notes]
        old = servers.get(name)
        if isinstance(old, dict):
            result.servers[name], kept = _keep_unchanged(old, result.servers[name])
            if kept:
                notes.append(f"kept {', '.join(kept)} from the entry it replaces")
        merged, _ = merge_into_config(existing, result, overwrite=True)
        save_config(merged, config_path)
    return notes


_TRANSPORT_FIELDS = frozenset({"command", "args", "env", "cwd", "inherit_env", "url", "headers", "auth"})


def _keep_unchanged(old: dict[str, Any], new: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """``new`` with the fields of ``old`` it does not give (raw JSON, ``${VAR}`` as written),
    and the names of those kept: an ``--overwrite`` changes only what it is given."""
    dropped = {"transport"}
    if declared_kinds(old)[0] != new.get("transport"):
        dropped |= _TRANSPORT_FIELDS  # another kind of server: the old one's fields mean nothing
    if "command" in new:
        dropped.add("args")  # a command and its arguments are one thing
    kept = [key for key in old if key not in new and key not in dropped]
    merged = {**new, **{key: copy.deepcopy(old[key]) for key in kept}}
    old_limits, new_limits = old.get("timeouts"), new.get("timeouts")
    if isinstance(old_limits, dict) and isinstance(new_limits, dict):
        merged["timeouts"] = {**old_limits, **new_limits}
        kept += [f"timeouts.{key}" for key in old_limits if key not in new_limits]
    return merged, kept


def remove_server(config_path: Path, name: str) -> None:
    """Remove server ``name`` from configs.json (atomically, under the lock).

    Its generated skill ``mcp:<name>`` is deleted by the next sync, as for any server that
    left the config.

    Raises:
        ConfigError: no server has that name (the message lists the configured ones), or
            configs.json cannot be used at all.
    """
    with _locked(config_path) as existing:
        _servers_with(existing, config_path, name)
        merged = copy.deepcopy(existing)
        assert merged is not None  # servers came from it
        del merged["servers"][name]
        save_config(merged, config_path)


def _servers_with(existing: dict[str, Any] | None, config_path: Path, name: str) -> dict[str, Any]:
    """The raw ``servers`` of configs.json, which has ``name``; else a ConfigError listing
    the configured names."""
    servers = (existing or {}).get("servers")
    if isinstance(servers, dict) and name in servers:
        return servers
    names = sorted(servers) if isinstance(servers, dict) else []
    listed = ", ".join(names) if names else "none"
    raise ConfigError(
        f"no server named {name!r} in {config_path} (configured: {listed}); check the name",
        path=str(config_path),
        server=name,
    )


def server_entry(config_path: Path, name: str) -> dict[str, Any]:
    """Server ``name``'s raw entry in configs.json, as written (``${VAR}`` unexpanded).

    Raises:
        ConfigError: no server has that name (the message lists the configured ones), or
            configs.json cannot be used at all.
    """
    with _locked(config_path) as existing:
        entry = _servers_with(existing, config_path, name)[name]
    return copy.deepcopy(entry) if isinstance(entry, dict) else {"invalid entry": entry}


def set_enabled(config_path: Path, name: str, enabled: bool) -> bool:
    """Set server ``name``'s ``enabled`` in configs.json (enabling removes the field: true is
    its default); returns False when it already was so (nothing written).

    Raises:
        ConfigError: no server has that name, its entry is not an object, or configs.json
            cannot be used at all.
    """
    with _locked(config_path) as existing:
        servers = _servers_with(existing, config_path, name)
        if not isinstance(servers[name], dict):
            raise ConfigError(
                f"{config_path}: server {name!r} must be an object; fix its entry first",
                path=str(config_path),
                server=name,
            )
        if servers[name].get("enabled", True) is enabled:
            return False
        merged = copy.deepcopy(existing)
        assert merged is not None  # servers came from it
        if enabled:
            merged["servers"][name].pop("enabled", None)
        else:
            merged["servers"][name]["enabled"] = False
        save_config(merged, config_path)
    return True
