"""The catalog of a running Manager, rebuilt each agent step only from what changed.

An agent asks for the catalog at every step (:meth:`keen.harness.Harness.begin_step`).
Built from scratch, that means rescanning the skills directory (every ``SKILL.md``
frontmatter parsed) and making a descriptor of every tool of every connected server: about
40 ms for 70 servers, 527 tools and 80 skills here, most of a step's own time
(``bench/turn_overhead.py``). :class:`CatalogCache` keeps what it built and reuses it:

* per connected server, its descriptors and search text, while the Manager still reports
  the same tools (after the pin check), ``serverInfo``, resources, resource templates and
  prompts, compared by value (the Manager keeps its ``Tool`` objects until a tools/list
  changes them, so the comparison stops at identity and costs microseconds);
* the local skills, while :class:`keen.skills.cache.DiscoveryCache` finds the skills
  directory unchanged (stat data of every ``SKILL.md``, symlink target, marker file and
  ``config.json``; see that module for why each is needed);
* the :class:`~keen.capabilities.Catalog` itself when nothing at all changed, so its search
  index and filter masks are built once, not once per step.

A server that connects, disconnects, is refreshed (a live tool-list change, new pins) or a
skill that is edited, swapped, enabled, disabled, added or removed is seen at the next call.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from keen import _text
from keen.capabilities.catalog import (
    SUMMARY_CHARS,
    Catalog,
    _skill_capability,
    _tokens,
    server_text,
    tool_capability,
)
from keen.capabilities.descriptor import Capability, LoadedCapability, Risk
from keen.capabilities.names import capability_id
from keen.errors import KeenError
from keen.mcp.types import ServerInfo, ServerState, Tool
from keen.skills import Discovery, Skill
from keen.skills.cache import DiscoveryCache

if TYPE_CHECKING:
    from keen.mcp import Manager
    from keen.mcp.pins import PinGuard

__all__ = ["CatalogCache"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class _ServerPart:
    """What one server contributes, with the inputs it was built from."""

    inputs: tuple[
        list[Tool], ServerInfo | None, list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]
    ]
    text: str
    caps: list[Capability]


class CatalogCache:
    """A callable returning the catalog of ``manager``'s connected servers plus the local
    (non-MCP) skills: :meth:`Catalog.from_manager`, rebuilt only from what changed.

    Args:
        manager: the running Manager.
        skills_root: the local skills (``None``: none), read through a
            :class:`~keen.skills.cache.DiscoveryCache` of it.
        skills: a shared :class:`~keen.skills.cache.DiscoveryCache` instead of ``skills_root``.
        pins: leave out the tools ``call_mcp_tool`` would refuse as quarantined.
        options: passed to :class:`Catalog` (``cache_dir``, ``cache``).

    ``builds`` / ``reuses``: calls that made a new Catalog / returned the last one.
    """

    def __init__(
        self,
        manager: Manager,
        *,
        skills_root: Path | None = None,
        skills: DiscoveryCache | None = None,
        pins: PinGuard | None = None,
        **options: Any,
    ) -> None:
        self.manager = manager
        self.skills = (
            skills
            if skills is not None
            else (DiscoveryCache(skills_root) if skills_root is not None else None)
        )
        self.pins = pins
        self.options = options
        self.builds = 0
        self.reuses = 0
        self._servers: dict[str, _ServerPart] = {}
        self._found: Discovery | None = None
        self._local: list[tuple[Skill, Capability]] = []
        self._catalog: Catalog | None = None

    def __call__(self) -> Catalog:
        """The catalog now: the last one when nothing changed, else a new one. Raises
        ``SkillError`` when the skills directory or its config cannot be read."""
        changed = self._catalog is None
        parts: dict[str, _ServerPart] = {}
        for status in self.manager.servers():
            if status.state is not ServerState.CONNECTED or not status.enabled:
                continue
            part = self._server(status.name)
            if part is None:
                continue
            changed = changed or self._servers.get(status.name) is not part
            parts[status.name] = part
        changed = changed or parts.keys() != self._servers.keys()
        self._servers = parts
        if self.skills is not None:
            found = self.skills.discover()
            if found is not self._found:
                self._local = self._local_skills(found)
                self._found, changed = found, True
        if not changed and self._catalog is not None:
            self.reuses += 1
            return self._catalog
        caps = [c for part in parts.values() for c in part.caps] + [c for _, c in self._local]
        self._catalog = Catalog(caps, {name: p.text for name, p in parts.items()}, **self.options)
        self.builds += 1
        return self._catalog

    def _local_skills(self, found: Discovery) -> list[tuple[Skill, Capability]]:
        """A capability per enabled local (non-MCP) skill; a skill the discovery cache kept
        (the same object: its files did not change) keeps its capability."""
        before = {id(skill): (skill, cap) for skill, cap in self._local}
        out: list[tuple[Skill, Capability]] = []
        for skill in found.enabled:
            kept = before.get(id(skill))
            if kept is not None and kept[0] is skill:
                out.append(kept)
            elif not (skill.managed and skill.name.startswith("mcp:")):  # MCP ones: live lists
                out.append((skill, _skill_capability(skill)))
        return out

    def _server(self, name: str) -> _ServerPart | None:
        """The server's part: the cached one when its inputs are equal, else a new one."""
        try:
            tools = self.manager.list_tools(name)
        except KeenError as exc:
            logger.debug("catalog: %s skipped: %s", name, exc)
            return None
        if self.pins is not None:
            # The Manager lists a changed tool as it was pinned; a call to it is refused all
            # the same, so the catalog offers none of the tools held for review.
            hidden = {c.name for c in self.manager.view(name).held}
            tools = [t for t in tools if t.name not in hidden]
        info = self.manager.server_info(name)
        inputs = (
            tools,
            info,
            _items(self.manager, name, "list_resources"),
            _items(self.manager, name, "list_resource_templates"),
            _items(self.manager, name, "list_prompts"),
        )
        cached = self._servers.get(name)
        if cached is not None and cached.inputs == inputs:
            return cached
        caps = [tool_capability(name, t.to_dict(), annotations_trusted=t.annotations_trusted) for t in tools]
        caps += [c for data in inputs[2] + inputs[3] if (c := _item_capability("resource", name, data))]
        caps += [c for data in inputs[4] if (c := _item_capability("prompt", name, data))]
        return _ServerPart(inputs, server_text(name, info, tools), caps)


