"""Tell ``keen serve``'s hosts when what it lists changed (``notifications/*/list_changed``).

An upstream server's tools change (its own change notice, an expired ``ttlMs``, a refresh,
a connect or disconnect); the Manager tells its observers; :class:`ChangeNotifier` is one of
them. It does not forward each upstream notice: it compares what *keen serve itself* lists
(a digest per list, from ``snapshot``) with what each host last saw of it, and tells a host
only when that differs. What a host saw is the list it was last given (:meth:`ChangeNotifier.shown`,
by the list handlers), or last told about (only a notice one of its open channels takes
counts as told: a listen stream's filter drops the others); one with no record of a list (it never listed,
or listed where it cannot be matched) saw it as the last round compared it, so a change not
compared yet when its channel opened is told to it too. A host that listed after a change
(say while keen serve's upstream servers connected) and is known by its list is not told
of it again, and an upstream change that leaves keen serve's
lists as they were (a tool held for review, a description changed past the first sentence)
reaches no host. A burst is coalesced: each round waits ``interval`` seconds before it
compares, so a host gets at most one notice per list per ``interval``, however many upstream
notices came.

A host is known by its caller scope: a handshake-era HTTP session (``session:<id>``: its
``tools/list`` POSTs and its ``GET`` stream), or the stdio connection (either era). A
2026-07-28 HTTP host has no session: its requests and its ``subscriptions/listen`` streams
cannot be matched, so each listen stream is a host of its own that saw the lists as the
last round compared them: a change between its ``tools/list`` and its listen is told on
that stream (the SDK's listen driver does not list again by itself) if the listen opens
before the round that compares the change (within ``interval`` of the change); once that
round compared it, a listen counts from the changed lists and is not told. A host that
listed after the change hears of it once more at worst. Missing a real change is worse.

A session's record is kept in the store too (:meth:`~keen.serve.store.Store.record_seen`),
since its ``tools/list`` POSTs and its ``GET`` streams may reach different replicas: a
stream compares with what the store says its host saw (listed on any replica, or was told
on any stream), and each round reads the records of the sessions whose streams it holds.
A notice counts as told to a ``GET`` stream's host only once the stream wrote it
(:meth:`NoticeStream.sent`): one left waiting when the stream ends is told on the host's
next stream, on any replica, and a stream keeps at most one waiting notice of each kind,
so an unread stream drops none. This is the redelivery MCP 2025-11-25 "Resumability and
Redelivery" gets from event ids, without a shared log of events: a change notice only
says "list again", and a first ``GET`` carries no ``Last-Event-ID`` (docs/serve.md "When
tools change" says why).

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
the streams that reach it; what each session's host saw is what they share.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import json
import logging
import math
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import anyio
import anyio.lowlevel
from mcp.server.subscriptions import (
    ListenHandler,
    PromptsListChanged,
    ResourcesListChanged,
    ServerEvent,
    ToolsListChanged,
)
from pydantic import BaseModel

if TYPE_CHECKING:
    from keen.serve.store import Store

__all__ = [
    "DEFAULT_NOTIFY_INTERVAL",
    "ChangeNotifier",
    "ListKind",
    "Notice",
    "NoticeStream",
    "digest",
    "list_digest",
]

logger = logging.getLogger("keen.serve")

ListKind = Literal["tools", "resources", "resource_templates", "prompts"]
"""The lists a host may be told changed: resources and resource templates share one notice."""

DEFAULT_NOTIFY_INTERVAL = 0.5
"""Seconds a round waits before comparing: the coalescing window and the minimum gap between
two notices of one list."""

_NOTICE_OF: dict[str, str] = {
    "tools": "tools",
    "resources": "resources",
    "resource_templates": "resources",
    "prompts": "prompts",
}
"""List kind -> the notice that tells of it."""
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
_SHARED = "session:"
"""Hosts whose record (what they saw) is kept in the store too: a handshake-era HTTP
session, whose requests and ``GET`` streams may each reach any replica."""
_MAX_HOSTS_SEEN = 10_000
"""Hosts whose last lists are remembered while they have no channel open (the oldest go
first; one that comes back saw the lists as the last round compared them)."""

_ALL_NOTICES = frozenset(_METHODS)
"""What a channel that takes every notice accepts (a ``GET`` stream, a stdio session)."""

_LISTENING: ContextVar[tuple[str | None, frozenset[str]]] = ContextVar(
    "keen_serve_listening", default=(None, _ALL_NOTICES)
)
"""The host of the ``subscriptions/listen`` request being served (None: a host of its own)
and the notices its filter accepts."""


def digest(items: Any) -> str:
    """A stable digest of a JSON-able value (what a list would show a host)."""
    return hashlib.sha256(json.dumps(items, sort_keys=True, default=str).encode()).hexdigest()


def list_digest(items: Sequence[BaseModel]) -> str:
    """:func:`digest` of a list of MCP entries (tools, resources, templates, prompts) in the
    wire shape a host gets them."""
    return digest([i.model_dump(mode="json", by_alias=True, exclude_none=True) for i in items])


def _accepted(params: Any) -> frozenset[str]:
    """The notices a ``subscriptions/listen`` filter asks for (MCP 2026-07-28,
    "Subscriptions": the server sends no kind the client did not request)."""
    wanted = getattr(params, "notifications", None)
    flags = {
        "tools": "tools_list_changed",
        "resources": "resources_list_changed",
        "prompts": "prompts_list_changed",
    }
    return frozenset(notice for notice, flag in flags.items() if getattr(wanted, flag, None))


class _HostBus:
    """The :class:`~mcp.server.subscriptions.SubscriptionBus` of keen serve's listen streams:
    each listener belongs to the host whose ``subscriptions/listen`` subscribed it (read from
    :data:`_LISTENING`, which the SDK's ``ListenHandler`` call runs under, with the notices
    that listen's filter accepts), and gets an event only when that host is to be told
    (:meth:`deliver`)."""

    def __init__(
        self,
        attach: Callable[[str | None, frozenset[str]], str],
        detach: Callable[[str, frozenset[str]], None],
    ) -> None:
        self._attach, self._detach = attach, detach
        self._listeners: dict[object, tuple[Callable[[ServerEvent], None], str]] = {}

    def subscribe(self, listener: Callable[[ServerEvent], None]) -> Callable[[], None]:
        wanted, notices = _LISTENING.get()
        host = self._attach(wanted, notices)
        token = object()
        self._listeners[token] = (listener, host)

        def unsubscribe() -> None:
            if self._listeners.pop(token, None) is not None:
                self._detach(host, notices)

        return unsubscribe

    async def publish(self, event: ServerEvent) -> None:
        """Every listener gets ``event`` (the SubscriptionBus protocol; keen serve delivers
        per host instead)."""
        self.deliver(event, None)

    def deliver(self, event: ServerEvent, hosts: set[str] | None) -> None:
        """``event`` to the listeners of ``hosts`` (every listener for None)."""
        for listener, host in list(self._listeners.values()):
            if hosts is None or host in hosts:
                try:
                    listener(event)
                except Exception:  # one broken stream must not starve the others
                    logger.exception("keen serve: a listen stream's listener failed")


@dataclass(frozen=True)
class Notice:
    """One notice for an HTTP ``GET`` event stream: its ``method``
    (``notifications/tools/list_changed``...) and ``lists``, the :func:`digest` of each list
    it tells of (list kind -> digest), recorded as the host's once it is written."""

    method: str
    lists: Mapping[str, str]


class NoticeStream:
    """The notices waiting for one HTTP ``GET`` event stream of a host (2025-11-25): at most
    one of each (a second before the host read the first says nothing new; it only updates
    the lists it tells of), so none is dropped however long the host leaves them unread.
    A notice counts as told once the stream wrote it (:meth:`sent`); one still waiting when
    the stream ends is told again on the host's next stream, on any replica sharing the
    store. Iterate for the notices; the iteration ends once keen serve stops and every
    waiting notice was taken."""

    def __init__(self, notifier: ChangeNotifier, host: str) -> None:
        self.host = host
        self._notifier = notifier
        self._waiting: dict[str, dict[str, str]] = {}
        self._changed = anyio.Event()
        self._closed = False

    def put(self, notice: str, lists: Mapping[str, str]) -> None:
        """Add ``notice`` (``tools``, ``resources``, ``prompts``), telling of ``lists``, to
        the waiting ones (merged into the one of its kind already waiting)."""
        self._waiting.setdefault(notice, {}).update(lists)
        self._changed.set()

    def close(self) -> None:
        """No notice comes after the waiting ones (keen serve is stopping)."""
        self._closed = True
        self._changed.set()

    def __aiter__(self) -> NoticeStream:
        return self

    async def __anext__(self) -> Notice:
        while not self._waiting:
            if self._closed:
                raise StopAsyncIteration
            self._changed = anyio.Event()
            await self._changed.wait()
        notice = next(iter(self._waiting))
        return Notice(_METHODS[notice], self._waiting.pop(notice))

    async def sent(self, notice: Notice) -> None:
        """``notice`` was written to the host: record it as told (here, and in the store for
        a session's host)."""
        await self._notifier.told(self.host, notice.lists)


class ChangeNotifier:
    """Coalesces upstream changes into list-changed notices to each host whose lists changed.

    Args:
        snapshot: returns ``{kind: digest}`` of each list this server serves and may change
            (:data:`ListKind`; :func:`digest` of what the list shows a host); a list absent
            from it never changes.
        interval: seconds of coalescing per round (> 0); at most one notice per list per interval.
        max_streams: open HTTP event streams (2025-11-25) and listen streams (2026-07-28) each.
        sleep: how a round waits ``interval`` seconds before it compares (:attr:`sleep`).
        store: where the record of each handshake-era HTTP session's host (``session:<id>``)
            is shared with the other replicas (:meth:`Store.record_seen`); None keeps it here only.
        record_ttl: seconds such a record lives unless renewed (the session's ttl).
    """

    def __init__(
        self,
        snapshot: Callable[[], Mapping[str, str]],
        *,
        interval: float = DEFAULT_NOTIFY_INTERVAL,
        max_streams: int = 1024,
        sleep: Callable[[float], Awaitable[object]] = anyio.sleep,
        store: Store | None = None,
        record_ttl: float = 30 * 60.0,
    ) -> None:
        if not interval > 0 or math.isinf(interval):
            raise ValueError(f"notify interval must be a positive number of seconds, got {interval!r}")
        self._snapshot = snapshot
        self.interval = interval
        self.max_streams = max_streams
        self.store = store
        self.record_ttl = record_ttl
        self.sleep = sleep
        """How each round waits its ``interval`` (``anyio.sleep``), read at every round: a
        test holds the rounds with a wait that ends when it says, not after some time."""
        self.bus = _HostBus(self._attach, self._detach)
        self._listen = ListenHandler(self.bus, max_subscriptions=max_streams)
        self._streams: set[NoticeStream] = set()
        """Each open HTTP ``GET`` stream (2025-11-25)."""
        self._sessions: list[tuple[Any, str]] = []
        self._seen: dict[str, dict[str, str]] = {}
        """Host -> ``{kind: digest}`` of each list as it last saw it (oldest host first)."""
        self._open: dict[str, int] = {}
        """Host -> how many channels it has open (streams, listens, a stdio session)."""
        self._accepts: dict[str, dict[str, int]] = {}
        """Host -> notice -> how many of its open channels accept it (a listen stream takes
        only what its filter asked for; the SDK drops the rest)."""
        self._listens = itertools.count()
        self._poked = anyio.Event()
        self._last: dict[str, str] = {}
        self._closed = False
        self.rounds = 0
        """How many rounds found a change and told hosts (for logs and tests)."""
        self.compared = 0
        """How many rounds compared the lists, told anyone or not (for tests: a change poked
        before this moved was compared)."""

    # -- inputs -------------------------------------------------------------------------------

    def poke(self, *_: object) -> None:
        """Something upstream changed (a Manager change or status observer): compare soon."""
        self._poked.set()

    async def shown(self, host: str | None, kind: ListKind, listed: str) -> None:
        """``host`` was given list ``kind`` whose :func:`digest` is ``listed``: it is told of
        that list again only once it differs. None (a 2026-07-28 HTTP caller, whose listen
        streams cannot be told apart from other hosts'): nothing is recorded."""
        if host is not None and not self._closed:
            await self.told(host, {kind: listed})

    async def told(self, host: str, lists: Mapping[str, str]) -> None:
        """``host`` now sees ``lists`` (list kind -> :func:`digest`): it was given them, or a
        notice of them was written to it. A session's host is recorded in the store too, for
        the replica its next ``GET`` stream reaches."""
        seen = self._seen.pop(host, None) or {}
        seen.update(lists)
        self._seen[host] = seen  # the most recent last
        self._forget_old()
        if self.store is not None and host.startswith(_SHARED):
            try:
                await self.store.record_seen(host, lists, self.record_ttl)
            except Exception:  # the list is served anyway; a stream elsewhere may tell it again
                # The session id stays out of the log: it is the session's key.
                logger.warning("keen serve: could not record what a session's host saw", exc_info=True)

    def attach_session(self, session: Any, host: str) -> None:
        """Send notices to this handshake-era stdio connection (an SDK ``ServerSession``), the
        one of ``host``."""
        if not self._closed and all(s is not session for s, _ in self._sessions):
            self._sessions.append((session, self._attach(host, _ALL_NOTICES)))

    @contextlib.asynccontextmanager
    async def open_stream(self, host: str) -> AsyncIterator[NoticeStream | None]:
        """The notices for one HTTP ``GET`` event stream of ``host`` (2025-11-25); ``None``
        when ``max_streams`` are open or the server is stopping. It ends when the server
        stops. A session's host is compared with what the store recorded of it, whichever
        replica gave it its lists or told it."""

        def refused() -> bool:
            return self._closed or len(self._streams) >= self.max_streams

        if not refused():  # no store read for a stream that is refused anyway
            await self._recall([host])
        if refused():  # again: others may have opened, or the server stopped, while it read
            yield None
            return
        stream = NoticeStream(self, self._attach(host, _ALL_NOTICES))
        self._streams.add(stream)
        try:
            yield stream
        finally:
            if stream in self._streams:
                self._streams.discard(stream)
                self._detach(host, _ALL_NOTICES)
            stream.close()

    async def listen(self, ctx: Any, params: Any, host: str | None = None) -> Any:
        """Serve one ``subscriptions/listen`` (the SDK's :class:`ListenHandler`) for ``host``
        (None: a host of its own, which saw the lists as the last round compared them)."""
        token = _LISTENING.set((host, _accepted(params)))
        try:
            return await self._listen(ctx, params)
        finally:
            _LISTENING.reset(token)

    # -- hosts ----------------------------------------------------------------------------------

    def _attach(self, host: str | None, notices: frozenset[str]) -> str:
        """One more channel of ``host`` (None: a new host of its own), which accepts
        ``notices`` (``tools``, ``resources``, ``prompts``). A list the host has
        no record of it saw as the last round compared it, not as it is now: a change that
        round has not compared yet (say one between its list and its listen, which cannot
        be matched in the 2026-07-28 era, when the listen opens within the round's
        ``interval``) is still told; one it compared already is not (no past lists are
        kept). At worst it hears of a change it listed already.
        Returns the host's key."""
        key = host if host is not None else f"listen:{next(self._listens)}"
        self._open[key] = self._open.get(key, 0) + 1
        accepts = self._accepts.setdefault(key, {})
        for notice in notices:
            accepts[notice] = accepts.get(notice, 0) + 1
        now = self._now()
        seen = self._seen.setdefault(key, {})
        for kind, listed in now.items():
            seen.setdefault(kind, self._last.get(kind, listed))
        if any(
            seen[kind] != listed and _NOTICE_OF.get(kind, kind) in accepts for kind, listed in now.items()
        ):
            self.poke()  # it saw lists a change since moved on: tell it soon
        return key

    def _detach(self, host: str, notices: frozenset[str]) -> None:
        accepts = self._accepts.get(host, {})
        for notice in notices:
            if (count := accepts.get(notice, 0) - 1) > 0:
                accepts[notice] = count
            else:
                accepts.pop(notice, None)
        left = self._open.get(host, 0) - 1
        if left > 0:
            self._open[host] = left
            return
        self._open.pop(host, None)
        self._accepts.pop(host, None)
        if host.startswith("listen:"):
            self._seen.pop(host, None)  # a listen stream's own key: never seen again
        self._forget_old()

    def _forget_old(self) -> None:
        """At most :data:`_MAX_HOSTS_SEEN` hosts without a channel are remembered."""
        idle = len(self._seen) - len(self._open)
        if idle <= _MAX_HOSTS_SEEN:
            return
        for host in list(self._seen):
            if idle <= _MAX_HOSTS_SEEN:
                break
            if host not in self._open:
                del self._seen[host]
                idle -= 1

    async def _recall(self, hosts: Sequence[str]) -> None:
        """What the store recorded of the sessions' hosts among ``hosts`` replaces what this
        replica knows of them (another replica may have given them newer lists)."""
        shared = [host for host in hosts if host.startswith(_SHARED)]
        if self.store is None or not shared:
            return
        try:
            recorded = await self.store.seen(shared)
        except Exception:  # compared with what this replica knows: at worst told again
            logger.warning("keen serve: could not read what the sessions' hosts saw", exc_info=True)
            return
        for host, lists in recorded.items():
            self._seen.setdefault(host, {}).update(lists)

    def _now(self) -> dict[str, str]:
        """The lists as keen serve serves them now; as last compared if that fails."""
        try:
            return dict(self._snapshot())
        except Exception:  # a broken snapshot must not refuse a host its channel
            logger.exception("keen serve: could not compare the served lists")
            return dict(self._last)

    @property
    def pending(self) -> bool:
        """Whether a change was poked and its round has not compared yet."""
        return self._poked.is_set()

    # -- the loop -----------------------------------------------------------------------------

    async def run(self) -> None:
        """Compare and notify, one round per burst of pokes, until cancelled."""
        self._last = dict(self._snapshot())
        while True:
            await self._poked.wait()
            # Coalesce: let the burst finish and the catalog settle, then compare once.
            await self.sleep(self.interval)
            # A session's host may have listed on another replica since: read its record
            # before the pending flag drops (after it, a round is over but for delivery).
            await self._recall(list(self._open))
            self._poked = anyio.Event()
            try:
                now = dict(self._snapshot())
            except Exception:  # a broken snapshot must not end notices for good
                logger.exception("keen serve: could not compare the served lists")
                self.compared += 1
                continue
            self._last = now
            # Per host: what it saw of each list (listed, or was told) against now. Only a
            # notice one of its channels takes is sent: a list it cannot be told of stays as
            # it saw it, and a channel that takes that notice later is told then. A host
            # with a GET stream counts as told once a stream wrote the notice
            # (NoticeStream.sent): one that ends first leaves it to tell on the next.
            told: dict[str, set[str]] = {}
            streaming = {stream.host for stream in self._streams}
            for host in self._open:
                seen = self._seen.setdefault(host, {})
                accepts = self._accepts.get(host, {})
                for kind, listed in now.items():
                    notice = _NOTICE_OF.get(kind, kind)
                    if seen.get(kind) != listed and notice in accepts:
                        told.setdefault(notice, set()).add(host)
                        if host not in streaming:
                            seen[kind] = listed
            if told:
                self.rounds += 1
                logger.info("keen serve: served %s changed; telling hosts", ", ".join(sorted(told)))
            for notice, hosts in told.items():
                lists = {kind: listed for kind, listed in now.items() if _NOTICE_OF.get(kind, kind) == notice}
                await self._deliver(notice, hosts, lists)
            self.compared += 1

    async def _deliver(self, notice: str, hosts: set[str], lists: Mapping[str, str]) -> None:
        self.bus.deliver(_EVENTS[notice](), hosts)
        await anyio.lowlevel.checkpoint()  # listen streams drain between events, as the SDK's bus lets them
        for stream in list(self._streams):
            if stream.host in hosts:
                stream.put(notice, lists)
        for session, host in list(self._sessions):
            if host not in hosts:
                continue
            try:
                with anyio.fail_after(5):
                    await getattr(session, _SESSION_SENDERS[notice])()
            except Exception as exc:  # the host went away: stop telling it
                logger.debug("keen serve: dropping a stdio host after %r", exc)
                self._sessions.remove((session, host))
                self._detach(host, _ALL_NOTICES)

    def close(self) -> None:
        """End every stream gracefully (listen streams send their final result)."""
        self._closed = True
        self._listen.close()
        for stream in list(self._streams):
            stream.close()
        self._streams.clear()
        self._sessions.clear()
        self._open.clear()
        self._accepts.clear()
