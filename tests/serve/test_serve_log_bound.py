"""An upstream's log messages reach a host bounded (docs/serve.md "During a call").

Before, keen serve passed every ``notifications/message`` of a server, whole, to the host
whose call was running: a server that sent thousands of large ones flooded the host and
held keen serve's memory (the SDK hands each one over as a task of its own). Now each
server gets a burst, then a steady rate (:class:`keen.serve.LogBound`), each message's data
is cut with a note, and the host is told once how many were dropped. The bound's clock is
the test's, so what passes does not depend on the machine's speed.
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
import sys
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp_types as mt
import pytest
from mcp.client.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from helpers import server_script
from helpers.forkserver import script_args
from helpers.loopback import redis_server
from helpers.serve import (
    INITIALIZE,
    JSON_HEADERS,
    MODERN,
    basic_in_memory,
    http_in_process,
    in_process,
    tls,
    write_upstream,
)
from keen._redact import redactor
from keen.mcp.connection.memory import in_memory_transport
from keen.serve import KeenServer, LogBound
from keen.serve.relay import LOG_QUEUE, HostPeer
from keen.serve.rounds import RoundsChannel, _Call  # pyright: ignore[reportPrivateUsage]
from keen.serve.store import MemoryStore, RedisStore

pytestmark = [
    pytest.mark.anyio,
    # logging/setLevel and the logging capability are deprecated as of 2026-07-28; 2025-11-25
    # hosts and servers still use them.
    pytest.mark.filterwarnings("ignore:The logging capability is deprecated"),
]

LEVELS = frozenset({"debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"})


class Clock:
    """The bound's clock: still unless the test moves it."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class Logs:
    """What a host got: each ``notifications/message`` as ``(level, logger, data)``."""

    def __init__(self) -> None:
        self.got: list[tuple[str, str | None, Any]] = []

    async def on_message(self, message: Any) -> None:
        root = getattr(message, "root", message)
        if isinstance(root, mt.LoggingMessageNotification):
            self.got.append((root.params.level, root.params.logger, root.params.data))

    async def notify(self, notification: mt.ServerNotification) -> None:
        """As a :class:`keen.serve.relay.HostChannel` (the peer tests below)."""
        await self.on_message(notification)


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    logs = {
        "transport": "stdio",
        "command": sys.executable,
        "args": script_args(str(server_script("log_stdio"))),
    }
    write_upstream(tmp_path, extra={"logs": logs})
    monkeypatch.setenv("KEEN_HOME", str(tmp_path))
    return tmp_path


def _transports() -> dict[str, Any]:
    from servers.log_stdio import server

    return {**basic_in_memory(), "logs": in_memory_transport(server)}


def _logged_host(
    home: Path, logs: Logs, bound: LogBound
) -> AbstractAsyncContextManager[tuple[KeenServer, Client]]:
    """keen serve (search mode, the flooding server beside the basic one) in this process,
    bounded by ``bound``, with a host whose log messages ``logs`` records."""
    return in_process(
        home,
        "session",
        mode="search",
        transports=_transports(),
        message_handler=logs.on_message,
        log_bound=bound,
    )


async def _flood(client: Any, count: int, size: int, level: str = "info") -> str:
    call = {"server": "logs", "tool": "flood", "arguments": {"count": count, "size": size, "level": level}}
    result = await client.call_tool("call_mcp_tool", call)
    return result.content[0].text


