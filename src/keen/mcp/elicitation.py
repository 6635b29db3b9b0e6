"""MCP elicitation (``elicitation/create``, form mode), headless: the answer comes from a callback.

A server may ask the user for input in the middle of a call (MCP 2025-11-25 "Client
Features > Elicitation"). ``keen.mcp`` has no user interface, so the question goes to an
injected :data:`ElicitationCallback` (the front end's form, or a policy such as "accept the
schema's defaults"). A session advertises the ``elicitation`` capability only when the
Manager has a callback at connection time; without one the SDK refuses the request with
``-32600 "Elicitation not supported"``.

URL-mode requests (out-of-band, e.g. a browser page) are declined: Keen has no way to
confirm such a flow for the user.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = ["ElicitAnswer", "ElicitationCallback", "sdk_callback"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ElicitAnswer:
    """The user's answer to one elicitation request.

    Attributes:
        action: ``accept`` (``content`` holds the form's values), ``decline`` (an explicit
            no) or ``cancel`` (dismissed without a choice), as MCP's ``ElicitResult``.
        content: the submitted values (top-level primitive fields of the requested schema).
    """

    action: Literal["accept", "decline", "cancel"]
    content: dict[str, Any] | None = field(default=None)


ElicitationCallback = Callable[[str, str, dict[str, Any]], Awaitable[ElicitAnswer]]
"""``(server, message, requested_schema) -> ElicitAnswer``: asked for every form-mode
``elicitation/create`` a server sends (``requested_schema``: a flat JSON Schema object)."""


def sdk_callback(server: str, current: Callable[[], ElicitationCallback | None]) -> Any:
    """The SDK ``ClientSession`` ``elicitation_callback`` for ``server``.

    ``current`` returns the Manager's callback at the time of the request (it may be set
    after the session connected). Returns the SDK result (``ElicitResult`` or ``ErrorData``).
    """
    import mcp_types as mt

    async def elicit(context: Any, params: Any) -> Any:
        callback = current()
        if callback is None:
            return mt.ErrorData(code=mt.INVALID_REQUEST, message="Elicitation not supported")
        if getattr(params, "mode", "form") != "form":
            logger.info("%s: declined a URL-mode elicitation (not supported)", server)
            return mt.ElicitResult(action="decline")
        schema = dict(getattr(params, "requested_schema", None) or {})
        try:
            answer = await callback(server, str(params.message), schema)
        except Exception as exc:  # a broken front end must not break the server's call
            logger.warning("%s: the elicitation callback failed (%s); declined", server, type(exc).__name__)
            return mt.ElicitResult(action="decline")
        content = answer.content if answer.action == "accept" else None
        return mt.ElicitResult(action=answer.action, content=content)

    return elicit
