"""Atomic file writes: a reader sees the old file or the new one, never a part.

Write to a temporary file in the same directory, fsync, then ``os.replace`` (atomic
on POSIX within one filesystem). ``mode`` is applied before any byte is written,
so a secret never sits in a world-readable file, even briefly.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import stat
from pathlib import Path
from typing import Any, BinaryIO

__all__ = [
    "BOM",
    "LONE_SURROGATE",
    "BrokenLink",
    "FileTooLarge",
    "NotRegularFile",
    "atomic_write_bytes",
    "atomic_write_json",
    "atomic_write_text",
    "leads_nowhere",
    "link_target",
    "open_regular",
    "read_regular",
]

_READ_FLAGS = (
    os.O_RDONLY
    | getattr(os, "O_NONBLOCK", 0)
    | getattr(os, "O_NOFOLLOW", 0)
    | getattr(os, "O_NOCTTY", 0)
    | getattr(os, "O_CLOEXEC", 0)
)


def atomic_write_bytes(path: Path, data: bytes, *, mode: int = 0o644, fsync: bool = True) -> None:
    """Replace ``path`` with ``data`` atomically; creates parent directories.

    Raises ``OSError`` from the filesystem; the target is untouched on failure.
    """
    import tempfile  # at the first write: reading processes (a prompt) need not load it (shutil, bz2...)

    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        if hasattr(os, "fchmod"):
            os.fchmod(fd, mode)
        else:  # Windows before Python 3.13: only the read-only bit applies there anyway
            os.chmod(tmp, mode)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            if fsync:
                handle.flush()
                os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def atomic_write_text(path: Path, text: str, *, mode: int = 0o644, fsync: bool = True) -> None:
    """UTF-8 text variant of :func:`atomic_write_bytes`."""
    atomic_write_bytes(path, text.encode("utf-8"), mode=mode, fsync=fsync)


LONE_SURROGATE = re.compile("[\ud800-\udfff]")
"""Half of a UTF-16 surrogate pair alone: what ``"\\ud800"`` without its pair reads as in JSON
(or a command-line byte that is not UTF-8); it has no UTF-8 form."""

BOM = "\ufeff"
"""The UTF-8 byte order mark, which some editors (Windows Notepad) write first: a reader of a
JSON or text file skips it."""


def atomic_write_json(path: Path, data: Any, *, mode: int = 0o644, fsync: bool = True) -> None:
    """Write ``data`` as indented JSON (UTF-8, trailing newline) atomically.

    A lone surrogate in a string (what a file's ``"\\ud800"`` escape without its pair reads
    as) is written as that escape again: it has no UTF-8 form, and the file keeps its value.
    """
    text = json.dumps(data, indent=2, ensure_ascii=False) + "\n"
    text = LONE_SURROGATE.sub(lambda found: f"\\u{ord(found.group()):04x}", text)
    atomic_write_text(path, text, mode=mode, fsync=fsync)


class BrokenLink(OSError):
    """:func:`link_target`'s path, or a folder on its way, is a symlink to nothing, or a loop
    of them; the message names the link (and the missing target) and the fix."""


def link_target(path: Path) -> Path:
    """The file a write to ``path`` replaces: ``path``, or the file a symlink there points to
    (a config kept with one's dotfiles), so the link stays a link.

    ``os.replace`` over the link itself would put a plain file in its place, and the file it
    pointed to would keep the old content without a word.

    Raises:
        BrokenLink: ``path`` is a symlink to nothing (a write would create it, folders and
            all, somewhere the user never meant) or a loop of symlinks; or ``path`` is
            missing because a folder on its way is one (``mcp -> ../moved/keen-mcp``: a
            read would find no file, a write no folder).
    """
    try:
        if not stat.S_ISLNK(os.lstat(path).st_mode):
            return path
    except OSError:  # missing, or no way to it: a folder link to nothing is the one to name
        _no_broken_folder(path)
        return path  # the read or write that follows says what else is wrong
    try:
        return Path(os.path.realpath(path, strict=True))
    except OSError:
        raise _broken(path, "file") from None


def leads_nowhere(path: Path) -> bool:
    """Whether ``path``, which a read found missing, is so because of a symlink (its own, or
    a folder's on its way) to nothing or a loop: :func:`link_target` would say which.

    A reader that takes a missing file for an empty config asks this first, or a link lost
    in a moved dotfiles folder reads as no settings at all.
    """
    try:
        link_target(path)
    except BrokenLink:
        return True
    return False


def _no_broken_folder(path: Path) -> None:
    """Raise :class:`BrokenLink` for the first folder up ``path``'s way that is a symlink to
    nothing or a loop; stop at the first that exists (everything above it resolves)."""
    for folder in path.parents:
        if os.path.exists(folder):
            return
        if os.path.islink(folder):
            raise _broken(folder, "folder")


def _broken(link: Path, kind: str) -> BrokenLink:
    """What is wrong with ``link``, a symlink that does not resolve, and what to do."""
    try:
        os.path.realpath(link, strict=True)
    except FileNotFoundError:
        return BrokenLink(
            f"{link} links to {os.path.realpath(link)}, which does not exist; create it or remove the link"
        )
    except OSError as exc:  # ELOOP: config.json -> config.json
        why = exc.strerror or exc
        usable = "a file you can read" if kind == "file" else "a folder Keen can use"
        return BrokenLink(f"cannot read {link}: {why}; it must be {usable}, or a link to one")
    return BrokenLink(f"{link} changed while Keen read it; try again")  # resolved just now


class NotRegularFile(OSError):
    """:func:`read_regular`'s path is a symlink, FIFO, device, socket or directory."""


class FileTooLarge(OSError):
    """:func:`read_regular`'s file holds more bytes than it was asked to read."""


def _open_regular(path: Path) -> tuple[int, int]:
    """A descriptor of the regular file ``path``, opened as :func:`read_regular` says, set to
    blocking reads, and the file's size. Raises NotRegularFile or OSError (closed then)."""
    import stat  # only where a file is read this way

    fd = os.open(path, _READ_FLAGS)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise NotRegularFile(f"{path} is not a regular file")
        if _READ_FLAGS & getattr(os, "O_NONBLOCK", 0):  # opened so: reads may block now
            os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd, info.st_size


def read_regular(path: Path, most: int) -> bytes:
    """The bytes of the regular file ``path``, at most ``most`` of them.

    Opened without following a final symlink and without blocking (a FIFO opens at once,
    then is refused by its type), so a reader on an event loop never waits on a writer.

    Raises:
        NotRegularFile: ``path`` is not a regular file (a FIFO, device, socket or directory;
            a final symlink fails to open instead, as the plain ``OSError`` below).
        FileTooLarge: it holds more than ``most`` bytes, or grew past them while read.
        OSError: ``path`` cannot be opened or read.
    """
    fd, size = _open_regular(path)
    try:
        if size > most:
            raise FileTooLarge(f"{path} holds {size} bytes, more than {most}")
        chunks: list[bytes] = []
        size = 0
        while size <= most and (chunk := os.read(fd, 1 << 16)):
            chunks.append(chunk)
            size += len(chunk)
        if size > most:  # it grew since fstat
            raise FileTooLarge(f"{path} holds more than {most} bytes")
        return b"".join(chunks)
    finally:
        os.close(fd)


def open_regular(path: Path) -> tuple[BinaryIO, int]:
    """The regular file ``path`` opened for buffered binary reading, as :func:`read_regular`
    opens it (no final symlink followed, never blocking on a FIFO), and its size in bytes:
    for a reader that takes part of a file of any size (a slice of its lines).

    Raises:
        NotRegularFile: ``path`` is not a regular file.
        OSError: ``path`` cannot be opened.
    """
    fd, size = _open_regular(path)
    return os.fdopen(fd, "rb"), size