async def test_a_flood_reaches_the_host_bounded_cut_and_counted(home: Path) -> None:
    logs = Logs()
    bound = LogBound(burst=5, per_second=1.0, max_chars=1_000, clock=Clock())
    async with _logged_host(home, logs, bound) as (_, client):
        assert await _flood(client, 50, 20_000) == "sent 50"
    flood = [entry for entry in logs.got if entry[1] == "logs/flood"]
    told = [entry for entry in logs.got if entry[1] == "keen serve"]
    assert len(flood) == 5, logs.got  # the burst; the clock never moved, so no more
    for level, _, data in flood:
        assert level == "info"
        assert isinstance(data, str) and len(data) <= 1_000 + 200
        # The note's counts are exact: the server's 20,000 characters, and the host's own
        # (before, "19,000 of 20,000 characters cut" counted the text before the secret was
        # blanked and the invisible character escaped).
        head, note = data.split("\n[truncated: ")
        assert note == (
            f"{len(head):,} characters shown (secrets blanked, invisible ones escaped) of the "
            "server's string of 20,000 characters; keen serve passes at most 1,000]"
        )
        assert "flood-secret" not in data and "Bearer [REDACTED]" in data
        assert "\u202e" not in data and "\\u202e" in data
    assert told == [
        (
            "info",
            "keen serve",
            "keen serve dropped 45 log messages of MCP server 'logs' during this call: it passes "
            "at most 5 at once, then 1 a second, of each server to each host",
        )
    ]


async def test_messages_below_the_hosts_level_are_not_counted_as_dropped(home: Path) -> None:
    logs = Logs()
    bound = LogBound(burst=5, per_second=1.0, clock=Clock())
    async with _logged_host(home, logs, bound) as (_, client):
        await client.set_logging_level("error")
        assert await _flood(client, 50, 100, level="info") == "sent 50"
        assert logs.got == []
        # The bucket was not spent on what the host never gets: an error passes.
        assert await _flood(client, 1, 100, level="error") == "sent 1"
    assert [(level, logger) for level, logger, _ in logs.got] == [("error", "logs/flood")]


async def test_a_long_flood_is_told_every_so_often_and_at_the_calls_end() -> None:
    clock = Clock()
    logs = Logs()
    bound = LogBound(burst=2, per_second=1.0, report_every=10.0, clock=clock)
    peer = HostPeer("h", logs, capabilities=[], levels=LEVELS, log_bound=bound)
    message = mt.LoggingMessageNotificationParams(level="warning", logger="l", data="hi")
    for _ in range(10):
        await peer.log("s", message)
    assert [logger for _, logger, _ in logs.got] == ["s/l", "s/l"]  # the burst, then none told yet
    clock.now = 10.0  # a flood still going ten seconds on: told once, then two more pass
    for _ in range(3):
        await peer.log("s", message)
    assert [logger for _, logger, _ in logs.got] == ["s/l", "s/l", "keen serve", "s/l", "s/l"]
    assert logs.got[2][0] == "warning"
    assert logs.got[2][2].startswith("keen serve dropped 8 log messages of MCP server 's'")
    await peer.log("s", message)  # one more dropped, told when the call ends
    await peer.end()
    assert logs.got[-1][2].startswith("keen serve dropped 2 log messages of MCP server 's'")
    assert len(logs.got) == 6
    await peer.log("s", message)  # after the call: nothing reaches the host
    assert len(logs.got) == 6


async def test_structured_log_data_keeps_its_shape_with_secrets_blanked_and_escapes() -> None:
    logs = Logs()
    peer = HostPeer("h", logs, capabilities=[], levels=LEVELS, log_bound=LogBound(clock=Clock()))
    data = {"auth": "Bearer abcdefgh12345678", "note": "a\u200bb\x1b[31m", "n": 3}
    await peer.log("s", mt.LoggingMessageNotificationParams(level="info", logger="x\u202ey", data=data))
    # The logger is the server's text too: a secret in it is blanked (before, it was passed).
    logger = "x" * 190 + " Bearer abcdefgh12345678"
    await peer.log("s", mt.LoggingMessageNotificationParams(level="info", logger=logger, data=1))
    assert logs.got == [
        ("info", "s/x\\u202ey", {"auth": "Bearer [REDACTED]", "note": "a\\u200bb\\x1b[31m", "n": 3}),
        ("info", "s/" + ("x" * 190 + " Bearer [REDACTED]")[:200], 1),
    ]


