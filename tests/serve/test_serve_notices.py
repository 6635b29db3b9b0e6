"""``keen serve`` tells its hosts when the tools it lists change (docs/serve.md "When tools change").

The upstream is the real changing server (``tests/servers/changing_server.py``) over
streamable HTTP; the test changes its tools through its own ``mutate`` tool, from a client
of its own. ``keen serve`` runs as a real process (``--mode extension``); the hosts are SDK
clients over HTTP or stdio, in the 2025-11-25 era (``notifications/tools/list_changed`` on
the session's stream) or the 2026-07-28 era (``subscriptions/listen``). What keen serve
decides alone (how few notices a flood makes, the ttl it lists with) is checked against its
server in this process, over memory streams (``helpers.serve.in_process``).
"""

from __future__ import annotations

import contextlib
import socket
import struct
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import httpx2
import mcp_types as mt
import pytest
from mcp.client.client import Client
from mcp.client.streamable_http import streamable_http_client

from helpers.changing import changing_http, wait_until
from helpers.hostile import keen_cli
from helpers.serve import (
    INITIALIZE,
    JSON_HEADERS,
    KeenServeProcess,
    StoreClock,
    basic_in_memory,
    http_in_process,
    in_process,
    stdio_params,
    tls,
    write_upstream,
)
from keen.serve.notify import ChangeNotifier
from keen.serve.store import MemoryStore

pytestmark = [pytest.mark.anyio, pytest.mark.slow_file]

INTERVAL = 0.3
SERVE_ARGS = ["--mode", "extension", "--notify-interval", str(INTERVAL)]


class Host:
    """An SDK client of ``keen serve`` that counts the tools/list_changed notices it gets."""

    def __init__(self) -> None:
        self.notices = 0
        self.client: Client | None = None

    async def on_message(self, message: Any) -> None:
        root = getattr(message, "root", message)
        if isinstance(root, mt.ToolListChangedNotification):
            self.notices += 1

    async def names(self) -> set[str]:
        assert self.client is not None
        return {t.name for t in (await self.client.list_tools()).tools}


@contextlib.asynccontextmanager
async def host(target: KeenServeProcess | Path, era: str, *, memory: bool = False) -> AsyncIterator[Host]:
    """A host over HTTP (``target`` a process), stdio (``target`` the KEEN_HOME) or, with
    ``memory``, of ``keen serve``'s server for that KEEN_HOME run in this process (memory
    streams, ``helpers.serve.in_process``: ``KEEN_HOME`` must be set to it)."""
    found = Host()
    mode = "legacy" if era == "session" else "auto"
    if memory:
        assert isinstance(target, Path)
        options = {"mode": "extension", "notify_interval": INTERVAL}
        async with in_process(target, era, message_handler=found.on_message, **options) as (_, client):
            found.client = client
            yield found
        return
    if isinstance(target, KeenServeProcess):
        async with _http_host(target.url, era, found.on_message) as client:
            found.client = client
            yield found
        return
    async with Client(
        stdio_params(target, SERVE_ARGS), mode=mode, cache=None, message_handler=found.on_message
    ) as client:
        found.client = client
        yield found


class Told:
    """The ``notifications/tools/list_changed`` a host got, in order (its message handler)."""

    def __init__(self) -> None:
        self.methods: list[str] = []

    async def on_message(self, message: Any) -> None:
        root = getattr(message, "root", message)
        if isinstance(root, mt.ToolListChangedNotification):
            self.methods.append(root.method)


def _process(home: Path, transport: str) -> contextlib.AbstractContextManager[KeenServeProcess | None]:
    """``keen serve`` as an HTTP process for ``transport`` ``http``; nothing for ``stdio``
    (:func:`host` starts a process per host then)."""
    return KeenServeProcess(home, args=SERVE_ARGS) if transport == "http" else contextlib.nullcontext()


