"""Keen: progressive disclosure of MCP tools for LLM agents.

The public API in one place::

    from keen import Manager, Gateway, sync_from_manager, skills_prompt, tool_definition

See README.md for a walk-through and DESIGN.md (in the shared folder) for the architecture.
"""

__version__ = "0.1.0"

# __version__ is defined first: keen.mcp reads it while this package is still importing.
from keen.errors import (
    ApprovalDenied,
    AuthFailed,
    AuthRequired,
    CallTimeout,
    ConfigError,
    InvalidArguments,
    KeenError,
    MCPServerError,
    RemoteProtocolError,
    RemoteToolError,
    ServerDisabled,
    ServerDisconnected,
    ServerNotConfigured,
    SkillError,
    ToolNotFound,
)
from keen.gateway import CALL_MCP_TOOL, ApprovalRequest, Gateway, GatewayResult, tool_definition
from keen.mcp import Manager, ServerInfo, ServerState, ServerStatus, Tool, ToolResult
from keen.mcpskills.startup import connect_server, sync_from_manager
from keen.prompt import prompt_stats, skills_prompt
from keen.skills import SkillsConfig, activate, discover

__all__ = [
    "CALL_MCP_TOOL",
    "ApprovalDenied",
    "ApprovalRequest",
    "AuthFailed",
    "AuthRequired",
    "CallTimeout",
    "ConfigError",
    "Gateway",
    "GatewayResult",
    "InvalidArguments",
    "KeenError",
    "MCPServerError",
    "Manager",
    "RemoteProtocolError",
    "RemoteToolError",
    "ServerDisabled",
    "ServerDisconnected",
    "ServerInfo",
    "ServerNotConfigured",
    "ServerState",
    "ServerStatus",
    "SkillError",
    "SkillsConfig",
    "Tool",
    "ToolNotFound",
    "ToolResult",
    "__version__",
    "activate",
    "connect_server",
    "discover",
    "prompt_stats",
    "skills_prompt",
    "sync_from_manager",
    "tool_definition",
]