class Stuck:
    """A host's channel that does not read: every write waits until the host reads again."""

    def __init__(self) -> None:
        self.writing = 0
        self.reads = anyio.Event()
        self.got: list[mt.LoggingMessageNotification] = []

    async def notify(self, notification: mt.ServerNotification) -> None:
        self.writing += 1
        await self.reads.wait()
        assert isinstance(notification, mt.LoggingMessageNotification)
        self.got.append(notification)


async def test_a_host_that_stops_reading_holds_no_upstream_message_but_one() -> None:
    # The SDK hands over each upstream log message as a task of its own, holding the whole
    # message until HostPeer.log returns: before, each passing one waited on the host's
    # write, so a host that stopped reading held every one of them (1.8 GB in a flood).
    channel = Stuck()
    peer = HostPeer(
        "h", channel, capabilities=[], levels=LEVELS, log_bound=LogBound(burst=1_000, clock=Clock())
    )
    big = "x" * 100_000
    inside = held = writes = 0

    async def one() -> None:
        nonlocal inside
        inside += 1
        try:
            await peer.log("s", mt.LoggingMessageNotificationParams(level="info", logger="l", data=big))
        finally:
            inside -= 1

    async with anyio.create_task_group() as tg:
        for _ in range(200):
            tg.start_soon(one)
        await anyio.wait_all_tasks_blocked()
        held, writes = inside, channel.writing
        channel.reads.set()
    assert (held, writes) == (1, 1)  # one task writes; the rest were queued or dropped, and returned
    await peer.end()
    passed = [n for n in channel.got if n.params.logger == "s/l"]
    told = [n.params.data for n in channel.got if n.params.logger == "keen serve"]
    assert len(passed) == 1 + LOG_QUEUE
    assert all(isinstance(n.params.data, str) and len(n.params.data) < 10_000 for n in passed)
    assert told == [
        f"keen serve dropped {200 - 1 - LOG_QUEUE} log messages of MCP server 's' during this call: "
        "it passes at most 1,000 at once, then 20 a second, of each server to each host"
    ]


async def test_a_sessions_log_level_holds_on_every_replica_and_ends_with_it(home: Path) -> None:
    # Before, the level was a dict of the replica that got logging/setLevel: a call of the
    # same session on another replica got every level.
    store = MemoryStore()

    async def levels(url: str, headers: dict[str, str], word: str) -> list[str]:
        call = {"server": "logs", "tool": "log_each", "arguments": {"word": word}}
        return [params["level"] for params in await _logged(http, url, headers, call)]

    async with (
        http_in_process(home, store=store, transports=_transports(), mode="search") as a,
        http_in_process(home, store=store, transports=_transports(), mode="search") as b,
        httpx2.AsyncClient(timeout=60, verify=tls()) as http,
    ):
        opened = await http.post(a.url, headers=JSON_HEADERS, json=INITIALIZE)
        sid = opened.headers["mcp-session-id"]
        session = {**JSON_HEADERS, "Mcp-Session-Id": sid, "MCP-Protocol-Version": "2025-11-25"}
        await http.post(
            a.url, headers=session, json={"jsonrpc": "2.0", "method": "notifications/initialized"}
        )
        assert await levels(b.url, session, "before") == ["debug", "info", "warning", "error"]
        set_level = {"jsonrpc": "2.0", "id": 2, "method": "logging/setLevel", "params": {"level": "warning"}}
        assert (await http.post(a.url, headers=session, json=set_level)).status_code == 200
        assert await levels(a.url, session, "a") == ["warning", "error"]
        assert await levels(b.url, session, "b") == ["warning", "error"]
        assert (await http.delete(b.url, headers=session)).status_code == 200
        assert await store.get_session(sid, 60) is None  # the level went with the session


