"""MCP elicitation (``elicitation/create``), headless: the answer comes from a callback.

A server may ask the user for input in the middle of a call (MCP 2025-11-25 "Client
Features > Elicitation"). ``keen.mcp`` has no user interface, so the question goes to an
injected :data:`ElicitationCallback` (the front end's form, or a policy such as "accept the
schema's defaults"). A session advertises the ``elicitation`` capability only when the
Manager has a callback at connection time; without one the SDK refuses the request with
``-32600 "Elicitation not supported"``.

URL-mode requests (MCP 2025-11-25 "Elicitation > URL Mode": the server asks the user to
open a page out of band, such as a third-party sign-in) go to a separate
:data:`UrlElicitationCallback`, and are declined when there is none. Before it is asked, the
URL is checked (:func:`check_url`): only ``https`` (or ``http`` on a loopback host) with a
host and no user name or password in it, so a server cannot make the front end show a
``file:``, ``javascript:`` or look-alike ``user@host`` link. Keen never opens or fetches the
URL itself; the person does, after consenting.

An ``accept`` of a URL-mode request only means the person consented; the interaction
itself finishes out of band, and a server may then send ``notifications/elicitation/
complete`` with the request's ``elicitationId`` (MCP 2025-11-25 "Elicitation > Completion
Notifications for URL Mode Elicitation"; the 2026-07-28 era has no such notice). An answer
may carry ``on_complete``: it is called once for that notice. Notices naming an id this
session never accepted, or one already completed, are ignored, as the spec requires.
"""

from __future__ import annotations

import ipaddress
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import urlsplit

__all__ = [
    "ElicitAnswer",
    "ElicitationCallback",
    "SessionElicitation",
    "UrlElicitationCallback",
    "check_url",
    "sdk_callback",
]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ElicitAnswer:
    """The user's answer to one elicitation request.

    Attributes:
        action: ``accept`` (``content`` holds the form's values), ``decline`` (an explicit
            no) or ``cancel`` (dismissed without a choice), as MCP's ``ElicitResult``.
        content: the submitted values (top-level primitive fields of the requested schema).
        on_complete: URL mode, with ``accept``: called (in the event loop) once the server
            reports the out-of-band interaction finished; it must not block.
    """

    action: Literal["accept", "decline", "cancel"]
    content: dict[str, Any] | None = field(default=None)
    on_complete: Callable[[], None] | None = field(default=None, compare=False)


ElicitationCallback = Callable[[str, str, dict[str, Any]], Awaitable[ElicitAnswer]]
"""``(server, message, requested_schema) -> ElicitAnswer``: asked for every form-mode
``elicitation/create`` a server sends (``requested_schema``: a flat JSON Schema object)."""

UrlElicitationCallback = Callable[[str, str, str], Awaitable[ElicitAnswer]]
"""``(server, message, url) -> ElicitAnswer``: asked for every URL-mode ``elicitation/create``
whose URL passed :func:`check_url`. ``accept`` means the person consented to open the page
(MCP: the interaction itself happens out of band); ``content`` is ignored."""

_MAX_URL_CHARS = 2048


def check_url(url: str) -> str | None:
    """Why ``url`` may not be shown to a person as a link to open, or ``None`` when it may.

    Allowed: ``https://host/...``, or ``http://`` to a loopback host (a local sign-in
    page); at most 2,048 printable ASCII characters (so no control, bidi or look-alike
    characters: a non-ASCII host must come as punycode), no user name or password before
    the host (MCP 2025-11-25 "Elicitation > Security Considerations > Safe URL Handling"
    asks clients to show the full URL and its domain, to warn about punycode, and never to
    open or pre-fetch it without consent).
    """
    if len(url) > _MAX_URL_CHARS:
        return f"longer than {_MAX_URL_CHARS} characters"
    if not all(33 <= ord(c) <= 126 for c in url):
        return "it holds whitespace, control or non-ASCII characters"
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
    except ValueError:
        return "not a valid URL"
    if parts.scheme not in ("https", "http"):
        return f"scheme {parts.scheme or '(none)'!r} is not https"
    if not host:
        return "it names no host"
    if "@" in parts.netloc:
        return "it holds a user name or password before the host"
    if parts.scheme == "http" and not _loopback(host):
        return "plain http is allowed only to a loopback host"
    return None


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


