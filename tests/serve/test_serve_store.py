"""The store: expiry of sessions, authorizations and counters; bounded memory; Redis keys
always carry a TTL."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import anyio
import pytest

from helpers.loopback import redis_server
from helpers.serve import StoreClock
from keen.serve.store import MemoryStore, RedisStore, open_store

pytestmark = pytest.mark.anyio


def raw_client(url: str) -> Any:
    """A plain Redis client of ``url``, to look at the keys the store wrote. The Redis client
    is imported here, not with the module: every xdist worker imports every test module, and
    only the one running these tests needs it (about 0.7 s of CPU each)."""
    import redis.asyncio as aioredis

    return aioredis.Redis.from_url(url, decode_responses=True)


class Later:
    """Real time (seconds since the epoch) plus ``ahead``, which the test moves forward."""

    def __init__(self) -> None:
        self.ahead = 0.0

    def __call__(self) -> float:
        return time.time() + self.ahead


async def test_memory_store_expires_everything() -> None:
    clock = StoreClock()
    store = MemoryStore(clock=clock)
    await store.create_session("s1", {"principal": "p"}, ttl=10)
    await store.authorize("session:s1", ["a", "b"], ttl=5)
    assert await store.get_session("s1", ttl=10) == {"principal": "p"}
    assert await store.is_authorized("session:s1", "a", ttl=5)
    assert not await store.is_authorized("session:s1", "c", ttl=5)
    assert not await store.is_authorized("session:s2", "a", ttl=5)
    clock.now += 4
    assert await store.is_authorized("session:s1", "a", ttl=5)  # renews a, not b
    clock.now += 3
    assert await store.is_authorized("session:s1", "a", ttl=5)
    assert not await store.is_authorized("session:s1", "b", ttl=5)
    clock.now += 20
    assert await store.get_session("s1", ttl=10) is None
    assert len(store) == 0


async def test_memory_store_rate_window_and_bounded_growth() -> None:
    clock = StoreClock()
    store = MemoryStore(clock=clock)
    assert [await store.hit("k", 60) for _ in range(3)] == [1, 2, 3]
    clock.now += 61
    assert await store.hit("k", 60) == 1
    for i in range(5000):
        await store.create_session(f"s{i}", {}, ttl=1)
        await store.authorize(f"session:s{i}", ["t"], ttl=1)
    clock.now += 5000
    for i in range(1000):
        await store.create_session(f"new{i}", {}, ttl=10_000)
    # The periodic sweep (every 1,000 writes) dropped the expired ones without anyone asking.
    assert len(store._sessions) + len(store._auth) <= 1000


async def test_delete_session_drops_its_authorizations() -> None:
    store = MemoryStore()
    await store.create_session("s", {}, ttl=60)
    await store.authorize("session:s", ["t"], ttl=60)
    assert await store.delete_session("s")
    assert not await store.is_authorized("session:s", "t", ttl=60)
    assert not await store.delete_session("s")


async def test_redis_store_keys_all_expire(tmp_path: Path) -> None:
    with redis_server(tmp_path) as url:
        opened = open_store(url)
        assert isinstance(opened, RedisStore)
        await opened.aclose()
        later = Later()
        store = RedisStore(url, clock=later)
        raw = raw_client(url)
        try:
            await store.create_session("s1", {"principal": "p"}, ttl=30)
            await store.authorize("session:s1", ["a"], ttl=20)
            await store.authorize("principal:x", ["b"], ttl=0.3)
            await store.hit("fetch:session:s1", 60)
            assert await store.get_session("s1", ttl=30) == {"principal": "p"}
            assert await store.is_authorized("session:s1", "a", ttl=20)
            assert not await store.is_authorized("session:s1", "b", ttl=20)
            # The 0.3 s authorization may have lapsed already on a loaded machine: the other
            # three keys are counted, each with its expiry.
            short = "keen:serve:auth:principal:x"
            keys = {k.decode() if isinstance(k, bytes) else k for k in await raw.keys("keen:serve:*")}
            assert len(keys - {short}) == 3, keys
            for key in keys - {short}:
                assert await raw.pttl(key) > 0, key
            later.ahead = 0.5  # past the short ttl on the store's clock (Redis keeps its own)
            assert not await store.is_authorized("principal:x", "b", ttl=1)
            assert await store.delete_session("s1")
            assert not await store.is_authorized("session:s1", "a", ttl=20)
            assert await store.get_session("s1", ttl=30) is None
        finally:
            await raw.aclose()
            await store.aclose()


async def test_renew_keeps_a_scopes_live_authorizations_and_not_its_lapsed_ones(tmp_path: Path) -> None:
    """What keeps a session's authorizations as long as the session (each of its requests)."""
    clock = StoreClock()
    memory = MemoryStore(clock=clock)
    await memory.authorize("session:s", ["a"], ttl=5)
    await memory.authorize("session:s", ["gone"], ttl=1)
    clock.now += 2
    await memory.renew("session:s", 10)
    clock.now += 8
    assert await memory.is_authorized("session:s", "a", ttl=5)
    assert not await memory.is_authorized("session:s", "gone", ttl=5)
    await memory.renew("session:none", 10)  # nothing to renew: nothing made
    assert "session:none" not in memory._auth
    with redis_server(tmp_path) as url:
        redis = RedisStore(url)
        raw = raw_client(url)
        try:
            # Redis keeps its own clock: the renewal shows as the key's expiry pushed past the
            # first ttl (a wait past a short ttl failed when a loaded machine delayed renew
            # beyond it); the memory store above shows the lapse itself on an injected clock.
            await redis.authorize("session:s", ["a"], ttl=5)
            assert await raw.pttl("keen:serve:auth:session:s") <= 5_000
            await redis.renew("session:s", 30)
            assert await raw.pttl("keen:serve:auth:session:s") > 20_000
            assert await redis.is_authorized("session:s", "a", ttl=1)
            await redis.renew("session:none", 30)
            assert await raw.exists("keen:serve:auth:session:none") == 0
        finally:
            await raw.aclose()
            await redis.aclose()


