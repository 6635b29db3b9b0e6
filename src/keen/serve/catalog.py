"""The upstream tools ``keen serve`` exposes, under names every LLM API accepts.

An upstream tool ``github/create_issue`` is exposed as ``github__create_issue``. Names are
cut to ``^[A-Za-z0-9_-]{1,64}$`` (the strictest of the common LLM tool-name rules); a name
that had to be changed or cut gets a stable 8-hex suffix from the SHA-256 of
``server/tool``, so it never collides with another tool and never changes between runs.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from dataclasses import dataclass

from keen.mcp.types import Tool

__all__ = ["MAX_NAME_CHARS", "ExposedTool", "ToolCatalog", "exposed_name", "minimal_description"]

MAX_NAME_CHARS = 64
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s")
_MINIMAL_CHARS = 160


def exposed_name(server: str, tool: str) -> str:
    """``<server>__<tool>`` made safe for LLM APIs; a stable hash suffix when it had to change."""
    raw = f"{server}__{tool}"
    safe = _UNSAFE.sub("_", raw)
    if safe == raw and len(raw) <= MAX_NAME_CHARS:
        return raw
    digest = hashlib.sha256(f"{server}/{tool}".encode()).hexdigest()[:8]
    return f"{safe[: MAX_NAME_CHARS - 9]}_{digest}"


def minimal_description(text: str, *, limit: int = _MINIMAL_CHARS) -> str:
    """The first sentence of ``text`` on one line, at most ``limit`` characters.

    Enough to choose a tool, no parameters or examples (the extension's stage 1).
    """
    flat = " ".join((text or "").split())
    first = _SENTENCE_END.split(flat, 1)[0] if flat else ""
    if len(first) > limit:
        first = first[: limit - 1].rstrip() + "…"
    return first


@dataclass(frozen=True, slots=True)
class ExposedTool:
    """One upstream tool as ``keen serve`` shows it: ``name`` is the exposed name."""

    name: str
    server: str
    tool: Tool

    @property
    def read_only(self) -> bool:
        return bool((self.tool.annotations or {}).get("readOnlyHint"))

    def minimal(self) -> str:
        text = minimal_description(self.tool.description) or f"{self.tool.name} on {self.server}"
        return f"[{self.server}] {text}"


class ToolCatalog:
    """Exposed name -> upstream tool, in a stable order (by exposed name)."""

    def __init__(self, tools: Iterable[Tool]) -> None:
        by_name: dict[str, ExposedTool] = {}
        for tool in tools:
            name = exposed_name(tool.server, tool.name)
            if name in by_name:
                # Two raw names mapped to one safe name: give the second its own hashed form.
                digest = hashlib.sha256(f"{tool.server}/{tool.name}#".encode()).hexdigest()[:8]
                name = f"{name[: MAX_NAME_CHARS - 9]}_{digest}"
            by_name[name] = ExposedTool(name=name, server=tool.server, tool=tool)
        self._tools = dict(sorted(by_name.items()))

    def __len__(self) -> int:
        return len(self._tools)

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def get(self, name: str) -> ExposedTool | None:
        return self._tools.get(name)

    def names(self) -> list[str]:
        return list(self._tools)

    def tools(self) -> list[ExposedTool]:
        return list(self._tools.values())

    def find(self, server: str, tool: str) -> ExposedTool | None:
        """The exposed tool for an upstream ``server``/``tool`` pair, if connected."""
        return self._tools.get(exposed_name(server, tool)) or next(
            (t for t in self._tools.values() if t.server == server and t.tool.name == tool), None
        )
