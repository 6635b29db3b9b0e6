"""The discovery policy: which capabilities a model sees this step, and why.

The rules are drawn in docs/architecture.md "The harness". Inputs (:class:`PolicyInputs`):
the permission mode (``read-only`` | ``ask`` | ``auto``), the connected servers, the token budget for tool schemas, the touched paths, recent
failures and what the model asked for (search hits, loaded skills). The policy is a pure
function of the catalog and those inputs, so a step's visible set can be explained and
rebuilt:

- base local tools (read-only) are always visible;
- skills appear as a one-line index (never their body). A skill whose frontmatter names
  ``paths`` (glob patterns relative to the workspace, e.g. ``packages/ui/**``) is about
  those files only: it joins the index while one of the last :data:`TOUCHED_WINDOW`
  touched paths (files and folders the local tools read or listed) matches a pattern, and
  leaves it when none does. A pattern matches a path as :func:`fnmatch.fnmatch` does
  (``*`` crosses ``/``), and also every path under the folder it names (``packages/ui``,
  ``packages/ui/**``);
- an MCP tool, resource or prompt is visible only when the model asked for it
  (ToolSearch), its server is connected, the mode allows it (``read-only`` hides every
  tool not annotated ``readOnlyHint``; ``auto`` hides destructive ones; ``ask`` shows
  them, approval comes at call time), it failed fewer than :data:`FAILURE_LIMIT` times in
  a row, and its schema fits the context budget. Under a tight budget the most recently
  requested *or used* capabilities win: a tool the model keeps calling outlives search
  hits it never used.

:func:`permission` is the second gate, for one call: visibility is not authorization.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from keen.capabilities import Capability, PermissionMode

__all__ = [
    "FAILURE_LIMIT",
    "TOUCHED_WINDOW",
    "Decision",
    "Entry",
    "PolicyInputs",
    "Selection",
    "diff",
    "hidden_reason",
    "path_match",
    "permission",
    "select",
    "visibility",
]

FAILURE_LIMIT = 3
TOUCHED_WINDOW = 20
"""How many of the most recently touched paths the policy looks at."""
Decision = Literal["allow", "ask", "deny"]


@dataclass(frozen=True)
class PolicyInputs:
    """What the policy decided from (recorded with every ``capability.diff``).

    ``context_budget_remaining``: tokens the model's context has left for MCP tool schemas
    this step. ``touched_paths``: the latest paths the local tools read or listed, oldest
    first. ``requested``: capability ids the model asked for (search hits, calls), least
    recent first.
    """

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


def hidden_reason(cap: Capability | None, mode: PermissionMode, what: str) -> str:
    """The text of a visibility refusal for ``what``: a tool the mode forbids is said so
    (searching will not help); anything else points at search_tools."""
    if cap is not None and cap.kind == "tool":
        verdict, why = permission(cap, mode)
        if verdict == "deny":
            return f"{what} is hidden and may not run in {mode} mode: {why}; searching will not change that"
    return (
        f"{what} is not among this step's tools; use search_tools to find a tool "
        "(hits the permission mode allows become callable on the next step)."
    )


def visibility(cap: Capability, mode: PermissionMode) -> str | None:
    """Why ``mode`` hides ``cap`` from the visible set (None: it may be seen)."""
    if mode == "read-only" and not cap.risk.read_only:
        return "read-only mode hides tools that may write"
    if mode == "auto" and cap.risk.level == "high":
        return "auto mode hides destructive tools"
    return None


def path_match(pattern: str, path: str) -> bool:
    """True when ``path`` (workspace-relative, ``/``-separated) matches a skill's ``paths``
    pattern: :func:`fnmatch.fnmatch` (``*`` crosses ``/``), or ``path`` is the folder the
    pattern names or lies under it (``packages/ui`` and ``packages/ui/**`` both match
    ``packages/ui`` and ``packages/ui/Button.tsx``)."""
    pattern = pattern.strip().removeprefix("./")
    path = path.strip().removeprefix("./").rstrip("/")
    base = pattern.rstrip("/")
    while base.endswith(("/**", "/*")):
        base = base.rsplit("/", 1)[0]
    return any(fnmatch.fnmatchcase(path, p) for p in (pattern, base, base + "/*") if p)


def _touched(cap: Capability, touched: Sequence[str]) -> str | None:
    """Why a path-scoped skill is relevant now (the newest matching touched path), or None."""
    for path in reversed(touched):
        for pattern in cap.paths:
            if path_match(pattern, path):
                return f"touched path {path} matches {pattern}"
    return None


def select(
    base: Iterable[Entry],
    catalog: Iterable[Capability],
    names: Mapping[str, str],
    inputs: PolicyInputs,
    failures: Mapping[str, int],
) -> Selection:
    """This step's visible set.

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
    touched = inputs.touched_paths[-TOUCHED_WINDOW:]
    for cap in by_id.values():
        if cap.kind != "skill":
            continue
        if not cap.paths:
            out.visible[cap.id] = Entry(cap.id, names[cap.id], "skill", "skill index", _fingerprint(cap))
        elif why := _touched(cap, touched):
            out.visible[cap.id] = Entry(cap.id, names[cap.id], "skill", why, _fingerprint(cap))
        else:
            out.hidden[cap.id] = f"no touched path matches its paths ({', '.join(cap.paths)})"
    connected = set(inputs.connected_servers)
    spent = 0
    # Most recent request or use first: under a tight budget the newest asks win.
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
                cap_id, names[cap_id], cap.kind, "requested: a search hit or a schema read", _fingerprint(cap)
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