async def test_what_a_sessions_host_saw_lives_and_ends_with_the_session(tmp_path: Path) -> None:
    """The record keen serve's replicas compare a session's event stream with
    (:mod:`keen.serve.notify`): kinds merge, each request's renewal keeps it, it expires
    unrenewed, and ending the session drops it; in Redis its key always carries a TTL."""
    clock = StoreClock()
    memory = MemoryStore(clock=clock)
    await memory.create_session("s", {}, ttl=100)  # the session outlives the record's ttl here
    await memory.record_seen("session:s", {"tools": "t1", "prompts": "p1"}, ttl=10)
    await memory.record_seen("session:s", {"tools": "t2"}, ttl=10)
    assert await memory.seen(["session:s", "session:other"]) == {
        "session:s": {"tools": "t2", "prompts": "p1"}
    }
    clock.now += 8
    await memory.renew("session:s", 10)
    clock.now += 8
    assert await memory.seen(["session:s"]) == {"session:s": {"tools": "t2", "prompts": "p1"}}
    clock.now += 3
    assert await memory.seen(["session:s"]) == {}
    await memory.record_seen("session:s", {"tools": "t3"}, ttl=10)
    assert await memory.seen(["session:s"]) == {"session:s": {"tools": "t3"}}  # the lapsed kinds are gone
    await memory.delete_session("s")
    assert await memory.seen(["session:s"]) == {}
    # A notice written after the session's DELETE (or a session never opened) leaves no record.
    await memory.record_seen("session:s", {"tools": "t4"}, ttl=10)
    await memory.record_seen("session:never", {"tools": "t4"}, ttl=10)
    assert await memory.seen(["session:s", "session:never"]) == {}
    assert len(memory) == 0
    with redis_server(tmp_path) as url:
        redis = RedisStore(url)
        raw = raw_client(url)
        try:
            await redis.create_session("s", {}, ttl=30)
            await redis.record_seen("session:s", {"tools": "t1", "prompts": "p1"}, ttl=5)
            await redis.record_seen("session:s", {"tools": "t2"}, ttl=5)
            assert await redis.seen(["session:s", "session:other"]) == {
                "session:s": {"tools": "t2", "prompts": "p1"}
            }
            assert 0 < await raw.pttl("keen:serve:seen:session:s") <= 5_000
            await redis.renew("session:s", 30)
            assert await raw.pttl("keen:serve:seen:session:s") > 20_000
            assert await redis.delete_session("s")
            assert await raw.exists("keen:serve:seen:session:s") == 0
            assert await redis.seen(["session:s"]) == {}
            await redis.record_seen("session:s", {"tools": "t4"}, ttl=30)
            await redis.record_seen("session:never", {"tools": "t4"}, ttl=30)
            assert await raw.keys("keen:serve:seen:*") == []
        finally:
            await raw.aclose()
            await redis.aclose()


