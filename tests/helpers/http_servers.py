"""In-process FastMCP servers over Streamable HTTP on 127.0.0.1, for tests.

Each server runs uvicorn in a background thread with its own event loop, so it works
the same from sync and async tests and never shares the test's loop. Typical use::

    with serve_http(make_basic_server(), api_key="s3cret") as srv:
        srv.url            # "http://127.0.0.1:<port>/mcp"
        srv.requests       # every HTTP request seen (method, path, headers)
        srv.stop()         # the server goes away: the port refuses connections
        srv.start()        # and comes back on the same port (fresh MCP sessions)

``api_key`` protection answers 401 with ``WWW-Authenticate: Bearer`` when the header
``api_key_header`` is missing or is not ``f"{api_key_scheme} {api_key}"`` (the raw key
when the scheme is empty). ``make_basic_server`` has the same tools as
``tests/servers/basic_stdio.py`` except ``die`` (it would kill the test process);
``list_page_size`` makes ``tools/list`` paginate with ``nextCursor``.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio
import uvicorn
from fastmcp import FastMCP
from fastmcp.exceptions import ToolError
from mcp_types import ToolAnnotations
from starlette.types import ASGIApp, Receive, Scope, Send

__all__ = ["HttpServer", "RecordedRequest", "make_basic_server", "make_echo_server", "serve_http"]

_START_TIMEOUT = 15.0
_STOP_TIMEOUT = 10.0


def make_echo_server(name: str, tool: str, description: str) -> FastMCP:
    """A FastMCP server ``name`` with ``echo(text)`` and ``tool()``, whose calls the test's
    middleware answers (its own body, returning ``"unreachable"``, never runs)."""
    server = FastMCP(name)

    @server.tool(description="Return the text unchanged.")
    def echo(text: str) -> str:
        return text

    def answered() -> str:
        return "unreachable"

    server.tool(name=tool, description=description)(answered)
    return server


def make_basic_server(
    n_extra_tools: int = 0, list_page_size: int | None = None, instructions: str | None = None
) -> FastMCP:
    """A FastMCP server named ``basic-http`` with ``echo``, ``add``, ``fail``, ``sleep``, ``env``,
    ``cwd``, ``pid`` and ``n_extra_tools`` generated ``extra_NNNN(query, limit=10)`` tools."""
    server = FastMCP("basic-http", instructions=instructions, list_page_size=list_page_size)

    @server.tool(description="Return the text unchanged.", annotations=ToolAnnotations(read_only_hint=True))
    def echo(text: str) -> str:
        return text

    @server.tool(description="Add two integers.", annotations=ToolAnnotations(read_only_hint=True))
    def add(a: int, b: int) -> int:
        return a + b

    @server.tool(description="Fail on purpose: an isError result whose text is the message.")
    def fail(message: str) -> str:
        raise ToolError(message)

    @server.tool(description="Sleep for the given number of seconds, then return 'slept <seconds>'.")
    async def sleep(seconds: float) -> str:
        await anyio.sleep(seconds)
        return f"slept {seconds}"

    @server.tool(description="Value of an environment variable, empty if unset.")
    def env(name: str) -> str:
        return os.environ.get(name, "")

    @server.tool(description="The server process's working directory.")
    def cwd() -> str:
        return os.getcwd()

    @server.tool(description="The server's process id.")
    def pid() -> int:
        return os.getpid()

    filler = "Generated tool for size and pagination tests. " * 5
    for index in range(n_extra_tools):
        server.tool(_extra_tool(index), name=f"extra_{index:04d}", description=f"{filler}Number {index}.")
    return server


def _extra_tool(index: int) -> Callable[[str, int], str]:
    def extra(query: str, limit: int = 10) -> str:
        return f"extra_{index:04d}:{query}:{limit}"

    return extra


@dataclass(frozen=True)
class RecordedRequest:
    """One HTTP request the server received; header names are lower-case."""

    method: str
    path: str
    headers: dict[str, str]
    query: str = ""
    """The query string as sent (``team=My%20Team``)."""


class _RequireApiKey:
    """ASGI middleware: record every request; 401 unless ``header`` carries ``expected``."""

    def __init__(self, app: ASGIApp, owner: HttpServer) -> None:
        self._app = app
        self._owner = owner

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        self._owner.requests.append(
            RecordedRequest(scope["method"], scope["path"], headers, scope["query_string"].decode("latin-1"))
        )
        expected = self._owner.expected_auth_value
        if expected is not None and headers.get(self._owner.api_key_header.lower()) != expected:
            body = json.dumps({"error": "invalid_token", "error_description": "missing or wrong API key"})
            await send(
                {
                    "type": "http.response.start",
                    "status": 401,
                    "headers": [
                        (b"content-type", b"application/json"),
                        (b"www-authenticate", b'Bearer error="invalid_token"'),
                    ],
                }
            )
            await send({"type": "http.response.body", "body": body.encode()})
            return
        await self._app(scope, receive, send)


@dataclass
class HttpServer:
    """A FastMCP server served on ``127.0.0.1:<port>`` by uvicorn in a background thread."""

    mcp: FastMCP
    api_key: str | None = None
    api_key_header: str = "Authorization"
    api_key_scheme: str = "Bearer"
    path: str = "/mcp"
    transport: str = "http"
    """``http`` (Streamable HTTP) or ``sse`` (the deprecated HTTP+SSE transport; path ``/sse``)."""
    app_options: dict[str, Any] = field(default_factory=dict[str, Any])
    """More keyword arguments of FastMCP's ``http_app`` (``json_response=True``)."""
    wrap: Callable[[ASGIApp], ASGIApp] | None = None
    """ASGI middleware around the MCP app, inside the API-key check (gzip, a handshake-only era)."""
    port: int = 0
    requests: list[RecordedRequest] = field(default_factory=list)
    _server: uvicorn.Server | None = field(default=None, repr=False)
    _thread: threading.Thread | None = field(default=None, repr=False)
    _error: list[BaseException] = field(default_factory=list, repr=False)
    # While stopped, a bound socket that does not listen keeps the port: connections are
    # refused, yet no other process (a parallel test worker's client or server) can take
    # the port before start() serves on it again.
    _holder: socket.socket | None = field(default=None, repr=False)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}{self.path}"

    @property
    def expected_auth_value(self) -> str | None:
        if self.api_key is None:
            return None
        return f"{self.api_key_scheme} {self.api_key}" if self.api_key_scheme else self.api_key

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def __str__(self) -> str:
        return self.url

    def start(self) -> None:
        """Serve (again) on ``port`` (a free ephemeral port the first time); returns once it accepts."""
        if self.running:
            raise RuntimeError("the server is already running")
        sock, self._holder = self._holder, None
        if sock is None:
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(("127.0.0.1", self.port))
        sock.listen(128)
        sock.set_inheritable(True)
        self.port = sock.getsockname()[1]
        # A fresh Starlette app per start: the MCP session manager runs once per instance.
        app: ASGIApp = self.mcp.http_app(path=self.path, transport=self.transport, **self.app_options)  # type: ignore[arg-type]
        if self.wrap is not None:
            app = self.wrap(app)
        app = _RequireApiKey(app, self)
        config = uvicorn.Config(
            app, log_level="warning", lifespan="on", timeout_graceful_shutdown=1, ws="none"
        )
        server = uvicorn.Server(config)
        self._server = server
        self._error.clear()

        def run() -> None:
            try:
                asyncio.run(server.serve(sockets=[sock]))
            except BaseException as exc:  # surfaced by start()/stop() in the test thread
                self._error.append(exc)
            finally:
                # Hand the port to a holder as soon as the listener closes (see _holder).
                holder = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                sock.close()
                try:
                    holder.bind(("127.0.0.1", self.port))
                    self._holder = holder
                except OSError:
                    holder.close()

        self._thread = threading.Thread(target=run, name=f"uvicorn-{self.port}", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + _START_TIMEOUT
        while not server.started:
            if self._error or not self._thread.is_alive():
                raise RuntimeError(f"the test HTTP server failed to start: {self._error!r}")
            if time.monotonic() > deadline:
                self.stop()
                raise TimeoutError(f"the test HTTP server did not start within {_START_TIMEOUT}s")
            time.sleep(0.01)
        with socket.create_connection(("127.0.0.1", self.port), timeout=_START_TIMEOUT):
            pass

    def stop(self) -> None:
        """Stop serving and wait for the thread; afterwards the port refuses connections."""
        server, thread = self._server, self._thread
        if server is None or thread is None:
            return
        server.should_exit = True
        thread.join(_STOP_TIMEOUT)
        if thread.is_alive():
            server.force_exit = True
            thread.join(_STOP_TIMEOUT)
        self._server = None
        self._thread = None
        if thread.is_alive():
            raise RuntimeError(f"the test HTTP server on port {self.port} did not stop")

    def close(self) -> None:
        """Stop serving and give the port up."""
        self.stop()
        holder, self._holder = self._holder, None
        if holder is not None:
            holder.close()


@contextmanager
def serve_http(
    mcp: FastMCP,
    *,
    api_key: str | None = None,
    api_key_header: str = "Authorization",
    api_key_scheme: str = "Bearer",
    path: str = "/mcp",
    transport: str = "http",
    app_options: dict[str, Any] | None = None,
    wrap: Callable[[ASGIApp], ASGIApp] | None = None,
) -> Iterator[HttpServer]:
    """Run ``mcp`` over Streamable HTTP (``transport="sse"``: HTTP+SSE, serve it at ``path="/sse"``)
    on 127.0.0.1 for the ``with`` block; see the module doc and :class:`HttpServer`'s
    ``app_options`` and ``wrap``."""
    server = HttpServer(
        mcp,
        api_key=api_key,
        api_key_header=api_key_header,
        api_key_scheme=api_key_scheme,
        path=path,
        transport=transport,
        app_options=app_options or {},
        wrap=wrap,
    )
    server.start()
    try:
        yield server
    finally:
        server.close()
