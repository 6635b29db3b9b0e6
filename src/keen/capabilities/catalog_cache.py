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

A server still starting (``connecting``, or one the Manager starts once it starts:
:meth:`~keen.mcp.Manager.to_start`) has no live list yet: its tools come from its generated
skill on disk, written by the last sync (docs/chat.md "Startup": a turn sent before
discovery ends uses the skills on disk), with their annotations taken as claims, less the
tools its marker records as held for review when quarantined tools are left out (``pins``);
the live list replaces them once it connects. So a search in a session's first steps finds
them, and a call to one waits for its server.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from keen.capabilities.catalog import Catalog, managed_marker, skill_tools, without_held
from keen.capabilities.describe import (
    ServerInputs,
    server_capabilities,
    server_inputs,
    server_text,
    skill_capability,
)
from keen.capabilities.descriptor import Capability
from keen.mcp.types import ServerState
from keen.skills import Discovery, Skill
from keen.skills.cache import DiscoveryCache

if TYPE_CHECKING:
    from keen.mcp import Manager
    from keen.trust.pins import PinGuard

__all__ = ["CatalogCache"]


def _id_prefix(server: str) -> str:
    """What every capability id of ``server`` begins with (keen.capabilities.names)."""
    return f"mcp__{server}__"


@dataclass(frozen=True, slots=True)
class _ServerPart:
    """What one server contributes, with the inputs it was built from."""

    inputs: ServerInputs
    text: str
    caps: list[Capability]


@dataclass(frozen=True, slots=True)
class _DiskPart:
    """What a server still starting contributes: its generated skill on disk (``skill``,
    the object the discovery cache keeps while its files are unchanged)."""

    skill: Skill
    text: str
    caps: list[Capability]


class CatalogCache:
    """A callable returning the catalog of ``manager``'s connected servers (a server still
    starting: its generated skill on disk; module doc) plus the local (non-MCP) skills:
    :meth:`Catalog.from_manager`, rebuilt only from what changed.

    Args:
        manager: the running Manager.
        skills_root: the local skills (``None``: none), read through a
            :class:`~keen.skills.cache.DiscoveryCache` of it.
        skills: a shared :class:`~keen.skills.cache.DiscoveryCache` instead of ``skills_root``.
        pins: leave out the tools ``call_mcp_tool`` would refuse as quarantined (a starting
            server's: those its skill's marker records as held when it was written).
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
        self._servers: dict[str, _ServerPart | _DiskPart] = {}
        self._found: Discovery | None = None
        self._generated: tuple[Discovery | None, dict[str, tuple[Skill, frozenset[str] | None]]] = (None, {})
        """Per discovery: each server's enabled generated skill and the tools its marker holds."""
        self._local: list[tuple[Skill, Capability]] = []
        self._catalog: Catalog | None = None

    def __call__(self) -> Catalog:
        """The catalog now: the last one when nothing changed, else a new one. Raises
        ``SkillError`` when the skills directory or its config cannot be read."""
        changed = self._catalog is None
        found = self.skills.discover() if self.skills is not None else self._found
        parts: dict[str, _ServerPart | _DiskPart] = {}
        if self.manager.started:
            for status in self.manager.servers():
                if not status.enabled:
                    continue
                if status.state is ServerState.CONNECTED:
                    part = self._server(status.name)
                elif status.state is ServerState.CONNECTING and found is not None:
                    # Connecting only: a started Manager leaves a server it does not start
                    # (outside ``only``) configured for good, and a call waits only for one
                    # that is connecting (Agent.joined).
                    part = self._from_disk(status.name, found)
                else:
                    continue
                if part is not None:
                    parts[status.name] = part
        elif found is not None:
            # Not started yet (keen chat's first step, built while its first request is out:
            # the skills on disk cover the configuration then): the enabled generated skill
            # of each server the session starts next stands for it. configs.json decides
            # which: a server disabled there keeps its enabled skill until the next sync.
            starting = self.manager.to_start()
            for name in self._generated_skills(found).keys() & starting:
                part = self._from_disk(name, found)
                if part is not None:
                    parts[name] = part
        for name, part in parts.items():
            changed = changed or self._servers.get(name) is not part
        changed = changed or parts.keys() != self._servers.keys()
        local, local_changed = self._local, False
        if self.skills is not None and found is not self._found:
            assert found is not None  # a DiscoveryCache always gives one
            local = self._local_skills(found)
            changed = local_changed = True
        if not changed and self._catalog is not None:
            self.reuses += 1
            return self._catalog
        self.builds += 1
        if self._catalog is not None and not local_changed:
            # The last catalog with the servers that changed replaced: the others' entries
            # and search rows are kept, not made again (Catalog.with_servers).
            before = self._servers
            replaced: dict[str, tuple[str, list[Capability]] | None] = {
                name: (part.text, part.caps) for name, part in parts.items() if before.get(name) is not part
            }
            replaced.update((name, None) for name in before.keys() - parts.keys())
            catalog = self._catalog.with_servers(replaced)
        else:
            # In id order (each server's part sorted once, the servers by their ids' prefix),
            # so the Catalog checks the order instead of sorting every capability again.
            order = sorted(parts, key=_id_prefix)
            caps = [c for name in order for c in parts[name].caps] + [c for _, c in local]
            catalog = Catalog(caps, {name: p.text for name, p in parts.items()}, **self.options)
        # Kept only with the catalog made from them: were the parts kept before a build that
        # raised, the next call would diff against servers its catalog never took in, and a
        # refresh of one server (with_servers) would leave the missed change out.
        self._servers, self._found, self._local, self._catalog = parts, found, local, catalog
        return catalog

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
                out.append((skill, skill_capability(skill)))
        return out

    def _generated_skills(self, found: Discovery) -> dict[str, tuple[Skill, frozenset[str] | None]]:
        """Server name -> its enabled generated skill in ``found`` and the tools its marker
        records as held (:func:`managed_marker`: each marker read once), kept per discovery."""
        if self._generated[0] is not found:
            by_server: dict[str, tuple[Skill, frozenset[str] | None]] = {}
            for skill in found.enabled:
                said = managed_marker(skill)
                if said is not None:
                    by_server[said[0]] = (skill, said[1])
            self._generated = (found, by_server)
        return self._generated[1]

    def _from_disk(self, name: str, found: Discovery) -> _DiskPart | None:
        """A starting server's part from its enabled generated skill (None without one): the
        cached part while the discovery cache keeps the same skill object."""
        generated = self._generated_skills(found).get(name)
        if generated is None:
            return None
        skill, held = generated
        cached = self._servers.get(name)
        if isinstance(cached, _DiskPart) and cached.skill is skill:
            return cached
        text, caps = skill_tools(skill, name, annotations_trusted=False)
        if self.pins is not None:  # as the live list leaves them out (server_inputs)
            caps = without_held(caps, skill, name, held)
        return _DiskPart(skill, text, sorted(caps, key=operator.attrgetter("id")))

    def _server(self, name: str) -> _ServerPart | None:
        """The server's part: the cached one when its inputs are equal, else a new one."""
        inputs = server_inputs(self.manager, name, held_out=self.pins is not None)
        if inputs is None:
            return None
        cached = self._servers.get(name)
        if isinstance(cached, _ServerPart) and cached.inputs == inputs:
            return cached
        caps = sorted(server_capabilities(name, inputs), key=operator.attrgetter("id"))
        return _ServerPart(inputs, server_text(name, inputs[1], inputs[0]), caps)