async def _logged(
    http: httpx2.AsyncClient, url: str, headers: dict[str, str], call: dict[str, Any]
) -> list[Any]:
    """The ``notifications/message`` params a handshake-era HTTP host got during one
    ``call_mcp_tool`` call (its POST answered on an event stream)."""
    body = {
        "jsonrpc": "2.0",
        "id": 3,
        "method": "tools/call",
        "params": {"name": "call_mcp_tool", "arguments": call},
    }
    response = await http.post(url, headers=headers, json=body)
    events = [json.loads(line[5:]) for line in response.text.splitlines() if line.startswith("data:")]
    assert "error" not in events[-1], events[-1]
    return [e["params"] for e in events if e.get("method") == "notifications/message"]


async def _session(http: httpx2.AsyncClient, url: str) -> dict[str, str]:
    """A new handshake-era HTTP session's headers."""
    opened = await http.post(url, headers=JSON_HEADERS, json=INITIALIZE)
    session = {
        **JSON_HEADERS,
        "Mcp-Session-Id": opened.headers["mcp-session-id"],
        "MCP-Protocol-Version": "2025-11-25",
    }
    await http.post(url, headers=session, json={"jsonrpc": "2.0", "method": "notifications/initialized"})
    return session


async def test_one_hosts_flood_does_not_spend_another_hosts_log_messages(home: Path) -> None:
    # Before, the bucket was the server's, shared by every host: after host A's call made
    # the server flood, host B's call to it got none of its log messages (all dropped).
    bound = LogBound(burst=5, per_second=1.0, max_chars=1_000, clock=Clock(), max_hosts=2)
    flood = {"server": "logs", "tool": "flood", "arguments": {"count": 30, "size": 100}}
    async with (
        http_in_process(home, transports=_transports(), mode="search", log_bound=bound) as served,
        httpx2.AsyncClient(timeout=60, verify=tls()) as http,
    ):
        a, b = await _session(http, served.url), await _session(http, served.url)
        got_a = await _logged(http, served.url, a, flood)
        got_b = await _logged(http, served.url, b, {**flood, "arguments": {"count": 3, "size": 100}})
        assert [m["logger"] for m in got_a] == ["logs/flood"] * 5 + ["keen serve"]
        assert got_a[-1]["data"].startswith("keen serve dropped 25 log messages of MCP server 'logs'")
        assert [m["logger"] for m in got_b] == ["logs/flood"] * 3  # its own share, whole
        # A's share is spent for A: its next call is dropped whole (the clock never moved).
        again = await _logged(http, served.url, a, {**flood, "arguments": {"count": 2, "size": 100}})
        assert [m["data"][:27] for m in again] == ["keen serve dropped 2 log me"]
        assert bound.buckets_kept() == 2
        # A session that ends takes its buckets with it.
        assert (await http.delete(served.url, headers=a)).status_code == 200
        assert bound.buckets_kept() == 1
        # At most max_hosts hosts' buckets are kept: a third host's first message pushes out
        # the least recently logged one's.
        c = await _session(http, served.url)
        d = await _session(http, served.url)
        for host in (c, d):
            assert (
                len(await _logged(http, served.url, host, {**flood, "arguments": {"count": 1, "size": 10}}))
                == 1
            )
        assert bound.buckets_kept() == 2


