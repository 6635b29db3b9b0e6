"""The discovery policy: which capabilities a model sees this turn, and why.

The rules are drawn in docs/architecture.md "The harness". Inputs (:class:`PolicyInputs`):
the permission mode (``read-only`` | ``ask`` | ``auto``), the connected servers, the token budget for tool schemas, the touched paths, recent
failures and what the model asked for (search hits, loaded skills). The policy is a pure
function of the catalog and those inputs, so a turn's visible set can be explained and
rebuilt:

- base local tools (read-only) are always visible; skills appear as a one-line index;
- an MCP tool is visible only when the model asked for it (ToolSearch), its server is
  connected, the mode allows it (``read-only`` hides every tool not annotated
  ``readOnlyHint``; ``auto`` hides destructive ones; ``ask`` shows them, approval comes at
  call time), it failed fewer than :data:`FAILURE_LIMIT` times in a row, and its schema
  fits the budget (most recently requested first).

:func:`permission` is the second gate, for one call: visibility is not authorization.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from keen.capabilities import Capability, PermissionMode

__all__ = [
    "FAILURE_LIMIT",
    "Decision",
    "Entry",
    "PolicyInputs",
    "Selection",
    "diff",
    "permission",
    "select",
    "visibility",
]

FAILURE_LIMIT = 3
Decision = Literal["allow", "ask", "deny"]


@dataclass(frozen=True)
class PolicyInputs:
    """What the policy decided from (recorded with every ``capability.diff``)."""

    permission_mode: PermissionMode
    connected_servers: tuple[str, ...]
    context_budget_remaining: int
    touched_paths: tuple[str, ...] = ()
    recent_failures: tuple[str, ...] = ()
    requested: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(self).items()}


@dataclass(frozen=True)
class Entry:
    """One visible capability: ``name`` is the tool name offered to the model (``kind``
    ``skill`` entries are offered as index lines, not tools); ``fingerprint`` changes when
    the capability's risk or summary does."""

    id: str
    name: str
    kind: str
    reason: str
    fingerprint: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Selection:
    """The visible set (id -> entry) and the capabilities held back, with reasons."""

    visible: dict[str, Entry] = field(default_factory=lambda: dict[str, Entry]())
    hidden: dict[str, str] = field(default_factory=lambda: dict[str, str]())


def _fingerprint(cap: Capability) -> str:
    return f"{cap.risk.level}: {cap.summary}"


def permission(cap: Capability, mode: PermissionMode) -> tuple[Decision, str]:
    """The permission gate for one call of ``cap`` in ``mode``: allow, ask the user, or deny."""
    if cap.risk.read_only:
        return "allow", "read-only capability"
    if mode == "read-only":
        return "deny", "read-only mode forbids tools that may write"
    if mode == "ask":
        return "ask", f"{cap.risk.level}-risk tool in ask mode needs approval"
    if cap.risk.level == "high":
        return "deny", "auto mode forbids destructive tools"
    return "allow", "auto mode allows non-destructive writes"


def visibility(cap: Capability, mode: PermissionMode) -> str | None:
    """Why ``mode`` hides ``cap`` from the visible set (None: it may be seen)."""
    if mode == "read-only" and not cap.risk.read_only:
        return "read-only mode hides tools that may write"
    if mode == "auto" and cap.risk.level == "high":
        return "auto mode hides destructive tools"
    return None


def select(
    base: Iterable[Entry],
    catalog: Iterable[Capability],
    names: Mapping[str, str],
    inputs: PolicyInputs,
    failures: Mapping[str, int],
) -> Selection:
    """This turn's visible set.

    Args:
        base: the local tools, always visible.
        catalog: every capability the live catalog holds (connected servers, local skills).
        names: capability id -> model tool name.
        inputs: the policy inputs.
        failures: capability id -> failures in a row.
    """
    out = Selection()
    for entry in base:
        out.visible[entry.id] = entry
    by_id = {c.id: c for c in catalog}
    for cap in by_id.values():
        if cap.kind == "skill":
            out.visible[cap.id] = Entry(cap.id, names[cap.id], "skill", "skill index", _fingerprint(cap))
    connected = set(inputs.connected_servers)
    spent = 0
    # Most recent request first: under a tight budget the newest asks win.
    for cap_id in dict.fromkeys(reversed(inputs.requested)):
        cap = by_id.get(cap_id)
        if cap is None:
            out.hidden[cap_id] = "not in the catalog (server gone or tool removed)"
            continue
        if cap.kind == "skill":
            continue
        if cap.server not in connected:
            out.hidden[cap_id] = f"server {cap.server} is not connected"
        elif why := visibility(cap, inputs.permission_mode):
            out.hidden[cap_id] = why
        elif failures.get(cap_id, 0) >= FAILURE_LIMIT:
            out.hidden[cap_id] = f"failed {failures[cap_id]} times in a row; try another approach"
        elif spent + cap.tokens_full > inputs.context_budget_remaining:
            out.hidden[cap_id] = f"schema ({cap.tokens_full} tokens) over the remaining budget"
        else:
            spent += cap.tokens_full
            out.visible[cap_id] = Entry(
                cap_id, names[cap_id], cap.kind, "requested by search", _fingerprint(cap)
            )
    return out


def diff(before: Mapping[str, Entry], after: Selection, gone_reason: Mapping[str, str]) -> dict[str, Any]:
    """The ``capability.diff`` body between two visible sets (empty lists when equal).

    ``gone_reason``: why an id left, when known better than the selection says (a server's state).
    """
    added = [e.to_dict() for i, e in after.visible.items() if i not in before]
    removed = [
        {
            "id": i,
            "name": e.name,
            "kind": e.kind,
            "reason": gone_reason.get(i) or after.hidden.get(i) or "no longer requested",
        }
        for i, e in before.items()
        if i not in after.visible
    ]
    changed = [
        {
            "id": i,
            "name": e.name,
            "before": before[i].fingerprint,
            "after": e.fingerprint,
            "reason": "the server changed the tool's description or annotations",
        }
        for i, e in after.visible.items()
        if i in before and before[i].fingerprint != e.fingerprint
    ]
    return {"added": added, "removed": removed, "changed": changed}
