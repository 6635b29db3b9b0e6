"""Two ``keen serve`` replicas sharing a real Redis: a session, its authorizations and what
its host saw of the lists live in the store, so any replica serves them (and tells its event
stream of a change it did not see), and one replica dying loses nothing."""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp_types as mt
import pytest
from mcp.client.client import Client
from mcp.client.streamable_http import streamable_http_client

from helpers.changing import changing_http, wait_until
from helpers.loopback import redis_server
from helpers.serve import MODERN, KeenServeProcess, read_json, tls, write_upstream

pytestmark = pytest.mark.anyio
TOKEN = "replica-token-0123456789"
HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


ENV = {"KEEN_SERVE_TOKEN": TOKEN}


@pytest.fixture(scope="module")
def survivor(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KeenServeProcess]:
    """Redis and replica B, once for the module: each test kills only A (B is the replica
    that survives, and nothing a test leaves in the store is seen by the next: every test
    opens its own session)."""
    home = tmp_path_factory.mktemp("replicas")
    write_upstream(home)
    with redis_server(home) as url, KeenServeProcess(home, _args(url), ENV) as b:
        yield b


def _args(url: str) -> list[str]:
    return ["--mode", "extension", "--store", url]


@pytest.fixture
def replicas(survivor: KeenServeProcess) -> Iterator[tuple[KeenServeProcess, KeenServeProcess]]:
    """A new replica A beside the module's B, on the same Redis (A is killed by the test)."""
    url = survivor.args[survivor.args.index("--store") + 1]
    with KeenServeProcess(survivor.home, _args(url), ENV) as a:
        yield a, survivor


def _rpc(
    http: httpx2.Client, url: str, method: str, params: dict, *, sid: str | None, rid: int
) -> httpx2.Response:
    headers = {**HEADERS, "Authorization": f"Bearer {TOKEN}", "MCP-Protocol-Version": "2025-11-25"}
    if sid:
        headers["Mcp-Session-Id"] = sid
    return http.post(
        url, headers=headers, json={"jsonrpc": "2.0", "id": rid, "method": method, "params": params}
    )


def test_session_moves_between_replicas_and_survives_one(replicas) -> None:
    a, b = replicas
    with httpx2.Client(timeout=30, verify=tls()) as http:
        init = _rpc(
            http,
            a.url,
            "initialize",
            {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "t", "version": "1"},
            },
            sid=None,
            rid=1,
        )
        assert init.status_code == 200, init.text
        sid = init.headers["mcp-session-id"]
        # The description is fetched through A ...
        read = _rpc(
            http,
            a.url,
            "resources/read",
            {"uri": "resource:///tool_descriptions?tools=mcp__basic__echo"},
            sid=sid,
            rid=2,
        )
        assert "mcp__basic__echo" in read.json()["result"]["contents"][0]["text"]
        # ... and authorizes the call through B.
        call = _rpc(
            http,
            b.url,
            "tools/call",
            {"name": "mcp__basic__echo", "arguments": {"text": "via b"}},
            sid=sid,
            rid=3,
        )
        assert call.json()["result"]["content"][0]["text"] == "via b"
        # Not fetched anywhere: refused on both.
        refused = _rpc(
            http,
            b.url,
            "tools/call",
            {"name": "mcp__basic__add", "arguments": {"a": 1, "b": 2}},
            sid=sid,
            rid=4,
        )
        assert refused.json()["result"]["isError"] is True
        a.kill()
        # A is gone; the session goes on through B.
        again = _rpc(
            http,
            b.url,
            "tools/call",
            {"name": "mcp__basic__echo", "arguments": {"text": "still"}},
            sid=sid,
            rid=5,
        )
        assert again.json()["result"]["content"][0]["text"] == "still"
        # Ending the session on B ends it everywhere.
        assert (
            http.delete(
                b.url, headers={"Authorization": f"Bearer {TOKEN}", "Mcp-Session-Id": sid}
            ).status_code
            == 200
        )
        gone = _rpc(
            http,
            b.url,
            "tools/call",
            {"name": "mcp__basic__echo", "arguments": {"text": "x"}},
            sid=sid,
            rid=6,
        )
        assert gone.status_code == 404


class _RoundRobin:
    """A load balancer inside the client: each request goes to the next live replica."""

    def __init__(self, replicas: tuple[KeenServeProcess, ...]) -> None:
        self.replicas = replicas
        self.cycle = itertools.cycle(replicas)
        self.seen: list[int] = []

    async def route(self, request: httpx2.Request) -> None:
        for _ in self.replicas:
            target = next(self.cycle)
            if target.proc is not None and target.proc.poll() is None:
                request.url = request.url.copy_with(port=target.port)
                self.seen.append(target.port)
                return


