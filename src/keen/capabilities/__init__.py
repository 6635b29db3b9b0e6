"""Capabilities: descriptors of what an agent may use, the catalog, ToolSearch, the prompt budget.

- :class:`Capability` (``descriptor``): id, kind, summary, source, risk from MCP
  annotations, token sizes, deferred :meth:`~Capability.load`.
- ids and model tool names (``names``): ``mcp__github__get_pull_request`` ->
  ``^[A-Za-z0-9_-]{1,64}$``, stable hash suffix when cut, collisions resolved the same
  way every run.
- :class:`Catalog` (``catalog``): from generated skills on disk, a live Manager or tool
  lists; ``search(query, k, filter)`` and ``load(id)``.
- ToolSearch (``search``): BM25 + wordllama, fused, offline, built from rows per document
  (``_rows``; the keyword index ``_bm25``, the pooled word vectors ``_pooling``). Imported
  on first search only (numpy and wordllama's files load then).
- The budgeted MCP section of a system prompt (``budget``).

Names load on first use (PEP 562), so the budgeted prompt (``keen.capabilities.budget``)
does not import the catalog.

Imports only downward (``keen.mcp``, ``keen.skills``, ``keen.mcpskills``, shared leaves);
see docs/architecture.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from keen._lazy import exports_from, lazy_module_attrs

if TYPE_CHECKING:
    from keen.capabilities.budget import BudgetedSection, budgeted_section
    from keen.capabilities.catalog import Catalog, SearchFilter, SearchHit, tool_capability
    from keen.capabilities.descriptor import Capability, Kind, LoadedCapability, Risk
    from keen.capabilities.modes import PermissionMode
    from keen.capabilities.names import MODEL_NAME_RE, capability_id, model_name, model_names

__all__ = [
    "MODEL_NAME_RE",
    "BudgetedSection",
    "Capability",
    "Catalog",
    "Kind",
    "LoadedCapability",
    "PermissionMode",
    "Risk",
    "SearchFilter",
    "SearchHit",
    "budgeted_section",
    "capability_id",
    "model_name",
    "model_names",
    "tool_capability",
]

_EXPORTS = {
    **exports_from("keen.capabilities.budget", ("BudgetedSection", "budgeted_section")),
    **exports_from(
        "keen.capabilities.catalog",
        ("Catalog", "SearchFilter", "SearchHit", "tool_capability"),
    ),
    **exports_from("keen.capabilities.descriptor", ("Capability", "Kind", "LoadedCapability", "Risk")),
    **exports_from("keen.capabilities.modes", ("PermissionMode",)),
    **exports_from(
        "keen.capabilities.names", ("MODEL_NAME_RE", "capability_id", "model_name", "model_names")
    ),
}

__getattr__, __dir__ = lazy_module_attrs(__name__, _EXPORTS)
