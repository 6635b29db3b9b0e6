"""Tool names as schema file paths, and text made safe for one markdown table cell.

docs/architecture.md "Generated skills": ``schemas/<tool>.json``; nested names (``a/b``) become
folders "as long as the name does not escape the schemas directory". A server chooses
its tool names, so every name is checked before it touches the filesystem.
"""

from __future__ import annotations

import hashlib
import posixpath
import unicodedata
from dataclasses import dataclass

from keen._text import has_invisible, unsafe_char
from keen.mcpskills._layout import SCHEMAS_DIR

__all__ = [
    "MAX_NAME_CHARS",
    "PlannedTool",
    "RejectedTool",
    "display_text",
    "plan_paths",
    "schema_relpath",
    "unsafe_char",
]

"""Server names as ``keen.mcp.config`` accepts them; also what makes ``mcp:<server>`` a safe dir name."""

MAX_NAME_CHARS = 512
# 255 bytes is the usual file-name limit (ext4, xfs, apfs); ".json" takes 5 of them.
_MAX_SEGMENT_BYTES = 250


@dataclass(frozen=True, slots=True)
class RejectedTool:
    """A tool whose schema was not written. ``name`` is the raw name (may hold control
    characters: never print it unescaped); ``display`` is the escaped form used in
    SKILL.md and logs; ``reason`` says why."""

    name: str
    display: str
    reason: str

    def to_dict(self) -> dict[str, str]:
        return {"name": self.display, "reason": self.reason}


@dataclass(frozen=True, slots=True)
class PlannedTool:
    """An accepted tool name and its schema path relative to the skill dir (``schemas/a/b.json``)."""

    name: str
    relpath: str


def schema_relpath(name: str) -> str:
    """Path of ``name``'s schema relative to the skill dir, e.g. ``a/b`` -> ``schemas/a/b.json``.

    Raises ``ValueError`` with a short reason when the name is empty, longer than
    ``MAX_NAME_CHARS``, contains NUL, control or format characters or a backslash,
    is absolute, has an empty, ``.`` or ``..`` segment, or has a segment too long
    for a file name. Whatever passes stays inside ``schemas/`` (checked again).
    """
    if not name:
        return _reject("the name is empty")
    if len(name) > MAX_NAME_CHARS:
        return _reject(f"the name is longer than {MAX_NAME_CHARS} characters")
    if "\x00" in name:
        return _reject("the name contains a NUL character")
    if (not name.isprintable() or has_invisible(name)) and any(unsafe_char(ch) for ch in name):
        return _reject("the name contains a control or invisible formatting character")
    if "\\" in name:
        return _reject("the name contains a backslash")
    if name.startswith("/"):
        return _reject("the name is an absolute path")
    segments = name.split("/")
    if any(seg == "" for seg in segments):
        return _reject("the name has an empty path segment (leading, trailing or doubled '/')")
    if any(seg in (".", "..") for seg in segments):
        return _reject("the name has a '.' or '..' path segment")
    if any(len(seg.encode("utf-8", "surrogatepass")) > _MAX_SEGMENT_BYTES for seg in segments):
        return _reject(f"a path segment of the name is longer than {_MAX_SEGMENT_BYTES} bytes")
    relpath = f"{SCHEMAS_DIR}/{name}.json"
    # Defence in depth: the rules above already imply this.
    normal = posixpath.normpath(relpath)
    if normal != relpath or not normal.startswith(f"{SCHEMAS_DIR}/"):
        return _reject("the name would escape the schemas directory")
    return relpath


def _reject(reason: str) -> str:
    raise ValueError(reason)


def plan_paths(names: list[str]) -> tuple[list[PlannedTool], list[RejectedTool]]:
    """Check every name; return accepted ``PlannedTool`` and ``RejectedTool`` lists.

    ``names`` must be sorted and free of duplicates (the caller resolves those), so
    the outcome is deterministic. Paths are compared as a case-insensitive,
    normalization-insensitive file system (macOS, Windows) would: a name whose file
    differs from an earlier one's only in case (``Search`` after ``search``) gets a
    distinct file, ``schemas/Search.<8 hex>.json``, so the generated skill means the same
    on every file system. A name whose file would collide with a folder another name
    needs (``x.json/y`` vs ``x``) is rejected when it comes later in sort order.
    """
    accepted: list[PlannedTool] = []
    rejected: list[RejectedTool] = []
    files: dict[str, str] = {}
    folders: dict[str, str] = {}
    for name in names:
        try:
            relpath = schema_relpath(name)
        except ValueError as exc:
            rejected.append(RejectedTool(name, display_text(name), str(exc)))
            continue
        if _fold(relpath) in files:
            relpath = _distinct(relpath, name)
            if len(relpath.rsplit("/", 1)[-1].encode("utf-8", "surrogatepass")) > _MAX_SEGMENT_BYTES + 5:
                reason = (
                    f"it differs from tool {display_text(files[_fold(schema_relpath(name))])} only in case"
                )
                rejected.append(
                    RejectedTool(name, display_text(name), reason + " and is too long for a file of its own")
                )
                continue
        parts = relpath.split("/")
        needed = [_fold("/".join(parts[:i])) for i in range(2, len(parts))]
        folded = _fold(relpath)
        clash = (
            files.get(folded) or folders.get(folded) or next((files[d] for d in needed if d in files), None)
        )
        if clash is not None:
            reason = f"its schema path collides with the one of tool {display_text(clash)}"
            rejected.append(RejectedTool(name, display_text(name), reason))
            continue
        files[folded] = name
        for folder in needed:
            folders.setdefault(folder, name)
        accepted.append(PlannedTool(name, relpath))
    return accepted, rejected


def _fold(path: str) -> str:
    """``path`` as a case- and normalization-insensitive file system compares it."""
    return unicodedata.normalize("NFC", unicodedata.normalize("NFD", path).casefold())


def _distinct(relpath: str, name: str) -> str:
    """``schemas/<name>.<8 hex of the name's SHA-256>.json``: a file of its own for a name that
    differs from another only in case."""
    digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:8]
    return f"{relpath.removesuffix('.json')}.{digest}.json"


def display_text(text: str, limit: int = 80) -> str:
    """``text`` with unsafe characters escaped (``\\u0000``), ``|`` escaped for tables, cut to ``limit``."""
    if not text:
        return "(empty)"
    if text.isprintable() and not has_invisible(text) and "|" not in text and len(text) <= limit:
        return text
    out: list[str] = []
    for ch in text[: limit + 1]:
        if unsafe_char(ch):
            code = ord(ch)
            out.append(f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}")
        elif ch == "|":
            out.append("\\|")
        else:
            out.append(ch)
    shown = "".join(out)
    return shown if len(text) <= limit else shown + "…"
