"""The upstream tools ``keen serve`` exposes, under names every LLM API accepts.

One name means one thing everywhere in Keen: an upstream tool is exposed under the model
tool name of its capability id (:mod:`keen.capabilities.names`), the name an agent's
harness offers, ToolSearch returns and the session log records. ``github/create_issue``
is ``mcp__github__create_issue``. An id that is not a valid name (``^[A-Za-z0-9_-]{1,64}$``,
the strictest of the common LLM tool-name rules) gets a readable prefix and a stable hash
suffix, so it never collides with another tool and never changes between runs.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from keen._redact import redactor
from keen._text import SUMMARY_CHARS, summary
from keen.capabilities.names import capability_id, model_name, model_names
from keen.mcp.types import Tool

if TYPE_CHECKING:
    from keen.capabilities import Catalog

__all__ = ["MAX_NAME_CHARS", "ExposedTool", "ToolCatalog", "exposed_name", "minimal_description"]

MAX_NAME_CHARS = 64


def exposed_name(server: str, tool: str) -> str:
    """The model tool name of ``server``'s ``tool`` (``mcp__<server>__<tool>`` when that is
    a valid name), ignoring collisions; :class:`ToolCatalog` resolves those."""
    return model_name(capability_id("tool", tool, server))


def minimal_description(text: str, *, limit: int = SUMMARY_CHARS) -> str:
    """The first sentence of ``text`` on one line, at most ``limit`` characters.

    Enough to choose a tool, no parameters or examples (the extension's stage 1). The same
    summary a generated SKILL.md's tool table gives (:func:`keen._text.summary`), never ending
    inside an abbreviation ("e.g.").
    """
    return summary(text, limit)


@dataclass(frozen=True, slots=True)
class ExposedTool:
    """One upstream tool as ``keen serve`` shows it: ``name`` is the exposed name.
    ``also_on``: the other servers with an identical tool (same name, description,
    parameters and risk), set on search results, which show such a group once."""

    name: str
    server: str
    tool: Tool
    also_on: tuple[str, ...] = ()

    @property
    def read_only(self) -> bool:
        return self.tool.read_only  # a readOnlyHint only from a server trusted for it

    def minimal(self) -> str:
        # Redacted before it is cut, so no part of a configured secret the server quoted in
        # its description survives (keen._redact; README "Secrets stay secret").
        text = (
            minimal_description(redactor.redact(self.tool.description))
            or f"{self.tool.name} on {self.server}"
        )
        return f"[{self.server}] {text}"


class ToolCatalog:
    """Exposed name -> upstream tool, in a stable order (by exposed name)."""

    def __init__(self, tools: Iterable[Tool]) -> None:
        by_id = {capability_id("tool", t.name, t.server): t for t in tools}
        names = model_names(by_id)  # unique, whatever the order (the capability catalog's names)
        self._tools = dict(
            sorted((names[i], ExposedTool(name=names[i], server=t.server, tool=t)) for i, t in by_id.items())
        )
        self._by_tool = {(t.server, t.tool.name): t for t in self._tools.values()}

    @functools.cached_property
    def capabilities(self) -> Catalog:
        """The same tools as a capability catalog (for the harness and ToolSearch); its model
        names are the exposed names. Built on first use."""
        from keen.capabilities import Catalog

        return Catalog.from_tools([t.tool for t in self._tools.values()])

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
        return self._by_tool.get((server, tool))
