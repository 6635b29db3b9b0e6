"""``keen serve`` as a real subprocess, and MCP clients for it in either protocol era.

``KeenServeProcess`` runs ``keen serve --transport http`` on a free 127.0.0.1 port in front
of ``tests/servers/basic_stdio.py`` and stops it (SIGTERM, then SIGKILL) afterwards.
``connect(target, era)`` opens an SDK ``Client``: ``target`` is a running process (HTTP)
or ``"stdio"`` (the client launches its own ``keen serve`` over stdio); ``era`` is
``"session"`` (2025-11-25 handshake, ``Mcp-Session-Id``) or ``"stateless"`` (2026-07-28).
``in_process(home, era)`` serves the same ``KeenServer`` from this process to an SDK client
over the SDK's in-memory transport: for what ``keen serve`` decides and says, where the
process and its transport are not what the test shows (its clock can then be the test's).
``http_in_process(home)`` serves it over Streamable HTTP on a free 127.0.0.1 port from this
event loop, as ``keen serve --transport http`` does (``keen.serve.serve_http``: the same app,
bearer check and caller scopes), and ``http_in_thread(home)`` from a thread of its own, for
tests that make blocking requests: where the process adds nothing to what a test shows, and
so that its store's clock can be the test's (``MemoryStore(clock=...)``) instead of a TTL
waited out in real time.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import signal
import ssl
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import httpx2
from mcp.client.client import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from conftest import peer, stdio_server
from helpers.forkserver import forked
from helpers.loopback import free_port, stop, wait_listening

if TYPE_CHECKING:
    from keen.serve import KeenServer, Store

__all__ = [
    "ERAS",
    "INITIALIZE",
    "JSON_HEADERS",
    "MODERN",
    "KeenServeProcess",
    "PostsAnswered",
    "ServedHttp",
    "StoreClock",
    "basic_in_memory",
    "connect",
    "free_port",
    "http_in_process",
    "http_in_thread",
    "in_process",
    "read_json",
    "serve_env",
    "stdio_params",
    "tls",
    "write_everything",
    "write_upstream",
]

ROOT = Path(__file__).resolve().parents[2]
KEEN = str(Path(sys.executable).parent / "keen")
BASIC = ROOT / "tests" / "servers" / "basic_stdio.py"
MODERN = "2026-07-28"
ERAS = ("session", "stateless")
JSON_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
"""What a raw JSON-RPC host sends with each POST to ``keen serve``'s streamable HTTP endpoint."""
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "keen-tests", "version": "1"},
    },
}
"""A raw handshake-era (2025-11-25) ``initialize`` request."""


@functools.cache
def tls() -> ssl.SSLContext:
    """httpx2's default TLS context, built once per process: every client built without one
    loads the CA bundle again (about 70 ms of CPU), and the suite builds hundreds (their
    requests go to 127.0.0.1 over plain HTTP; verification stays as httpx2 sets it)."""
    return httpx2.create_ssl_context()


def write_upstream(home: Path, *, extra_tools: int = 2, extra: dict[str, Any] | None = None) -> Path:
    """``$home/mcp/configs.json`` with ``basic`` (``basic_stdio.py``) and any ``extra`` servers."""
    path = home / "mcp" / "configs.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    servers: dict[str, Any] = {
        "basic": stdio_server("basic_stdio.py", "--tools", str(extra_tools)),
    }
    servers.update(extra or {})
    path.write_text(json.dumps({"version": 1, "servers": servers}))
    return path


def write_everything(home: Path) -> Path:
    """``home`` with ``basic`` and ``everything`` (server-everything, the npm reference
    server, over stdio: prompts, resources, templates, a progress-reporting tool) upstream."""
    everything = {"transport": "stdio", "command": peer("node", "mcp-server-everything"), "args": ["stdio"]}
    write_upstream(home, extra={"everything": everything})
    return home


