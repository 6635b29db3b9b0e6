"""Run ``keen serve`` over stdio or Streamable HTTP until stopped."""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import signal
import socket
import sys
from collections.abc import Awaitable, Callable

import anyio
import uvicorn

from keen._terminal import STILL_STOPPING
from keen.serve._shutdown import CleanServer, InFlight
from keen.serve._stdin import claimed_stdin, host_streams
from keen.serve.http import HttpSecurity, build_app
from keen.serve.server import KeenServer

__all__ = ["serve_http", "serve_stdio"]

logger = logging.getLogger("keen.serve")


async def serve_stdio(keen: KeenServer) -> None:
    """Serve one host over this process's stdin/stdout (both protocol eras; the SDK decides
    which from the first message). Returns when the host closes stdin; cancellable (Ctrl-C,
    SIGTERM) while the host keeps it open (keen.serve._stdin).

    Raises:
        KeyboardInterrupt: after Ctrl-C, once every session is closed.
    """

    async def serve() -> None:
        with claimed_stdin() as lines:
            async with keen, host_streams(lines) as (read, write):
                await keen.server.run(read, write, keen.server.create_initialization_options())

    await _sigint_cancels(serve)


async def _sigint_cancels(fn: Callable[[], Awaitable[None]]) -> None:
    """Run ``fn``; Ctrl-C cancels it through a cancel scope, then raises KeyboardInterrupt.

    asyncio's own Ctrl-C handling cancels the main task natively, which the task groups
    KeenServer and the SDK's stdio transport hold open across ``async with`` cannot unwind
    ("Attempted to exit a cancel scope that isn't the current task's current cancel scope").
    """
    if sys.platform == "win32":  # no signal receivers there; asyncio's handling stays
        await fn()
        return
    interrupted = False
    served = anyio.CancelScope()
    async with anyio.create_task_group() as tg:

        async def watch() -> None:
            # Open until fn's shutdown is over: closed, it gave SIGINT back to Python's
            # handler, and a second Ctrl-C raised KeyboardInterrupt into that shutdown.
            nonlocal interrupted
            with anyio.open_signal_receiver(signal.SIGINT) as signals:
                async for _ in signals:
                    if interrupted:
                        with contextlib.suppress(OSError):
                            os.write(2, STILL_STOPPING)
                        continue
                    interrupted = True
                    served.cancel()

        tg.start_soon(watch)
        with served:
            await fn()
        tg.cancel_scope.cancel()
    if interrupted:
        raise KeyboardInterrupt


async def serve_http(
    keen: KeenServer,
    security: HttpSecurity,
    port: int,
    *,
    path: str = "/mcp",
    on_ready: Callable[[str], None] | None = None,
) -> None:
    """Serve ``http://<security.host>:<port><path>`` until cancelled or interrupted; either
    way the server shuts down fully (calls in flight answered, upstream sessions closed).

    ``on_ready`` gets the endpoint's URL once the upstream servers were started and the
    socket listens (the port it holds, for ``port`` 0).

    Raises ``ValueError`` (from :class:`HttpSecurity`) for a non-loopback bind without a
    token, ``OSError`` for an address it cannot listen on (in use, not this machine's).
    """
    app = InFlight(build_app(keen, security, path=path))
    config = uvicorn.Config(
        app,
        host=security.host,
        port=port,
        log_level="warning",
        access_log=False,
        lifespan="on",
        timeout_graceful_shutdown=5,
    )
    # On shutdown the hosts' event streams end first (uvicorn would wait for those open
    # responses); calls still running get GRACE seconds, then a clean 503 (keen.serve._shutdown).

    def ready(host: str, bound: int) -> None:
        shown = f"[{host}]" if ":" in host else host
        url = f"http://{shown}:{bound}{path}"
        logger.info("keen serve: %s (%s mode)", url, keen.mode)
        if on_ready is not None:
            on_ready(url)

    # Bound here, not by uvicorn: its bind failure is a log line and sys.exit(3), which
    # surfaced as a traceback; this one is an OSError that says what to do. Not listened on
    # here: uvicorn listens once the upstream servers were started (the lifespan), and until
    # then a host's connection is refused, as it was, rather than left waiting.
    listener = _bound(security.host, port)
    try:
        server = CleanServer(config, app, on_shutdown=keen.notifier.close, on_ready=ready)
        await server.serve_until_stopped(sockets=[listener])
    finally:
        listener.close()


def _bound(host: str, port: int) -> socket.socket:
    """A TCP socket bound to ``host``:``port`` (as ``socket.create_server`` binds one), not
    yet listening. Raises ``OSError`` that says what to change."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    listener = socket.socket(family, socket.SOCK_STREAM)
    try:
        if os.name not in ("nt", "cygwin"):
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if family == socket.AF_INET6:
            listener.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        listener.bind((host, port))
    except OSError as exc:
        listener.close()
        shown = f"[{host}]" if ":" in host else host
        raise OSError(f"cannot listen on {shown}:{port} ({_bind_advice(exc)})") from exc
    return listener


def _bind_advice(exc: OSError) -> str:
    """Why a bind failed and what to change: the port for one in use or not allowed, the
    host for an address not of this machine or a name that does not resolve. A resolver
    error (``socket.gaierror``, which a bind may pass on as an ``OSError`` of the same
    negative number) has its own numbers, not ``errno``'s: its ``strerror``
    says it."""
    if isinstance(exc, socket.gaierror) or (exc.errno is not None and exc.errno < 0):
        why = (exc.strerror or str(exc)).split(" (while attempting", 1)[0]
        return f"{why}; pass a --host that names this machine, e.g. 127.0.0.1"
    why = os.strerror(exc.errno) if exc.errno else str(exc)
    if exc.errno == errno.EADDRINUSE:
        return f"{why}; stop what listens there, or pass another --port"
    if exc.errno == errno.EADDRNOTAVAIL:
        return f"{why}; pass a --host that is an address of this machine, e.g. 127.0.0.1"
    if exc.errno == errno.EACCES:
        return f"{why}; pass a --port above 1023, or one this user may bind"
    return f"{why}; check --host and --port"
