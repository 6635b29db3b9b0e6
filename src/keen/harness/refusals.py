"""Why the visibility gate refuses a call, worded for the model.

A call outside what it may see gets the most precise reason that leaks nothing hidden: a
server that is down, unusable or not configured says so with its remedy (the server checks
only, never the tool's schema); a tool its server lists but the pins hold for review (new or
changed since the user trusted the server's tools, README "Security: what Keen trusts") says
so and what the user runs, never its new definition; a tool the permission mode forbids says
that searching will not help; anything else points at ``search_tools``. In ``keen serve``'s callback mode a
capability missing from the catalog gets the gateway's own reason when there is one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from keen._terminal import name_in_message
from keen.capabilities import Catalog, PermissionMode
from keen.errors import KeenError
from keen.gateway import Gateway
from keen.harness.executors import server_trouble
from keen.harness.policy import hidden_reason
from keen.mcp.manager import Manager

RemedyWords = Callable[[KeenError, str], str]

__all__ = ["held_reason", "not_in_catalog", "why_hidden"]


def why_hidden(
    catalog: Catalog | None,
    gateway: Gateway | None,
    mode: PermissionMode,
    words: RemedyWords,
    cap_id: str,
    name: str,
    server: str | None,
    tool: str | None,
) -> tuple[str, str | None]:
    """A step-mode visibility refusal's text and code, for a call by id (``call_mcp_tool``)
    or by a name an earlier step offered (``code`` is ``None`` unless the server is the trouble)."""
    try:
        known = catalog.get(cap_id or name) if catalog is not None else None
    except KeyError:
        known = None
    if known is None and gateway and (trouble := server_trouble(gateway.manager, name, server)):
        return words(trouble, trouble.server), trouble.code
    if known is None and gateway and server and tool and (held := held_reason(gateway.manager, server, tool)):
        return held, None
    what = f"{server}/{_quoted(tool or '')}" if server else _quoted(name)
    return hidden_reason(known, mode, what), None


def held_reason(manager: Manager, server: str, tool: str) -> str | None:
    """Why connected ``server``'s ``tool`` is not offered when the pins hold it (the
    Manager's view through its trust, :meth:`keen.mcp.Manager.view`): new or changed since
    the user trusted the server's tools (``pinning: quarantine``), or every tool of a server
    whose pins cannot be read. ``None`` when the trust holds nothing of that name, or the
    server cannot say now.

    The text names what the user runs to review and accept it (``keen mcp diff``, then
    ``keen mcp trust``, README "Security: what Keen trusts") and tells the model that
    searching will not bring it; it never quotes the held definition.
    """
    try:
        view = manager.view(server)
    except KeenError:
        return None
    what = f"{server}/{_quoted(tool)}"
    # A trust written before views had an error reads as none (keen.mcp.listing.views.ToolsView).
    if getattr(view, "error", ""):
        if tool not in {t.name for t in manager.live_tools(server)}:
            return None
        return (
            f"{what} is held: Keen cannot read the pins of server {server}, so none of its tools "
            "is offered and searching will not change that. The user has to fix or delete its pin "
            f"file (`keen mcp diff {server}` says what is wrong); tell them."
        )
    if not any(held.name == tool for held in view.held):
        return None
    return (
        f"{what} is held for review: server {server} lists it, but it is new or changed since the "
        "user trusted the server's tools, so it is not offered and searching will not change that. "
        f"The user can review it with `keen mcp diff {server}`, then accept it with "
        f"`keen mcp trust {server}`; tell them."
    )


def _quoted(name: str) -> str:
    """A name as a refusal quotes it: escaped onto one line (a server's name cannot start a
    line of its own in the model's text) and cut (:func:`keen._terminal.name_in_message`)."""
    return name_in_message(name)


def not_in_catalog(
    gateway: Gateway | None, words: RemedyWords, server: str | None, tool: str | None, args: dict[str, Any]
) -> tuple[str, str, str | None]:
    """Callback-mode refusal of a call whose capability the live catalog lacks: ``(gate, text,
    code)``: why the server cannot serve it (not configured, disabled, disconnected, signed
    out, no such tool shown) at ``validate`` when there is a reason, else ``not served
    here`` at ``visibility``."""
    # The server's state and the tool's name only: the mcp_checks stage is the one place
    # check_call runs, and a tool outside the catalog must not have its schema quoted back.
    if server and tool and gateway:
        try:
            gateway.manager.find_tool(server, tool)
        except KeenError as exc:
            return "validate", words(exc, server), exc.code
    what = name_in_message(f"{server}/{tool}") if server else "this tool"
    return "visibility", f"{what} is not served here", None
