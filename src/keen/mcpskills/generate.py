"""Generate, refresh and delete the managed skill dir of one MCP server.

``skills/mcp:<server>/`` holds ``SKILL.md``, ``.keen-generated-mcp.json`` and
``schemas/<tool>.json`` (docs/architecture.md "Generated skills"). Contents come from :mod:`keen.mcpskills._render`,
the atomic swap from :mod:`keen.mcpskills._swap`.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from keen._redact import redactor
from keen._text import one_line, some_of
from keen.errors import SkillError
from keen.mcp import SERVER_NAME_RE, ServerInfo, ServerStatus, Tool, tools_hash
from keen.mcpskills import _swap
from keen.mcpskills._layout import skill_name
from keen.mcpskills._models import Marker
from keen.mcpskills._names import PlannedTool, RejectedTool, display_text, plan_paths
from keen.mcpskills._render import (
    FORMAT,
    MANAGED_BY,
    MARKER_FILE,
    MAX_SKIPPED_LISTED,
    MAX_TABLE_ROWS,
    SKILL_FILE,
    describe_server,
    dump_json,
    iso,
    render_schema,
    render_skill_md,
)

__all__ = ["GenerationReport", "delete_skill", "generate_skill", "skill_name"]

logger = logging.getLogger(__name__)

_CONFIG_DESCRIPTION_CHARS = 200


@dataclass(frozen=True)
class GenerationReport:
    """What :func:`generate_skill` did.

    ``action``: ``generated`` (a new version was swapped in) or ``unchanged`` (same
    tools and server info as the current version: files kept, marker status updated).
    ``skill_path``: ``skills_root/mcp:<server>`` (the stable link path). ``tool_count``:
    tools the server listed; ``schema_count``: schema files written; ``table_rows`` and
    ``omitted_rows``: the SKILL.md table and what the 1000-row cap left out;
    ``rejected``: tools without a schema (unsafe names, path collisions, duplicates).
    """

    server: str
    action: Literal["generated", "unchanged"]
    skill_path: Path
    tool_count: int
    schema_count: int
    table_rows: int
    omitted_rows: int
    tools_hash: str
    description: str
    rejected: list[RejectedTool] = field(default_factory=lambda: list[RejectedTool]())

    def to_dict(self) -> dict[str, Any]:
        return {
            "server": self.server,
            "action": self.action,
            "skill_path": str(self.skill_path),
            "tool_count": self.tool_count,
            "schema_count": self.schema_count,
            "table_rows": self.table_rows,
            "omitted_rows": self.omitted_rows,
            "tools_hash": self.tools_hash,
            "description": self.description,
            "rejected": [r.to_dict() for r in self.rejected],
        }


def _check_server(server: str) -> None:
    if not SERVER_NAME_RE.fullmatch(server):
        raise SkillError(
            f"{server!r} is not a valid MCP server name (1-64 letters, digits, '_' or '-'); "
            "rename it in configs.json",
            name=skill_name(server),
        )


def _canonical(tool: Tool) -> str:
    return json.dumps(tool.to_dict(), sort_keys=True, separators=(",", ":"))


def _plan(tools: list[Tool]) -> tuple[list[tuple[Tool, PlannedTool]], list[RejectedTool]]:
    """Sort by name, keep one tool per name (the smallest canonical JSON, so the choice does
    not depend on list order), then check names as paths."""
    groups: dict[str, list[Tool]] = {}
    for tool in tools:
        groups.setdefault(tool.name, []).append(tool)
    chosen: dict[str, Tool] = {}
    duplicates: list[Tool] = []
    for name in sorted(groups):
        group = groups[name]
        if len(group) > 1:
            group = sorted(group, key=_canonical)
            duplicates.extend(group[1:])
        chosen[name] = group[0]
    accepted, rejected = plan_paths(list(chosen))
    planned = [(chosen[p.name], p) for p in accepted]
    for dup in duplicates:
        kept = next((r for r in rejected if r.name == dup.name), None)
        if kept is None:
            reason = "the server lists this name more than once; the schema of one of them was written"
            rejected.append(RejectedTool(dup.name, display_text(dup.name), reason))
    rejected.sort(key=lambda r: (r.name, r.reason))
    return planned, rejected


def _source_hash(server: str, description: str, info: ServerInfo | None, hashed_tools: str) -> str:
    """Hash of everything the generated files depend on except the clock."""
    info_part = None
    if info is not None:
        info_part = [info.name, info.version, info.title, info.instructions]
    blob = json.dumps([FORMAT, server, description, info_part, hashed_tools], sort_keys=True)
    return "sha256:" + hashlib.sha256(blob.encode()).hexdigest()


def _fingerprints(planned: Sequence[tuple[Tool, PlannedTool]]) -> dict[str, str]:
    """The definition fingerprint (its outputSchema counts, as it does for the pins, though no
    schema file holds it) of each planned tool claiming ``readOnlyHint``, by name: the one
    hint a catalog asks whether to trust. Only those: 1,000 LiveMCPBench tools take 120 ms of
    CPU to fingerprint against 0.9-1.3 s to generate (load 3 on 2 CPUs), and 88 of them claim it;
    those 88 take 7-15 ms of CPU, paid at every sync, an unchanged skill's too (load 3).

    A tool whose claim keen chat does not trust now (``annotations_trusted`` False: never
    reviewed, or changed since under ``"pinning": "warn"``, where it is shown with the
    stricter of the pinned and live annotations and can equal the pin though the server
    changed it) gets none, so the catalog trusts it not (a ``trust_annotations`` server
    excepted); ``keen mcp trust`` writes the skill again after a review."""
    claiming = [
        tool
        for tool, _ in planned
        if (tool.annotations or {}).get("readOnlyHint") is True and tool.annotations_trusted
    ]
    if not claiming:
        return {}
    from keen.trust.fingerprint import fingerprint  # rfc8785: loaded when a tool needs it

    return {tool.name: fingerprint(tool) for tool in claiming}


def generate_skill(
    skills_root: Path,
    status: ServerStatus,
    tools: list[Tool],
    *,
    info: ServerInfo | None = None,
    now: datetime | None = None,
    fsync: bool = True,
    invalid: Sequence[tuple[str, str]] = (),
    description: str | None = None,
    held: str = "",
    held_tools: Sequence[str] = (),
    held_info: bool = False,
    batch: _swap.Batch | None = None,
) -> GenerationReport:
    """Write or refresh ``skills_root/mcp:<status.name>/`` from ``tools``.

    ``info``: what the server said of itself as it may be shown (``Manager.server_info``: under
    pinning, as pinned); ``None`` shows none. Never ``status.info``, which is the info as the
    server sent it (``ServerStatus.info``), unvetted. ``now`` (default: the current UTC time)
    is the generated timestamp. When the current version was made from the same tools and
    server info (same ``tools_hash``), nothing is rewritten but the marker's ``status``,
    ``last_error`` and ``last_successful_refresh`` (action ``unchanged``). Otherwise a new
    version is built beside the link and swapped in atomically; a concurrent reader sees
    the old or the new skill, never a mix, and a killed process leaves the old one.
    ``fsync=False`` skips the fsyncs (for throwaway dirs; a killed process is still safe,
    a power cut is not). ``last_error`` is redacted before it is written. ``invalid``:
    ``(name, reason)`` of tools the server listed but the MCP schema rejects; they are
    named under "Skipped tools" with the other tools that got no schema. ``description``:
    the server's ``description`` from configs.json; when set it is the frontmatter
    description (the catalog line) instead of one derived from the server.
    ``held``: the pins' note on tools held for review (``keen.trust.pins.PinnedView.note``),
    added to the catalog line and to SKILL.md; those tools are not in ``tools`` as listed.
    ``held_tools``: their names, recorded in the marker (``held_tools``, ``[]`` when none,
    added to an unchanged skill's marker that lacks it): a changed tool
    held under ``pinning: quarantine`` is in ``tools`` as it was pinned, and a catalog
    built from the skill before its server connects must not offer it as callable.
    ``held_info``: the server's info is held for review (``info`` is then as it was pinned).
    ``batch``: the startup sync's batch (call with its lock held): the new version or
    marker is written now and swapped in by the batch's ``commit``, which reports a
    failed swap; ``fsync`` is then the batch's.

    Raises ``SkillError`` for an invalid server name, or when ``mcp:<server>`` exists but
    is not managed by Keen (it is never overwritten); ``OSError`` from the filesystem, with
    the previous version left in place; ``keen.mcpskills._swap.NotDurableError`` (an
    ``OSError``) when the new version is live but the skills dir could not be flushed after
    the swap (the previous version is kept on disk).
    """
    server = status.name
    _check_server(server)
    moment = now if now is not None else datetime.now(UTC)
    planned, rejected = _plan(tools)
    rejected += [
        RejectedTool(name, display_text(name), f"its definition is invalid: {display_text(reason, 200)}")
        for name, reason in sorted(invalid)
    ]
    if description and description.strip():
        # The user's own words for the catalog line; one line, bounded like server text.
        description = one_line(description, _CONFIG_DESCRIPTION_CHARS)
    else:
        description = describe_server(
            server, info, [t.name for t, _ in planned], [t.description for t, _ in planned]
        )
    if held:
        description = f"{description} {held}."
    hashed = tools_hash(tools)
    held_names = sorted(set(held_tools))
    source = _source_hash(
        server,
        description,
        info,
        hashed
        + (json.dumps(sorted(invalid)) if invalid else "")
        + (json.dumps(held_names) if held_names else ""),
    )
    state_fields = {
        "configured": True,
        "status": status.state.value,
        "last_error": redactor.redact(status.last_error),
        "last_successful_refresh": iso(status.last_refresh_at or moment),
        # Always, [] too: a marker without it was written before Keen recorded held tools
        # (keen.capabilities.catalog.managed_marker), and the next sync gives it the field.
        "held_tools": held_names,
        # Always, for an unchanged skill too: the source hash is of Tool.to_dict(), which
        # drops a falsy outputSchema the fingerprint keeps (None -> {} is another definition
        # with the same hash), and a marker written before Keen recorded them gets them.
        "fingerprints": _fingerprints(planned),
    }
    link = _swap.link_path(skills_root, server)
    report_args: dict[str, Any] = {
        "server": server,
        "skill_path": link,
        "tool_count": len(tools),
        "schema_count": len(planned),
        "table_rows": min(len(planned), MAX_TABLE_ROWS),
        "omitted_rows": max(0, len(planned) - MAX_TABLE_ROWS),
        "tools_hash": hashed,
        "description": description,
        "rejected": rejected,
    }
    with _swap.locked(skills_root):
        current = _swap.inspect(skills_root, server)
        if current.kind == "unmanaged":
            raise SkillError(
                f"{current.path} exists and is not generated by Keen ({current.reason}); "
                f"rename or remove it so Keen can generate the skill for MCP server {server!r}",
                name=skill_name(server),
            )
        if (
            current.kind == "link"
            and current.target is not None
            and current.marker is not None
            and current.marker.format == FORMAT
            and current.marker.source_hash == source
            and (current.target / SKILL_FILE).is_file()
        ):
            names = None
            if batch is None:
                _swap.update_marker(current, state_fields, fsync=fsync)
            else:
                batch.add_marker(server, current, state_fields)
                names = batch.names(server)
            _swap.cleanup(skills_root, server, keep=current.target.name, names=names)
            logger.debug("mcp:%s unchanged (%d tools, %s)", server, len(tools), hashed[:19])
            return GenerationReport(action="unchanged", **report_args)
        marker = Marker(
            format=FORMAT,
            managed_by=MANAGED_BY,
            server=server,
            **state_fields,
            tool_count=len(tools),
            schema_count=len(planned),
            generated_at=iso(moment),
            tools_hash=hashed,
            source_hash=source,
            rejected_tools=[r.to_dict() for r in rejected[:MAX_SKIPPED_LISTED]],
            rejected_count=len(rejected),
        )
        skill_md = render_skill_md(
            server=server,
            description=description,
            info=info,
            tools=planned,
            rejected=rejected,
            generated_at=moment,
            held=held,
            held_tools=bool(held_names),
            held_info=held_info,
        )

        def files() -> Iterator[tuple[str, bytes]]:
            # Marker first: even a half-written build dir says whose it is.
            yield MARKER_FILE, dump_json(marker.as_json())
            for tool, plan in planned:
                yield plan.relpath, render_schema(tool)
            yield SKILL_FILE, skill_md

        if rejected:
            # One line per server, however many tools: 20,000 bad names are one warning.
            logger.warning(
                "mcp:%s: no schema for %d tool(s), listed in its SKILL.md: %s",
                server,
                len(rejected),
                some_of(rejected, 3, "; ", lambda r: f"{r.display} ({r.reason})"),
            )
        if batch is None:  # a batch deletes debris after its swap, from its one listing
            _swap.cleanup(skills_root, server, keep=current.target.name if current.target else None)
        build = _swap.new_build_dir(skills_root, server)
        try:
            _swap.write_tree(build, files(), fsync=fsync and batch is None)
            if batch is None:
                _swap.publish(skills_root, server, build, current, fsync=fsync)
            else:
                batch.add_build(server, build, current)
        except _swap.NotDurableError:
            raise  # published; publish kept the replaced version and deleted only debris
        except BaseException:
            # Keep whatever the link points to now (old or, if the swap got through, new).
            _swap.discard(skills_root, server)
            raise
    logger.debug(
        "mcp:%s generated (%d tools, %d rejected, %s)", server, len(tools), len(rejected), hashed[:19]
    )
    return GenerationReport(action="generated", **report_args)


def delete_skill(skills_root: Path, server: str) -> bool:
    """Delete ``skills_root/mcp:<server>`` if, and only if, its marker says
    ``managed_by: "keen-mcp"`` for this server (docs/architecture.md "Startup sync").

    Deletes the link, its versioned dir and leftover build dirs. Returns False when there
    was no managed skill; a user's own ``mcp:<server>`` dir is never touched. Raises
    ``SkillError`` for an invalid server name, ``OSError`` from the filesystem.
    """
    _check_server(server)
    with _swap.locked(skills_root):
        return _swap.remove(skills_root, server)
