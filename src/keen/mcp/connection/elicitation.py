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

A server may instead fail a request with ``-32042`` (URL elicitation required), naming the
pages and their ``elicitationId``s; its completion notices say the request may be sent
again (MCP 2025-11-25 "Elicitation > URL Mode > URL Elicitation Required Error"). The
session expects those ids (:meth:`SessionElicitation.expect`) before anyone is shown the
pages, so a notice that comes before a caller waits (:meth:`SessionElicitation.wait`) is
not lost.
"""

from __future__ import annotations

import ipaddress
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import urlsplit

import anyio

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
        self._expected: dict[str, anyio.Event] = {}

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
        if answer.action == "accept" and isinstance(elicitation_id, str):
            self.accepted(elicitation_id, answer.on_complete)
        return mt.ElicitResult(action=answer.action)

    def accepted(self, elicitation_id: str, on_complete: Callable[[], None] | None) -> None:
        """The person accepted the page of ``elicitation_id``: call ``on_complete`` (if any)
        once its completion notice comes."""
        if on_complete is None:
            return
        self._pending.pop(elicitation_id, None)  # a reused id: the newest request wins
        self._pending[elicitation_id] = on_complete
        _bound(self._pending)

    def expect(self, elicitation_ids: list[str]) -> None:
        """Track the completion of ``elicitation_ids`` (a ``-32042``'s pages) from now on, so
        :meth:`wait` sees a notice that came before it was called. An id expected again (a
        server that reuses ids) waits for a new notice."""
        for elicitation_id in elicitation_ids:
            self._expected.pop(elicitation_id, None)
            self._expected[elicitation_id] = anyio.Event()
        _bound(self._expected)

    async def wait(self, elicitation_ids: list[str], timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for the completion notice of every id (each
        :meth:`expect`-ed first). Returns ``True`` when all came, ``False`` when the time ran
        out or an id was never expected (or was forgotten: at most 64 are kept)."""
        events = [self._expected.get(elicitation_id) for elicitation_id in elicitation_ids]
        if not events or None in events:
            return False
        with anyio.move_on_after(timeout):
            for event in events:
                assert event is not None
                await event.wait()
            return True
        return False

    def completed(self, elicitation_id: str) -> bool:
        """The server sent ``notifications/elicitation/complete`` for ``elicitation_id``: call
        that request's ``on_complete`` once and release a :meth:`wait` for it. Returns
        ``False`` (and does nothing) for an id this session neither accepted nor expects, or
        one already completed."""
        expected = self._expected.get(elicitation_id)
        waited = expected is not None and not expected.is_set()
        if expected is not None:
            expected.set()
        on_complete = self._pending.pop(elicitation_id, None)
        if on_complete is None:
            if not waited:
                logger.debug("%s: ignored a completion notice for an unknown elicitation", self.server)
            return waited
        try:
            on_complete()
        except Exception as exc:  # a broken front end must not break the session
            logger.warning("%s: the completion callback failed (%s)", self.server, type(exc).__name__)
        return True


def _bound(items: dict[str, Any]) -> None:
    # A server need never send a notice: the oldest entry is forgotten first.
    while len(items) > _MAX_PENDING:
        del items[next(iter(items))]


def sdk_callback(
    server: str,
    current: Callable[[], ElicitationCallback | None],
    current_url: Callable[[], UrlElicitationCallback | None] = lambda: None,
) -> SessionElicitation:
    """The SDK ``ClientSession`` ``elicitation_callback`` for ``server``: a
    :class:`SessionElicitation` (see there for the arguments)."""
    return SessionElicitation(server, current, current_url)