async def _settled(keen: Any) -> None:
    """The round the upstreams' first connections poked has compared (bounded)."""
    await wait_until(lambda: not keen.notifier.pending, "the round of the connections", 20)


@pytest.fixture
def upstream(tmp_path: Path) -> Any:
    with changing_http(tmp_path) as url:
        yield url


@pytest.fixture
def home(tmp_path: Path, upstream: str) -> Path:
    write_upstream(tmp_path, extra={"changing": {"transport": "streamable_http", "url": upstream}})
    return tmp_path


@contextlib.asynccontextmanager
async def changer(url: str) -> AsyncIterator[Client]:
    """A client of the upstream itself, to change its tools."""
    async with Client(url, cache=None) as client:
        yield client


async def eventually(check: Callable[[], Awaitable[bool]], what: str, timeout: float = 20.0) -> None:
    """Poll the async ``check`` every 0.1 s until true; fail with ``what`` after ``timeout`` s."""
    for _ in range(int(timeout / 0.1)):
        if await check():
            return
        await anyio.sleep(0.1)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


async def _served(found: Host, name: str) -> None:
    # The first list may race the upstream's first connection: wait for it (bounded).
    async def upstream_listed() -> bool:
        return "mcp__changing__echo" in await found.names()

    await eventually(upstream_listed, "the upstream's tools in keen serve's list")
    # A round the first connections started may still be pending: let it end before counting.
    await anyio.sleep(INTERVAL * 4)
    assert name not in await found.names()


@pytest.mark.parametrize("transport", ["http", "stdio"])
async def test_handshake_host_is_told_and_relists(home: Path, upstream: str, transport: str) -> None:
    with _process(home, transport) as proc:
        async with host(proc or home, "session") as found, changer(upstream) as up:
            assert found.client is not None
            assert found.client.server_capabilities.tools is not None
            assert found.client.server_capabilities.tools.list_changed is True
            await _served(found, "mcp__changing__fresh")
            before = found.notices
            await up.call_tool("mutate", {"op": "add", "name": "fresh"})
            await wait_until(lambda: found.notices > before, "a tools/list_changed notice", 20)
            assert "mcp__changing__fresh" in await found.names()
            # A removal is told too, and the list drops the tool.
            told = found.notices
            await up.call_tool("mutate", {"op": "remove", "name": "fresh"})
            await wait_until(lambda: found.notices > told, "a second notice", 20)
            assert "mcp__changing__fresh" not in await found.names()


@pytest.mark.parametrize("transport", ["http", "stdio"])
async def test_stateless_host_hears_on_subscriptions_listen(
    home: Path, upstream: str, transport: str
) -> None:
    with _process(home, transport) as proc:
        async with host(proc or home, "stateless") as found, changer(upstream) as up:
            client = found.client
            assert client is not None and client.protocol_version == "2026-07-28"
            assert client.server_capabilities.tools is not None
            assert client.server_capabilities.tools.list_changed is True
            await _served(found, "mcp__changing__late")
            async with client.listen(tools_list_changed=True) as sub:
                await up.call_tool("mutate", {"op": "add", "name": "late"})
                with anyio.fail_after(20):
                    event = await sub.__aiter__().__anext__()
                assert type(event).__name__ == "ToolsListChanged"
                assert "mcp__changing__late" in await found.names()


