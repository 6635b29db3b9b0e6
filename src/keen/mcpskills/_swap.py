"""Atomic publication of a generated skill dir (docs/architecture.md "Generated skills").

On disk, for server ``github``::

    skills/mcp:github -> .mcp:github.3f9a0c1b2d4e      (relative symlink: the skill)
    skills/.mcp:github.3f9a0c1b2d4e/                   (complete versioned dir)
    skills/.mcp:github.8e7d6c5b4a39.tmp/               (a build in progress, or debris)
    skills/.keen-mcp.lock                              (keen.skills.lock: one writer at a time)

``rename(2)`` cannot replace a non-empty directory, and two renames leave a moment with
no skill at all. So a new version is written into a ``.tmp`` dir beside the link, made
durable (one ``syncfs`` when asked), renamed to its versioned name, and then
the link is replaced with ``os.replace`` of a fresh symlink (a skill not there yet gets
its link made in place by ``symlink(2)``, which fails if the name was taken): a reader opening
``mcp:github/...`` resolves either the old or the new version, both complete. The old
version is stamped with its retirement time (its mtime) and kept for ``RETIRED_GRACE_SECONDS``:
a reader that resolved the link just before the swap (an agent that read SKILL.md and then
opens schemas under the path it resolved) still finds every file of the version it started
with. Later writers delete retired versions once the grace has passed. Dot-prefixed names are invisible to skill discovery
(``keen.skills.discover`` skips them). A process killed mid-build leaves the link on the
old version; the ``.tmp`` debris is removed by the next writer, which is safe because
writers hold the lock. A plain managed dir from an older layout is migrated with
``renameat2(RENAME_EXCHANGE)`` where the kernel offers it, else two renames.

If that last fsync of the skills dir fails, the new version is live but not known to be
on disk: the replaced version is retired (kept for its grace) rather than deleted, only the
build debris goes, and :class:`NotDurableError` says so.

The startup sync writes many servers' skills through one :class:`Batch`, committed twice
(``keen.mcpskills.sync``): first the new versions, then the status markers that changed.
Each commit flushes what it wrote with one ``syncfs`` before any link or marker is swapped
in, and, when it swapped links, the skills dir with one fsync after the last swap; old
versions are retired only after that. The order of what reaches the disk is the same as for
one skill, so a power cut leaves every skill whole (old or new). A marker is replaced by a
rename inside its version dir: atomic (a reader sees the old or the new marker), but that
dir is not fsynced afterwards, so a power cut may bring back the old marker (as with
:func:`keen._fs.atomic_write_bytes` without ``fsync``). :meth:`Batch.abort` deletes what a
batch wrote but did not commit (marker temporary files inside live version dirs included).
"""

from __future__ import annotations

import ctypes
import logging
import os
import posixpath
import re
import secrets
import shutil
import stat
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from keen._fs import atomic_write_bytes
from keen.mcpskills import _layout
from keen.mcpskills._models import Marker, ValidationError
from keen.mcpskills._render import MARKER_FILE, dump_json
from keen.skills.lock import LOCK_FILE, locked

__all__ = [
    "LOCK_FILE",
    "RETIRED_GRACE_SECONDS",
    "Batch",
    "Current",
    "NotDurableError",
    "cleanup",
    "discard",
    "inspect",
    "link_path",
    "locked",
    "new_build_dir",
    "publish",
    "read_marker",
    "remove",
    "update_marker",
    "write_tree",
]

logger = logging.getLogger(__name__)

# How long a version replaced by a newer one stays on disk for readers that resolved it
# before the swap. Reading a skill takes milliseconds; a minute covers a starved reader.
RETIRED_GRACE_SECONDS = 60.0

Kind = Literal["absent", "link", "dir", "dangling", "unmanaged"]


class NotDurableError(OSError):
    """The new version is published (the link points to it) but the fsync of the skills dir
    that makes the link survive a power cut failed. The replaced version is kept (retired,
    deleted by a later writer after its grace), so nothing a reader or the old link needs is gone."""

    def __init__(self, server: str, cause: OSError) -> None:
        super().__init__(
            cause.errno,
            f"the new skill for {server} is published but not confirmed on disk ({cause.strerror or cause}): "
            "a power cut before the next successful write may bring back the previous version; "
            "check the disk holding the skills directory and run the sync again",
        )
        self.server = server