_MAX_PENDING = 64
"""Accepted URL-mode requests kept waiting for their completion notice, per session (a
server need never send one; the oldest is forgotten first)."""


class SessionElicitation:
    """One session's elicitation: the SDK ``ClientSession`` ``elicitation_callback`` (call the
    object) and the URL-mode requests the person accepted, until :meth:`completed`.

    Args:
        server: the server's name.
        current / current_url: return the Manager's form-mode and URL-mode callbacks at the
            time of the request (they may be set after the session connected).
    """

    def __init__(
        self,
        server: str,
        current: Callable[[], ElicitationCallback | None],
        current_url: Callable[[], UrlElicitationCallback | None] = lambda: None,
    ) -> None:
        self.server = server
        self._current, self._current_url = current, current_url
        self._pending: dict[str, Callable[[], None]] = {}

    async def __call__(self, context: Any, params: Any) -> Any:
        """Answer one ``elicitation/create``; returns ``ElicitResult`` or ``ErrorData``."""
        import mcp_types as mt

        server, callback = self.server, self._current()
        if callback is None:
            return mt.ErrorData(code=mt.INVALID_REQUEST, message="Elicitation not supported")
        if getattr(params, "mode", "form") == "url":
            return await self._url(params, self._current_url())
        if getattr(params, "mode", "form") != "form":
            logger.info("%s: declined an elicitation of unknown mode", server)
            return mt.ElicitResult(action="decline")
        schema = dict(getattr(params, "requested_schema", None) or {})
        try:
            answer = await callback(server, str(params.message), schema)
        except Exception as exc:  # a broken front end must not break the server's call
            logger.warning("%s: the elicitation callback failed (%s); declined", server, type(exc).__name__)
            return mt.ElicitResult(action="decline")
        content = answer.content if answer.action == "accept" else None
        return mt.ElicitResult(action=answer.action, content=content)

    async def _url(self, params: Any, callback: UrlElicitationCallback | None) -> Any:
        import mcp_types as mt

        server, url = self.server, str(getattr(params, "url", "") or "")
        if callback is None:
            logger.info("%s: declined a URL-mode elicitation (no one to ask)", server)
            return mt.ElicitResult(action="decline")
        problem = check_url(url)
        if problem is not None:
            logger.warning("%s: declined a URL-mode elicitation: its URL is refused (%s)", server, problem)
            return mt.ElicitResult(action="decline")
        try:
            answer = await callback(server, str(params.message), url)
        except Exception as exc:  # a broken front end must not break the server's call
            logger.warning(
                "%s: the URL elicitation callback failed (%s); declined", server, type(exc).__name__
            )
            return mt.ElicitResult(action="decline")
        elicitation_id = getattr(params, "elicitation_id", None)
        if answer.action == "accept" and answer.on_complete is not None and isinstance(elicitation_id, str):
            self._pending.pop(elicitation_id, None)  # a reused id: the newest request wins
            self._pending[elicitation_id] = answer.on_complete
            while len(self._pending) > _MAX_PENDING:
                del self._pending[next(iter(self._pending))]
        return mt.ElicitResult(action=answer.action)

    def completed(self, elicitation_id: str) -> bool:
        """The server sent ``notifications/elicitation/complete`` for ``elicitation_id``: call
        that request's ``on_complete`` once. Returns ``False`` (and does nothing) for an id
        this session has no accepted request waiting under."""
        on_complete = self._pending.pop(elicitation_id, None)
        if on_complete is None:
            logger.debug("%s: ignored a completion notice for an unknown elicitation", self.server)
            return False
        try:
            on_complete()
        except Exception as exc:  # a broken front end must not break the session
            logger.warning("%s: the completion callback failed (%s)", self.server, type(exc).__name__)
        return True


def sdk_callback(
    server: str,
    current: Callable[[], ElicitationCallback | None],
    current_url: Callable[[], UrlElicitationCallback | None] = lambda: None,
) -> SessionElicitation:
    """The SDK ``ClientSession`` ``elicitation_callback`` for ``server``: a
    :class:`SessionElicitation` (see there for the arguments)."""
    return SessionElicitation(server, current, current_url)
