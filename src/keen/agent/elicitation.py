"""Answering MCP servers' questions to the user (``elicitation/create``, form mode).

The REPL shows a form with the requested schema's defaults filled in; one-shot runs have
no one to ask, so they :func:`decline` unless ``--yes`` says to :func:`accept_defaults`.
Each is a :data:`keen.mcp.connection.elicitation.ElicitationCallback`, the one type the MCP layer,
the agent and the REPL share.
Form-mode schemas are flat objects of primitive properties (MCP 2025-11-25 "Elicitation":
string, number, integer, boolean, enums; each may carry a ``default``, SEP-1034).
"""

from __future__ import annotations

from typing import Any

from keen.mcp.connection.elicitation import ElicitAnswer, ElicitationCallback

__all__ = ["ElicitAnswer", "ElicitationCallback", "accept_defaults", "decline", "defaults"]


def defaults(requested_schema: dict[str, Any]) -> dict[str, Any]:
    """The ``default`` of every top-level property that has one (for a pre-filled form).

    Args:
        requested_schema: ``{"type": "object", "properties": {name: {..., "default": v}}}``.

    Returns:
        ``{name: default}``; properties without a default are left out. A malformed schema
        (no ``properties`` object) gives ``{}``.
    """
    properties = requested_schema.get("properties")
    if not isinstance(properties, dict):
        return {}
    return {
        str(name): spec["default"]
        for name, spec in properties.items()  # type: ignore[misc]
        if isinstance(spec, dict) and "default" in spec
    }


async def accept_defaults(server: str, message: str, requested_schema: dict[str, Any]) -> ElicitAnswer:
    """An :data:`ElicitationCallback` for a user who accepts the pre-filled form as is (``--yes``)."""
    return ElicitAnswer("accept", defaults(requested_schema))


async def decline(server: str, message: str, requested_schema: dict[str, Any]) -> ElicitAnswer:
    """An :data:`ElicitationCallback` with no one to ask: every request is declined."""
    return ElicitAnswer("decline")