@dataclass(frozen=True, slots=True)
class Current:
    """What ``skills/mcp:<server>`` is now.

    ``kind``: ``absent``; ``link`` (our symlink to a complete managed dir, ``target``);
    ``dir`` (a plain managed dir of an older layout, ``target`` = the path itself);
    ``dangling`` (our symlink whose versioned dir is gone); ``unmanaged`` (anything
    else: never touched, ``reason`` says why). ``marker`` is the parsed marker file.
    """

    kind: Kind
    path: Path
    target: Path | None = None
    marker: Marker | None = None
    reason: str = ""

    @property
    def managed(self) -> bool:
        return self.kind in ("link", "dir", "dangling")


def link_path(root: Path, server: str) -> Path:
    """``root/mcp:<server>`` (``mcp_<server>`` on Windows, where ``:`` is not allowed)."""
    return root / _layout.skill_dir(server)


_VERSIONED = re.compile(r"\.(?P<dir>.+)\.[0-9a-f]{12}(?P<suffix>\.tmp|\.link|\.old)?")
"""A name Keen gives a version of some server's skill: ``.<skill dir>.<12 hex>[.tmp|.link|.old]``
(the hex and suffix end the name, so ``dir`` is the whole skill dir name)."""


def _versioned(server: str, name: str) -> re.Match[str] | None:
    """``name``'s match when it is one of ``server``'s version names, else ``None``. One
    pattern for every server: compiling one per server cost more than the rest of the
    skill's publication (re's own cache holds 512 patterns, fewer than a large
    configuration's servers)."""
    match = _VERSIONED.fullmatch(name)
    return match if match is not None and match.group("dir") == _layout.skill_dir(server) else None


def read_marker(skill_dir: Path, server: str) -> Marker | None:
    """The marker of ``skill_dir`` if it says ``managed_by: keen-mcp`` for ``server``, else None."""
    try:
        marker = Marker.model_validate_json((skill_dir / MARKER_FILE).read_bytes())
    except (OSError, ValidationError):
        return None
    return marker if marker.server == server else None


def inspect(root: Path, server: str) -> Current:
    """Classify ``root/mcp:<server>``; see :class:`Current`. Never follows a link that
    points outside ``root`` or at a name Keen does not create."""
    path = link_path(root, server)
    # One lstat per name looked at: what is_symlink, exists and is_dir asked in turn (a
    # stat each, and the sync inspects every server's skill).
    mode = _lstat_mode(path)
    if mode is None:
        return Current("absent", path)
    if stat.S_ISLNK(mode):
        target = os.readlink(path)
        match = _versioned(server, target)
        if match is None or match.group("suffix"):
            return Current(
                "unmanaged", path, reason=f"it is a symlink to {target!r}, which Keen did not create"
            )
        versioned = root / target
        target_mode = _lstat_mode(versioned)
        if target_mode is not None and stat.S_ISDIR(target_mode):
            marker = read_marker(versioned, server)
            if marker is None:
                return Current("unmanaged", path, reason=f"{versioned} has no keen-mcp {MARKER_FILE}")
            return Current("link", path, versioned, marker)
        if target_mode is None:
            return Current("dangling", path)
        return Current("unmanaged", path, reason=f"{versioned} is not a directory")
    if stat.S_ISDIR(mode):
        marker = read_marker(path, server)
        if marker is None:
            return Current("unmanaged", path, reason=f"it has no {MARKER_FILE} saying managed_by keen-mcp")
        return Current("dir", path, path, marker)
    return Current("unmanaged", path, reason="it is not a directory")


def _lstat_mode(path: Path) -> int | None:
    """``path``'s own mode (a link not followed), or ``None`` when nothing is there."""
    try:
        return os.lstat(path).st_mode
    except (FileNotFoundError, NotADirectoryError):
        return None


def new_build_dir(root: Path, server: str) -> Path:
    """A fresh, not yet existing ``root/.mcp:<server>.<12 hex>.tmp``."""
    return root / f".{_layout.skill_dir(server)}.{secrets.token_hex(6)}.tmp"


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _sync_filesystem(path: Path) -> None:
    """Flush the whole filesystem holding ``path`` once (Linux ``syncfs``; else ``os.sync``).

    One flush after all files are written instead of one fsync per file: 1,000 fsyncs
    cost 1-4 s on a busy disk here, one syncfs 35-130 ms (measured on ext4, 2 cores).
    """
    func = getattr(ctypes.CDLL(None, use_errno=True), "syncfs", None)
    if func is None:
        os.sync()
        return
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        if func(fd) != 0:
            errno = ctypes.get_errno()
            raise OSError(errno, f"syncfs failed: {os.strerror(errno)}", str(path))
    finally:
        os.close(fd)