def test_open_store_rejects_unknown() -> None:
    assert isinstance(open_store(None), MemoryStore)
    with pytest.raises(ValueError, match="redis://"):
        open_store("postgres://x")


async def test_memory_store_caps_open_sessions_per_owner() -> None:
    clock = StoreClock()
    store = MemoryStore(clock=clock)
    opened = [await store.open_session(f"s{i}", {}, 10, owner="a", limit=2) for i in range(4)]
    assert opened == [True, True, False, False]
    assert await store.open_session("b0", {}, 10, owner="b", limit=2)  # per owner
    assert await store.get_session("s0", ttl=10) == {"owner": "a"}
    assert await store.delete_session("s0")
    assert await store.open_session("s4", {}, 10, owner="a", limit=2)  # the place was freed
    clock.now += 5
    assert await store.get_session("s1", ttl=10) is not None  # renewed: still holds its place
    clock.now += 6  # s4 expired, s1 lives on
    assert await store.open_session("s5", {}, 10, owner="a", limit=2)
    assert not await store.open_session("s6", {}, 10, owner="a", limit=2)
    clock.now += 100
    assert await store.open_session("s7", {}, 10, owner="a", limit=2)
    assert len(store._owned["a"]) == 1


async def test_redis_store_caps_open_sessions_per_owner(tmp_path: Path) -> None:
    with redis_server(tmp_path) as url:
        store = RedisStore(url)
        raw = raw_client(url)
        try:
            opened = [
                await store.open_session(f"s{i}", {"principal": "p"}, 0.6, owner="a", limit=2)
                for i in range(3)
            ]
            assert opened == [True, True, False]
            assert await store.open_session("b0", {}, 30, owner="b", limit=2)
            for key in await raw.keys("keen:serve:*"):
                assert await raw.pttl(key) > 0, key
            assert await store.delete_session("s0")
            assert await store.open_session("s3", {}, 30, owner="a", limit=2)
            assert not await store.open_session("s4", {}, 30, owner="a", limit=2)
            await store.get_session("s1", ttl=30)  # renewed past its first expiry
            await anyio.sleep(0.8)
            assert not await store.open_session("s5", {}, 30, owner="a", limit=2)
            assert await store.delete_session("s1")
            assert await store.open_session("s5", {}, 30, owner="a", limit=2)
        finally:
            await raw.aclose()
            await store.aclose()


async def test_update_session_writes_only_while_the_session_lives(tmp_path: Path) -> None:
    # logging/setLevel writes a session's data back: once a DELETE or the expiry ended the
    # session, that write must not bring it back (in Redis, SET ... XX).
    clock = StoreClock()
    memory = MemoryStore(clock=clock)
    with redis_server(tmp_path) as url:
        redis = RedisStore(url)
        for store in (memory, redis):
            await store.create_session("s", {"principal": "p"}, 60)
            assert await store.update_session("s", {"principal": "p", "log_level": "error"}, 60)
            assert await store.get_session("s", 60) == {"principal": "p", "log_level": "error"}
            assert await store.delete_session("s")
            assert not await store.update_session("s", {"principal": "p"}, 60)
            assert await store.get_session("s", 60) is None
        await memory.create_session("old", {}, 1)
        clock.now += 2
        assert not await memory.update_session("old", {"log_level": "error"}, 60)
        assert await memory.get_session("old", 60) is None
        await redis.aclose()
