"""Where ``keen serve`` keeps session and authorization state: in memory, or in Redis.

Everything stored expires: sessions after ``session_ttl`` seconds without use, a tool's
authorization the ttl its scope gives it after its description was last fetched or used
(:meth:`keen.serve.KeenServer.auth_ttl_of`; a session renews all of its own with each
request, :meth:`Store.renew`), rate counters at the end of their window. Nothing grows
without bound.

``MemoryStore`` (default) serves one process. ``RedisStore`` (``--store redis://...``) lets
several ``keen serve`` replicas behind one load balancer share sessions and
authorizations: a description fetched through one replica authorizes the call through
another, and a session survives the replica that opened it. What each session's host last
saw of keen serve's lists is shared too, so the replica its event stream reaches tells it
of a change it has not seen, whichever replica it listed on (:mod:`keen.serve.notify`).

Keys (Redis), all under ``keen:serve:`` and all with a TTL:

- ``session:<id>``: JSON ``{"principal": ..., "owner": ..., "host": [...], "log_level": ...}``
  (``host``: what the host declared at ``initialize`` that Keen relays to it,
  :mod:`keen.serve.relay`; ``log_level``: what it set with ``logging/setLevel``, if it did)
- ``owner:<owner>``: sorted set ``session id -> expiry (epoch ms)``, the open sessions one
  caller (``owner``: its bearer token's principal, or its address) holds, for the cap on
  them; it expires with the latest of them
- ``auth:<scope>``: hash ``tool -> expiry (epoch seconds)``; the key itself expires with the
  latest of them
- ``seen:<scope>``: hash ``list kind -> digest``, what the host of a handshake-era session
  was last given or told of each list (:meth:`Store.record_seen`); it lives as the session does
- ``rate:<scope>:<window>``: a counter
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Protocol

__all__ = [
    "DEFAULT_AUTH_TTL",
    "DEFAULT_FETCH_LIMIT",
    "DEFAULT_MAX_SESSIONS",
    "DEFAULT_SESSION_TTL",
    "MemoryStore",
    "RedisStore",
    "Store",
    "open_store",
]

DEFAULT_SESSION_TTL = 30 * 60.0
"""Seconds a session lives without a request (the SDK's own idle timeout for sessions)."""

DEFAULT_AUTH_TTL = 60 * 60.0
"""Seconds a fetched description keeps its tool authorized (renewed by each authorized call)."""

DEFAULT_FETCH_LIMIT = 60
"""Descriptions one caller may fetch a minute (``keen serve --fetch-limit``)."""

DEFAULT_MAX_SESSIONS = 100
"""Open sessions one caller may hold at once (``keen serve --max-sessions``)."""

_PREFIX = "keen:serve:"


class Store(Protocol):
    """Session and authorization state shared by every request a server (or replica set) sees."""

    async def create_session(self, session_id: str, data: dict[str, Any], ttl: float) -> None:
        """Record a new session that lives ``ttl`` seconds unless touched."""
        ...

    async def open_session(
        self, session_id: str, data: dict[str, Any], ttl: float, *, owner: str, limit: int
    ) -> bool:
        """:meth:`create_session` for ``owner``, unless it holds ``limit`` live sessions
        already: then nothing is recorded and the answer is False."""
        ...

    async def get_session(self, session_id: str, ttl: float) -> dict[str, Any] | None:
        """The session's data, renewing its ``ttl``; ``None`` when unknown or expired."""
        ...

    async def update_session(self, session_id: str, data: dict[str, Any], ttl: float) -> bool:
        """Replace a live session's data, renewing its ``ttl``. Nothing is written, and the
        answer is False, once the session is unknown, expired or deleted: a request that read
        it before a ``DELETE`` ended it must not bring it back."""
        ...

    async def delete_session(self, session_id: str) -> bool:
        """Forget a session, its authorizations and what :meth:`record_seen` recorded of its
        host; False when it was unknown."""
        ...

    async def authorize(self, scope: str, tools: Iterable[str], ttl: float) -> None:
        """Authorize ``tools`` in ``scope`` for ``ttl`` seconds."""
        ...

    async def is_authorized(self, scope: str, tool: str, ttl: float) -> bool:
        """True when ``tool`` is authorized in ``scope``; a hit renews it for ``ttl`` seconds."""
        ...

    async def renew(self, scope: str, ttl: float) -> None:
        """Keep every authorization in ``scope``, and what :meth:`record_seen` recorded for
        it, for at least ``ttl`` more seconds (a session's authorizations and record live as
        long as the session: each request renews them)."""
        ...

    async def record_seen(self, scope: str, lists: Mapping[str, str], ttl: float) -> None:
        """The host of ``scope`` saw these lists (list kind -> digest, as
        :mod:`keen.serve.notify` compares them), the other kinds as recorded before; the
        record lives ``ttl`` seconds unless renewed. For a session's scope
        (``session:<id>``), nothing is recorded once the session is gone: a notice written
        after its ``DELETE`` does not bring back a record of it."""
        ...

    async def seen(self, scopes: Sequence[str]) -> dict[str, dict[str, str]]:
        """What :meth:`record_seen` recorded for each of ``scopes`` (one with no live record
        is absent)."""
        ...

    async def hit(self, key: str, window: float) -> int:
        """Count one event for ``key`` in the current ``window`` (seconds); returns the count."""
        ...

    async def aclose(self) -> None:
        """Release connections."""
        ...


class MemoryStore:
    """Process-local state with lazy expiry and a periodic sweep (every 1,000 writes)."""

    def __init__(self, *, clock: Any = time.monotonic) -> None:
        self._clock = clock
        self._sessions: dict[str, tuple[float, dict[str, Any]]] = {}
        self._auth: dict[str, dict[str, float]] = {}
        self._rates: dict[str, tuple[float, int]] = {}
        self._owned: dict[str, set[str]] = {}
        self._seen: dict[str, tuple[float, dict[str, str]]] = {}
        self._writes = 0

    def __len__(self) -> int:
        """Live entries of every kind (sessions, authorizations, counters): for tests and stats."""
        self._sweep()
        return (
            len(self._sessions)
            + sum(len(v) for v in self._auth.values())
            + len(self._rates)
            + len(self._seen)
        )

    async def create_session(self, session_id: str, data: dict[str, Any], ttl: float) -> None:
        self._wrote()
        self._sessions[session_id] = (self._clock() + ttl, dict(data))

    async def open_session(
        self, session_id: str, data: dict[str, Any], ttl: float, *, owner: str, limit: int
    ) -> bool:
        if self._live_sessions(owner) >= limit:
            return False
        await self.create_session(session_id, {**data, "owner": owner}, ttl)
        self._owned.setdefault(owner, set()).add(session_id)
        return True

    def _live_sessions(self, owner: str) -> int:
        held = self._owned.get(owner)
        if not held:
            return 0
        now = self._clock()
        live = {s for s in held if s in self._sessions and self._sessions[s][0] > now}
        if live:
            self._owned[owner] = live
        else:
            del self._owned[owner]
        return len(live)

    async def get_session(self, session_id: str, ttl: float) -> dict[str, Any] | None:
        entry = self._sessions.get(session_id)
        now = self._clock()
        if entry is None or entry[0] <= now:
            self._sessions.pop(session_id, None)
            return None
        self._sessions[session_id] = (now + ttl, entry[1])
        return dict(entry[1])

    async def update_session(self, session_id: str, data: dict[str, Any], ttl: float) -> bool:
        # No await between the check and the write: no other task runs in between.
        entry = self._sessions.get(session_id)
        now = self._clock()
        if entry is None or entry[0] <= now:
            return False
        self._sessions[session_id] = (now + ttl, dict(data))
        return True

    async def delete_session(self, session_id: str) -> bool:
        self._auth.pop(f"session:{session_id}", None)
        self._seen.pop(f"session:{session_id}", None)
        entry = self._sessions.pop(session_id, None)
        if entry is not None:
            self._owned.get(str(entry[1].get("owner")), set()).discard(session_id)
        return entry is not None

    async def authorize(self, scope: str, tools: Iterable[str], ttl: float) -> None:
        self._wrote()
        until = self._clock() + ttl
        granted = self._auth.setdefault(scope, {})
        for tool in tools:
            granted[tool] = until

    async def is_authorized(self, scope: str, tool: str, ttl: float) -> bool:
        granted = self._auth.get(scope)
        now = self._clock()
        if not granted or granted.get(tool, 0.0) <= now:
            return False
        granted[tool] = now + ttl
        return True

    async def renew(self, scope: str, ttl: float) -> None:
        record = self._seen.get(scope)
        if record is not None and record[0] > self._clock():
            self._seen[scope] = (max(record[0], self._clock() + ttl), record[1])
        granted = self._auth.get(scope)
        if granted:
            until = self._clock() + ttl
            for tool, old in granted.items():
                if old > self._clock():
                    granted[tool] = max(old, until)

    async def record_seen(self, scope: str, lists: Mapping[str, str], ttl: float) -> None:
        now = self._clock()
        kind, _, session_id = scope.partition(":")
        if kind == "session":
            entry = self._sessions.get(session_id)
            if entry is None or entry[0] <= now:
                return
        self._wrote()
        until, known = self._seen.get(scope, (now, {}))
        self._seen[scope] = (now + ttl, {**(known if until > now else {}), **lists})

    async def seen(self, scopes: Sequence[str]) -> dict[str, dict[str, str]]:
        now = self._clock()
        return {s: dict(r[1]) for s in scopes if (r := self._seen.get(s)) is not None and r[0] > now}

    async def hit(self, key: str, window: float) -> int:
        self._wrote()
        now = self._clock()
        start, count = self._rates.get(key, (now, 0))
        if now - start >= window:
            start, count = now, 0
        self._rates[key] = (start, count + 1)
        return count + 1

    async def aclose(self) -> None:
        self._sessions.clear()
        self._auth.clear()
        self._rates.clear()
        self._owned.clear()
        self._seen.clear()

    def _wrote(self) -> None:
        self._writes += 1
        if self._writes % 1000 == 0:
            self._sweep()

    def _sweep(self) -> None:
        now = self._clock()
        for sid in [s for s, (until, _) in self._sessions.items() if until <= now]:
            del self._sessions[sid]
        for scope in [s for s, (until, _) in self._seen.items() if until <= now]:
            del self._seen[scope]
        for owner in list(self._owned):
            self._live_sessions(owner)
        for scope in list(self._auth):
            granted = {t: u for t, u in self._auth[scope].items() if u > now}
            if granted:
                self._auth[scope] = granted
            else:
                del self._auth[scope]
        # A rate entry is dead once its window is over; the longest window in use is 60 s.
        for key in [k for k, (start, _) in self._rates.items() if now - start >= 3600]:
            del self._rates[key]


class RedisStore:
    """State in Redis (``redis.asyncio``), shared by every replica pointing at the same URL.

    Args:
        url: ``redis://[user:password@]host:port/db``.
        prefix: key prefix, so several deployments can share one Redis.
        clock: seconds since the epoch, read for the authorizations' expiry times and the
            rate windows (``int(now // window)``); tests may pass their own. The keys' own
            expiry is Redis's clock.
    """

    def __init__(self, url: str, *, prefix: str = _PREFIX, clock: Callable[[], float] = time.time) -> None:
        import redis.asyncio as aioredis

        self._redis: Any = aioredis.Redis.from_url(url, decode_responses=True)
        self._prefix = prefix
        self._clock = clock

    async def ping(self) -> None:
        """Raise ``redis.exceptions.ConnectionError`` when the server cannot be reached."""
        await self._redis.ping()

    async def create_session(self, session_id: str, data: dict[str, Any], ttl: float) -> None:
        await self._redis.set(self._k("session", session_id), json.dumps(data), px=_ms(ttl))

    async def open_session(
        self, session_id: str, data: dict[str, Any], ttl: float, *, owner: str, limit: int
    ) -> bool:
        # One script, so replicas opening sessions for one caller at once cannot pass the cap.
        opened = await self._redis.eval(
            _OPEN_SESSION,
            2,
            self._k("session", session_id),
            self._k("owner", owner),
            session_id,
            json.dumps({**data, "owner": owner}),
            _ms(ttl),
            limit,
        )
        return bool(opened)

    async def get_session(self, session_id: str, ttl: float) -> dict[str, Any] | None:
        key = self._k("session", session_id)
        async with self._redis.pipeline(transaction=False) as pipe:
            pipe.get(key)
            pipe.pexpire(key, _ms(ttl))
            raw, _ = await pipe.execute()
        if raw is None:
            return None
        data: dict[str, Any] = json.loads(raw)
        if isinstance(data.get("owner"), str):
            # The session lives on: so does its place under the cap.
            await self._redis.eval(_RENEW_OWNED, 1, self._k("owner", data["owner"]), session_id, _ms(ttl))
        return data

    async def update_session(self, session_id: str, data: dict[str, Any], ttl: float) -> bool:
        # XX: written only over a live key, so a DELETE (or the expiry) in between wins.
        key = self._k("session", session_id)
        return bool(await self._redis.set(key, json.dumps(data), px=_ms(ttl), xx=True))

    async def delete_session(self, session_id: str) -> bool:
        key = self._k("session", session_id)
        raw = await self._redis.get(key)
        scope = f"session:{session_id}"
        removed = await self._redis.delete(key, self._k("auth", scope), self._k("seen", scope))
        owner = json.loads(raw).get("owner") if raw else None
        if isinstance(owner, str):
            await self._redis.zrem(self._k("owner", owner), session_id)
        return bool(removed)

    async def authorize(self, scope: str, tools: Iterable[str], ttl: float) -> None:
        names = list(tools)
        if not names:
            return
        key = self._k("auth", scope)
        until = self._clock() + ttl
        async with self._redis.pipeline(transaction=False) as pipe:
            pipe.hset(key, mapping=dict.fromkeys(names, f"{until:.3f}"))
            pipe.pexpire(key, _ms(ttl), gt=True)
            pipe.pexpire(key, _ms(ttl), nx=True)
            await pipe.execute()

    async def is_authorized(self, scope: str, tool: str, ttl: float) -> bool:
        key = self._k("auth", scope)
        raw = await self._redis.hget(key, tool)
        now = self._clock()
        if raw is None or float(raw) <= now:
            return False
        async with self._redis.pipeline(transaction=False) as pipe:
            pipe.hset(key, tool, f"{now + ttl:.3f}")
            pipe.pexpire(key, _ms(ttl), gt=True)
            await pipe.execute()
        return True

    async def renew(self, scope: str, ttl: float) -> None:
        async with self._redis.pipeline(transaction=False) as pipe:
            pipe.pexpire(self._k("seen", scope), _ms(ttl), gt=True)
            pipe.hgetall(self._k("auth", scope))
            _, granted = await pipe.execute()
        key = self._k("auth", scope)
        now = self._clock()
        live = {t: f"{max(float(u), now + ttl):.3f}" for t, u in granted.items() if float(u) > now}
        if not live:
            return
        async with self._redis.pipeline(transaction=False) as pipe:
            pipe.hset(key, mapping=live)
            pipe.pexpire(key, _ms(ttl), gt=True)
            await pipe.execute()

    async def record_seen(self, scope: str, lists: Mapping[str, str], ttl: float) -> None:
        if not lists:
            return
        kind, _, session_id = scope.partition(":")
        # One script: a session ended between a check and the write must not get a record.
        keys = [self._k("seen", scope), *([self._k("session", session_id)] if kind == "session" else [])]
        pairs = [item for pair in lists.items() for item in pair]
        await self._redis.eval(_RECORD_SEEN, len(keys), *keys, _ms(ttl), *pairs)

    async def seen(self, scopes: Sequence[str]) -> dict[str, dict[str, str]]:
        if not scopes:
            return {}
        async with self._redis.pipeline(transaction=False) as pipe:
            for scope in scopes:
                pipe.hgetall(self._k("seen", scope))
            found = await pipe.execute()
        return {scope: dict(record) for scope, record in zip(scopes, found, strict=True) if record}

    async def hit(self, key: str, window: float) -> int:
        bucket = self._k("rate", f"{key}:{int(self._clock() // window)}")
        async with self._redis.pipeline(transaction=False) as pipe:
            pipe.incr(bucket)
            pipe.pexpire(bucket, _ms(window) + 1000)
            count, _ = await pipe.execute()
        return int(count)

    async def aclose(self) -> None:
        await self._redis.aclose()

    def _k(self, kind: str, name: str) -> str:
        return f"{self._prefix}{kind}:{name}"


_OPEN_SESSION = """
local now = redis.call('TIME')
local ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', ms)
if redis.call('ZCARD', KEYS[2]) >= tonumber(ARGV[4]) then
  return 0
end
redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
redis.call('ZADD', KEYS[2], ms + tonumber(ARGV[3]), ARGV[1])
redis.call('PEXPIRE', KEYS[2], ARGV[3], 'GT')
redis.call('PEXPIRE', KEYS[2], ARGV[3], 'NX')
return 1
"""
"""KEYS: the session, the owner's set; ARGV: session id, data, ttl (ms), limit. 1 when opened.
Times are the Redis server's (``TIME``), one clock for every replica."""

_RENEW_OWNED = """
local now = redis.call('TIME')
local ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
redis.call('ZADD', KEYS[1], 'XX', ms + tonumber(ARGV[2]), ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[2], 'GT')
return 1
"""
"""KEYS: the owner's set; ARGV: session id, ttl (ms)."""


_RECORD_SEEN = """
if #KEYS > 1 and redis.call('EXISTS', KEYS[2]) == 0 then
  return 0
end
redis.call('HSET', KEYS[1], unpack(ARGV, 2))
redis.call('PEXPIRE', KEYS[1], ARGV[1])
return 1
"""
"""KEYS: the record, then its session for a session's scope; ARGV: ttl (ms), then list kind
and digest pairs. 0 when the session is gone."""


def _ms(seconds: float) -> int:
    return max(1, int(seconds * 1000))


def open_store(spec: str | None) -> MemoryStore | RedisStore:
    """``None``/``"memory"`` -> :class:`MemoryStore`; ``redis://...``/``rediss://...`` -> :class:`RedisStore`.

    Raises ``ValueError`` for anything else, naming the accepted forms.
    """
    if spec in (None, "", "memory"):
        return MemoryStore()
    assert spec is not None
    if spec.startswith(("redis://", "rediss://", "unix://")):
        return RedisStore(spec)
    raise ValueError(f"unknown --store {spec!r}; use memory or redis://host:port/db")
