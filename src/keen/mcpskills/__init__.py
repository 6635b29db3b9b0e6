"""Generated MCP skills: one managed skill dir per server, and the startup sync.

``generate_skill`` writes ``skills/mcp:<server>/`` (SKILL.md, marker, one schema per
tool) atomically; ``delete_skill`` removes only Keen-managed dirs; ``sync_mcp_skills``
applies the startup-sync table to a snapshot of every configured server. See
docs/architecture.md "Generated skills" and "Startup sync". Every name another package uses
is exported here; the ``_``-modules are this package's own. Names load on first use (PEP 562),
so ``from keen.mcpskills import schema_path`` (the skills layout the call tool's description
names) loads only that small module.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from keen._lazy import exports_from, lazy_module_attrs

if TYPE_CHECKING:
    from keen.mcpskills._layout import SCHEMAS_DIR, schema_path, skill_dir, skill_md_path, skill_name
    from keen.mcpskills._names import RejectedTool
    from keen.mcpskills._render import FORMAT, MAX_SKIPPED_LISTED, MAX_TABLE_ROWS, describe_server
    from keen.mcpskills.generate import GenerationReport, delete_skill, generate_skill
    from keen.mcpskills.live import LiveSkills, disk_tools, snapshot
    from keen.mcpskills.startup import sync_from_manager
    from keen.mcpskills.sync import (
        SYNC_STATE_FILE,
        ServerSnapshot,
        SyncAction,
        SyncEntry,
        SyncReport,
        sync_mcp_skills,
        sync_server,
    )
    from keen.skills.discover import MANAGED_BY, MARKER_FILE

__all__ = [
    "FORMAT",
    "MANAGED_BY",
    "MARKER_FILE",
    "MAX_SKIPPED_LISTED",
    "MAX_TABLE_ROWS",
    "SCHEMAS_DIR",
    "SYNC_STATE_FILE",
    "GenerationReport",
    "LiveSkills",
    "RejectedTool",
    "ServerSnapshot",
    "SyncAction",
    "SyncEntry",
    "SyncReport",
    "delete_skill",
    "describe_server",
    "disk_tools",
    "generate_skill",
    "schema_path",
    "skill_dir",
    "skill_md_path",
    "skill_name",
    "snapshot",
    "sync_from_manager",
    "sync_mcp_skills",
    "sync_server",
]

_EXPORTS = {
    **exports_from(
        "keen.mcpskills._layout", ("SCHEMAS_DIR", "schema_path", "skill_dir", "skill_md_path", "skill_name")
    ),
    **exports_from("keen.mcpskills._names", ("RejectedTool",)),
    **exports_from(
        "keen.mcpskills._render", ("FORMAT", "MAX_SKIPPED_LISTED", "MAX_TABLE_ROWS", "describe_server")
    ),
    **exports_from("keen.skills.discover", ("MANAGED_BY", "MARKER_FILE")),
    **exports_from("keen.mcpskills.generate", ("GenerationReport", "delete_skill", "generate_skill")),
    **exports_from("keen.mcpskills.live", ("LiveSkills", "disk_tools", "snapshot")),
    **exports_from("keen.mcpskills.startup", ("sync_from_manager",)),
    **exports_from(
        "keen.mcpskills.sync",
        (
            "SYNC_STATE_FILE",
            "ServerSnapshot",
            "SyncAction",
            "SyncEntry",
            "SyncReport",
            "sync_mcp_skills",
            "sync_server",
        ),
    ),
}

__getattr__, __dir__ = lazy_module_attrs(__name__, _EXPORTS)