async def test_two_2026_07_28_callers_without_a_token_each_get_their_own_log_share(home: Path) -> None:
    # A 2026-07-28 caller over HTTP has no session: before, with no token configured, every
    # one of them was the one host "principal:anonymous" and shared one bucket a server, so
    # after A's call made the server flood, B's call got none of its log messages. Each is
    # now its principal, its address: A calls from 127.0.0.1, B from 127.0.0.2 (loopback).
    bound = LogBound(burst=5, per_second=1.0, max_chars=1_000, clock=Clock())
    got: dict[str, Logs] = {}
    async with http_in_process(home, transports=_transports(), mode="search", log_bound=bound) as served:
        for address, count in (("127.0.0.1", 30), ("127.0.0.2", 3), ("127.0.0.1", 2)):
            logs = got.setdefault(address, Logs())
            transport = httpx2.AsyncHTTPTransport(local_address=address, verify=tls())
            async with (
                httpx2.AsyncClient(transport=transport, timeout=60, verify=tls()) as http,
                Client(
                    streamable_http_client(served.url, http_client=http),
                    mode="auto",
                    cache=None,
                    log_level="info",
                    message_handler=logs.on_message,
                ) as client,
            ):
                assert client.protocol_version == MODERN
                assert await _flood(client, count, 100) == f"sent {count}"
    a, b = got["127.0.0.1"].got, got["127.0.0.2"].got
    assert [logger for _, logger, _ in b] == ["logs/flood"] * 3  # its own share, whole
    # A's share is spent for A, across its two connections: 5 of its first call's 30 passed,
    # and none of its second call's (the clock never moved).
    assert [logger for _, logger, _ in a] == ["logs/flood"] * 5 + ["keen serve"] * 2
    assert a[5][2].startswith("keen serve dropped 25 log messages of MCP server 'logs'")
    assert a[6][2].startswith("keen serve dropped 2 log messages of MCP server 'logs'")
    assert bound.buckets_kept() == 2


def test_a_full_bound_drops_the_least_recently_logged_hosts_buckets() -> None:
    # Which host's buckets go when the map is full: before this test, removing the bucket
    # just made (popitem(last=True): no bound at all) or never moving a host that logs to
    # the end (move_to_end) still passed every test.
    bound = LogBound(burst=1, per_second=1.0, clock=Clock(), max_hosts=2)
    assert bound  # an empty bound is not falsy: `bound or LogBound()` keeps it
    assert bound.take("a", "s") and bound.take("b", "s")
    assert not bound.take("a", "s")  # a's one is spent; a is now the most recently logged
    assert bound.take("c", "s")  # the map was full: b's bucket went, not a's
    assert bound.buckets_kept() == 2
    assert not bound.take("a", "s")  # a kept, still spent (the clock never moved)
    assert bound.take("b", "s")  # b starts full again (and pushes out c, now the oldest)
    # A new host on a full map is bound as any other: its bucket is kept, not the one pushed out.
    assert bound.take("d", "s")
    assert not bound.take("d", "s")
    assert not bound.take("d", "s")
    assert bound.buckets_kept() == 2


class HeldWrite:
    """Holds the next write of a session's data (armed by the test) until the test says go:
    the point between ``logging/setLevel``'s read of its session and its write."""

    def __init__(self) -> None:
        self.armed = False
        self.reached = anyio.Event()
        self.go = anyio.Event()

    async def __call__(self) -> None:
        if self.armed:
            self.armed = False
            self.reached.set()
            await self.go.wait()


def _held(base: type[Any], hold: HeldWrite) -> type[Any]:
    """``base`` (a store class) whose session writes after ``initialize`` wait on ``hold``."""

    class Held(base):
        async def create_session(self, *args: Any, **kwargs: Any) -> Any:
            await hold()
            return await super().create_session(*args, **kwargs)

        async def update_session(self, *args: Any, **kwargs: Any) -> Any:
            await hold()
            return await super().update_session(*args, **kwargs)

    return Held


