"""The harness: the visible set per step (one model request), two gates, one pipeline, a replayable event log.

- :class:`Harness` (``pipeline``): ``begin_step()`` computes the visible set (logging a
  ``capability.diff``) and returns the tool definitions to offer; ``call(name, arguments)``
  runs the stages of :data:`keen.calls.ORDER` (validate > visibility > mcp_checks > pin_check >
  permission > pre_hooks > execute > truncate > post_hooks > audit) and returns an
  :class:`Observation` (a refusal is an observation, not an error).
- The discovery policy and the permission gate (``policy``).
- The workspace-confined local tools ``read_file``, ``list_dir``, ``glob``, ``grep`` (``local``).
- The session log ``$KEEN_HOME/sessions/<id>.jsonl`` and :func:`replay` (``events``).

Names load on first use (PEP 562): ``keen chat`` reads the first step's tool definitions
(``definitions``) before the pipeline, the gateway and anyio are imported.

Imports only downward (capabilities, gateway, mcpskills, skills, mcp, shared leaves); the
import-linter contracts in pyproject.toml hold it to docs/architecture.md.
"""

from typing import TYPE_CHECKING

from keen._lazy import exports_from, lazy_module_attrs

if TYPE_CHECKING:
    from keen.harness.entries import GATE_CODES
    from keen.harness.events import (
        EventLog,
        Replay,
        ReplayedStep,
        approvals,
        new_session_id,
        read_events,
        replay,
        session_path,
    )
    from keen.harness.local import LocalToolError, Workspace
    from keen.harness.pipeline import Harness, Observation, PostHook, PreHook, Visibility
    from keen.harness.policy import Entry, PolicyInputs, Selection, permission, select, visibility

__all__ = [
    "GATE_CODES",
    "Entry",
    "EventLog",
    "Harness",
    "LocalToolError",
    "Observation",
    "PolicyInputs",
    "PostHook",
    "PreHook",
    "Replay",
    "ReplayedStep",
    "Selection",
    "Visibility",
    "Workspace",
    "approvals",
    "new_session_id",
    "permission",
    "read_events",
    "replay",
    "select",
    "session_path",
    "visibility",
]

_EXPORTS = {
    **exports_from("keen.harness.entries", ("GATE_CODES",)),
    **exports_from(
        "keen.harness.events",
        (
            "EventLog",
            "Replay",
            "ReplayedStep",
            "approvals",
            "new_session_id",
            "read_events",
            "replay",
            "session_path",
        ),
    ),
    **exports_from("keen.harness.local", ("LocalToolError", "Workspace")),
    **exports_from("keen.harness.pipeline", ("Harness", "Observation", "PostHook", "PreHook", "Visibility")),
    **exports_from(
        "keen.harness.policy", ("Entry", "PolicyInputs", "Selection", "permission", "select", "visibility")
    ),
}

__getattr__, __dir__ = lazy_module_attrs(__name__, _EXPORTS)
