"""``keen serve --transport http`` stops cleanly with calls in flight (Ctrl-C, SIGTERM).

uvicorn alone gave a stopped ``keen serve`` two bad endings: on Ctrl-C it waited its
graceful timeout for a call to a slow or hung upstream, then cancelled the request with an
``Exception in ASGI application`` traceback; on SIGTERM (which Keen turns into a
cancellation, ``keen.cli._signals``) it never ran its shutdown at all, and the lifespan that
owns the upstream sessions died with another traceback when the event loop closed.

Here every HTTP request runs in a cancel scope (:class:`InFlight`); :class:`CleanServer`'s
shutdown lets requests finish for :data:`GRACE` seconds, then cancels the rest, each
answered ``503`` with a JSON-RPC error saying why, and always runs to its end (shielded),
lifespan included, so the upstream sessions close in the task that opened them.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Callable

import anyio
import uvicorn
from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["GRACE", "CleanServer", "InFlight"]

GRACE = 2.0
"""Seconds requests in flight may still finish once shutdown starts (under uvicorn's own
``timeout_graceful_shutdown``, so uvicorn never has to cancel one itself)."""

_SHUTTING_DOWN = json.dumps(
    {
        "jsonrpc": "2.0",
        "id": None,
        "error": {
            "code": -32603,
            "message": "keen serve is shutting down; the call was cancelled. Retry once it is back.",
        },
    }
).encode()


class InFlight:
    """ASGI middleware: each HTTP request runs in a cancel scope :meth:`cancel_all` cancels."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self._scopes: set[anyio.CancelScope] = set()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def tracked(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        with anyio.CancelScope() as cancel:
            self._scopes.add(cancel)
            try:
                await self.app(scope, receive, tracked)
            finally:
                self._scopes.discard(cancel)
        if cancel.cancelled_caught and not started:
            headers = [
                (b"content-type", b"application/json"),
                (b"content-length", b"%d" % len(_SHUTTING_DOWN)),
            ]
            await send({"type": "http.response.start", "status": 503, "headers": headers})
            await send({"type": "http.response.body", "body": _SHUTTING_DOWN})

    def cancel_all(self) -> None:
        for scope in list(self._scopes):
            scope.cancel()


class CleanServer(uvicorn.Server):
    """A uvicorn server whose shutdown cancels late requests cleanly and cannot be cut short;
    ``on_shutdown`` runs first (e.g. ending the hosts' open event streams). ``on_ready`` is
    called once with the bound ``(host, port)`` when the app started and the socket listens."""

    def __init__(
        self,
        config: uvicorn.Config,
        inflight: InFlight,
        *,
        on_shutdown: Callable[[], None] | None = None,
        on_ready: Callable[[str, int], None] | None = None,
    ) -> None:
        super().__init__(config)
        self.inflight = inflight
        self.on_shutdown = on_shutdown
        self.on_ready = on_ready
        self.shut_down = False

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if self.on_ready is None or self.should_exit or not self.servers:
            return
        # The port the socket holds (``--port 0`` binds any free one).
        bound = self.servers[0].sockets[0].getsockname()
        self.on_ready(str(bound[0]), int(bound[1]))

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        if self.shut_down:
            return
        self.shut_down = True
        if self.on_shutdown is not None:
            self.on_shutdown()

        async def cancel_late() -> None:
            await anyio.sleep(GRACE)
            self.inflight.cancel_all()

        with anyio.CancelScope(shield=True):
            async with anyio.create_task_group() as tg:
                tg.start_soon(cancel_late)
                await super().shutdown(sockets)
                tg.cancel_scope.cancel()

    async def serve_until_stopped(self, sockets: list[socket.socket] | None = None) -> None:
        """``serve(sockets)``; when cancelled (SIGTERM) after startup, shut down fully all the same."""
        try:
            await self.serve(sockets)
        finally:
            if self.started and not self.shut_down:
                self.should_exit = True
                await self.shutdown()
