"""The skills directory's writer lock (docs/architecture.md "Files on disk").

Everything that writes into ``$KEEN_HOME/skills`` (the generated-skill sync and live
refresh, ``/skills enable|disable``, ``keen skills enable|disable``) holds one exclusive
lock, ``skills/.keen-mcp.lock``, around its whole read-modify-write: without it two writers
that each load ``config.json``, change one flag and save would lose one of the changes.
Readers take no lock: every file is replaced atomically, so a reader sees a whole old or a
whole new file.

A ``config.json`` that is a symlink (kept with one's dotfiles, perhaps linked from several
Keen homes) is one file for several skills directories, each with its own lock: the writer
also holds ``<file>.lock`` beside the file it points to, as configs.json's edits do.

The lock is ``filelock`` (``flock`` on POSIX, ``msvcrt`` on Windows): the kernel drops it
when its holder dies, even by SIGKILL. It is re-entrant per thread and path, so a writer
may call another writer's function while holding it. (The file keeps the name it had when
only the MCP sync took it, so processes of an older Keen still exclude each other with newer ones.)
"""

from __future__ import annotations

import contextlib
from _thread import _local  # threading.local itself, without importing threading
from collections.abc import Iterator
from pathlib import Path

from keen._fs import BrokenLink, link_target
from keen.errors import SkillError

__all__ = ["CONFIG_FILE", "LOCK_FILE", "locked"]

CONFIG_FILE = "config.json"
"""The skills config's name in the skills directory (:mod:`keen.skills.config`): never a
skill, a plain file or a symlink."""
LOCK_FILE = ".keen-mcp.lock"
_LOCK_POLL_SECONDS = 0.05
_held = _local()  # per thread: the roots this thread holds (re-entrant)


@contextlib.contextmanager
def locked(root: Path, timeout: float = 60.0) -> Iterator[None]:
    """Hold ``root/.keen-mcp.lock`` (exclusive) for the block; re-entrant per thread.

    When ``root/config.json`` is a symlink, ``<file>.lock`` beside the file it points to is
    held too (module doc), re-entrant per thread and file the same way.

    Args:
        root: the skills directory (created if missing).
        timeout: seconds to wait for another holder.

    Raises:
        SkillError: another process (or thread) held it for longer than ``timeout``; or
            ``root`` (or the folder config.json links into) cannot be made or locked (a file
            by that name, no permission).
    """
    key = str(root.absolute())
    depths: dict[str, int] = getattr(_held, "depths", None) or {}
    _held.depths = depths
    if key in depths:
        depths[key] += 1
        try:
            yield
        finally:
            depths[key] -= 1
        return
    # Imported by the first writer: readers (discovery, every prompt) import this module
    # through the skills config and never lock (filelock's import is ~15 ms of CPU).
    import filelock

    lock = filelock.FileLock(root / LOCK_FILE, timeout=timeout, poll_interval=_LOCK_POLL_SECONDS, mode=0o644)
    try:
        root.mkdir(parents=True, exist_ok=True)
        lock.acquire()
    except filelock.Timeout:
        raise SkillError(
            f"another Keen process has been writing skills in {root} for over {timeout:.0f}s "
            f"(lock {root / LOCK_FILE}); wait for it or stop it, then retry"
        ) from None
    except OSError as exc:
        # A skills root that is a file (FileExistsError), or a folder Keen may not write: a
        # bare OSError reached open_runtime(sync=True)'s caller.
        why = exc.strerror or type(exc).__name__
        raise SkillError(
            f"cannot write skills in {root} ({why}); the skills root must be a folder Keen can "
            "write (default $KEEN_HOME/skills): pass another, or fix that path",
            folder=str(root),
        ) from exc
    depths[key] = 1
    try:
        with _linked_config_locked(root, timeout, depths):
            yield
    finally:
        del depths[key]
        lock.release()


@contextlib.contextmanager
def _linked_config_locked(root: Path, timeout: float, depths: dict[str, int]) -> Iterator[None]:
    """Hold ``<file>.lock`` beside the file ``root/config.json`` links to, if it is a link:
    two skills directories linking one file would each save it under their own lock only,
    and lose each other's change. ``depths``: this thread's held locks (:func:`locked`)."""
    config = root / CONFIG_FILE
    try:
        file = link_target(config) if config.is_symlink() else None
    except BrokenLink:
        file = None  # the config's load names it, with its fix
    key = None if file is None else str(file.with_name(file.name + ".lock"))
    if key is None or key in depths:
        yield
        return
    import filelock

    lock = filelock.FileLock(key, timeout=timeout, poll_interval=_LOCK_POLL_SECONDS, mode=0o644)
    try:
        lock.acquire()
    except filelock.Timeout:
        raise SkillError(
            f"another Keen process has been writing {file} (through {config}) for over {timeout:.0f}s "
            f"(lock {key}); wait for it or stop it, then retry"
        ) from None
    except OSError as exc:
        why = exc.strerror or type(exc).__name__
        raise SkillError(
            f"cannot lock {key} ({why}), beside the file {config} links to: Keen writes the skills "
            f"config there, so that folder must be one it can write; fix its permissions, or make "
            f"{config} a plain file"
        ) from exc
    depths[key] = 1
    try:
        yield
    finally:
        del depths[key]
        lock.release()