@pytest.mark.parametrize("kind", ["memory", "redis"])
async def test_a_set_level_racing_a_delete_does_not_bring_the_session_back(
    home: Path, tmp_path: Path, kind: str
) -> None:
    # Before, logging/setLevel read the session, then wrote it whole: a DELETE between the
    # two was undone, the session (and its place under the caller's cap) back for its ttl.
    hold = HeldWrite()
    with contextlib.ExitStack() as stack:
        if kind == "memory":
            store = _held(MemoryStore, hold)()
        else:
            store = _held(RedisStore, hold)(stack.enter_context(redis_server(tmp_path)))
        async with (
            http_in_process(home, store=store, transports=_transports(), mode="search") as served,
            httpx2.AsyncClient(timeout=60, verify=tls()) as http,
        ):
            opened = await http.post(served.url, headers=JSON_HEADERS, json=INITIALIZE)
            sid = opened.headers["mcp-session-id"]
            session = {**JSON_HEADERS, "Mcp-Session-Id": sid, "MCP-Protocol-Version": "2025-11-25"}
            set_level = {
                "jsonrpc": "2.0",
                "id": 2,
                "method": "logging/setLevel",
                "params": {"level": "error"},
            }
            answers: list[httpx2.Response] = []

            async def set_it() -> None:
                answers.append(await http.post(served.url, headers=session, json=set_level))

            hold.armed = True
            async with anyio.create_task_group() as tg:
                tg.start_soon(set_it)
                await hold.reached.wait()  # setLevel read the session; its write waits
                assert (await http.delete(served.url, headers=session)).status_code == 200
                hold.go.set()
            assert await store.get_session(sid, 60) is None
            (answer,) = answers
            error = _sse_or_json(answer)["error"]
            assert error["code"] == mt.INVALID_REQUEST
            assert "this session ended (deleted or expired)" in error["message"], error
            again = await http.post(served.url, headers=session, json=set_level)
            assert again.status_code == 404
            await store.aclose()


def _sse_or_json(response: httpx2.Response) -> dict[str, Any]:
    """The JSON-RPC message of a POST's answer (one JSON body, or the last event of a stream)."""
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        events = [json.loads(line[5:]) for line in response.text.splitlines() if line.startswith("data:")]
        return events[-1]
    return response.json()


@pytest.mark.parametrize(
    ("size", "string", "structured"),
    # The server's lengths, written out: "a" and `size` tags; {"k": [...]} as JSON text, 7
    # characters before the list, 3 a tag, 2 between two, 2 after.
    [
        (500, "string of 501 characters (more once escaped)", "data, 2,507 characters as JSON text"),
        (20_000, "string of 20,001 characters", "data, 100,007 characters as JSON text"),
    ],
)
async def test_the_cut_counts_what_the_host_sees_escaped_and_splits_no_escape(
    size: int, string: str, structured: str
) -> None:
    # A Unicode tag is shown as a 10-character escape: before, the cut counted the message
    # unescaped, so 8,000 tags reached the host as 80,000 characters, and 500 uncut as 5,000.
    logs = Logs()
    peer = HostPeer(
        "h", logs, capabilities=[], levels=LEVELS, log_bound=LogBound(max_chars=1_005, clock=Clock())
    )
    await peer.log("s", mt.LoggingMessageNotificationParams(level="info", data="a" + "\U000e0041" * size))
    await peer.log("s", mt.LoggingMessageNotificationParams(level="info", data={"k": ["\U000e0041"] * size}))
    got = [data for _, _, data in logs.got]
    for shown, whole in zip(got, (string, structured), strict=True):
        head, note = shown.split("\n[truncated: ")
        assert len(head) <= 1_005 and head.startswith(("a\\U000e0041", '{"k": ["\\U000e0041'))
        assert "\U000e0041" not in head and len(head) > 1_005 - len('"\\U000e0041", ')
        assert re.search(r"\\U(?![0-9a-f]{8})", head) is None  # no escape split
        # The note's counts are the real ones: the head as the host sees it, and the server's
        # data (before, the count of what was cut was taken on the text unescaped).
        assert note == (
            f"{len(head):,} characters shown (secrets blanked, invisible ones escaped) of the "
            f"server's {whole}; keen serve passes at most 1,005]"
        )


