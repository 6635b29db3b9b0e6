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
from keen.trust.fingerprint import body_fingerprint, definition, fingerprint, info_fingerprint

__all__ = ["InfoPin", "PinFile", "Review", "ToolPin", "ValidationError"]


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


class InfoPin(BaseModel):
    """``mcp/pins/info/<server>.json``: what a server said of itself at initialize, as a
    model or host is shown it (``serverInfo`` name, title and version, and ``instructions``:
    MCP 2025-11-25 "Lifecycle"; :func:`keen.trust.fingerprint.shown_info`), pinned as one.

    A file of its own beside the pin file, not a member of it: a Keen that pins only tools
    reads pin files strictly (no unknown member) and would call one holding it broken, so
    two Keens on one ``KEEN_HOME`` (a rolling upgrade) both keep working.
    """

    model_config = ConfigDict(extra="forbid", defer_build=True)

    version: int = PIN_FILE_VERSION
    server: str
    fingerprint: str
    info: dict[str, str | None]
    pinned_at: str = Field(default_factory=_now)
    reviewed: bool = False
    """Pinned by ``keen mcp trust`` after a diff showed it (a person saw it), not on first use."""

    @classmethod
    def of(cls, server: str, shown: dict[str, Any], *, reviewed: bool = False) -> InfoPin:
        return cls(server=server, fingerprint=info_fingerprint(shown), info=dict(shown), reviewed=reviewed)


class PinFile(BaseModel):
    """``mcp/pins/<server>.json``: the pinned tools of one server, by name. ``info``: its
    pinned :class:`InfoPin`, which :class:`keen.trust.pinstore.PinStore` reads from and
    writes to its own file (never into this one); ``None`` when none is pinned yet (recorded
    at the next look, as on first use)."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    version: int = PIN_FILE_VERSION
    server: str
    updated_at: str = Field(default_factory=_now)
    tools: dict[str, ToolPin] = Field(default_factory=dict)
    info: InfoPin | None = Field(default=None, exclude=True)
    instructions: dict[str, Any] | None = Field(default=None, exclude=True)
    """Read and dropped: a Keen of one release wrote the instructions pin here (which an
    older Keen could not read); they are pinned again, in :class:`InfoPin`, at the next look."""


class Review(BaseModel):
    """``mcp/pins/reviews/<server>.json``: the live definitions ``keen mcp diff`` last showed,
    by name (a name a server lists twice has two fingerprints). ``keen mcp trust`` pins only
    definitions whose fingerprint is here, so what is pinned is what a person saw."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    version: int = PIN_FILE_VERSION
    server: str
    reviewed_at: str = Field(default_factory=_now)
    tools: dict[str, list[str]] = Field(default_factory=dict)
    info: str | None = None
    """The fingerprint of the server's info (:class:`InfoPin`) as the diff showed it; ``None``
    when the diff did not show it (pinned and reviewed as it is): such a review accepts no
    change of it and marks nothing of it reviewed."""
    cut: dict[str, int] = Field(default_factory=dict)
    """Tool name -> how many characters of its definition (name and diff) the diff did not
    print (it stops a long one; ``--full`` prints it whole). ``keen mcp trust`` pins none of
    these: a server could hide an instruction after the text a person saw."""
    info_cut: int = 0
    """How many characters of the server info's diff the diff did not print (as :attr:`cut`)."""

    @classmethod
    def of(
        cls,
        server: str,
        tools: list[Tool],
        info: str | None = None,
        *,
        cut: dict[str, int] | None = None,
        info_cut: int = 0,
    ) -> Review:
        shown: dict[str, list[str]] = {}
        for tool in tools:
            shown.setdefault(tool.name, []).append(fingerprint(tool))
        return cls(server=server, tools=shown, info=info, cut=dict(cut or {}), info_cut=info_cut)
