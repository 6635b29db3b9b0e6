"""When a connected server's tools are listed again: change notices, ``ttlMs``, requests.

One :class:`ListWatch` per session, run by the server's owner task beside the parked
session (docs/architecture.md "Tools that change"). Three things ask for a re-list:

- a change notice: ``notifications/tools/list_changed`` (2025-11-25 and earlier, through the
  session's message handler) or a ``ToolsListChanged`` event on a ``subscriptions/listen``
  stream (2026-07-28, :func:`listen_for_changes`);
- the listing's ``ttlMs`` running out (2026-07-28 list results; MCP specification
  2026-07-28, "Caching"): a positive ``ttlMs`` is honoured with a re-list when it expires,
  floored at the debounce interval; ``0`` ("immediately stale", what a server that sets no
  hint sends) schedules nothing, the server's change notices keep the list fresh;
- an explicit refresh (:meth:`ListWatch.request_and_wait`).

Requests are coalesced: whatever arrives while a re-list runs or within ``interval``
seconds after one started costs one more re-list, so a server that sends a thousand
notices a second costs at most one re-list per interval. An explicit refresh skips the
wait. Re-lists run in the owner's task group, never in a caller's task, so a slow
server's refresh never blocks calls to other servers (or to itself).
"""

from __future__ import annotations

import contextlib
import logging
import math
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

import anyio
from mcp.client.subscriptions import ListenNotSupportedError, Subscription, SubscriptionLost, listen
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from keen.mcp.config.defaults import DEFAULT_REFRESH_INTERVAL
from keen.mcp.listing.changes import RefreshReason, ToolsChanged

if TYPE_CHECKING:
    from mcp.client.session import ClientSession

__all__ = ["DEFAULT_REFRESH_INTERVAL", "ListWatch", "listen_for_changes", "open_subscription"]

logger = logging.getLogger(__name__)


_RANK: dict[RefreshReason, int] = {"ttl": 0, "notification": 1, "reconnect": 2, "sync": 2, "refresh": 3}
_LISTEN_BACKOFF_MAX = 60.0
_ACK_TIMEOUT = 10.0

Relist = Callable[[RefreshReason], Awaitable[ToolsChanged | None]]


class ListWatch:
    """Coalesces re-list requests for one session; see the module docstring.

    Args:
        server: the server's name (for log lines).
        relist: lists the tools again and returns what changed (``None`` when it failed).
        interval: seconds between the starts of two re-lists, at least.
    """

    def __init__(self, server: str, relist: Relist, *, interval: float = DEFAULT_REFRESH_INTERVAL) -> None:
        self.server = server
        self._relist = relist
        self.interval = max(0.0, interval)
        self._pending: RefreshReason | None = None
        self._wake = anyio.Event()
        self._waiters: list[anyio.Event] = []
        self._expires_at: float | None = None
        self.notices = 0
        """Change notices received (every one, including those coalesced away)."""
        self.relists = 0
        """Re-lists run."""
        self.last_change: ToolsChanged | None = None
        """What the latest re-list found (``None`` before the first, or when it failed)."""

    def request(self, reason: RefreshReason) -> None:
        """Ask for a re-list (synchronous; safe from any callback in the event loop)."""
        if reason == "notification":
            self.notices += 1
        if self._pending is None or _RANK[reason] > _RANK[self._pending]:
            self._pending = reason
        self._wake.set()

    async def request_and_wait(self) -> ToolsChanged | None:
        """Re-list now (no debounce wait) and return what that re-list found."""
        done = anyio.Event()
        self._waiters.append(done)
        self.request("refresh")
        await done.wait()
        return self.last_change

    def set_ttl(self, ttl_ms: int | None) -> None:
        """Schedule the re-list a listing's ``ttlMs`` asks for (``None``/``0``: none)."""
        if ttl_ms:
            self._expires_at = anyio.current_time() + max(ttl_ms / 1000, self.interval)
        else:
            self._expires_at = None

    async def run(self) -> None:
        """The loop; runs until cancelled (the session ends)."""
        last_start = -math.inf
        while True:
            if self._pending is None:
                timeout = (
                    None if self._expires_at is None else max(0.0, self._expires_at - anyio.current_time())
                )
                with anyio.move_on_after(timeout):
                    await self._wake.wait()
                self._wake = anyio.Event()
                if self._pending is None:
                    if self._expires_at is None or anyio.current_time() < self._expires_at:
                        continue
                    self._pending = "ttl"
            if self._pending != "refresh":
                # Debounce: notices that keep coming are answered once per interval.
                await anyio.sleep(max(0.0, last_start + self.interval - anyio.current_time()))
            reason, self._pending = self._pending or "notification", None
            waiters, self._waiters = self._waiters, []
            self._expires_at = None
            last_start = anyio.current_time()
            self.relists += 1
            try:
                self.last_change = await self._relist(reason)
            finally:
                for waiter in waiters:
                    waiter.set()


async def open_subscription(
    stack: contextlib.AsyncExitStack, session: ClientSession, server: str
) -> Subscription | None:
    """Open a ``subscriptions/listen`` stream for tool-list changes on ``stack`` (2026-07-28).

    Opened before the first tools/list, so no change between that listing and the
    acknowledgment is lost (events are not replayed). ``None`` when the session is of an
    older era or the server does not offer or honour the subscription.
    """
    if session.protocol_version not in MODERN_PROTOCOL_VERSIONS:
        return None
    sub: Subscription | None = None
    try:
        # Bounded: a server that takes the request but never acknowledges it must not hold
        # up the connection (the SDK waits for the ack without a limit by default).
        with anyio.move_on_after(_ACK_TIMEOUT):
            sub = await stack.enter_async_context(listen(session, tools_list_changed=True))
    except (ListenNotSupportedError, MCPError, SubscriptionLost) as exc:
        logger.debug("server %s: no subscriptions/listen: %s", server, exc)
        return None
    if sub is None:
        logger.debug("server %s: subscriptions/listen not acknowledged in %ss", server, _ACK_TIMEOUT)
        return None
    if not sub.honored.tools_list_changed:
        logger.debug("server %s: subscriptions/listen does not honour tool changes", server)
        return None
    return sub


async def listen_for_changes(session: ClientSession, watch: ListWatch, first: Subscription | None) -> None:
    """Turn the events of a ``subscriptions/listen`` stream into re-list requests.

    ``first``: the stream :func:`open_subscription` opened (``None``: nothing to follow).
    A stream that drops is opened again (with a growing pause, at most a minute) and
    followed by a re-list, since events are not replayed. Returns when the server stops
    offering the subscription; the ``ttlMs`` schedule and explicit refreshes remain.
    """
    if first is None:
        return
    try:
        async for _event in first:
            watch.request("notification")
    except SubscriptionLost as exc:
        logger.debug("server %s: subscription lost (%s); listening again", watch.server, exc)
    backoff = 1.0
    while True:
        await anyio.sleep(backoff)
        backoff = min(backoff * 2, _LISTEN_BACKOFF_MAX)
        try:
            async with listen(session, tools_list_changed=True) as sub:
                if not sub.honored.tools_list_changed:
                    return
                watch.request("notification")  # no replay: changes may have been missed
                backoff = 1.0
                async for _event in sub:
                    watch.request("notification")
        except ListenNotSupportedError:
            return
        except MCPError as exc:
            logger.debug("server %s: subscriptions/listen refused: %s", watch.server, exc)
            return
        except SubscriptionLost as exc:
            logger.debug("server %s: subscription lost (%s); listening again", watch.server, exc)
