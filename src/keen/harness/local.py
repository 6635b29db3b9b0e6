"""The local read-only tools: ``read_file``, ``list_dir``, ``glob``, ``grep``.

Every path is confined to a set of roots (the workspace and ``$KEEN_HOME/skills``). A
relative path is taken from the workspace; an absolute one must already lie inside a
root. The path is resolved (``..`` collapsed, symlinks followed) before the check, so
neither ``../..``, ``/etc/passwd`` nor a symlink that points outside gets through; a walk
(``glob``, ``grep``) drops every entry whose real path leaves the roots.

Keen's own files are not workspace files: everything under a *private* directory
(``$KEEN_HOME``: configs.json, OAuth tokens, logs, sessions) is refused, even when the
workspace contains it, except the roots inside it (the skills). Whatever a tool returns
has every secret Keen knows replaced by ``[REDACTED]`` (:mod:`keen._redact`), so a key
copied into a workspace file does not reach the model either.

A tool cannot hang its caller: only regular files are opened (a FIFO, device or socket
is skipped, and opened non-blocking in case one is swapped in), a whole file is read up
to ``MAX_FILE_BYTES`` (a larger one only as a ``read_file`` slice, ``offset`` and
``limit`` lines, read up to the slice's end and at most ``MAX_FILE_BYTES`` of it), a
grep pattern gets ``PATTERN_SECONDS`` per line (the ``regex`` module's timeout) and a
whole walk ``WALK_SECONDS``; a caller running a tool in a worker thread passes a ``stop``
event that ends it early.

Errors are :class:`LocalToolError` with a message a model can act on; the harness turns
them into observations.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import os
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio.to_thread

from keen._fs import FileTooLarge, NotRegularFile, open_regular, read_regular
from keen._redact import redactor
from keen.harness.definitions import LOCAL_TOOLS

__all__ = ["LOCAL_TOOLS", "LocalToolError", "Output", "Workspace"]

MAX_FILE_BYTES = 2_000_000
MAX_ENTRIES = 500
MAX_MATCHES = 200
DEFAULT_LINES = 2000
PATTERN_SECONDS = 1.0
"""A grep pattern that takes longer than this on one line is refused (catastrophic backtracking)."""
WALK_SECONDS = 10.0
"""A glob or grep stops after this long and returns what it found, with a note."""


class LocalToolError(Exception):
    """A local tool refused or failed; ``str(exc)`` says why and what to do."""


class _Budget:
    """When a walk must stop: its deadline passed, or the caller set ``stop`` (abandoned)."""

    def __init__(self, seconds: float, stop: threading.Event | None) -> None:
        self.deadline = time.monotonic() + seconds
        self.stop = stop
        self.expired = False

    def left(self) -> float:
        return self.deadline - time.monotonic()

    def over(self) -> bool:
        if self.stop is not None and self.stop.is_set():
            raise LocalToolError("stopped")
        self.expired = self.expired or self.left() <= 0
        return self.expired


def _within(real: Path, dirs: Sequence[Path]) -> bool:
    return any(real == d or real.is_relative_to(d) for d in dirs)


def _read_regular(path: Path, shown: str) -> bytes:
    """The bytes of the regular file ``path`` (at most ``MAX_FILE_BYTES``). Raises
    LocalToolError for anything else (:class:`_TooBig` for a larger file): a FIFO or device
    opened non-blocking returns at once and is refused by its type, a symlink swapped in
    after the path was resolved is not followed (:func:`keen._fs.read_regular`)."""
    try:
        return read_regular(path, MAX_FILE_BYTES)
    except NotRegularFile:
        raise _not_regular(shown) from None
    except FileTooLarge:
        raise _TooBig(
            f"{shown!r} is larger than {MAX_FILE_BYTES:,} bytes, more than a whole-file read takes; "
            "read a slice of it: call read_file with offset (its first line, from 1) and limit "
            f"(how many lines, e.g. offset=1, limit={DEFAULT_LINES})"
        ) from None
    except OSError as exc:
        raise LocalToolError(f"{shown!r} cannot be opened ({exc.strerror})") from None


def _not_regular(shown: str) -> LocalToolError:
    return LocalToolError(f"{shown!r} is not a regular file (a FIFO, device or socket); it is not read")


class _TooBig(LocalToolError):
    """A whole-file read of a file over ``MAX_FILE_BYTES``; the message says how to read a slice."""


_SKIP_CHUNK = 1 << 16
"""Bytes read at a time while skipping the lines before a slice (a long line is not held whole)."""


def _slice(path: Path, shown: str, first: int, count: int, budget: _Budget) -> str:
    """Lines ``first`` to ``first + count - 1`` of a file larger than ``MAX_FILE_BYTES``,
    read up to the slice's end and at most ``MAX_FILE_BYTES`` of it: the file is never
    loaded whole. Lines end at ``\n`` only (a ``\r`` before it is dropped), where
    :meth:`Workspace._read_file`'s whole-file read splits as :meth:`str.splitlines` (at a lone
    ``\r`` and the other Unicode line boundaries too), so in a file holding those the numbers
    differ. A line longer than the cap is shown cut, with a note. ``budget`` is checked
    before each chunk skipped and each line read: the caller's stop event ends the read
    (:class:`LocalToolError`), its deadline (``WALK_SECONDS``) ends it with a note."""
    try:
        handle, size = open_regular(path)
    except NotRegularFile:
        raise _not_regular(shown) from None
    except OSError as exc:
        raise LocalToolError(f"{shown!r} cannot be opened ({exc.strerror})") from None
    rows: list[str] = []
    note = ""
    with handle:
        number, open_line = 1, False
        while number < first:  # skip to the slice, a chunk at a time
            # Each chunk, not each line: a file without newlines is one line of any length.
            if budget.over():  # raises when the caller stopped the call
                return _stopped(
                    number, f"before offset={first}: that far into the file is too far to reach in time"
                )
            piece = handle.readline(_SKIP_CHUNK)
            if not piece:
                lines = number - 1 + open_line  # a last line without its newline counts
                return f"[the file has {lines:,} lines, fewer than offset={first}; {size:,} bytes]"
            open_line = not piece.endswith(b"\n")
            if not open_line:
                number += 1
        taken = 0
        while len(rows) < count:
            if budget.over():
                if not rows:
                    return _stopped(number, "before reading it: read a smaller slice")
                note = "\n" + _stopped(
                    number,
                    f"lines {first}-{number - 1} are above: call read_file with offset={number} to read on",
                )
                break
            raw = handle.readline(MAX_FILE_BYTES - taken + 1)
            if not raw:
                break
            cut = not raw.endswith(b"\n") and len(raw) > MAX_FILE_BYTES - taken
            line = raw[: MAX_FILE_BYTES - taken] if cut else raw
            rows.append(f"{number:>6}\t{_decoded(line, cut, shown, number)}")
            taken += len(line)
            if cut:
                note = (
                    f"\n[the slice stopped in line {number}: a slice reads at most {MAX_FILE_BYTES:,} bytes; "
                    "ask for fewer lines]"
                )
                break
            number += 1
        else:
            if handle.read(1):
                last = first + len(rows) - 1
                note = (
                    f"\n[lines {first}-{last} of a file of {size:,} bytes; "
                    f"call read_file with offset={last + 1} to read on]"
                )
    if not rows:
        return f"[the file has {first - 1:,} lines: offset={first} is past its end; {size:,} bytes]"
    return "\n".join(rows) + note


def _stopped(number: int, where: str) -> str:
    """The note of a slice that ran out of time (``WALK_SECONDS``) at line ``number``."""
    return f"[stopped after {WALK_SECONDS:g} s at line {number:,}, {where}]"


def _decoded(line: bytes, cut: bool, shown: str, number: int) -> str:
    """One line of a slice as text, its line ending dropped; a ``cut`` line may end in the
    middle of a character, which is left out. Raises LocalToolError for bytes not UTF-8."""
    for end in range(len(line), max(len(line) - 4, -1) if cut else len(line) - 1, -1):
        try:
            return line[:end].decode("utf-8").removesuffix("\n").removesuffix("\r")
        except UnicodeDecodeError:
            continue
    raise LocalToolError(f"{shown!r} is not UTF-8 text (line {number})")


@dataclass(frozen=True, slots=True)
class Output:
    """A local tool's result. ``more``: how to get the rest if the harness cuts ``text``
    (called with the number of characters kept)."""

    text: str
    more: str = "ask for less, e.g. a narrower path or pattern"
    touched: tuple[str, ...] = ()


class Workspace:
    """The roots the local tools may read. ``workspace`` is where relative paths start.

    ``private``: directories refused even inside the workspace (``$KEEN_HOME``), except
    where an ``extra_roots`` entry lies inside one (``$KEEN_HOME/skills``).
    """

    def __init__(
        self, workspace: Path, extra_roots: Sequence[Path] = (), private: Sequence[Path] = ()
    ) -> None:
        self.workspace = workspace.resolve()
        self.extra = [r.resolve() for r in extra_roots]
        self.roots = [self.workspace, *self.extra]
        self.private = [p.resolve() for p in private]

    def _private(self, real: Path) -> bool:
        return _within(real, self.private) and not _within(real, self.extra)

    def _inside(self, real: Path) -> bool:
        return _within(real, self.roots) and not self._private(real)

    def _may_enter(self, real: Path) -> bool:
        """Whether a walk goes into the directory ``real``: not into a private one, unless
        an extra root (the skills) lies below it."""
        return not self._private(real) or any(root.is_relative_to(real) for root in self.extra)

    def resolve(self, path: str | None) -> Path:
        """The real path of ``path`` if it lies inside a root. Raises LocalToolError."""
        raw = (path or ".").strip() or "."
        if "\x00" in raw:
            raise LocalToolError("the path contains a NUL character")
        candidate = Path(raw).expanduser()
        if not candidate.is_absolute():
            candidate = self.workspace / candidate
        real = candidate.resolve()
        if _within(real, self.roots) and self._private(real):
            raise LocalToolError(
                f"{raw!r} is one of Keen's own files (its configuration, sign-ins, logs and sessions), "
                f"not a workspace file; local tools do not read it (skills are under {self.extra[0]})"
                if self.extra
                else f"{raw!r} is one of Keen's own files, not a workspace file; local tools do not read it"
            )
        if not self._inside(real):
            raise LocalToolError(
                f"{raw!r} is outside the workspace: local tools read only under "
                f"{', '.join(str(r) for r in self.roots)}; use a path inside it"
            )
        return real

    def shown(self, real: Path) -> str:
        """How a path is shown to the model: relative to the workspace when inside it."""
        return str(real.relative_to(self.workspace)) if real.is_relative_to(self.workspace) else str(real)

    def _walk(self, top: Path, budget: _Budget) -> Iterator[Path]:
        """Files under ``top`` whose real path stays inside the roots (symlinks checked),
        until ``budget`` runs out."""
        for dirpath, dirnames, filenames in os.walk(top, followlinks=False):
            here = Path(dirpath)
            dirnames[:] = sorted(
                d for d in dirnames if not d.startswith(".git") and self._may_enter(here / d)
            )
            for name in sorted(filenames):
                if budget.over():
                    return
                path = here / name
                try:
                    real = path.resolve()
                except (OSError, RuntimeError):  # a symlink loop
                    continue
                if self._inside(real):
                    yield path

    # -- the tools --------------------------------------------------------------------------

    def run(self, tool: str, arguments: dict[str, Any], stop: threading.Event | None = None) -> Output:
        """Run one local tool, its output redacted. Raises LocalToolError (refused, failed, or
        ended by ``stop``), KeyError (unknown)."""
        budget = _Budget(WALK_SECONDS, stop)
        out: Output = getattr(self, f"_{tool}")(budget, **arguments)
        return dataclasses.replace(out, text=redactor.redact_literals(out.text))

    async def run_cancellably(self, tool: str, arguments: dict[str, Any]) -> Output:
        """:meth:`run` in a worker thread, so the event loop keeps running: Ctrl-C and
        SIGTERM cancel the turn at once. A cancelled call is abandoned and told to stop,
        which it does at its next file or line."""
        stop = threading.Event()
        try:
            return await anyio.to_thread.run_sync(
                lambda: self.run(tool, arguments, stop), abandon_on_cancel=True
            )
        finally:
            stop.set()

    def _read_file(
        self, budget: _Budget, path: str, offset: int | None = None, limit: int | None = None
    ) -> Output:
        real = self.resolve(path)
        if not real.is_file():
            raise LocalToolError(f"{path!r} is not a file; use list_dir to see what is there")
        first, count = offset or 1, limit or DEFAULT_LINES
        shown = self.shown(real)
        more = f"call read_file on {shown} with a later offset and a smaller limit"
        try:
            data = _read_regular(real, path)
        except _TooBig as exc:
            if offset is None and limit is None:
                raise LocalToolError(str(exc)) from None
            # A slice of a larger file: read up to its last line, never the file whole.
            return Output(_slice(real, path, first, count, budget), more=more, touched=(shown,))
        try:
            lines = data.decode("utf-8").splitlines()
        except UnicodeDecodeError:
            raise LocalToolError(f"{path!r} is not UTF-8 text") from None
        chunk = lines[first - 1 : first - 1 + count]
        text = "\n".join(f"{first + i:>6}\t{line}" for i, line in enumerate(chunk))
        last = first - 1 + len(chunk)
        if last < len(lines):
            text += (
                f"\n[lines {first}-{last} of {len(lines)}; call read_file with offset={last + 1} to read on]"
            )
        return Output(text, more=more, touched=(shown,))

    def _list_dir(self, budget: _Budget, path: str = ".") -> Output:
        real = self.resolve(path)
        if not real.is_dir():
            raise LocalToolError(f"{path!r} is not a directory")
        entries = sorted(real.iterdir())
        names = [p.name + ("/" if p.is_dir() else "") for p in entries[:MAX_ENTRIES]]
        if len(entries) > MAX_ENTRIES:
            names.append(f"[{len(entries) - MAX_ENTRIES} more entries; list a subdirectory]")
        shown = self.shown(real)
        return Output("\n".join(names) or "(empty)", more="list a subdirectory", touched=(shown,))

    def _glob(self, budget: _Budget, pattern: str, path: str = ".") -> Output:
        top = self.resolve(path)
        found = [
            self.shown(p.resolve())
            for p in self._walk(top, budget)
            if fnmatch.fnmatch(str(p.relative_to(top)), pattern) or fnmatch.fnmatch(p.name, pattern)
        ]
        text = "\n".join(found[:MAX_ENTRIES]) or "(no match)"
        return Output(text + _late(budget), touched=(self.shown(top),))

    def _grep(self, budget: _Budget, pattern: str, path: str = ".", include: str = "*") -> Output:
        # The regex module: re-compatible syntax (VERSION0), and a timeout per search. Imported
        # at the first grep (about 15 ms), not with the harness a chat imports before it asks.
        import regex

        try:
            compiled = regex.compile(pattern)
        except regex.error as exc:
            raise LocalToolError(f"invalid regular expression {pattern!r}: {exc}") from None
        top = self.resolve(path)
        files = (
            [top]
            if top.is_file()
            else (p for p in self._walk(top, budget) if fnmatch.fnmatch(p.name, include))
        )
        hits: list[str] = []
        for file in files:
            real = file.resolve()  # opened without following a link: the link's target
            shown = self.shown(real)
            try:
                lines = _read_regular(real, shown).decode("utf-8").splitlines()
            except (LocalToolError, UnicodeDecodeError):
                if file == top:
                    raise
                continue  # a binary, huge or special file in a walk: skipped
            for n, line in enumerate(lines, 1):
                if budget.over():
                    break
                limit = min(PATTERN_SECONDS, max(budget.left(), 0.001))
                try:
                    found = compiled.search(line, timeout=limit)
                except TimeoutError:
                    if limit < PATTERN_SECONDS:
                        # The walk's deadline ran out during this search, not the pattern's own
                        # limit: the walk stops with what it found. Decided by which limit was
                        # given, not by the clock after it, which a loaded machine moves on.
                        budget.expired = True
                        break
                    raise LocalToolError(
                        f"the pattern {pattern!r} took more than {PATTERN_SECONDS:g} s on line {n} of {shown}: "
                        "it backtracks without end (nested repetition such as (a+)+); simplify it"
                    ) from None
                if found:
                    hits.append(f"{shown}:{n}: {line}")
            if len(hits) >= MAX_MATCHES:
                hits = [
                    *hits[:MAX_MATCHES],
                    f"[stopped at {MAX_MATCHES} matches; narrow the pattern or path]",
                ]
                break
            if budget.expired:
                break
        return Output(("\n".join(hits) or "(no match)") + _late(budget), touched=(self.shown(top),))


def _late(budget: _Budget) -> str:
    """The note a walk that ran out of time ends with ("" when it finished)."""
    if not budget.expired:
        return ""
    return f"\n[stopped after {WALK_SECONDS:g} s; what is above is what was found so far: narrow the path or pattern]"