@pytest.mark.parametrize("mode", ["legacy", MODERN])
async def test_sdk_client_behind_round_robin_survives_a_replica(replicas, mode: str) -> None:
    a, b = replicas
    balancer = _RoundRobin((a, b))
    async with (
        httpx2.AsyncClient(
            headers={"Authorization": f"Bearer {TOKEN}"},
            timeout=30,
            event_hooks={"request": [balancer.route]},
            verify=tls(),
        ) as http,
        Client(streamable_http_client(a.url, http_client=http), mode=mode, cache=None) as client,
    ):
        await client.read_resource("resource:///tool_descriptions?tools=mcp__basic__add")
        for i in range(4):
            result = await client.call_tool("mcp__basic__add", {"a": i, "b": 1})
            assert not result.is_error, read_json(result)
        assert {a.port, b.port} <= set(balancer.seen)
        a.kill()
        for i in range(4):
            result = await client.call_tool("mcp__basic__add", {"a": i, "b": 2})
            assert not result.is_error and result.content[0].text == str(i + 2)


class _Told:
    """An SDK client's ``notifications/tools/list_changed``, counted as they come."""

    def __init__(self) -> None:
        self.count = 0

    async def on_message(self, message: Any) -> None:
        if isinstance(getattr(message, "root", message), mt.ToolListChangedNotification):
            self.count += 1


@contextlib.asynccontextmanager
async def _host(url: str, told: _Told, hooks: dict[str, Any] | None = None) -> AsyncIterator[Client]:
    """A handshake-era (2025-11-25) SDK client of ``url``; ``hooks`` are its HTTP client's."""
    async with (
        httpx2.AsyncClient(
            headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30, verify=tls(), event_hooks=hooks or {}
        ) as http,
        Client(
            streamable_http_client(url, http_client=http),
            mode="legacy",
            cache=None,
            message_handler=told.on_message,
        ) as client,
    ):
        yield client


async def _names(client: Client) -> set[str]:
    return {t.name for t in (await client.list_tools()).tools}


async def test_a_get_stream_that_reaches_another_replica_after_a_change_is_told(tmp_path: Path) -> None:
    """A host lists its tools on replica A; an upstream tool goes; replica B tells a host of
    its own (its round compared the change), and only then does the first host's ``GET``
    event stream reach B. B never served that session, but the store holds what its host
    saw: the stream is told, and the host lists again."""
    with (
        changing_http(tmp_path) as upstream,
        redis_server(tmp_path) as url,
    ):
        write_upstream(tmp_path, extra={"changing": {"transport": "streamable_http", "url": upstream}})
        args = [*_args(url), "--notify-interval", "0.3"]
        with KeenServeProcess(tmp_path, args, ENV) as a, KeenServeProcess(tmp_path, args, ENV) as b:
            opened = anyio.Event()

            answered: dict[str, set[int | None]] = {"GET": set(), "POST": set()}

            async def streams_to_b(request: httpx2.Request) -> None:
                # The load balancer: POSTs go to A; the GET event stream to B, once let through.
                if request.method == "GET":
                    await opened.wait()
                    request.url = request.url.copy_with(port=b.port)

            async def replied(response: httpx2.Response) -> None:
                if response.is_success and response.request.method in answered:
                    answered[response.request.method].add(response.request.url.port)

            told, witnessed = _Told(), _Told()
            hooks = {"request": [streams_to_b], "response": [replied]}
            async with (
                _host(a.url, told, hooks) as client,
                _host(b.url, witnessed) as witness,
                Client(upstream, cache=None) as changer,
            ):
                for listing in (client, witness):  # each replica connected to the upstream
                    for _ in range(200):
                        if "mcp__changing__stats" in await _names(listing):
                            break
                        await anyio.sleep(0.1)
                    else:
                        raise AssertionError("the upstream's tools were never listed")
                await changer.call_tool("mutate", {"op": "remove", "name": "stats"})
                await wait_until(lambda: witnessed.count, "B telling its own host of the change", 20)
                assert told.count == 0  # its stream is not open anywhere yet
                opened.set()
                await wait_until(lambda: told.count, "the stream on B telling the host", 20)
                assert "mcp__changing__stats" not in await _names(client)
                # The routes held: the host's lists came from A only, its stream from B only.
                assert answered == {"GET": {b.port}, "POST": {a.port}}, answered
