"""Answering MCP servers' questions to the user (``elicitation/create``, form mode).

The REPL shows a form with the requested schema's defaults filled in; one-shot runs have
no one to ask, so they :func:`decline` unless ``--yes`` says to :func:`accept_defaults`.
The MCP layer takes any :class:`Elicitor` as its callback (:mod:`keen.mcp.elicitation`).
Form-mode schemas are flat objects of primitive properties (MCP 2025-11-25 "Elicitation":
string, number, integer, boolean, enums; each may carry a ``default``, SEP-1034).
"""

from __future__ import annotations

from typing import Any, Protocol

from keen.mcp.elicitation import ElicitAnswer

__all__ = ["ElicitAnswer", "Elicitor", "accept_defaults", "decline", "defaults"]


class Elicitor(Protocol):
    """Asks the user what a server wants to know, in the middle of a tool call."""

    async def __call__(self, server: str, message: str, requested_schema: dict[str, Any]) -> ElicitAnswer:
        """Ask.

        Args:
            server: the server asking (as named in configs.json).
            message: the server's question, untrusted text.
            requested_schema: a flat JSON Schema object of the fields wanted.

        Returns:
            ``accept`` with the values, ``decline`` or ``cancel``.
        """
        ...


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
    """An :class:`Elicitor` for a user who accepts the pre-filled form as is (``--yes``)."""
    return ElicitAnswer("accept", defaults(requested_schema))


async def decline(server: str, message: str, requested_schema: dict[str, Any]) -> ElicitAnswer:
    """An :class:`Elicitor` with no one to ask: every request is declined."""
    return ElicitAnswer("decline")
