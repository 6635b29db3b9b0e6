"""The files Keen keeps beside generated skills, as pydantic models: the marker
(``.keen-generated-mcp.json`` in each generated skill) and the sync state
(``skills/.keen-mcp-sync.json``). See docs/architecture.md "Generated skills" and "Startup sync".

Both read leniently: the marker's identity (``managed_by``, ``server``) is all that makes
a directory Keen's to replace or delete, so its other fields are optional and unknown
ones are kept; a broken sync state is only logged, since losing it means no more than a
sync-made disable looking like the user's.

Each model builds its validator at its first use (pydantic's ``defer_build``), not when this
module is imported: ``keen chat`` imports the sync before its first model request, which
reads neither file.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, ValidationError

__all__ = ["AutoDisabled", "Marker", "SyncState", "ValidationError"]


class Marker(BaseModel):
    """A generated skill's marker file; fields as ``generate_skill`` writes them."""

    model_config = ConfigDict(extra="allow", defer_build=True)

    managed_by: Literal["keen-mcp"] = "keen-mcp"  # keen.skills.discover.MANAGED_BY
    server: str
    format: int | None = None
    configured: bool | None = None
    status: str | None = None
    last_error: str | None = None
    last_successful_refresh: str | None = None
    tool_count: int | None = None
    schema_count: int | None = None
    generated_at: str | None = None
    tools_hash: str | None = None
    source_hash: str | None = None
    rejected_tools: list[dict[str, Any]] | None = None
    rejected_count: int | None = None
    held_tools: list[str] | None = None
    """Tools the pins held for review when it was written (a changed one shows as pinned);
    ``[]`` when none, absent from a marker written before Keen recorded them."""
    fingerprints: dict[str, str] | None = None
    """Each schema file's tool that claims ``readOnlyHint``, by name: the fingerprint
    (``keen.trust.fingerprint``) of the whole definition the skill shows, ``outputSchema``
    included, which its schema file leaves out: what a pin is compared with offline, as a
    live tool is, before its claim is trusted."""

    def updated(self, changes: dict[str, Any]) -> Marker:
        """A copy with ``changes`` applied (validated)."""
        return Marker.model_validate({**self.as_json(), **changes})

    def as_json(self) -> dict[str, Any]:
        """The JSON object written to disk: the fields that were set, unknown ones included."""
        return self.model_dump(mode="json", exclude_unset=True)


class AutoDisabled(BaseModel):
    """One skill the sync disabled: the user's value before (``None``: not set) and why."""

    model_config = ConfigDict(defer_build=True)

    previous: StrictBool | None = None
    reason: str = ""


class SyncState(BaseModel):
    """``skills/.keen-mcp-sync.json``: the skills the sync disabled, by skill name."""

    model_config = ConfigDict(defer_build=True)

    format: Literal[1] = 1
    auto_disabled: dict[str, AutoDisabled] = Field(default_factory=dict)
