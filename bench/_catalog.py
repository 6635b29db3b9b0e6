"""Recorded MCP tool catalogs for the benchmarks (standard library only: every replay
server process imports it, so it must cost nothing to load).

Two formats, told apart by their first non-blank byte:

- LiveMCPBench ``tools.json`` (``[``): a JSON list of servers, each with ``name``,
  ``description`` and ``tools.{key}`` = ``{server_name, version, tools: [{name,
  description, inputSchema, annotations, outputSchema?}]}``; ``key`` is the server's
  ``config.mcpServers`` name.
- ToolGym ``tool_descriptions.ndjson`` (``{``): one JSON object per line with
  ``qualifiedName`` and ``tools[]`` (``name``, ``description``, ``inputSchema``).

``wire_tool`` turns a recorded definition into what ``tools/list`` sends: the recorded
keys verbatim, minus JSON ``null`` values at the top level and inside ``annotations``
(MCP omits absent optional fields; the recordings wrote them as ``null``).
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from keen.mcp.types import SERVER_NAME_RE

__all__ = [
    "KEEN_NAME",
    "CatalogError",
    "RecordedServer",
    "detect_format",
    "find_server",
    "keen_names",
    "load_catalog",
    "slugify",
    "wire_tool",
]

KEEN_NAME = SERVER_NAME_RE
"""Keen's server-name rule (``keen.mcp.types.SERVER_NAME_RE``; use ``fullmatch``)."""

_WIRE_KEYS = ("name", "title", "description", "inputSchema", "outputSchema", "annotations", "icons", "_meta")


class CatalogError(Exception):
    """A catalog file that cannot be read, or a server it does not hold."""


@dataclass(frozen=True)
class RecordedServer:
    """One server of a catalog. ``name``: as recorded (LiveMCPBench ``name``, ToolGym
    ``qualifiedName``); ``key``: a config-style name (LiveMCPBench ``tools`` key, else
    ``name``); ``info_name``/``version``: the ``serverInfo`` to announce; ``instructions``:
    the recorded server description, if any; ``tools``: wire dicts (see ``wire_tool``)."""

    name: str
    key: str
    info_name: str
    version: str
    instructions: str | None
    source: str
    tools: list[dict[str, Any]] = field(default_factory=lambda: list[dict[str, Any]]())


def wire_tool(raw: dict[str, Any]) -> dict[str, Any]:
    """A recorded tool as ``tools/list`` sends it (known keys, ``null`` left out)."""
    out = {key: raw[key] for key in _WIRE_KEYS if raw.get(key) is not None}
    if isinstance(out.get("annotations"), dict):
        hints = {k: v for k, v in out["annotations"].items() if v is not None}
        if hints:
            out["annotations"] = hints
        else:
            del out["annotations"]
    out.setdefault("inputSchema", {"type": "object"})
    return out


def detect_format(path: Path) -> str:
    """``"livemcpbench"`` or ``"toolgym"`` from the first non-blank byte. Raises CatalogError."""
    try:
        with path.open("rb") as handle:
            head = handle.read(4096).lstrip()
    except OSError as exc:
        raise CatalogError(f"cannot read catalog {path}: {exc.strerror}; pass an existing file") from exc
    if head.startswith(b"["):
        return "livemcpbench"
    if head.startswith(b"{"):
        return "toolgym"
    raise CatalogError(
        f"{path} is neither a LiveMCPBench tools.json (a JSON list) nor a ToolGym .ndjson "
        "(one JSON object per line)"
    )


def _livemcpbench(entry: dict[str, Any]) -> RecordedServer:
    blocks: dict[str, Any] = entry.get("tools") or {}
    key, block = next(iter(blocks.items()), (entry["name"], {}))
    return RecordedServer(
        name=entry["name"],
        key=key,
        info_name=block.get("server_name") or key,
        version=str(block.get("version") or "0"),
        instructions=entry.get("description") or None,
        source="livemcpbench",
        tools=[wire_tool(t) for b in blocks.values() for t in b.get("tools") or []],
    )


def _toolgym(entry: dict[str, Any]) -> RecordedServer:
    name = entry["qualifiedName"]
    return RecordedServer(
        name=name,
        key=name,
        info_name=name,
        version="0",
        instructions=entry.get("description") or None,
        source="toolgym",
        tools=[wire_tool(t) for t in entry.get("tools") or []],
    )


def _ndjson(path: Path, wanted: str | None) -> Iterable[dict[str, Any]]:
    # A replay server wants one line of ~300: skip the others without parsing them.
    needle = json.dumps(wanted, ensure_ascii=False)[1:-1] if wanted is not None else None
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            if not line.strip() or (needle is not None and needle not in line):
                continue
            try:
                yield json.loads(line)
            except json.JSONDecodeError as exc:
                raise CatalogError(f"{path}:{number}: not JSON ({exc.msg}); fix or remove that line") from exc


def _servers(path: Path, wanted: str | None) -> Iterable[RecordedServer]:
    kind = detect_format(path)
    try:
        if kind == "toolgym":
            yield from (_toolgym(e) for e in _ndjson(path, wanted))
            return
        entries = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise CatalogError(f"{path}: not JSON ({exc.msg} at line {exc.lineno}); is it a tools.json?") from exc
    except KeyError as exc:
        raise CatalogError(f"{path}: a server entry has no {exc} field; is it a ToolGym .ndjson?") from exc
    try:
        yield from (_livemcpbench(e) for e in entries)
    except (KeyError, AttributeError, TypeError) as exc:
        raise CatalogError(f"{path}: a server entry lacks {exc}; is it a LiveMCPBench tools.json?") from exc


def load_catalog(path: Path) -> list[RecordedServer]:
    """Every server of the catalog at ``path``, in file order. Raises CatalogError."""
    return list(_servers(path, None))


def find_server(path: Path, name: str) -> RecordedServer:
    """The server recorded as ``name`` (or whose LiveMCPBench key is ``name``). Raises
    CatalogError naming close matches when there is none."""
    for server in _servers(path, name):
        if name in (server.name, server.key):
            return server
    everything = load_catalog(path)  # the fast path missed: the file may escape names differently
    for server in everything:
        if name in (server.name, server.key):
            return server
    import difflib

    close = difflib.get_close_matches(name, [s.name for s in everything], n=3)
    hint = f" Did you mean: {', '.join(close)}?" if close else ""
    raise CatalogError(f"no server named {name!r} in {path}.{hint}")


def slugify(text: str) -> str:
    """A Keen server name for ``text``: ASCII letters, digits, ``_`` and ``-``, <= 60 chars
    (room for a dedupe suffix); ``server`` if nothing is left."""
    ascii_text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    slug = re.sub(r"[^A-Za-z0-9_-]+", "-", ascii_text).strip("-_")[:60].strip("-_")
    return slug or "server"


def keen_names(raw_names: Iterable[str]) -> list[str]:
    """Valid, unique Keen server names for ``raw_names``, deterministically, in order.

    A name that is not a valid Keen name is slugified; a taken one gets ``-2``, ``-3``, ...
    (compared case-insensitively, so the skill dirs differ on any filesystem).
    """
    out: list[str] = []
    taken: set[str] = set()
    for raw in raw_names:
        base = raw if KEEN_NAME.fullmatch(raw) and len(raw) <= 60 else slugify(raw)
        name, n = base, 1
        while name.lower() in taken:
            n += 1
            name = f"{base}-{n}"
        taken.add(name.lower())
        out.append(name)
    return out
