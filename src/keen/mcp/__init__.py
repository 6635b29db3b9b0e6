"""Keen's headless MCP client layer: config, connections, tools, calls.

Knows nothing of skills, prompts, REPLs or LLMs (``docs/architecture.md``). Names load
on first use, so ``import keen.mcp.types`` or ``keen.mcp.config`` does not import the SDK.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from keen._lazy import exports_from, lazy_module_attrs

if TYPE_CHECKING:
    from keen.mcp.config import MCPConfig, load_config, parse_config
    from keen.mcp.connection.reconnect import Reconnector
    from keen.mcp.listing.changes import ChangeObserver, ToolChange, ToolsChanged
    from keen.mcp.listing.views import ToolsView, ToolTrust
    from keen.mcp.manager import Manager, StatusObserver, in_memory_transport
    from keen.mcp.types import (
        SERVER_NAME_RE,
        ServerInfo,
        ServerState,
        ServerStatus,
        Tool,
        ToolResult,
        tools_hash,
    )

__all__ = [
    "SERVER_NAME_RE",
    "ChangeObserver",
    "MCPConfig",
    "Manager",
    "Reconnector",
    "ServerInfo",
    "ServerState",
    "ServerStatus",
    "StatusObserver",
    "Tool",
    "ToolChange",
    "ToolResult",
    "ToolTrust",
    "ToolsChanged",
    "ToolsView",
    "in_memory_transport",
    "load_config",
    "parse_config",
    "tools_hash",
]

_EXPORTS = {
    **exports_from("keen.mcp.listing.changes", ("ChangeObserver", "ToolChange", "ToolsChanged")),
    **exports_from("keen.mcp.config", ("MCPConfig", "load_config", "parse_config")),
    **exports_from("keen.mcp.listing.views", ("ToolTrust", "ToolsView")),
    **exports_from("keen.mcp.manager", ("Manager", "StatusObserver", "in_memory_transport")),
    **exports_from("keen.mcp.connection.reconnect", ("Reconnector",)),
    **exports_from(
        "keen.mcp.types",
        ("SERVER_NAME_RE", "ServerInfo", "ServerState", "ServerStatus", "Tool", "ToolResult", "tools_hash"),
    ),
}

__getattr__, __dir__ = lazy_module_attrs(__name__, _EXPORTS)
