"""``keen serve``'s limits belong to the caller, not to one of its sessions.

A host that sends ``initialize`` again gets a new session; the description-read rate limit
used to be counted per session, so each new session started a fresh count, and nothing
capped how many sessions one caller held (tens of thousands a minute were accepted). Here
a raw HTTP host on loopback opens sessions in a bounded loop: past ``--max-sessions`` it
gets HTTP 429 with a message saying what to do, another token is not affected, ending a
session frees its place, and a new session keeps the caller's read count. With no token
configured, the caller is its address. Both stores: memory and Redis.

``keen serve``'s HTTP front runs in a thread of this process (``helpers.serve.http_in_thread``:
the same app, bearer check and caller scopes as the console script's); the Redis store reads
a clock that starts the test early in a rate window instead of waiting for one.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest

from helpers.loopback import redis_server
from helpers.serve import INITIALIZE, JSON_HEADERS, ServedHttp, http_in_thread, tls, write_upstream
from keen.serve.store import MemoryStore, RedisStore

TOKENS = ("limits-token-one-abcdefghijklmnop", "limits-token-two-abcdefghijklmnop")
CAP = 4
FETCHES = 3


class WindowStart:
    """The Redis store's clock: real time, moved at its first reading (the first description
    read: sessions are timed by Redis's own clock) to a second into a 60 s rate window, so
    the reads have 59 s however long the servers took to start. The store counts in fixed
    windows (``int(now // 60)``) and reads that straddle a boundary start a new count; the
    test waited up to 20 s for a fresh window before. The memory store's window starts at the
    caller's first read (``MemoryStore.hit``)."""

    def __init__(self) -> None:
        self.shift: float | None = None

    def __call__(self) -> float:
        now = time.time()
        if self.shift is None:
            self.shift = 1.0 - now % 60
        return now + self.shift


@contextlib.contextmanager
def _serve(
    tmp_path: Path, store: str, tokens: tuple[str, ...], monkeypatch: pytest.MonkeyPatch
) -> Iterator[ServedHttp]:
    write_upstream(tmp_path)
    monkeypatch.setenv("KEEN_HOME", str(tmp_path))
    with contextlib.ExitStack() as stack:
        state: MemoryStore | RedisStore = MemoryStore()
        if store == "redis":
            state = RedisStore(stack.enter_context(redis_server(tmp_path)), clock=WindowStart())
        yield stack.enter_context(
            http_in_thread(
                tmp_path, tokens=tokens, store=state, mode="extension", max_sessions=CAP, fetch_limit=FETCHES
            )
        )


def _headers(token: str | None, session: str | None = None) -> dict[str, str]:
    headers = {**JSON_HEADERS, "MCP-Protocol-Version": "2025-11-25"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    if session:
        headers["Mcp-Session-Id"] = session
    return headers


def _initialize(url: str, token: str | None) -> httpx2.Response:
    return httpx2.post(url, headers=_headers(token), json=INITIALIZE, timeout=30, verify=tls())


def _read(url: str, token: str | None, session: str) -> dict[str, Any]:
    body = {
        "jsonrpc": "2.0",
        "id": 2,
        "method": "resources/read",
        "params": {"uri": "resource:///tool_descriptions?tools=mcp__basic__echo"},
    }
    response = httpx2.post(url, headers=_headers(token, session), json=body, timeout=30, verify=tls())
    assert response.status_code == 200, response.text
    result: dict[str, Any] = json.loads(response.json()["result"]["contents"][0]["text"])
    return result


@pytest.mark.parametrize("store", ["memory", "redis"])
def test_sessions_are_capped_per_token_and_reads_counted_per_token(
    tmp_path: Path, store: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with _serve(tmp_path, store, TOKENS, monkeypatch) as proc:
        answers = [_initialize(proc.url, TOKENS[0]) for _ in range(CAP + 6)]
        opened = [r.headers["mcp-session-id"] for r in answers if r.status_code == 200]
        refused = [r for r in answers if r.status_code != 200]
        assert len(opened) == CAP, [r.status_code for r in answers]
        assert {r.status_code for r in refused} == {429}
        message = refused[0].json()["error"]["message"]
        assert "Too many open sessions" in message and "DELETE" in message and "--max-sessions" in message
        assert TOKENS[0] not in message
        # Another principal is not held back by the first one's sessions.
        other = _initialize(proc.url, TOKENS[1])
        assert other.status_code == 200, other.text
        # Ending a session frees its place.
        gone = httpx2.delete(proc.url, headers=_headers(TOKENS[0], opened[0]), timeout=30, verify=tls())
        assert gone.status_code == 200
        again = _initialize(proc.url, TOKENS[0])
        assert again.status_code == 200, again.text
        # The read limit is the caller's: a new session does not start a new count.
        first = other.headers["mcp-session-id"]
        reads = [_read(proc.url, TOKENS[1], first) for _ in range(FETCHES)]
        assert all("mcp__basic__echo" in r for r in reads), reads
        fresh = _initialize(proc.url, TOKENS[1]).headers["mcp-session-id"]
        assert _read(proc.url, TOKENS[1], fresh)["error"]["code"] == "RATE_LIMITED"
        # ...and it is not shared with another caller.
        assert "mcp__basic__echo" in _read(proc.url, TOKENS[0], again.headers["mcp-session-id"])


@pytest.mark.parametrize("store", ["memory", "redis"])
def test_without_a_token_the_caller_is_its_address(
    tmp_path: Path, store: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with _serve(tmp_path, store, (), monkeypatch) as proc:
        answers = [_initialize(proc.url, None) for _ in range(CAP + 2)]
        assert [r.status_code for r in answers] == [200] * CAP + [429] * 2
        sessions = [r.headers["mcp-session-id"] for r in answers[:CAP]]
        reads = [_read(proc.url, None, sid) for sid in sessions[:FETCHES]]
        assert all("mcp__basic__echo" in r for r in reads), reads
        assert _read(proc.url, None, sessions[FETCHES])["error"]["code"] == "RATE_LIMITED"