def serve_env(home: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KEEN_SERVE_TOKEN")}
    env.update(KEEN_HOME=str(home), **extra)
    return env


def stdio_params(home: Path, serve_args: list[str] | None = None) -> StdioServerParameters:
    """How an SDK client starts ``keen serve --transport stdio`` for ``home`` (``serve_args``,
    default ``--mode extension``): forked from the worker's warm process (``helpers.forkserver``),
    the same console script on the client's pipes without the imports of a new interpreter."""
    command, *forked_args = forked(KEEN)
    return StdioServerParameters(
        command=command,
        args=[*forked_args, "serve", "--transport", "stdio", *(serve_args or ["--mode", "extension"])],
        env=serve_env(home),
    )


@dataclass
class KeenServeProcess:
    """``keen serve --transport http`` in a subprocess (see the module docstring)."""

    home: Path
    args: list[str] = field(default_factory=lambda: ["--mode", "extension"])
    env: dict[str, str] = field(default_factory=dict)
    port: int = 0
    proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    def start(self, timeout: float = 30.0) -> KeenServeProcess:
        self.port = self.port or free_port()
        log = open(self.home / f"serve-{self.port}.log", "ab")  # noqa: SIM115
        self.proc = subprocess.Popen(
            [*forked(KEEN), "serve", "--transport", "http", "--port", str(self.port), *self.args],
            env=serve_env(self.home, **self.env),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            start_new_session=True,
        )
        log.close()
        try:
            wait_listening(self.port, self.proc, "keen serve", timeout=timeout, log=self.log)
        except RuntimeError:
            self.stop()
            raise
        return self

    def log(self) -> str:
        path = self.home / f"serve-{self.port}.log"
        return path.read_text(errors="replace")[-2000:] if path.exists() else ""

    def kill(self) -> None:
        """SIGKILL the process group at once (a crashed replica)."""
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)

    def stop(self) -> None:
        if self.proc is not None:
            stop(self.proc, group=True, grace=15)

    def __enter__(self) -> KeenServeProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class PostsAnswered:
    """The POSTs an HTTP client sent and the responses to them it has read whole (httpx2
    event hooks; pass to :func:`connect`). A test that cancels a call waits for
    :meth:`all_read` before it closes the client: a reply that reaches the SDK's HTTP client
    after it closed makes it raise ``ClosedResourceError``/``BrokenResourceError`` from its
    exit, a race of the client's own teardown, not of the server."""

    def __init__(self) -> None:
        self.sent = 0
        self.read = 0

    async def on_request(self, request: httpx2.Request) -> None:
        if request.method == "POST":
            self.sent += 1

    async def on_response(self, response: httpx2.Response) -> None:
        if response.request.method == "POST":
            await response.aread()  # the whole reply, before the SDK takes it
            self.read += 1

    def all_read(self) -> bool:
        return self.read >= self.sent


@contextlib.asynccontextmanager
async def connect(
    target: KeenServeProcess | ServedHttp | str,
    era: str,
    *,
    token: str | None = None,
    home: Path | None = None,
    serve_args: list[str] | None = None,
    url: str | None = None,
    posts: PostsAnswered | None = None,
) -> AsyncIterator[Client]:
    """An SDK client of ``keen serve`` in ``era`` (``"session"`` or ``"stateless"``);
    ``posts`` counts its POSTs and their replies (HTTP only)."""
    # The stateless era through the real negotiation: server/discover, then 2026-07-28.
    mode = "legacy" if era == "session" else "auto"
    if not isinstance(target, str) or url is not None:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        endpoint = url or ("" if isinstance(target, str) else target.url)
        hooks = {} if posts is None else {"request": [posts.on_request], "response": [posts.on_response]}
        async with (
            httpx2.AsyncClient(headers=headers, timeout=30, verify=tls(), event_hooks=hooks) as http,
            Client(streamable_http_client(endpoint, http_client=http), mode=mode, cache=None) as client,
        ):
            _check_era(client, era)
            yield client
        return
    assert target == "stdio" and home is not None
    async with Client(stdio_params(home, serve_args), mode=mode, cache=None) as client:
        _check_era(client, era)
        yield client


def basic_in_memory(extra_tools: int = 2) -> dict[str, Any]:
    """``transports`` for :func:`in_process` that reach the ``basic`` server of
    :func:`write_upstream` in this process (``tests/servers/basic_stdio.py``'s own ``build``,
    over memory streams) instead of a process per server: for tests of what keen serve says,
    where the upstream's process shows nothing. Its ``die`` would end this process: not for
    tests that call it."""
    from keen.mcp.connection.memory import in_memory_transport
    from servers.basic_stdio import build

    return {"basic": in_memory_transport(build(extra_tools))}


def _keen_server(home: Path, options: dict[str, Any], transports: dict[str, Any] | None = None) -> KeenServer:
    """``keen serve``'s server for ``home`` as the CLI builds it (keen.cli.serve_cmd);
    ``options`` go to ``KeenServer``, ``transports`` to its ``Manager`` (configured servers
    reached another way: ``keen.mcp.connection.memory.in_memory_transport``)."""
    from keen import paths
    from keen.mcp.manager import Manager
    from keen.serve import KeenServer
    from keen.trust import PinGuard, PinStore

    if os.environ.get("KEEN_HOME") != str(home):
        raise AssertionError(f"set KEEN_HOME to {home} first (monkeypatch.setenv)")
    # The pins' folder rooted at start, as `keen serve` roots it (keen.cli.serve_cmd): a
    # store without a root would read KEEN_HOME at every call, which the real server never does.
    pins = PinGuard(PinStore(paths.pins_dir()))
    manager = Manager(home / "mcp" / "configs.json", trust=pins, transports=transports)
    return KeenServer(manager, **options)


