"""Why the visibility gate refuses a call, worded for the model.

A call outside what it may see gets the most precise reason that leaks nothing hidden: a
server that is down, unusable or not configured says so with its remedy (the server checks
only, never the tool's schema); a tool the permission mode forbids says that searching will
not help; anything else points at ``search_tools``. In ``keen serve``'s callback mode a
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

RemedyWords = Callable[[KeenError, str], str]

__all__ = ["not_in_catalog", "why_hidden"]


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
    return hidden_reason(known, mode, name_in_message(f"{server}/{tool}" if server else name)), None


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