async def test_the_notes_length_of_a_string_is_its_characters_and_of_other_data_its_json_text() -> None:
    # Before, a string's length was named "as JSON text" but counted on the string itself:
    # for '"quoted"\n' * 200 the note said 1,800, where its JSON text is 2,402 characters.
    logs = Logs()
    peer = HostPeer(
        "h", logs, capabilities=[], levels=LEVELS, log_bound=LogBound(max_chars=1_000, clock=Clock())
    )
    text = 'é"\\\n' * 300  # 4 characters a time (as JSON text, 7: é \" \\ \n)
    await peer.log("s", mt.LoggingMessageNotificationParams(level="info", data=text))
    await peer.log("s", mt.LoggingMessageNotificationParams(level="info", data={"m": text}))
    (_, _, string), (_, _, structured) = logs.got
    assert string == text[:1_000] + (
        "\n[truncated: 1,000 characters shown (secrets blanked, invisible ones escaped) of the "
        "server's string of 1,200 characters; keen serve passes at most 1,000]"
    )
    head, note = structured.split("\n[truncated: ")
    assert head.startswith('{"m": "é\\"\\\\\\n') and len(head) <= 1_000
    assert note == (
        f"{len(head):,} characters shown (secrets blanked, invisible ones escaped) of the "
        "server's data, 2,109 characters as JSON text; keen serve passes at most 1,000]"
    )


async def test_keens_debug_log_of_a_flood_redacts_only_what_it_shows(
    home: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    # `keen -v serve`: before, the debug line of each upstream log message redacted the whole
    # message (1 MB) and then kept 200 characters of it, slowing keen serve in a flood.
    caplog.set_level(logging.DEBUG, logger="keen.mcp.connection.server")
    redacted: list[int] = []
    redact = redactor.redact

    def counted(text: str) -> str:
        redacted.append(len(text))
        return redact(text)

    monkeypatch.setattr(redactor, "redact", counted)
    bound = LogBound(max_chars=1_000, clock=Clock())
    async with in_process(home, "session", mode="search", transports=_transports(), log_bound=bound) as (
        _,
        client,
    ):
        assert await _flood(client, 3, 1_000_000) == "sent 3"
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("server logs: log info: ")]
    assert len(lines) == 3
    assert all("Bearer [REDACTED]" in line and "flood-secret" not in line for line in lines)
    assert redacted and max(redacted) < 1_000_000 // 100, max(redacted)


class Away(Logs):
    """A host's channel that reaches no host until ``back`` (a 2026-07-28 host between two
    rounds of its call: its RoundsChannel has no request to write on)."""

    def __init__(self) -> None:
        super().__init__()
        self.back = False

    async def notify(self, notification: mt.ServerNotification) -> None:
        if not self.back:
            await RoundsChannel(_Call(token="t", caller="h"), 1.0).notify(notification)
        await super().notify(notification)


async def test_log_messages_that_reach_no_host_are_counted_and_told_when_one_is_back() -> None:
    # Before, RoundsChannel.notify did nothing without a request to write on: the messages
    # were lost without a count, and so was a notice of what the bound dropped.
    clock = Clock()
    channel = Away()
    bound = LogBound(clock=clock, report_every=10.0)
    peer = HostPeer("h", channel, capabilities=[], levels=LEVELS, log_bound=bound)
    for level in ("warning", "error", "info"):
        with pytest.raises(MCPError, match="between two rounds of this call"):
            await peer.log("s", mt.LoggingMessageNotificationParams(level=level, logger="l", data="lost"))
    assert channel.got == []
    channel.back = True
    clock.now = 10.0
    await peer.log("s", mt.LoggingMessageNotificationParams(level="info", logger="l", data="here"))
    await peer.end()
    assert channel.got == [
        (
            "error",
            "keen serve",
            "keen serve dropped 3 log messages of MCP server 's' during this call: it passes at "
            "most 100 at once, then 20 a second, of each server to each host",
        ),
        ("info", "s/l", "here"),
    ]