class StoreClock:
    """A store's clock (``MemoryStore(clock=...)``, ``RedisStore(clock=...)``), in seconds:
    ``now``, moved by the test instead of a TTL or window waited out in real time."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@dataclass
class ServedHttp:
    """``keen serve``'s HTTP front served from this process (:func:`http_in_process`,
    :func:`http_in_thread`): ``url`` is its endpoint, ``keen`` the server behind it."""

    home: Path
    keen: KeenServer
    url: str


@contextlib.asynccontextmanager
async def http_in_process(
    home: Path,
    *,
    tokens: tuple[str, ...] = (),
    store: Store | None = None,
    transports: dict[str, Any] | None = None,
    **options: Any,
) -> AsyncIterator[ServedHttp]:
    """``keen serve --transport http`` for ``home`` in this event loop: ``keen.serve.serve_http``
    on a free 127.0.0.1 port, ``tokens`` its bearer tokens (as ``KEEN_SERVE_TOKENS``), ``store``
    its state (default memory; ``MemoryStore(clock=...)`` moves its time), ``transports`` for
    its ``Manager`` (configured servers run in this process: :func:`basic_in_memory`),
    ``options`` for ``KeenServer`` (``mode``, ``auth_ttl``, ``fetch_limit``...). Yields once it
    listens and its upstream servers' first connection attempts ended; on exit it is
    cancelled and shuts down as a ``keen serve`` given SIGTERM does. ``KEEN_HOME`` must be
    ``home``."""
    from keen.serve import HttpSecurity, serve_http

    keen = _keen_server(home, {**options, "store": store}, transports)
    ready = anyio.Event()
    urls: list[str] = []

    def on_ready(url: str) -> None:
        urls.append(url)
        ready.set()

    async def serve() -> None:
        try:
            await serve_http(keen, HttpSecurity(tokens=list(tokens)), 0, on_ready=on_ready)
        finally:
            ready.set()  # a start that failed ends the wait below, which says so

    async with anyio.create_task_group() as tg:
        tg.start_soon(serve)
        with anyio.fail_after(60):
            await ready.wait()
        if not urls:
            raise RuntimeError("keen serve (in this process) stopped before it listened")
        # Its upstream servers' first connection attempts ended: what a test asks first finds
        # their tools, as a keen serve process started before the test does by then.
        if not await keen.manager.wait_ready(60):
            raise RuntimeError(f"keen serve's upstream servers did not settle: {keen.manager.servers()}")
        yield ServedHttp(home, keen, urls[0])
        tg.cancel_scope.cancel()


@contextlib.contextmanager
def http_in_thread(
    home: Path, *, tokens: tuple[str, ...] = (), store: Store | None = None, **options: Any
) -> Iterator[ServedHttp]:
    """:func:`http_in_process` in a thread with its own event loop, for a test that makes
    blocking requests (``httpx2.post``) from its own; stopped on exit, and what failed in
    the thread raised here."""
    started = threading.Event()
    stopping = threading.Event()
    served: list[ServedHttp] = []
    failed: list[BaseException] = []

    async def main() -> None:
        async with http_in_process(home, tokens=tokens, store=store, **options) as server:
            served.append(server)
            started.set()
            await anyio.to_thread.run_sync(stopping.wait)

    def run() -> None:
        try:
            anyio.run(main)
        except BaseException as exc:  # raised again in the test's thread below
            failed.append(exc)
        finally:
            started.set()

    thread = threading.Thread(target=run, name="keen-serve-http", daemon=True)
    thread.start()
    started.wait(90)
    try:
        if not served:
            raise RuntimeError("keen serve (in a thread) did not listen") from (failed or [None])[0]
        yield served[0]
    finally:
        stopping.set()
        thread.join(60)
    if thread.is_alive():  # still serving: its port and upstreams would outlive the test
        raise RuntimeError("keen serve (in a thread) did not stop within 60 s")
    if failed:
        raise RuntimeError("keen serve (in a thread) failed") from failed[0]


@contextlib.asynccontextmanager
async def in_process(
    home: Path,
    era: str = "session",
    *,
    message_handler: Any = None,
    transports: dict[str, Any] | None = None,
    **options: Any,
) -> AsyncIterator[tuple[KeenServer, Client]]:
    """``keen serve``'s server for ``home`` (``$home/mcp/configs.json``) in this process and an
    SDK client of it in ``era`` over memory streams; ``options`` go to ``KeenServer`` (``mode``,
    ``ready_wait``...), ``message_handler`` to the client (the notifications it gets),
    ``transports`` to its ``Manager`` (:func:`basic_in_memory`).
    ``KEEN_HOME`` must already be ``home`` (``monkeypatch.setenv``): the audit log and skills
    go where a ``keen serve`` started there puts them."""
    keen = _keen_server(home, options, transports)
    mode = "legacy" if era == "session" else "auto"
    async with keen, Client(keen.server, mode=mode, cache=None, message_handler=message_handler) as client:
        _check_era(client, era)
        yield keen, client


def _check_era(client: Client, era: str) -> None:
    expected = MODERN if era == "stateless" else "2025-11-25"
    if client.protocol_version != expected:
        raise AssertionError(f"negotiated {client.protocol_version}, wanted {expected} ({era} era)")


def read_json(result: Any) -> Any:
    """The JSON body of a ``ReadResourceResult`` or a ``CallToolResult`` (first text block)."""
    items = getattr(result, "contents", None) or getattr(result, "content", None) or []
    return json.loads(items[0].text)
