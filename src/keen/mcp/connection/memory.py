"""In-process MCP servers as a Manager transport (tests and embedding)."""

from __future__ import annotations

from typing import Any

from keen.mcp.types import TransportFactory

__all__ = ["in_memory_transport"]


def in_memory_transport(server: Any) -> TransportFactory:
    """A transport factory that runs ``server`` in this process, over memory streams.

    Args:
        server: an MCP SDK ``Server`` (low level) or ``MCPServer``; other frameworks expose
            one (FastMCP: ``server._mcp_server``).

    Returns:
        A factory for ``Manager(transports={name: ...})``; each connection starts the server
        in a background task and stops it when the session closes.
    """
    # The SDK's own in-memory transport, the one its ``Client(server)`` uses.
    from keen.mcp.connection.sdk_private import in_memory_transport_class

    transport = in_memory_transport_class()
    return lambda: transport(server)
