"""``keen serve``'s limits belong to the caller, not to one of its sessions.

A host that sends ``initialize`` again gets a new session; the description-read rate limit
used to be counted per session, so each new session started a fresh count, and nothing
capped how many sessions one caller held (tens of thousands a minute were accepted). Here
a raw HTTP host on loopback opens sessions in a bounded loop: past ``--max-sessions`` it
gets HTTP 429 with a message saying what to do, another token is not affected, ending a
session frees its place, and a new session keeps the caller's read count. With no token
configured, the caller is its address. Both stores: memory and Redis.
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
from helpers.serve import INITIALIZE, JSON_HEADERS, KeenServeProcess, tls, write_upstream

# The Redis tests may wait up to 20 s for a fresh rate window (`_whole_window`): handed out
# first, so that such a wait never ends the run alone.
pytestmark = pytest.mark.slow_file

TOKENS = ("limits-token-one-abcdefghijklmnop", "limits-token-two-abcdefghijklmnop")
CAP = 4
FETCHES = 3


@contextlib.contextmanager
def _serve(tmp_path: Path, store: str, env: dict[str, str]) -> Iterator[KeenServeProcess]:
    write_upstream(tmp_path)
    limits = ["--max-sessions", str(CAP), "--fetch-limit", str(FETCHES)]
    with contextlib.ExitStack() as stack:
        spec = stack.enter_context(redis_server(tmp_path)) if store == "redis" else "memory"
        args = ["--mode", "extension", "--store", spec, *limits]
        yield stack.enter_context(KeenServeProcess(tmp_path, args, env))


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


def _whole_window(store: str) -> None:
    """Start the reads early in a 60 s rate window: the Redis store counts in fixed windows
    (``int(now // 60)``), and reads that straddle a boundary start a new count. The memory
    store's window starts at the caller's first read (``MemoryStore.hit``): nothing to wait
    for (the wait was up to 20 s, most of this file's time, and when it came last it ended
    the suite's run on one worker)."""
    if store != "redis":
        return
    left = 60 - time.time() % 60
    if left < 20:
        time.sleep(left + 0.05)


@pytest.mark.parametrize("store", ["memory", "redis"])
def test_sessions_are_capped_per_token_and_reads_counted_per_token(tmp_path: Path, store: str) -> None:
    with _serve(tmp_path, store, {"KEEN_SERVE_TOKENS": ",".join(TOKENS)}) as proc:
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
        _whole_window(store)
        reads = [_read(proc.url, TOKENS[1], first) for _ in range(FETCHES)]
        assert all("mcp__basic__echo" in r for r in reads), reads
        fresh = _initialize(proc.url, TOKENS[1]).headers["mcp-session-id"]
        assert _read(proc.url, TOKENS[1], fresh)["error"]["code"] == "RATE_LIMITED"
        # ...and it is not shared with another caller.
        assert "mcp__basic__echo" in _read(proc.url, TOKENS[0], again.headers["mcp-session-id"])


@pytest.mark.parametrize("store", ["memory", "redis"])
def test_without_a_token_the_caller_is_its_address(tmp_path: Path, store: str) -> None:
    with _serve(tmp_path, store, {}) as proc:
        answers = [_initialize(proc.url, None) for _ in range(CAP + 2)]
        assert [r.status_code for r in answers] == [200] * CAP + [429] * 2
        sessions = [r.headers["mcp-session-id"] for r in answers[:CAP]]
        _whole_window(store)
        reads = [_read(proc.url, None, sid) for sid in sessions[:FETCHES]]
        assert all("mcp__basic__echo" in r for r in reads), reads
        assert _read(proc.url, None, sessions[FETCHES])["error"]["code"] == "RATE_LIMITED"
