"""Generated MCP skills: one managed skill dir per server, and the startup sync.

``generate_skill`` writes ``skills/mcp:<server>/`` (SKILL.md, marker, one schema per
tool) atomically; ``delete_skill`` removes only Keen-managed dirs; ``sync_mcp_skills``
applies the startup-sync table to a snapshot of every configured server. See
docs/architecture.md "Generated skills" and "Startup sync".
"""

from keen.mcpskills._names import RejectedTool
from keen.mcpskills._render import FORMAT, MANAGED_BY, MARKER_FILE, MAX_TABLE_ROWS
from keen.mcpskills.generate import GenerationReport, delete_skill, generate_skill, skill_name
from keen.mcpskills.sync import (
    SYNC_STATE_FILE,
    ServerSnapshot,
    SyncAction,
    SyncEntry,
    SyncReport,
    sync_mcp_skills,
    sync_server,
)

__all__ = [
    "FORMAT",
    "MANAGED_BY",
    "MARKER_FILE",
    "MAX_TABLE_ROWS",
    "SYNC_STATE_FILE",
    "GenerationReport",
    "RejectedTool",
    "ServerSnapshot",
    "SyncAction",
    "SyncEntry",
    "SyncReport",
    "delete_skill",
    "generate_skill",
    "skill_name",
    "sync_mcp_skills",
    "sync_server",
]
