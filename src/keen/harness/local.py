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
is skipped, and opened non-blocking in case one is swapped in), files are read up to
``MAX_FILE_BYTES``, a grep pattern gets ``PATTERN_SECONDS`` per line (the ``regex``
module's timeout) and a whole walk ``WALK_SECONDS``; a caller running a tool in a worker
thread passes a ``stop`` event that ends it early.

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

from keen._fs import FileTooLarge, NotRegularFile, read_regular
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
    LocalToolError for anything else: a FIFO or device opened non-blocking returns at once
    and is refused by its type, a symlink swapped in after the path was resolved is not
    followed (:func:`keen._fs.read_regular`)."""
    try:
        return read_regular(path, MAX_FILE_BYTES)
    except NotRegularFile:
        raise LocalToolError(
            f"{shown!r} is not a regular file (a FIFO, device or socket); it is not read"
        ) from None
    except FileTooLarge:
        raise _too_big(shown) from None
    except OSError as exc:
        raise LocalToolError(f"{shown!r} cannot be opened ({exc.strerror})") from None


def _too_big(shown: str) -> LocalToolError:
    return LocalToolError(
        f"{shown!r} is larger than {MAX_FILE_BYTES} bytes, more than the local tools read; "
        "ask the user for the part you need"
    )


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

    def _read_file(self, budget: _Budget, path: str, offset: int = 1, limit: int = DEFAULT_LINES) -> Output:
        real = self.resolve(path)
        if not real.is_file():
            raise LocalToolError(f"{path!r} is not a file; use list_dir to see what is there")
        try:
            lines = _read_regular(real, path).decode("utf-8").splitlines()
        except UnicodeDecodeError:
            raise LocalToolError(f"{path!r} is not UTF-8 text") from None
        chunk = lines[offset - 1 : offset - 1 + limit]
        text = "\n".join(f"{offset + i:>6}\t{line}" for i, line in enumerate(chunk))
        last = offset - 1 + len(chunk)
        if last < len(lines):
            text += (
                f"\n[lines {offset}-{last} of {len(lines)}; call read_file with offset={last + 1} to read on]"
            )
        shown = self.shown(real)
        return Output(
            text, more=f"call read_file on {shown} with a later offset and a smaller limit", touched=(shown,)
        )

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