def write_tree(build_dir: Path, files: Iterable[tuple[str, bytes]], *, fsync: bool) -> int:
    """Create ``build_dir`` and write ``(relative path, bytes)`` files into it; return the count.
    Paths are normalized POSIX paths inside ``build_dir`` (:func:`keen.mcpskills._names.plan_paths`).

    Files are created exclusively (``O_EXCL | O_NOFOLLOW``), mode 0644. With ``fsync``
    the filesystem is flushed once at the end, so the later swap publishes data that
    survives a power cut (crash consistency), not only a killed process.
    """
    build_dir.mkdir(mode=0o755)
    made = {""}  # folders made, as relative POSIX paths ("" is build_dir itself)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    count = 0
    # Paths joined as strings: a Path built and parsed per file cost as much as its write.
    base = os.fspath(build_dir) + os.sep
    for rel, data in files:
        folder = posixpath.dirname(rel)
        if folder not in made:
            # Each missing level, outermost first, by name: walking Path.parents of every
            # new folder up to the filesystem root cost more than writing the skill.
            parts = folder.split("/")
            for depth in range(1, len(parts) + 1):
                sub = "/".join(parts[:depth])
                if sub not in made:
                    os.mkdir(base + sub, 0o755)
                    made.add(sub)
        fd = os.open(base + rel, flags, 0o644)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
        finally:
            os.close(fd)
        count += 1
    if fsync:
        _sync_filesystem(build_dir)
    return count


def _exchange(a: Path, b: Path) -> bool:
    """Swap two paths atomically with Linux ``renameat2(RENAME_EXCHANGE)``; False if unavailable."""
    func = getattr(ctypes.CDLL(None, use_errno=True), "renameat2", None)
    if func is None:
        return False
    at_fdcwd, rename_exchange = -100, 2
    result = func(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange)
    if result != 0:
        logger.debug("renameat2(RENAME_EXCHANGE) failed: %s", os.strerror(ctypes.get_errno()))
        return False
    return True


def _swap_in(root: Path, server: str, build_dir: Path, current: Current) -> Path:
    """Rename the complete ``build_dir`` to its versioned name and point ``mcp:<server>`` at
    it in one ``os.replace``; returns the versioned dir (not yet durable: fsync ``root``)."""
    final = build_dir.with_name(build_dir.name.removesuffix(".tmp"))
    os.rename(build_dir, final)
    link = link_path(root, server)
    if current.kind == "absent":
        # Nothing to replace: the link is made in place, at once whole (symlink(2) creates
        # it with its target, and fails if anything took the name meanwhile).
        try:
            os.symlink(final.name, link)
        except OSError:
            # No reader can have resolved the version: back to a build dir, which the
            # caller's discard deletes at once (a versioned dir would wait out a grace, and
            # past it no sync would come back to it while the name stays taken).
            os.rename(final, build_dir)
            raise
        return final
    tmp_link = final.with_name(final.name + ".link")
    os.symlink(final.name, tmp_link)
    if current.kind == "dir":
        # One-time migration from a plain dir: os.replace cannot put a link over a dir.
        old = final.with_name(final.name + ".old")
        if _exchange(tmp_link, link):
            os.rename(tmp_link, old)  # the old dir, now under the temporary link's name
        else:
            os.rename(link, old)
            os.rename(tmp_link, link)
    else:
        os.replace(tmp_link, link)
    return final


def _retire(
    root: Path,
    server: str,
    final: Path,
    current: Current,
    names: Iterable[str] | None,
    *,
    durable: bool = True,
) -> None:
    """After the swap: start the replaced version's grace, delete old debris. Not
    ``durable`` (the skills dir's fsync failed): only build debris goes, since the link on
    disk may still name an older version."""
    # What the swap replaced: the link's old version, or a migrated plain dir (now .old).
    retired = {"link": current.target, "dir": final.with_name(final.name + ".old")}.get(current.kind)
    try:
        if retired is not None and retired.is_dir():
            # Start its grace now: readers may have resolved it an instant before the swap.
            os.utime(retired)
    except OSError as exc:
        if durable:
            raise
        logger.warning("could not stamp %s as retired: %s", retired, exc)
    cleanup(root, server, keep=final.name, names=names, debris_only=not durable)


def publish(root: Path, server: str, build_dir: Path, current: Current, *, fsync: bool) -> Path:
    """Make the complete ``build_dir`` the skill: rename it to its versioned name, point
    ``mcp:<server>`` at it in one ``os.replace``, then delete older versions and debris.
    ``current`` must be managed or absent (the caller checked). Returns the versioned dir.

    Raises :class:`NotDurableError` when the skills dir's fsync fails after the swap (the
    new version is live, the replaced one kept); other ``OSError`` before the swap."""
    final = _swap_in(root, server, build_dir, current)
    if fsync:
        try:
            _fsync_dir(root)
        except OSError as exc:
            _retire(root, server, final, current, None, durable=False)
            raise NotDurableError(server, exc) from exc
    _retire(root, server, final, current, None)
    return final


