"""Requests over a server's session: ``tools/call`` in both protocol eras, a stale tool list
relisted once, and what a failed request becomes.

* :mod:`~keen.mcp.calls.send`: the requests the Manager sends, and their failures.
* ``_input``: ``tools/call`` with the server's questions back (elicitation, input rounds).
* ``_stale``: a call refused because Keen's copy of the tool list is stale.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from keen._lazy import exports_from, lazy_module_attrs

if TYPE_CHECKING:
    from keen.mcp.calls.send import connected, not_connected, send_request, send_tool_call

__all__ = ["connected", "not_connected", "send_request", "send_tool_call"]

_EXPORTS = {
    **exports_from("keen.mcp.calls.send", ("connected", "not_connected", "send_request", "send_tool_call")),
}

__getattr__, __dir__ = lazy_module_attrs(__name__, _EXPORTS)
