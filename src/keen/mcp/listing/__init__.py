"""What a server lists, and when it is listed again: tools (every page, invalid ones
dropped, full descriptions fetched), resources and prompts, the diff between two listings,
and the argument validator compiled from the listed schemas.

* :mod:`~keen.mcp.listing.tool_pages`, :mod:`~keen.mcp.listing.tool_filter`,
  :mod:`~keen.mcp.listing.tool_descriptions`: ``tools/list`` followed to the end.
* :mod:`~keen.mcp.listing.resources`: resources, resource templates and prompts.
* :mod:`~keen.mcp.listing.watch`: when a connected server's tools are listed again.
* :mod:`~keen.mcp.listing.changes`: what changed between two listings (``capability.diff``).
* :mod:`~keen.mcp.listing.validation`: arguments checked against a listed ``inputSchema``.
* :mod:`~keen.mcp.listing.streams`: the base of the session-stream proxies.
* :mod:`~keen.mcp.listing.views`: each server's tools as listed and as the trust shows
  them, and the per-tool plans of its calls' checks (:class:`ToolViews`, the Manager's).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from keen._lazy import exports_from, lazy_module_attrs

if TYPE_CHECKING:
    from keen.mcp.listing.changes import (
        ChangeObserver,
        RefreshReason,
        ToolChange,
        ToolsChanged,
        diff_tools,
    )
    from keen.mcp.listing.resources import list_prompts, list_resource_templates, list_resources
    from keen.mcp.listing.streams import EOFWatch, StreamProxy
    from keen.mcp.listing.tool_descriptions import (
        description_required,
        fetch_descriptions,
        with_full_descriptions,
    )
    from keen.mcp.listing.tool_filter import InvalidTool, ToolListFilter, WriteWatch
    from keen.mcp.listing.tool_pages import list_all_tools
    from keen.mcp.listing.validation import ArgumentValidator
    from keen.mcp.listing.views import (
        HeldTool,
        ListedServer,
        ListedView,
        ToolsView,
        ToolTrust,
        ToolViews,
        listed_tool,
        tool_name_given,
    )
    from keen.mcp.listing.watch import (
        DEFAULT_REFRESH_INTERVAL,
        ListWatch,
        listen_for_changes,
        open_subscription,
    )

__all__ = [
    "DEFAULT_REFRESH_INTERVAL",
    "ArgumentValidator",
    "ChangeObserver",
    "EOFWatch",
    "HeldTool",
    "InvalidTool",
    "ListWatch",
    "ListedServer",
    "ListedView",
    "RefreshReason",
    "StreamProxy",
    "ToolChange",
    "ToolListFilter",
    "ToolTrust",
    "ToolViews",
    "ToolsChanged",
    "ToolsView",
    "WriteWatch",
    "description_required",
    "diff_tools",
    "fetch_descriptions",
    "list_all_tools",
    "list_prompts",
    "list_resource_templates",
    "list_resources",
    "listed_tool",
    "listen_for_changes",
    "open_subscription",
    "tool_name_given",
    "with_full_descriptions",
]

_EXPORTS = {
    **exports_from(
        "keen.mcp.listing.changes",
        ("ChangeObserver", "RefreshReason", "ToolChange", "ToolsChanged", "diff_tools"),
    ),
    **exports_from(
        "keen.mcp.listing.resources", ("list_prompts", "list_resource_templates", "list_resources")
    ),
    **exports_from("keen.mcp.listing.streams", ("EOFWatch", "StreamProxy")),
    **exports_from(
        "keen.mcp.listing.tool_descriptions",
        ("description_required", "fetch_descriptions", "with_full_descriptions"),
    ),
    **exports_from("keen.mcp.listing.tool_filter", ("InvalidTool", "ToolListFilter", "WriteWatch")),
    **exports_from("keen.mcp.listing.tool_pages", ("list_all_tools",)),
    **exports_from("keen.mcp.listing.validation", ("ArgumentValidator",)),
    **exports_from(
        "keen.mcp.listing.views",
        (
            "HeldTool",
            "ListedServer",
            "ListedView",
            "ToolTrust",
            "ToolViews",
            "ToolsView",
            "listed_tool",
            "tool_name_given",
        ),
    ),
    **exports_from(
        "keen.mcp.listing.watch",
        ("DEFAULT_REFRESH_INTERVAL", "ListWatch", "listen_for_changes", "open_subscription"),
    ),
}

__getattr__, __dir__ = lazy_module_attrs(__name__, _EXPORTS)