def _items(manager: Any, server: str, method: str) -> list[dict[str, Any]]:
    """Resources, resource templates or prompts of ``server`` when the Manager can list them
    (duck-typed ``method``: ``list_resources(name)``, ``list_resource_templates(name)`` or
    ``list_prompts(name)``, returning dicts in wire shape)."""
    lister = getattr(manager, method, None)
    if lister is None:
        return []
    try:
        items = lister(server)
    except (KeenError, TypeError):
        return []
    return [item if isinstance(item, dict) else getattr(item, "__dict__", {}) for item in items or []]


def _item_capability(
    kind: Literal["resource", "prompt"], server: str, data: dict[str, Any]
) -> Capability | None:
    """One listed resource, resource template or prompt. Its full layer (deferred:
    :meth:`Capability.load`) is the whole listing entry (uri, uriTemplate or name,
    description, mimeType or arguments); reading the resource or getting the prompt is a
    call, not a load. A template is named by its ``uriTemplate`` (RFC 6570) and its summary
    says which variables to give as arguments when it is read."""
    template = str(data.get("uriTemplate") or "") if kind == "resource" else ""
    name = str(data.get("uri") or template or data.get("name") or "")
    if not name:
        return None
    description = str(data.get("description") or "")
    summary = description or str(data.get("name", ""))
    if template:
        summary = f"URI template; read it with arguments {_template_variables(template)}. {summary}"
    summary = _text.summary(summary, SUMMARY_CHARS, sentence=False)
    full = json.dumps(data, ensure_ascii=False, default=str)
    holder: list[Capability] = []

    def load() -> LoadedCapability:
        return LoadedCapability(holder[0], full, raw=dict(data))

    cap = Capability(
        id=capability_id(kind, name, server),
        kind=kind,
        name=name,
        title=str(data.get("title") or data.get("name") or ""),
        summary=summary,
        server=server,
        risk=Risk.reading(),
        tokens_index=_tokens(f"- {name}: {summary}"),
        tokens_full=_tokens(full),
        search_text=f"{data.get('name') or ''} {description}".strip(),
        _loader=load,
    )
    holder.append(cap)
    return cap


def _template_variables(template: str) -> str:
    """The variables of an RFC 6570 URI template as a JSON object of placeholders
    (``{"resourceId": "..."}``); unparsable: the template itself."""
    from mcp.shared.uri_template import InvalidUriTemplate, UriTemplate

    try:
        names = UriTemplate.parse(template).variable_names
    except InvalidUriTemplate:
        return template
    return json.dumps(dict.fromkeys(names, "..."))
