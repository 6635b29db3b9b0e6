"""Keen: progressive disclosure of MCP tools for LLM agents.

The public API in one place::

    from keen import open_runtime, Manager, Gateway, skills_prompt, tool_definition

Names are imported on first use (PEP 562 module ``__getattr__``), so ``import keen.paths``
or ``import keen.skills`` loads neither the MCP SDK nor any layer above the one asked for.
The package map is drawn in ``docs/architecture.md``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from keen._lazy import exports_from, lazy_module_attrs
from keen._version import __version__

if TYPE_CHECKING:
    from keen._gcfreeze import freeze_at_first_start
    from keen.errors import (
        ApprovalDenied,
        AuthFailed,
        AuthRequired,
        BudgetTooSmall,
        CallTimeout,
        CapabilityNotFound,
        ConfigError,
        InvalidArguments,
        KeenError,
        MCPServerError,
        RemoteProtocolError,
        RemoteToolError,
        ServerDisabled,
        ServerDisconnected,
        ServerMisconfigured,
        ServerNotConfigured,
        SkillError,
        ToolChanged,
        ToolNotFound,
        ToolQuarantined,
        UserActionRequired,
    )
    from keen.gateway import CALL_MCP_TOOL, ApprovalRequest, Gateway, GatewayResult, tool_definition
    from keen.mcp import Manager, ServerInfo, ServerState, ServerStatus, Tool, ToolResult
    from keen.mcpskills.startup import sync_from_manager
    from keen.prompt import skills_prompt
    from keen.prompt_cost import prompt_stats
    from keen.runtime import Runtime, connect_server, open_runtime
    from keen.skills import SkillsConfig, activate, discover

# Public name -> the module that defines it (imported by __getattr__ on first access).
_EXPORTS: dict[str, str] = {
    **exports_from(
        "keen.errors",
        (
            "ApprovalDenied",
            "AuthFailed",
            "AuthRequired",
            "BudgetTooSmall",
            "CallTimeout",
            "CapabilityNotFound",
            "ConfigError",
            "InvalidArguments",
            "KeenError",
            "MCPServerError",
            "RemoteProtocolError",
            "RemoteToolError",
            "ServerDisabled",
            "ServerDisconnected",
            "ServerMisconfigured",
            "ServerNotConfigured",
            "SkillError",
            "ToolChanged",
            "ToolNotFound",
            "ToolQuarantined",
            "UserActionRequired",
        ),
    ),
    **exports_from(
        "keen.gateway", ("CALL_MCP_TOOL", "ApprovalRequest", "Gateway", "GatewayResult", "tool_definition")
    ),
    **exports_from(
        "keen.mcp", ("Manager", "ServerInfo", "ServerState", "ServerStatus", "Tool", "ToolResult")
    ),
    **exports_from("keen.mcpskills.startup", ("sync_from_manager",)),
    **exports_from("keen.runtime", ("Runtime", "connect_server", "open_runtime")),
    **exports_from("keen._gcfreeze", ("freeze_at_first_start",)),
    **exports_from("keen.prompt", ("skills_prompt",)),
    **exports_from("keen.prompt_cost", ("prompt_stats",)),
    **exports_from("keen.skills", ("SkillsConfig", "activate", "discover")),
}

__all__ = [
    "CALL_MCP_TOOL",
    "ApprovalDenied",
    "ApprovalRequest",
    "AuthFailed",
    "AuthRequired",
    "BudgetTooSmall",
    "CallTimeout",
    "CapabilityNotFound",
    "ConfigError",
    "Gateway",
    "GatewayResult",
    "InvalidArguments",
    "KeenError",
    "MCPServerError",
    "Manager",
    "RemoteProtocolError",
    "RemoteToolError",
    "Runtime",
    "ServerDisabled",
    "ServerDisconnected",
    "ServerInfo",
    "ServerMisconfigured",
    "ServerNotConfigured",
    "ServerState",
    "ServerStatus",
    "SkillError",
    "SkillsConfig",
    "Tool",
    "ToolChanged",
    "ToolNotFound",
    "ToolQuarantined",
    "ToolResult",
    "UserActionRequired",
    "__version__",
    "activate",
    "connect_server",
    "discover",
    "freeze_at_first_start",
    "open_runtime",
    "prompt_stats",
    "skills_prompt",
    "sync_from_manager",
    "tool_definition",
]


__getattr__, __dir__ = lazy_module_attrs(__name__, _EXPORTS)
