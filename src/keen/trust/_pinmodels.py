"""The pin files' models (:mod:`keen.trust.pinstore` reads and writes them; format in
:mod:`keen.trust.pins`), apart from the store so that opening a store loads no pydantic:
each model is imported when a pin file is first read or written.

The models build their validators at their first use (pydantic's ``defer_build``).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from keen.mcp.types import Tool
from keen.trust._pinformat import PIN_FILE_VERSION
from keen.trust.fingerprint import body_fingerprint, definition, fingerprint, instructions_fingerprint

__all__ = ["InstructionsPin", "PinFile", "Review", "ToolPin", "ValidationError"]


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


class ToolPin(BaseModel):
    """One pinned tool: its fingerprints and the definition they cover (kept for diffs)."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    fingerprint: str
    body: str
    definition: dict[str, Any]
    pinned_at: str = Field(default_factory=_now)
    reviewed: bool = False
    """Pinned by ``keen mcp trust`` (a person saw the definition), not on first use: only then
    are its annotations taken as true (``keen.trust.pins.pinned_view``)."""

    @classmethod
    def of(cls, tool: Tool, *, reviewed: bool = False) -> ToolPin:
        return cls(
            fingerprint=fingerprint(tool),
            body=body_fingerprint(tool),
            definition=definition(tool),
            reviewed=reviewed,
        )


class InstructionsPin(BaseModel):
    """A server's pinned ``instructions`` (its initialize result's, MCP 2025-11-25
    "Lifecycle"): the text (``""``: the server gave none) and its fingerprint."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    fingerprint: str
    text: str
    pinned_at: str = Field(default_factory=_now)
    reviewed: bool = False
    """Pinned by ``keen mcp trust`` (a person saw the text), not on first use."""

    @classmethod
    def of(cls, text: str, *, reviewed: bool = False) -> InstructionsPin:
        return cls(fingerprint=instructions_fingerprint(text), text=text, reviewed=reviewed)


class PinFile(BaseModel):
    """``mcp/pins/<server>.json``: the pinned tools of one server, by name, and its pinned
    instructions (``None`` in a pin file written before they were pinned: recorded at the
    next look, as on first use)."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    version: int = PIN_FILE_VERSION
    server: str
    updated_at: str = Field(default_factory=_now)
    tools: dict[str, ToolPin] = Field(default_factory=dict)
    instructions: InstructionsPin | None = None


class Review(BaseModel):
    """``mcp/pins/reviews/<server>.json``: the live definitions ``keen mcp diff`` last showed,
    by name (a name a server lists twice has two fingerprints). ``keen mcp trust`` pins only
    definitions whose fingerprint is here, so what is pinned is what a person saw."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    version: int = PIN_FILE_VERSION
    server: str
    reviewed_at: str = Field(default_factory=_now)
    tools: dict[str, list[str]] = Field(default_factory=dict)
    instructions: str | None = None
    """The fingerprint of the server's instructions as the diff showed them (``None``: a
    review written before instructions were pinned, which accepts no change of them)."""

    @classmethod
    def of(cls, server: str, tools: list[Tool], instructions: str | None = None) -> Review:
        shown: dict[str, list[str]] = {}
        for tool in tools:
            shown.setdefault(tool.name, []).append(fingerprint(tool))
        seen = instructions_fingerprint(instructions or "") if instructions is not None else None
        return cls(server=server, tools=shown, instructions=seen)
