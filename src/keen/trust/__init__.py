"""Tool-definition trust: what Keen lets a model see of a server's tools, and when.

Beside :mod:`keen.mcp`, which it uses (docs/architecture.md "Package map"):

* :mod:`~keen.trust.fingerprint`: SHA-256 over the canonical JSON of a tool's definition.
* :mod:`~keen.trust.pinstore`: the pin files ``$KEEN_HOME/mcp/pins/<server>.json``.
* :mod:`~keen.trust.pins`: trust on first use, then quarantine what changes (rug pulls).
* :mod:`~keen.trust.info_pins`: the same for what a server says of itself (``serverInfo``,
  ``instructions``).
* :mod:`~keen.trust.flags`: flags on tool text (shadowing, overrides, secret grabs, hidden text).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from keen._lazy import exports_from, lazy_module_attrs

if TYPE_CHECKING:
    from keen.trust.fingerprint import body_fingerprint, definition, fingerprint
    from keen.trust.flags import (
        Flag,
        ShadowIndex,
        escape_text,
        flag_change,
        flag_kinds,
        scan_server,
        scan_servers,
        scan_tool,
    )
    from keen.trust.pins import (
        PinGuard,
        PinnedView,
        PinReport,
        ToolCheck,
        compare,
        pinned_tool,
        pinning_policy,
        trust,
    )
    from keen.trust.pinstore import PinFile, PinStore, Review, ToolPin
    from keen.trust.skill_trust import configured_annotations_trusted

__all__ = [
    "Flag",
    "PinFile",
    "PinGuard",
    "PinReport",
    "PinStore",
    "PinnedView",
    "Review",
    "ShadowIndex",
    "ToolCheck",
    "ToolPin",
    "body_fingerprint",
    "compare",
    "configured_annotations_trusted",
    "definition",
    "escape_text",
    "fingerprint",
    "flag_change",
    "flag_kinds",
    "pinned_tool",
    "pinning_policy",
    "scan_server",
    "scan_servers",
    "scan_tool",
    "trust",
]

_EXPORTS = {
    **exports_from("keen.trust.fingerprint", ("body_fingerprint", "definition", "fingerprint")),
    **exports_from(
        "keen.trust.flags",
        (
            "Flag",
            "ShadowIndex",
            "escape_text",
            "flag_change",
            "flag_kinds",
            "scan_server",
            "scan_servers",
            "scan_tool",
        ),
    ),
    **exports_from(
        "keen.trust.pins",
        (
            "PinGuard",
            "PinReport",
            "PinnedView",
            "ToolCheck",
            "compare",
            "pinned_tool",
            "pinning_policy",
            "trust",
        ),
    ),
    **exports_from("keen.trust.pinstore", ("PinFile", "PinStore", "Review", "ToolPin")),
    **exports_from("keen.trust.skill_trust", ("configured_annotations_trusted",)),
}

__getattr__, __dir__ = lazy_module_attrs(__name__, _EXPORTS)
