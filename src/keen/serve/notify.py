"""Tell ``keen serve``'s hosts when what it lists changed (``notifications/*/list_changed``).

An upstream server's tools change (its own change notice, an expired ``ttlMs``, a refresh,
a connect or disconnect); the Manager tells its observers; :class:`ChangeNotifier` is one of
them. It does not forward each upstream notice: it compares what *keen serve itself* lists
(a digest per list, from ``snapshot``) before and after, and tells hosts only when that
changed. A burst is coalesced: each round waits ``interval`` seconds before it compares, so
hosts get at most one notice per list per ``interval``, however many upstream notices came.

Where a notice goes, by protocol era and transport (docs/serve.md "When tools change"):

- 2026-07-28 (either transport): the ``subscriptions/listen`` streams hosts opened, through
  the SDK's :class:`~mcp.server.subscriptions.ListenHandler` (MCP 2026-07-28, "Subscriptions").
  The era has no other server-to-client channel.
- 2025-11-25 over Streamable HTTP: every open ``GET`` event stream of a live session
  (:meth:`open_stream`; ``keen.serve.http`` serves the stream). MCP 2025-11-25,
  "Listening for Messages from the Server".
- 2025-11-25 over stdio: the one connection, once the host sent ``notifications/initialized``
  (:meth:`attach_session`).

Each replica of a multi-replica deployment watches the same upstream servers, so each tells
its own hosts' streams; nothing about notices is shared through the store.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import math
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Literal

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.server.subscriptions import (
    InMemorySubscriptionBus,
    ListenHandler,
    PromptsListChanged,
    ResourcesListChanged,
    ServerEvent,
    ToolsListChanged,
)

__all__ = ["DEFAULT_NOTIFY_INTERVAL", "ChangeNotifier", "ListKind", "digest"]

logger = logging.getLogger("keen.serve")

ListKind = Literal["tools", "resources", "prompts"]

DEFAULT_NOTIFY_INTERVAL = 0.5
"""Seconds a round waits before comparing: the coalescing window and the minimum gap between
two notices of one list."""

_METHODS: dict[str, str] = {
    "tools": "notifications/tools/list_changed",
    "resources": "notifications/resources/list_changed",
    "prompts": "notifications/prompts/list_changed",
}
_EVENTS: dict[str, Callable[[], ServerEvent]] = {
    "tools": ToolsListChanged,
    "resources": ResourcesListChanged,
    "prompts": PromptsListChanged,
}
_SESSION_SENDERS = {
    "tools": "send_tool_list_changed",
    "resources": "send_resource_list_changed",
    "prompts": "send_prompt_list_changed",
}
_STREAM_BUFFER = 8


def digest(items: Any) -> str:
    """A stable digest of a JSON-able value (what a list would show a host)."""
    return hashlib.sha256(json.dumps(items, sort_keys=True, default=str).encode()).hexdigest()


class ChangeNotifier:
    """Coalesces upstream changes into list-changed notices to every connected host.

    Args:
        snapshot: returns ``{kind: digest}`` of each list this server serves and may change
            (``"tools"``, ``"resources"``, ``"prompts"``); a list absent from it never changes.
        interval: seconds of coalescing per round (> 0); at most one notice per list per interval.
        max_streams: open HTTP event streams (2025-11-25) and listen streams (2026-07-28) each.
    """

    def __init__(
        self,
        snapshot: Callable[[], Mapping[str, str]],
        *,
        interval: float = DEFAULT_NOTIFY_INTERVAL,
        max_streams: int = 1024,
    ) -> None:
        if not interval > 0 or math.isinf(interval):
            raise ValueError(f"notify interval must be a positive number of seconds, got {interval!r}")
        self._snapshot = snapshot
        self.interval = interval
        self.max_streams = max_streams
        self.bus = InMemorySubscriptionBus()
        self.listen = ListenHandler(self.bus, max_subscriptions=max_streams)
        self._streams: set[MemoryObjectSendStream[str]] = set()
        self._sessions: list[Any] = []
        self._poked = anyio.Event()
        self._last: dict[str, str] = {}
        self._closed = False
        self.rounds = 0
        """How many rounds found a change and told hosts (for logs and tests)."""

    # -- inputs -------------------------------------------------------------------------------

    def poke(self, *_: object) -> None:
        """Something upstream changed (a Manager change or status observer): compare soon."""
        self._poked.set()

    def attach_session(self, session: Any) -> None:
        """Send notices to this handshake-era stdio connection (an SDK ``ServerSession``)."""
        if not self._closed and all(s is not session for s in self._sessions):
            self._sessions.append(session)

    @contextlib.contextmanager
    def open_stream(self) -> Iterator[MemoryObjectReceiveStream[str] | None]:
        """A stream of notification methods for one HTTP ``GET`` event stream (2025-11-25);
        ``None`` when ``max_streams`` are open or the server is stopping. It ends when the
        server stops."""
        if self._closed or len(self._streams) >= self.max_streams:
            yield None
            return
        send, receive = anyio.create_memory_object_stream[str](_STREAM_BUFFER)
        self._streams.add(send)
        try:
            with receive:
                yield receive
        finally:
            self._streams.discard(send)
            send.close()

    # -- the loop -----------------------------------------------------------------------------

    async def run(self) -> None:
        """Compare and notify, one round per burst of pokes, until cancelled."""
        self._last = dict(self._snapshot())
        while True:
            await self._poked.wait()
            # Coalesce: let the burst finish and the catalog settle, then compare once.
            await anyio.sleep(self.interval)
            self._poked = anyio.Event()
            try:
                now = dict(self._snapshot())
            except Exception:  # a broken snapshot must not end notices for good
                logger.exception("keen serve: could not compare the served lists")
                continue
            changed = [k for k in _METHODS if now.get(k) != self._last.get(k)]
            self._last = now
            if changed:
                self.rounds += 1
                logger.info("keen serve: served %s changed; telling hosts", ", ".join(changed))
                for kind in changed:
                    await self._deliver(kind)

    async def _deliver(self, kind: str) -> None:
        method = _METHODS[kind]
        await self.bus.publish(_EVENTS[kind]())
        for stream in list(self._streams):
            try:
                stream.send_nowait(method)
            except anyio.WouldBlock:
                pass  # that host has unread notices already; one more says nothing new
            except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                self._streams.discard(stream)
        for session in list(self._sessions):
            try:
                with anyio.fail_after(5):
                    await getattr(session, _SESSION_SENDERS[kind])()
            except Exception as exc:  # the host went away: stop telling it
                logger.debug("keen serve: dropping a stdio host after %r", exc)
                self._sessions.remove(session)

    def close(self) -> None:
        """End every stream gracefully (listen streams send their final result)."""
        self._closed = True
        self.listen.close()
        for stream in list(self._streams):
            stream.close()
        self._streams.clear()
        self._sessions.clear()