def discard(root: Path, server: str) -> None:
    """After a failed build or swap: keep whatever the link points to now (old or, if the
    swap got through, new) and delete the rest of this server's debris."""
    now_current = inspect(root, server)
    cleanup(root, server, keep=now_current.target.name if now_current.target else None)


class Batch:
    """Several servers' skills written as one (the startup sync; module doc).

    Builds and markers handed to it are swapped in by :meth:`commit`, after one flush of
    the filesystem for all of them. Use it holding the lock, from one thread, and commit
    before the lock is released: the listing taken at the start is then the whole truth
    (every writer holds the lock), less what the batch itself writes.
    """

    def __init__(self, root: Path, *, fsync: bool) -> None:
        self.root = root
        self.fsync = fsync
        self._builds: list[tuple[str, Path, Current]] = []
        self._markers: list[tuple[str, Path, Path]] = []
        # One listing for every server, taken before any build dir of this batch exists
        # (a build listed here would be deleted as debris): listing the folder for each
        # server written was quadratic in servers.
        self._names: dict[str, list[str]] = {}
        try:
            listed = os.listdir(root)
        except FileNotFoundError:
            listed = []
        for name in listed:
            match = _VERSIONED.fullmatch(name)
            if match is not None:
                self._names.setdefault(match.group("dir"), []).append(name)

    def names(self, server: str) -> list[str]:
        """``server``'s version and debris names as listed when the batch began."""
        return self._names.get(_layout.skill_dir(server), [])

    def add_build(self, server: str, build_dir: Path, current: Current) -> None:
        """Swap the complete ``build_dir`` in at :meth:`commit` (``current`` as :func:`publish`)."""
        self._builds.append((server, build_dir, current))

    def add_marker(self, server: str, current: Current, changes: dict[str, Any]) -> bool:
        """Write the marker of a managed skill with ``changes`` applied beside it now, and
        replace the marker at :meth:`commit`; False when nothing changed or not managed.
        Raises ``OSError`` (nothing replaced)."""
        if current.target is None or current.marker is None:
            return False
        updated = current.marker.updated(changes)
        if updated == current.marker:
            return False
        target = current.target / MARKER_FILE
        tmp = target.with_name(f".{MARKER_FILE}.{secrets.token_hex(6)}.tmp")
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        fd = os.open(tmp, flags, 0o644)
        try:
            view = memoryview(dump_json(updated.as_json()))
            while view:
                view = view[os.write(fd, view) :]
        except BaseException:
            os.close(fd)
            os.unlink(tmp)
            raise
        os.close(fd)
        self._markers.append((server, tmp, target))
        return True

    def abort(self) -> None:
        """Drop everything added and not committed: delete the marker temporary files
        (they sit inside live version dirs, where no cleanup looks) and the pending builds.
        Safe to call after :meth:`commit` (then nothing is pending) and more than once."""
        builds, self._builds = self._builds, []
        markers, self._markers = self._markers, []
        for _, tmp, _ in markers:
            _unlink_quietly(tmp)
        for server, _, _ in builds:
            discard(self.root, server)

    def commit(self) -> dict[str, OSError]:
        """Swap in everything added: one ``syncfs`` (with ``fsync``), every marker and link
        replaced, one fsync of the skills dir, then old versions retired and debris deleted.
        Returns the servers whose swap failed (their previous version stays, their debris
        is deleted), with the error; a :class:`NotDurableError` for a server whose new
        version is live but whose link's fsync failed (its replaced version is kept)."""
        builds, self._builds = self._builds, []
        markers, self._markers = self._markers, []
        try:
            return self._commit(builds, markers)
        except BaseException:
            # Interrupted mid-way: no marker temporary file may stay inside a live version.
            for _, tmp, _ in markers:
                if os.path.lexists(tmp):
                    _unlink_quietly(tmp)
            raise

    def _commit(
        self, builds: list[tuple[str, Path, Current]], markers: list[tuple[str, Path, Path]]
    ) -> dict[str, OSError]:
        failed: dict[str, OSError] = {}
        if not builds and not markers:
            return failed
        if self.fsync:
            try:
                _sync_filesystem(self.root)
            except OSError as exc:
                for server, tmp, _ in markers:
                    _unlink_quietly(tmp)
                    failed[server] = exc
                for server, _, _ in builds:
                    failed[server] = exc
                    discard(self.root, server)
                return failed
        for server, tmp, target in markers:
            try:
                os.replace(tmp, target)
            except OSError as exc:
                _unlink_quietly(tmp)
                failed[server] = exc
        swapped: list[tuple[str, Path, Current]] = []
        for server, build_dir, current in builds:
            try:
                swapped.append((server, _swap_in(self.root, server, build_dir, current), current))
            except OSError as exc:
                failed[server] = exc
                discard(self.root, server)
        if self.fsync and swapped:
            try:
                _fsync_dir(self.root)
            except OSError as exc:
                # The links are swapped: each new version is live, but the old links may be
                # what the disk holds. Keep the replaced versions (retired), delete debris only.
                for server, final, current in swapped:
                    failed[server] = NotDurableError(server, exc)
                    _retire(self.root, server, final, current, self.names(server), durable=False)
                return failed
        for server, final, current in swapped:
            _retire(self.root, server, final, current, self.names(server))
        return failed


