"""Keen's headless MCP client layer (seeds/003): config, connections, tools, calls.

Knows nothing of skills, prompts, REPLs or LLMs.
"""

from keen.mcp.config import MCPConfig, load_config, parse_config
from keen.mcp.manager import Manager, StatusObserver
from keen.mcp.types import ServerInfo, ServerState, ServerStatus, Tool, ToolResult

__all__ = [
    "MCPConfig",
    "Manager",
    "ServerInfo",
    "ServerState",
    "ServerStatus",
    "StatusObserver",
    "Tool",
    "ToolResult",
    "load_config",
    "parse_config",
]