async def test_a_flood_of_upstream_changes_yields_few_notices(
    home: Path, upstream: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # How many notices keen serve sends is its own decision: its server runs in this process
    # (the transports' delivery of a notice is the two tests above).
    monkeypatch.setenv("KEEN_HOME", str(home))
    count = 25
    async with host(home, "session", memory=True) as found, changer(upstream) as up:
        await _served(found, "mcp__changing__t0")
        # The upstreams' first connections were changes too (hosts may have listed before):
        # let those notices settle (none for a whole wait: a loaded machine may send one
        # late), then count from there.
        settled = -1
        with anyio.fail_after(30):  # notices that never stop are a failure of their own
            while found.notices != settled:
                settled = found.notices
                await anyio.sleep(INTERVAL * 5)
        # Upstream notices that change nothing keen serve lists reach no host.
        await up.call_tool("flood", {"count": 30})
        await anyio.sleep(INTERVAL * 5)
        assert found.notices == settled
        start = time.monotonic()
        for i in range(count):
            await up.call_tool("mutate", {"op": "add", "name": f"t{i}"})
        wanted = {f"mcp__changing__t{i}" for i in range(count)}

        async def all_listed() -> bool:
            return found.notices > settled and wanted <= await found.names()

        await eventually(all_listed, "a notice and every added tool", 30)
        # Let any trailing round finish, then bound what the hosts got.
        await anyio.sleep(INTERVAL * 4)
        elapsed = time.monotonic() - start
    # Each round waits INTERVAL before it compares: at most one notice per INTERVAL.
    told = found.notices - settled
    assert 1 <= told <= elapsed / INTERVAL + 1
    assert told < count, f"{told} notices for {count} upstream changes"


async def test_search_mode_lists_the_same_tools_and_searches_the_new_one(home: Path, upstream: str) -> None:
    with KeenServeProcess(home, args=["--mode", "search", "--notify-interval", str(INTERVAL)]) as proc:
        async with host(proc, "session") as found, changer(upstream) as up:
            client = found.client
            assert client is not None
            before = await found.names()
            assert before == {"search_tools", "describe_tools", "call_mcp_tool"}
            await up.call_tool(
                "mutate", {"op": "add", "name": "zebra_census", "description": "Count the zebras."}
            )

            async def finds() -> bool:
                result = await client.call_tool("search_tools", {"query": "count zebras"})
                hits = (result.structured_content or {}).get("tools", [])
                return any(h["name"] == "mcp__changing__zebra_census" for h in hits)

            await eventually(finds, "search_tools to find the new tool")
            assert await found.names() == before
            assert found.notices == 0
        # Nothing is ever sent unprompted in search mode: no event stream to open.
        response = httpx2.get(proc.url, headers={"Accept": "text/event-stream"}, verify=tls())
        assert response.status_code == 405
        assert response.headers["allow"] == "POST, DELETE"


async def test_tools_list_ttl_is_bounded_by_the_upstream_ttl(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KEEN_HOME", str(tmp_path))  # keen serve's server in this process
    with changing_http(tmp_path, "--ttl-ms", "1500") as url:
        write_upstream(tmp_path, extra={"changing": {"transport": "streamable_http", "url": url}})
        async with host(tmp_path, "stateless", memory=True) as found:
            client = found.client
            assert client is not None
            await _served(found, "mcp__changing__none")
            listed = await client.list_tools()
    assert listed.ttl_ms is not None and 0 <= listed.ttl_ms <= 1500


@pytest.mark.parametrize("era", ["session", "stateless"])
@pytest.mark.parametrize("transport", ["http", "memory"])
async def test_a_host_is_told_only_when_what_it_sees_changed(
    tmp_path: Path, upstream: str, monkeypatch: pytest.MonkeyPatch, era: str, transport: str
) -> None:
    """A tool added to a pinned server is held for review: no host sees it, so none is told.
    Nor is a host known by its list that listed after a change (here keen serve's upstreams
    connecting, which a round compares only ``interval`` later): it already sees what changed. A change it does
    not see yet (a pinned tool removed) is told once. keen serve runs in this process (HTTP on
    127.0.0.1, or the stdio session over memory streams) so the test can wait for its rounds."""
    write_upstream(
        tmp_path,
        extra={"changing": {"transport": "streamable_http", "url": upstream, "pinning": "quarantine"}},
    )
    monkeypatch.setenv("KEEN_HOME", str(tmp_path))
    interval = 1.0  # long enough for the host to list before the round of the connections
    told = Told()

    async with contextlib.AsyncExitStack() as stack:
        if transport == "http":
            served = await stack.enter_async_context(
                http_in_process(tmp_path, mode="extension", notify_interval=interval)
            )
            keen, client = (
                served.keen,
                await stack.enter_async_context(_http_host(served.url, era, told.on_message)),
            )
        else:
            keen, client = await stack.enter_async_context(
                in_process(
                    tmp_path, era, mode="extension", notify_interval=interval, message_handler=told.on_message
                )
            )
        names = {t.name for t in (await client.list_tools()).tools}
        assert {"mcp__changing__echo", "mcp__changing__stats"} <= names, names
        if era == "stateless":
            # Its listen cannot be matched with its list: one opened before the round of the
            # connections would be told of them once more (the test below), so it waits.
            await _settled(keen)
            sub = await stack.enter_async_context(client.listen(tools_list_changed=True))

            async def events() -> None:
                # The SDK's client hands each event to the message handler too: counted there.
                async for _ in sub:
                    pass

            tg = await stack.enter_async_context(anyio.create_task_group())
            tg.start_soon(events)
            stack.callback(tg.cancel_scope.cancel)
        # The first approved call pins the server's tools (trust on first use).
        await client.read_resource("resource:///tool_descriptions?tools=mcp__changing__echo")
        assert not (await client.call_tool("mcp__changing__echo", {"text": "pin"})).is_error
        async with changer(upstream) as up:
            await up.call_tool("mutate", {"op": "add", "name": "sneaky"})
            await wait_until(lambda: keen.manager.view("changing").held, "the new tool held for review", 20)
            compared = keen.notifier.compared
            await wait_until(lambda: keen.notifier.compared > compared, "the round after the hold", 20)
            assert "mcp__changing__sneaky" not in {t.name for t in (await client.list_tools()).tools}
            assert told.methods == []
            # What the host does see change is told, once.
            await up.call_tool("mutate", {"op": "remove", "name": "stats"})
            await wait_until(lambda: told.methods, "a notice of the removed tool", 20)
            assert "mcp__changing__stats" not in {t.name for t in (await client.list_tools()).tools}
    assert len(told.methods) == 1, told.methods


async def test_keen_mcp_trust_in_another_process_tells_the_hosts(
    tmp_path: Path, upstream: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A tool held for review appears once ``keen mcp trust``, run as its own process, pins
    it: no upstream changed, yet a connected host is told (keen serve looks at the pin files
    every ``pins_poll`` seconds). A pins folder broken (a file where it should be) holds the
    server whole, and mended serves it again: each is told too."""
    write_upstream(
        tmp_path,
        extra={"changing": {"transport": "streamable_http", "url": upstream, "pinning": "quarantine"}},
    )
    monkeypatch.setenv("KEEN_HOME", str(tmp_path))
    told = Told()

    async def names() -> set[str]:
        return {t.name for t in (await client.list_tools()).tools}

    def keen(*args: str) -> None:
        run = keen_cli(*args, keen_home=tmp_path)
        assert run.code == 0, run

    async with contextlib.AsyncExitStack() as stack:
        served = await stack.enter_async_context(
            http_in_process(tmp_path, mode="extension", notify_interval=INTERVAL, pins_poll=INTERVAL)
        )
        client = await stack.enter_async_context(_http_host(served.url, "session", told.on_message))
        notifier = served.keen.notifier
        assert "mcp__changing__echo" in await names()
        # The first approved call pins the server's tools (trust on first use).
        await client.read_resource("resource:///tool_descriptions?tools=mcp__changing__echo")
        assert not (await client.call_tool("mcp__changing__echo", {"text": "pin"})).is_error
        async with changer(upstream) as up:
            await up.call_tool("mutate", {"op": "add", "name": "sneaky"})
        await wait_until(lambda: served.keen.manager.view("changing").held, "the new tool held", 20)
        # The change that held it poked a round: once none is pending, that round compared.
        await wait_until(lambda: not notifier.pending, "the round after the hold", 20)
        assert "mcp__changing__sneaky" not in await names()
        before = len(told.methods)
        # Accepted in another process, as a user does: the diff they read, then the trust.
        await anyio.to_thread.run_sync(keen, "mcp", "diff", "changing", "--json")
        await anyio.to_thread.run_sync(keen, "mcp", "trust", "changing", "--json")
        await wait_until(lambda: len(told.methods) > before, "a notice of the trusted tool", 20)
        assert "mcp__changing__sneaky" in await names()
        # A file where the pins folder should be: the pinned server is held whole.
        pins = tmp_path / "mcp" / "pins"
        pins.rename(tmp_path / "pins-aside")
        pins.write_text("not a folder")
        before = len(told.methods)
        await wait_until(lambda: len(told.methods) > before, "a notice of the held server", 20)
        assert not any(name.startswith("mcp__changing__") for name in await names())
        # Mended: served again, and told so.
        pins.unlink()
        (tmp_path / "pins-aside").rename(pins)
        before = len(told.methods)
        await wait_until(lambda: len(told.methods) > before, "a notice of the mended folder", 20)
        assert "mcp__changing__sneaky" in await names()


async def test_a_stateless_host_that_listens_after_a_change_not_compared_yet_is_told(
    home: Path, upstream: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A 2026-07-28 HTTP host lists, the upstream drops a tool, and the host opens its listen
    before the round that compares the drop. Its listen cannot be matched with its list, so
    it counts from the lists that round compared before: it is told (the SDK's listen driver
    does not list again, so a stream that started from the new list would leave the host
    with the old one for good)."""
    monkeypatch.setenv("KEEN_HOME", str(home))
    told = Told()

    async with contextlib.AsyncExitStack() as stack:
        served = await stack.enter_async_context(http_in_process(home, mode="extension"))
        keen = served.keen
        client = await stack.enter_async_context(_http_host(served.url, "stateless", told.on_message))
        await _settled(keen)
        gate = _Gate(keen.notifier)  # the round of the removal compares only once the listen is open
        assert "mcp__changing__stats" in {t.name for t in (await client.list_tools()).tools}
        async with changer(upstream) as up:
            await up.call_tool("mutate", {"op": "remove", "name": "stats"})
        await wait_until(lambda: keen.notifier.pending, "keen serve sees the removal", 20)
        sub = await stack.enter_async_context(client.listen(tools_list_changed=True))
        assert keen.notifier.pending, "the round of the removal compared before the listen: nothing tested"
        gate.open()

        async def events() -> None:
            async for _ in sub:  # the SDK's client hands each event to the message handler too
                pass

        tg = await stack.enter_async_context(anyio.create_task_group())
        tg.start_soon(events)
        stack.callback(tg.cancel_scope.cancel)
        await wait_until(lambda: told.methods, "a notice of the tool removed before the listen", 20)
    assert told.methods == ["notifications/tools/list_changed"], told.methods


async def test_a_get_stream_on_a_replica_that_never_saw_the_sessions_list_is_told(
    home: Path, upstream: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two replicas on one store. A handshake-era host lists its tools on replica A; the
    upstream drops a tool; the host's GET event stream reaches replica B before B's round
    compares the drop. B never served that session: it compares with what the store says
    its host saw, so it tells the stream (a stream that started from the new list would
    leave the host with the old one). After B's round, the same holds: the test of that
    is ``test_serve_replicas``, with real replicas and Redis."""
    monkeypatch.setenv("KEEN_HOME", str(home))
    store = MemoryStore()
    options: dict[str, Any] = {"store": store, "mode": "extension"}
    async with (
        http_in_process(home, **options) as a,
        http_in_process(home, **options) as b,
        httpx2.AsyncClient(timeout=30, verify=tls()) as http,
    ):
        for replica in (a, b):
            await wait_until(
                lambda r=replica: not r.keen.notifier.pending, "the round of the connections", 20
            )
        # B's round of the removal compares only once the stream is open.
        gate = _Gate(b.keen.notifier)
        opened = await http.post(a.url, headers=JSON_HEADERS, json=INITIALIZE)
        assert opened.status_code == 200, opened.text
        session = {"Mcp-Session-Id": opened.headers["mcp-session-id"], "MCP-Protocol-Version": "2025-11-25"}
        initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        await http.post(a.url, headers={**JSON_HEADERS, **session}, json=initialized)
        listed = await http.post(
            a.url,
            headers={**JSON_HEADERS, **session},
            json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
        )
        assert "mcp__changing__stats" in listed.text, listed.text
        async with changer(upstream) as up:
            await up.call_tool("mutate", {"op": "remove", "name": "stats"})
        await wait_until(lambda: b.keen.notifier.pending, "replica B sees the removal", 20)
        get = {"Accept": "text/event-stream", **session}
        async with http.stream("GET", b.url, headers=get) as stream:
            assert stream.status_code == 200
            assert b.keen.notifier.pending, (
                "B's round of the removal compared before the stream: nothing tested"
            )
            gate.open()
            with anyio.fail_after(20):
                async for line in stream.aiter_lines():
                    if "notifications/tools/list_changed" in line:
                        break


async def test_a_get_stream_host_is_told_once_and_recorded_as_told(
    home: Path, upstream: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The notice a host's GET stream wrote counts as told (in the store too): a later round
    with nothing new tells it nothing, nor does a new stream of the session (a reconnect),
    though the host never listed again."""
    monkeypatch.setenv("KEEN_HOME", str(home))
    store = MemoryStore()
    told = Told()
    sessions: set[str] = set()

    async def session_of(response: httpx2.Response) -> None:
        if sid := response.headers.get("mcp-session-id"):
            sessions.add(sid)

    async with (
        http_in_process(home, store=store, mode="extension", notify_interval=INTERVAL) as served,
        httpx2.AsyncClient(timeout=30, verify=tls(), event_hooks={"response": [session_of]}) as http,
        Client(
            streamable_http_client(served.url, http_client=http),
            mode="legacy",
            cache=None,
            message_handler=told.on_message,
        ) as client,
    ):
        keen = served.keen
        (sid,) = sessions
        scope = f"session:{sid}"
        assert "mcp__changing__stats" in {t.name for t in (await client.list_tools()).tools}
        await _settled(keen)
        before = len(told.methods)
        async with changer(upstream) as up:
            await up.call_tool("mutate", {"op": "remove", "name": "stats"})
        await wait_until(lambda: len(told.methods) > before, "a notice of the removed tool", 20)
        now = keen.served.listed()[1]

        async def recorded() -> bool:
            return (await store.seen([scope])).get(scope, {}).get("tools") == now

        await eventually(recorded, "the written notice recorded as what the host saw")
        compared = keen.notifier.compared
        keen.notifier.poke()
        await wait_until(lambda: keen.notifier.compared > compared, "a round with nothing new", 20)
        # A reconnect: a new GET stream of the session is not told again either.
        get = {"Accept": "text/event-stream", "Mcp-Session-Id": sid, "MCP-Protocol-Version": "2025-11-25"}
        rounds = keen.notifier.rounds
        async with http.stream("GET", served.url, headers=get) as stream:
            assert stream.status_code == 200
            # A round with the stream open tells nobody. (Asking whether a round was pending
            # right after the open failed under load: a late poke of the upstream's own
            # relisting is pending too, and tells nothing.)
            compared = keen.notifier.compared
            keen.notifier.poke()
            await wait_until(lambda: keen.notifier.compared > compared, "a round with the stream open", 20)
            assert keen.notifier.rounds == rounds, "the new stream counts the host as not told"
        assert len(told.methods) == before + 1, told.methods


async def test_a_get_stream_renews_the_record_of_what_its_host_saw(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A session kept alive by its GET stream alone keeps the record of what its host saw as
    long as the session lives, as its POSTs keep it (the store's clock is the test's)."""
    write_upstream(tmp_path)
    monkeypatch.setenv("KEEN_HOME", str(tmp_path))
    clock = StoreClock()
    store = MemoryStore(clock=clock)
    async with (
        http_in_process(tmp_path, store=store, mode="extension", session_ttl=100) as served,
        httpx2.AsyncClient(timeout=30, verify=tls()) as http,
    ):
        opened = await http.post(served.url, headers=JSON_HEADERS, json=INITIALIZE)
        sid = opened.headers["mcp-session-id"]
        session = {"Mcp-Session-Id": sid, "MCP-Protocol-Version": "2025-11-25"}
        listed = await http.post(
            served.url,
            headers={**JSON_HEADERS, **session},
            json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
        )
        assert listed.status_code == 200, listed.text
        scope = f"session:{sid}"
        assert "tools" in (await store.seen([scope]))[scope]
        clock.now += 80
        async with http.stream(
            "GET", served.url, headers={"Accept": "text/event-stream", **session}
        ) as stream:
            assert stream.status_code == 200
        clock.now += 40  # past the list's ttl, within the GET's
        assert "tools" in (await store.seen([scope])).get(scope, {}), "the record lapsed"
        assert await store.get_session(sid, 100) is not None


@contextlib.asynccontextmanager
async def _notifier(lists: dict[str, str], store: MemoryStore | None = None) -> AsyncIterator[ChangeNotifier]:
    """A :class:`ChangeNotifier` of ``lists`` (the test changes them), its rounds running,
    each comparing as soon as it is poked (no coalescing wait)."""

    async def at_once(_seconds: float) -> None:
        await anyio.lowlevel.checkpoint()

    notifier = ChangeNotifier(lambda: lists, sleep=at_once, store=store)
    async with anyio.create_task_group() as tg:
        tg.start_soon(notifier.run)
        await _round(notifier)  # its first snapshot is taken: what a stream opened now counts from
        yield notifier
        notifier.close()
        tg.cancel_scope.cancel()


async def _round(notifier: ChangeNotifier) -> None:
    """Poke a round and wait until it compared."""
    compared = notifier.compared
    notifier.poke()
    await wait_until(lambda: notifier.compared > compared, "a round", 20)


async def test_a_stream_left_unread_loses_no_kind_of_notice() -> None:
    """A host that leaves its GET stream unread through many rounds of one list's changes is
    still told of the other list's: one notice of each waits, none is dropped for room."""
    lists = {"tools": "t0", "resources": "r0", "resource_templates": "x", "prompts": "p0"}
    async with _notifier(lists) as notifier, notifier.open_stream("session:slow") as stream:
        assert stream is not None
        for i in range(20):
            lists["resources"] = f"r{i + 1}"
            await _round(notifier)
        lists["tools"] = "t1"
        await _round(notifier)
        with anyio.fail_after(20):
            waiting = [await anext(stream), await anext(stream)]
        assert {n.method for n in waiting} == {
            "notifications/resources/list_changed",
            "notifications/tools/list_changed",
        }
        assert [n.lists for n in waiting if n.method.startswith("notifications/tools")] == [{"tools": "t1"}]


async def test_a_notice_a_stream_never_wrote_is_told_on_the_hosts_next_stream() -> None:
    """The stream ends with its notice unwritten (the host went away, or the replica died
    before writing it): the host's next stream, here on another replica sharing the store,
    is told; once written, the stream after that is not."""
    store = MemoryStore()
    await store.create_session("h", {}, ttl=60)
    lists = {"tools": "t0"}
    async with _notifier(lists, store) as a, _notifier(lists, store) as b:
        await a.shown("session:h", "tools", "t0")
        async with a.open_stream("session:h") as dropped:
            assert dropped is not None
            lists["tools"] = "t1"
            await _round(a)
            await _round(b)  # B compared it too, with no stream of the host open
        async with b.open_stream("session:h") as stream:
            assert stream is not None
            with anyio.fail_after(20):
                notice = await anext(stream)
            assert notice.method == "notifications/tools/list_changed"
            await stream.sent(notice)
        assert not a.pending
        async with a.open_stream("session:h") as stream:
            assert stream is not None
            assert not a.pending, "told again of what the last stream wrote"


class _Gate:
    """Holds every round of ``notifier`` (from its next one) before it compares, until the
    test opens the gate: what a round must not compare yet stays pending without a timing."""

    def __init__(self, notifier: ChangeNotifier) -> None:
        self._opened = anyio.Event()
        notifier.sleep = self._wait

    async def _wait(self, _seconds: float) -> None:
        await self._opened.wait()

    def open(self) -> None:
        self._opened.set()


@contextlib.asynccontextmanager
async def _http_host(url: str, era: str, on_message: Any) -> AsyncIterator[Client]:
    """An SDK client of keen serve at ``url`` in ``era``, its messages to ``on_message``."""
    async with (
        httpx2.AsyncClient(timeout=30, verify=tls()) as http,
        Client(
            streamable_http_client(url, http_client=http),
            mode="legacy" if era == "session" else "auto",
            cache=None,
            message_handler=on_message,
        ) as client,
    ):
        yield client


@pytest.mark.parametrize("how", ["reset", "closed"])
async def test_a_notice_written_to_a_connection_the_host_broke_is_told_on_its_next_stream(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    """The host's GET connection is reset (or closed after it read all) before keen serve
    writes the notice: the write fails, and uvicorn says so only as a disconnect a few loop
    turns later. The notice must not be recorded as told (before, one turn was waited, and
    the host's next stream was never told of the change)."""
    write_upstream(tmp_path)
    monkeypatch.setenv("KEEN_HOME", str(tmp_path))
    async with (
        http_in_process(tmp_path, transports=basic_in_memory(), mode="extension") as served,
        httpx2.AsyncClient(timeout=30, verify=tls()) as http,
    ):
        keen = served.keen
        await _settled(keen)
        opened = await http.post(served.url, headers=JSON_HEADERS, json=INITIALIZE)
        sid = opened.headers["mcp-session-id"]
        session = {**JSON_HEADERS, "Mcp-Session-Id": sid, "MCP-Protocol-Version": "2025-11-25"}
        await http.post(
            served.url, headers=session, json={"jsonrpc": "2.0", "method": "notifications/initialized"}
        )
        await http.post(served.url, headers=session, json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
        scope = f"session:{sid}"
        before = (await keen.store.seen([scope]))[scope]["tools"]
        url = httpx2.URL(served.url)
        host = socket.create_connection((url.host, url.port or 80), timeout=20)
        with contextlib.closing(host):
            host.sendall(
                f"GET {url.raw_path.decode()} HTTP/1.1\r\nHost: {url.host}:{url.port}\r\n"
                f"Accept: text/event-stream\r\nMcp-Session-Id: {sid}\r\n"
                "MCP-Protocol-Version: 2025-11-25\r\n\r\n".encode()
            )
            # The stream's headers reached the host: its stream is open and written to.
            head = await anyio.to_thread.run_sync(host.recv, 65536)
            assert head.startswith(b"HTTP/1.1 200"), head
            (stream,) = list(keen.notifier._streams)  # pyright: ignore[reportPrivateUsage]
            if how == "reset":
                host.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        # Closed before keen serve writes the notice (what a round does for a changed list).
        stream.put("tools", {"tools": "changed"})
        await wait_until(lambda: not keen.notifier._streams, "the stream ended", 20)  # pyright: ignore[reportPrivateUsage]
        after = (await keen.store.seen([scope]))[scope]["tools"]
        assert (before != "changed", after) == (True, before), "recorded as told, so never told again"