def _unlink_quietly(path: Path) -> None:
    try:
        os.unlink(path)
    except OSError as exc:
        logger.warning("could not delete %s: %s", path, exc)


def cleanup(
    root: Path,
    server: str,
    *,
    keep: str | None,
    grace: float = RETIRED_GRACE_SECONDS,
    names: Iterable[str] | None = None,
    debris_only: bool = False,
) -> list[str]:
    """Delete Keen's ``.mcp:<server>.<hex>[.tmp|.link|.old]`` entries but ``keep``; return the names.

    ``names``: the entries to consider, from a listing taken under the same hold of the
    lock (:meth:`Batch.names`); default: ``root`` is listed now.

    Build debris (``.tmp`` dirs, ``.link`` symlinks) goes at once: no reader ever saw it. A
    retired version (a complete versioned dir or a migrated ``.old`` dir) goes only once
    it was retired (its mtime, stamped by :func:`publish`) more than ``grace`` seconds ago,
    so a reader still inside it finishes; ``grace=0`` deletes it now. ``debris_only``: no
    version is deleted, whatever its age (after a swap whose fsync failed).
    Only names Keen creates are touched. Call it with the lock held: a concurrent writer's
    build dir matches the same pattern. Failures are logged and retried next time.
    """
    # Every name of this server's versions starts so. The folder holds two entries per
    # server and this runs for each server written: the names are listed and filtered in C
    # (os.listdir, str.startswith), not stepped through as DirEntry objects one by one.
    prefix = f".{_layout.skill_dir(server)}."
    removed: list[str] = []
    if names is None:
        try:
            names = [name for name in os.listdir(root) if name.startswith(prefix)]
        except FileNotFoundError:
            return removed
    cutoff = time.time() - grace
    for name in names:
        match = _versioned(server, name)
        if name == keep or match is None:
            continue
        path = os.path.join(root, name)
        try:
            info = os.lstat(path)
        except FileNotFoundError:
            continue
        if match.group("suffix") in (None, ".old") and (
            debris_only or (grace > 0 and info.st_mtime > cutoff)
        ):
            continue
        try:
            if stat.S_ISDIR(info.st_mode):
                shutil.rmtree(path)
            else:
                os.unlink(path)
            removed.append(name)
        except OSError as exc:
            logger.warning("could not delete %s: %s; Keen retries at the next sync", path, exc)
    return removed


def remove(root: Path, server: str) -> bool:
    """Delete the managed skill of ``server`` (link, versioned dir, debris); False if there
    was none or it is not managed (then nothing but Keen's own debris is touched)."""
    current = inspect(root, server)
    deleted = False
    if current.kind in ("link", "dangling"):
        os.unlink(current.path)
        deleted = True
    elif current.kind == "dir":
        # Rename first so the skill vanishes at once instead of file by file.
        os.rename(current.path, root / f".{_layout.skill_dir(server)}.{secrets.token_hex(6)}.old")
        deleted = True
    elif current.kind == "unmanaged":
        logger.warning("not deleting %s: %s", current.path, current.reason)
    # A removed skill has no next version to wait for: everything goes now.
    cleanup(root, server, keep=None, grace=0)
    return deleted


def update_marker(current: Current, changes: dict[str, Any], *, fsync: bool = True) -> bool:
    """Rewrite the marker of a managed skill with ``changes`` applied (one atomic file
    replace inside the current version); False when nothing changed or not managed."""
    if current.target is None or current.marker is None:
        return False
    updated = current.marker.updated(changes)
    if updated == current.marker:
        return False
    atomic_write_bytes(current.target / MARKER_FILE, dump_json(updated.as_json()), fsync=fsync)
    return True
