"""Capability descriptors: what the catalog knows of a tool, skill, resource or prompt.

A descriptor holds a one-line summary and token sizes, never the body: the full schema
(or SKILL.md body, or resource description) is read only when :meth:`Capability.load`
is called (deferred loading). Risk comes from the MCP tool annotations
(https://modelcontextprotocol.io/specification/2025-11-25/server/tools#tool-annotations)
with the specification's defaults for a missing hint: not read-only, destructive,
not idempotent, open-world. So an unannotated MCP tool counts as a write tool.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from keen.capabilities.modes import PermissionMode

__all__ = ["Capability", "Kind", "LoadedCapability", "PermissionMode", "Risk"]

Kind = Literal["tool", "skill", "resource", "prompt"]


@dataclass(frozen=True, slots=True)
class Risk:
    """The four MCP tool hints, spec defaults applied. ``level``: ``low`` (read-only),
    ``medium`` (writes, not destructive) or ``high`` (may destroy data)."""

    read_only: bool = False
    destructive: bool = True
    idempotent: bool = False
    open_world: bool = True

    @classmethod
    def from_annotations(cls, annotations: dict[str, Any] | None, *, trusted: bool = True) -> Risk:
        """Risk of a tool with these ``annotations`` (``None``: unannotated, a write tool).

        ``trusted=False``: the annotations are a server's claims only, so a tool that claims
        ``readOnlyHint`` is not read-only here but a write claimed to destroy nothing
        (``medium``): asked for in ``ask`` mode, refused in ``read-only`` mode.
        """
        hints = annotations or {}

        def flag(key: str, default: bool) -> bool:
            value = hints.get(key)
            return value if isinstance(value, bool) else default

        read_only = flag("readOnlyHint", False)
        if read_only and not trusted:
            return cls(
                read_only=False, destructive=False, idempotent=False, open_world=flag("openWorldHint", True)
            )
        return cls(
            read_only=read_only,
            # The spec: destructiveHint and idempotentHint mean something only when not read-only.
            destructive=False if read_only else flag("destructiveHint", True),
            idempotent=True if read_only else flag("idempotentHint", False),
            open_world=flag("openWorldHint", True),
        )

    @classmethod
    def reading(cls) -> Risk:
        """A capability that only brings text into context (a skill, resource or prompt)."""
        return cls(read_only=True, destructive=False, idempotent=True, open_world=False)

    @property
    def level(self) -> Literal["low", "medium", "high"]:
        if self.read_only:
            return "low"
        return "high" if self.destructive else "medium"

    def to_dict(self) -> dict[str, Any]:
        return {
            "level": self.level,
            "readOnlyHint": self.read_only,
            "destructiveHint": self.destructive,
            "idempotentHint": self.idempotent,
            "openWorldHint": self.open_world,
        }


@dataclass(frozen=True, slots=True)
class LoadedCapability:
    """The full layer of a capability. ``text``: what a model is shown when the capability
    enters its view (tool: name, description and the JSON ``inputSchema``; skill: the
    SKILL.md body). ``schema``: the tool's ``inputSchema`` (``None`` for other kinds)."""

    descriptor: Capability
    text: str
    schema: dict[str, Any] | None = None
    raw: dict[str, Any] = field(default_factory=lambda: dict[str, Any]())


@dataclass(frozen=True, slots=True)
class Capability:
    """One capability of the catalog (the directory and summary layers, not the full one).

    ``id``: see :mod:`keen.capabilities.names`. ``name``: the tool, skill, resource or
    prompt name as its source spells it. ``server``: the MCP server, ``None`` for a local
    skill. ``summary``: one line (<= 200 chars). ``tokens_index`` / ``tokens_full``: the
    estimated o200k tokens of the summary line and of the full layer. ``params``:
    parameter names (search only). ``location``: the file holding the full layer (schema
    JSON or SKILL.md), ``""`` when it lives in memory. ``search_text``: the text ToolSearch indexes (full
    description and parameter descriptions), never shown to a model as is. ``paths``: for a
    skill, the glob patterns of its ``paths`` frontmatter (the files it is about); empty when
    it applies everywhere.
    """

    id: str
    kind: Kind
    name: str
    title: str
    summary: str
    server: str | None
    risk: Risk
    tokens_index: int
    tokens_full: int
    params: tuple[str, ...] = ()
    location: str = ""
    search_text: str = field(default="", repr=False)
    paths: tuple[str, ...] = ()
    _loader: Callable[[], LoadedCapability] | None = field(default=None, repr=False, compare=False)

    @property
    def source(self) -> str:
        """``mcp:<server>`` or ``local``."""
        return f"mcp:{self.server}" if self.server else "local"

    def load(self) -> LoadedCapability:
        """The full layer, read now (from the schema file, SKILL.md or the live list).

        Raises ``keen.errors.SkillError`` when a file on disk is gone or unreadable.
        """
        if self._loader is None:
            return LoadedCapability(self, self.summary)
        return self._loader()

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready summary layer (no body, no search text)."""
        return {
            "id": self.id,
            "kind": self.kind,
            "name": self.name,
            "title": self.title,
            "summary": self.summary,
            "server": self.server,
            "source": self.source,
            "risk": self.risk.to_dict(),
            "tokens": {"index": self.tokens_index, "full": self.tokens_full},
            "location": self.location or None,
        }
