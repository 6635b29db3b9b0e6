"""The local read-only tools: ``read_file``, ``list_dir``, ``glob``, ``grep``.

Every path is confined to a set of roots (the workspace and ``$KEEN_HOME/skills``). A
relative path is taken from the workspace; an absolute one must already lie inside a
root. The path is resolved (``..`` collapsed, symlinks followed) before the check, so
neither ``../..``, ``/etc/passwd`` nor a symlink that points outside gets through; a walk
(``glob``, ``grep``) drops every entry whose real path leaves the roots.

Errors are :class:`LocalToolError` with a message a model can act on; the harness turns
them into observations.
"""

from __future__ import annotations

import fnmatch
import os
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["LOCAL_TOOLS", "LocalToolError", "Output", "Workspace"]

MAX_FILE_BYTES = 2_000_000
MAX_ENTRIES = 500
MAX_MATCHES = 200
DEFAULT_LINES = 2000


class LocalToolError(Exception):
    """A local tool refused or failed; ``str(exc)`` says why and what to do."""


@dataclass(frozen=True, slots=True)
class Output:
    """A local tool's result. ``more``: how to get the rest if the harness cuts ``text``
    (called with the number of characters kept)."""

    text: str
    more: str = "ask for less, e.g. a narrower path or pattern"
    touched: tuple[str, ...] = ()


def _schema(properties: dict[str, Any], required: Sequence[str]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": list(required),
        "additionalProperties": False,
    }


_PATH = {"type": "string", "description": "Path relative to the workspace (or inside the skills directory)"}

LOCAL_TOOLS: dict[str, tuple[str, dict[str, Any]]] = {
    "read_file": (
        "Read a text file in the workspace or the skills directory (SKILL.md, schema files). "
        "Lines are numbered from 1; use offset and limit to page through a long file.",
        _schema(
            {
                "path": _PATH,
                "offset": {"type": "integer", "minimum": 1, "description": "First line to read (1-based)"},
                "limit": {"type": "integer", "minimum": 1, "description": "How many lines"},
            },
            ["path"],
        ),
    ),
    "list_dir": (
        "List a directory of the workspace or the skills directory (directories end with /).",
        _schema({"path": _PATH}, []),
    ),
    "glob": (
        "Find files by glob pattern (e.g. **/*.py) under a directory of the workspace.",
        _schema({"pattern": {"type": "string"}, "path": _PATH}, ["pattern"]),
    ),
    "grep": (
        "Search file contents with a regular expression; prints path:line: text for each match.",
        _schema(
            {
                "pattern": {"type": "string", "description": "Python regular expression"},
                "path": _PATH,
                "include": {"type": "string", "description": "Only files whose name matches this glob"},
            },
            ["pattern"],
        ),
    ),
}


class Workspace:
    """The roots the local tools may read. ``workspace`` is where relative paths start."""

    def __init__(self, workspace: Path, extra_roots: Sequence[Path] = ()) -> None:
        self.workspace = workspace.resolve()
        self.roots = [self.workspace, *(r.resolve() for r in extra_roots)]

    def _inside(self, real: Path) -> bool:
        return any(real == root or real.is_relative_to(root) for root in self.roots)

    def resolve(self, path: str | None) -> Path:
        """The real path of ``path`` if it lies inside a root. Raises LocalToolError."""
        raw = (path or ".").strip() or "."
        if "\x00" in raw:
            raise LocalToolError("the path contains a NUL character")
        candidate = Path(raw).expanduser()
        if not candidate.is_absolute():
            candidate = self.workspace / candidate
        real = candidate.resolve()
        if not self._inside(real):
            raise LocalToolError(
                f"{raw!r} is outside the workspace: local tools read only under "
                f"{', '.join(str(r) for r in self.roots)}; use a path inside it"
            )
        return real

    def shown(self, real: Path) -> str:
        """How a path is shown to the model: relative to the workspace when inside it."""
        return str(real.relative_to(self.workspace)) if real.is_relative_to(self.workspace) else str(real)

    def _walk(self, top: Path) -> Iterator[Path]:
        """Files under ``top`` whose real path stays inside the roots (symlinks checked)."""
        for dirpath, dirnames, filenames in os.walk(top, followlinks=False):
            dirnames[:] = sorted(d for d in dirnames if not d.startswith(".git"))
            for name in sorted(filenames):
                path = Path(dirpath) / name
                if self._inside(path.resolve()):
                    yield path

    # -- the tools --------------------------------------------------------------------------

    def run(self, tool: str, arguments: dict[str, Any]) -> Output:
        """Run one local tool. Raises LocalToolError (refused or failed), KeyError (unknown)."""
        return getattr(self, f"_{tool}")(**arguments)

    def _read_file(self, path: str, offset: int = 1, limit: int = DEFAULT_LINES) -> Output:
        real = self.resolve(path)
        if not real.is_file():
            raise LocalToolError(f"{path!r} is not a file; use list_dir to see what is there")
        if real.stat().st_size > MAX_FILE_BYTES:
            raise LocalToolError(f"{path!r} is larger than {MAX_FILE_BYTES} bytes; use grep to find the part")
        try:
            lines = real.read_text(encoding="utf-8").splitlines()
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

    def _list_dir(self, path: str = ".") -> Output:
        real = self.resolve(path)
        if not real.is_dir():
            raise LocalToolError(f"{path!r} is not a directory")
        entries = sorted(real.iterdir())
        names = [p.name + ("/" if p.is_dir() else "") for p in entries[:MAX_ENTRIES]]
        if len(entries) > MAX_ENTRIES:
            names.append(f"[{len(entries) - MAX_ENTRIES} more entries; list a subdirectory]")
        shown = self.shown(real)
        return Output("\n".join(names) or "(empty)", more="list a subdirectory", touched=(shown,))

    def _glob(self, pattern: str, path: str = ".") -> Output:
        top = self.resolve(path)
        found = [
            self.shown(p.resolve())
            for p in self._walk(top)
            if fnmatch.fnmatch(str(p.relative_to(top)), pattern) or fnmatch.fnmatch(p.name, pattern)
        ]
        return Output("\n".join(found[:MAX_ENTRIES]) or "(no match)", touched=(self.shown(top),))

    def _grep(self, pattern: str, path: str = ".", include: str = "*") -> Output:
        try:
            regex = re.compile(pattern)
        except re.error as exc:
            raise LocalToolError(f"invalid regular expression {pattern!r}: {exc}") from None
        top = self.resolve(path)
        files = [top] if top.is_file() else [p for p in self._walk(top) if fnmatch.fnmatch(p.name, include)]
        hits: list[str] = []
        for file in files:
            if file.stat().st_size > MAX_FILE_BYTES:
                continue
            try:
                lines = file.read_text(encoding="utf-8").splitlines()
            except (UnicodeDecodeError, OSError):
                continue
            hits += [
                f"{self.shown(file.resolve())}:{n}: {line}"
                for n, line in enumerate(lines, 1)
                if regex.search(line)
            ]
            if len(hits) >= MAX_MATCHES:
                hits = [
                    *hits[:MAX_MATCHES],
                    f"[stopped at {MAX_MATCHES} matches; narrow the pattern or path]",
                ]
                break
        return Output("\n".join(hits) or "(no match)", touched=(self.shown(top),))
