"""Streamable HTTP front for ``keen serve``: security, sessions in the store, both eras.

Every request to ``/mcp`` passes, in order:

1. Host and Origin checks against DNS rebinding (the SDK's ``TransportSecurityMiddleware``;
   MCP spec 2025-11-25, Transports, "Security Warning"): 421 / 403.
2. The bearer check when tokens are configured (``KEEN_SERVE_TOKEN`` /
   ``KEEN_SERVE_TOKENS``): 401 with ``WWW-Authenticate: Bearer``. A bind to anything but
   loopback refuses to start without a token.
3. Era routing. A request whose ``MCP-Protocol-Version`` is a 2026-07-28-era version is
   stateless: its caller scope is the token's principal. Otherwise it is the handshake era
   and this module keeps the ``Mcp-Session-Id`` sessions *in the store* (not in the SDK's
   per-process session table), so any replica sharing the store serves any session:
   ``initialize`` opens one (the id comes back in the response header; 429 when the caller's
   principal already holds ``max_sessions`` open ones), other POSTs need a
   live id (400 without one, 404 for an unknown or expired one), ``DELETE`` ends it, and
   ``GET`` opens the session's event stream (``text/event-stream``), on which the server
   sends ``notifications/tools/list_changed`` when what it lists changes
   (:mod:`keen.serve.notify`; MCP 2025-11-25, Transports, "Listening for Messages from the
   Server"). 2026-07-28 hosts get the same notices on ``subscriptions/listen`` instead.

The SDK's stateless Streamable HTTP manager then serves the message; it answers both eras,
with one JSON body, or on an event stream for a ``tools/call`` that asked for progress (the
upstream's progress notifications come on it before the result; docs/serve.md "During a
call"). A handshake-era ``tools/call`` from a host that accepts an event stream is answered
on one Keen writes (:class:`keen.serve.relay.SseChannel`) as soon as something is sent before
the result: the upstream's progress, log messages and requests (elicitation, sampling,
roots), whose answers the host POSTs back (a JSON-RPC response, accepted with 202).
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import ipaddress
import json
import logging
import os
import secrets
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.lowlevel
from mcp.server.streamable_http import MCP_SESSION_ID_HEADER
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp, StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecurityMiddleware, TransportSecuritySettings
from mcp_types import LOG_LEVEL_META_KEY, UNSUPPORTED_PROTOCOL_VERSION
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import Message, Receive, Scope, Send

from keen.serve.notify import Notice, NoticeStream
from keen.serve.relay import (
    CHANNEL_KEY,
    HOST_KEY,
    LEVEL_KEY,
    SSE_HEADERS,
    STREAM_KEY,
    SseChannel,
    host_capabilities,
)
from keen.serve.server import PRINCIPAL_KEY, SCOPE_KEY, KeenServer

__all__ = ["HttpSecurity", "build_app", "is_loopback", "tokens_from_env"]

logger = logging.getLogger("keen.serve")

MAX_BODY_BYTES = 4 * 1024 * 1024
SSE_PING_SECONDS = 15.0
"""An SSE comment this often keeps an idle event stream open through proxies."""
_LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")
_KNOWN_VERSIONS = (*HANDSHAKE_PROTOCOL_VERSIONS, *MODERN_PROTOCOL_VERSIONS)


def is_loopback(host: str) -> bool:
    """True for ``localhost`` and loopback addresses (127.0.0.0/8, ::1)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def tokens_from_env(environ: Mapping[str, str] | None = None) -> list[str]:
    """Bearer tokens from ``KEEN_SERVE_TOKEN`` (one) and ``KEEN_SERVE_TOKENS`` (comma-separated).

    Each token is its own principal: in the stateless era, authorizations are kept per token.
    """
    env = os.environ if environ is None else environ
    tokens = [env.get("KEEN_SERVE_TOKEN", ""), *env.get("KEEN_SERVE_TOKENS", "").split(",")]
    return [t.strip() for t in tokens if t.strip()]


@dataclass
class HttpSecurity:
    """Who may reach the endpoint.

    Args:
        host: the bind address.
        tokens: accepted bearer tokens (none: no bearer check; loopback binds only).
        allowed_hosts: extra Host header values (e.g. a load balancer's name; ``name:*`` for any port).
        allowed_origins: extra Origin values (``http://name:*`` for any port).
    """

    host: str = "127.0.0.1"
    tokens: list[str] = field(default_factory=list)
    allowed_hosts: list[str] = field(default_factory=list)
    allowed_origins: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not is_loopback(self.host) and not self.tokens:
            raise ValueError(
                f"refusing to serve on {self.host} without a bearer token: set KEEN_SERVE_TOKEN (or "
                "KEEN_SERVE_TOKENS) in the environment, or bind 127.0.0.1"
            )
        self._principals = {hashlib.sha256(t.encode()).hexdigest()[:16]: t.encode() for t in self.tokens}

    def transport_settings(self) -> TransportSecuritySettings:
        hosts = [*(f"{n}:*" for n in _LOOPBACK_NAMES), *_LOOPBACK_NAMES]
        origins = [f"http://{n}:*" for n in _LOOPBACK_NAMES] + [f"http://{n}" for n in _LOOPBACK_NAMES]
        if not is_loopback(self.host) and self.host not in ("0.0.0.0", "::"):
            bound = f"[{self.host}]" if ":" in self.host else self.host
            hosts += [bound, f"{bound}:*"]
        return TransportSecuritySettings(
            enable_dns_rebinding_protection=True,
            allowed_hosts=hosts + list(self.allowed_hosts),
            allowed_origins=origins + list(self.allowed_origins),
        )

    def principal(self, authorization: str | None) -> str | None:
        """The principal id of a valid ``Bearer`` header, ``"anonymous"`` when no tokens are
        configured, ``None`` when the header is missing or wrong."""
        if not self._principals:
            return "anonymous"
        scheme, _, presented = (authorization or "").partition(" ")
        if scheme.lower() != "bearer" or not presented:
            return None
        given = presented.strip().encode()
        found = None
        for pid, token in self._principals.items():
            # Compare with every token, in constant time each, so timing says nothing.
            if hmac.compare_digest(given, token):
                found = pid
        return found


class _Gate:
    """The ASGI layer in front of the SDK's handler (see the module docstring)."""

    def __init__(
        self,
        keen: KeenServer,
        security: HttpSecurity,
        inner: StreamableHTTPASGIApp,
        streaming: StreamableHTTPASGIApp | None = None,
    ) -> None:
        self.keen = keen
        self.security = security
        self.inner = inner
        self.streaming = streaming or inner
        self.transport_security = TransportSecurityMiddleware(security.transport_settings())

    def _cancel(self, caller: str, message: dict[str, Any] | None) -> None:
        """A host's ``notifications/cancelled`` cancels its call running here: each POST is
        served statelessly, so the SDK never sees the call it names (MCP 2025-11-25,
        Utilities, "Cancellation")."""
        if message is not None and message.get("method") == "notifications/cancelled":
            params = message.get("params")
            if isinstance(params, dict) and params.get("requestId") is not None:
                self.keen.cancel_call(caller, params["requestId"])

    async def _until_gone(
        self,
        app: StreamableHTTPASGIApp,
        scope: Scope,
        body: bytes,
        message: dict[str, Any] | None,
        receive: Receive,
        send: Send,
    ) -> None:
        """Serve a 2026-07-28 POST; a ``tools/call`` is cancelled when its host closes the
        connection, that era's only cancellation signal over HTTP (no notification comes)."""
        is_call = message is not None and message.get("method") == "tools/call"
        call_id = _request_id(message) if is_call else None
        if call_id is None:
            await app(scope, _replay(body, receive), send)
            return
        gone = anyio.Event()

        async def disconnect() -> Message:
            # What the app reads after the body: the watcher below is the one reader of receive.
            await gone.wait()
            return {"type": "http.disconnect"}

        async with anyio.create_task_group() as tg:

            async def watch() -> None:
                while (await receive())["type"] != "http.disconnect":
                    pass
                gone.set()
                self.keen.cancel_call(scope[SCOPE_KEY], call_id)

            tg.start_soon(watch)
            await app(scope, _replay(body, disconnect), send)
            tg.cancel_scope.cancel()

    def _for(self, message: dict[str, Any] | None, request: Request, scope: Scope) -> StreamableHTTPASGIApp:
        """The handler for this POST: a call that asked for progress (``_meta.progressToken``)
        or for log messages (2026-07-28 ``_meta`` log level) from a host that accepts an event
        stream is answered on one, where the upstream's notifications reach the host before the
        result (MCP 2025-11-25, Transports, "Sending Messages to the Server"); everything else
        is one JSON response."""
        if _accepts_stream(request) and _wants_stream(message):
            scope[STREAM_KEY] = True
            return self.streaming
        return self.inner

    async def _call_on_channel(
        self, scope: Scope, receive: Receive, send: Send, message: dict[str, Any] | None
    ) -> None:
        """A handshake-era ``tools/call`` from a host that accepts an event stream: what the
        upstream asks or tells during the call goes to the host on this POST's response
        (:class:`keen.serve.relay.SseChannel`), which is one JSON body when nothing was sent."""
        params = message.get("params") if message is not None else None
        meta = params.get("_meta") if isinstance(params, dict) else None
        token = meta.get("progressToken") if isinstance(meta, dict) else None
        channel = SseChannel(send, scope[SCOPE_KEY], self.keen.replies, token)
        scope[CHANNEL_KEY] = channel
        try:
            await self.inner(scope, receive, channel.app_send())
        finally:
            channel.close()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        request = Request(scope, receive)
        refused = await self.transport_security.validate_request(request, is_post=False)
        if refused is not None:
            await refused(scope, receive, send)
            return
        principal = self.security.principal(request.headers.get("authorization"))
        if principal is None:
            await _error(401, "Missing or invalid bearer token", {"www-authenticate": "Bearer"})(
                scope, receive, send
            )
            return
        # Limits are the caller's, not its session's: keyed on the token, or the address.
        client = scope.get("client")
        scope[PRINCIPAL_KEY] = (
            f"token:{principal}" if self.security.tokens else f"address:{client[0] if client else 'unknown'}"
        )
        version = request.headers.get("mcp-protocol-version")
        if version is not None and version not in _KNOWN_VERSIONS:
            # Else the SDK's stateless handler takes it for a 2026-07-28 request and answers
            # about a missing _meta envelope, which says nothing of the real mistake.
            await self._unsupported_version(scope, receive, send, version)
            return
        if version is not None and version not in HANDSHAKE_PROTOCOL_VERSIONS:
            scope[SCOPE_KEY] = f"principal:{principal}"
            if request.method != "POST":
                await self.inner(scope, receive, send)
                return
            body = await _read_body(receive)
            if body is None:
                await _error(413, "Request body too large")(scope, receive, send)
                return
            message = _message(body)
            self._cancel(scope[SCOPE_KEY], message)
            await self._until_gone(self._for(message, request, scope), scope, body, message, receive, send)
            return
        await self._handshake_era(scope, receive, send, request, principal)

    async def _unsupported_version(self, scope: Scope, receive: Receive, send: Send, version: str) -> None:
        """HTTP 400 with JSON-RPC ``-32022`` (MCP 2026-07-28, "Protocol Version Negotiation"):
        the request's own id and ``data.supported``, every version Keen serves, so a client
        retries with one of them instead of taking Keen for a server of the old era."""
        body = await _read_body(receive) if scope.get("method") == "POST" else b""
        if body is None:
            await _error(413, "Request body too large")(scope, receive, send)
            return
        known = ", ".join(_KNOWN_VERSIONS)
        error = {
            "code": UNSUPPORTED_PROTOCOL_VERSION,
            "message": f"Bad Request: unsupported MCP-Protocol-Version {version[:64]!r}; send one of "
            f"{known}, or none before initialize",
            "data": {"supported": list(_KNOWN_VERSIONS), "requested": version[:64]},
        }
        reply = {"jsonrpc": "2.0", "id": _request_id(_message(body)), "error": error}
        await JSONResponse(reply, status_code=400)(scope, receive, send)

    async def _handshake_era(
        self, scope: Scope, receive: Receive, send: Send, request: Request, principal: str
    ) -> None:
        method = request.method
        session_id = request.headers.get(MCP_SESSION_ID_HEADER)
        store = self.keen.store
        if method == "DELETE":
            if session_id and await _owned(store, session_id, principal, self.keen.session_ttl):
                await store.delete_session(session_id)
                self.keen.log_bound.forget(f"session:{session_id}")
                await Response(status_code=200)(scope, receive, send)
            else:
                await _error(404, "Session not found")(scope, receive, send)
            return
        if method == "GET" and self.keen.mode == "extension":
            # Search mode's list never changes: it has nothing to send on a stream.
            await self._event_stream(scope, receive, send, request, session_id, principal)
            return
        if method != "POST":
            allow = "GET, POST, DELETE" if self.keen.mode == "extension" else "POST, DELETE"
            await Response(status_code=405, headers={"allow": allow})(scope, receive, send)
            return
        body = await _read_body(receive)
        if body is None:
            await _error(413, "Request body too large")(scope, receive, send)
            return
        replay = _replay(body, receive)
        message = _message(body)
        if _is_initialize(message):
            new_id = secrets.token_hex(16)
            limit = self.keen.max_sessions
            # What the host declared is kept with its session: each later POST is served
            # statelessly, and an upstream's request during a call needs it (keen.serve.relay).
            params = message.get("params") if message is not None else None
            declared = host_capabilities(params.get("capabilities") if isinstance(params, dict) else None)
            if not await store.open_session(
                new_id,
                {"principal": principal, "host": declared},
                self.keen.session_ttl,
                owner=scope[PRINCIPAL_KEY],
                limit=limit,
            ):
                logger.info("open session cap (%d) reached by %s", limit, scope[PRINCIPAL_KEY])
                await _error(
                    429,
                    f"Too many open sessions: this caller holds {limit} already; end the ones it no longer "
                    f"uses (DELETE with their Mcp-Session-Id) or reuse one, else each ends after "
                    f"{self.keen.session_ttl:g} s unused (the cap is keen serve --max-sessions)",
                )(scope, replay, send)
                return
            scope[SCOPE_KEY] = f"session:{new_id}"
            await self.inner(scope, replay, _with_session_header(send, new_id))
            return
        if not session_id:
            await _error(400, "Bad Request: Mcp-Session-Id header is required; send initialize first")(
                scope, replay, send
            )
            return
        data = await _session_of(store, session_id, principal, self.keen.session_ttl)
        if data is None:
            await _error(404, "Session not found")(scope, replay, send)
            return
        scope[SCOPE_KEY] = f"session:{session_id}"
        scope[HOST_KEY] = data.get("host") or []
        scope[LEVEL_KEY] = data.get("log_level")
        # The session's authorizations live as long as it does (docs/serve.md, section 5).
        await store.renew(scope[SCOPE_KEY], self.keen.session_ttl)
        self._cancel(scope[SCOPE_KEY], message)
        if _is_response(message):
            # The host's answer to what Keen asked it during a call (MCP 2025-11-25,
            # Transports: a POST of a response is accepted with 202 and no body).
            assert message is not None
            if not self.keen.replies.deliver(scope[SCOPE_KEY], message):
                logger.info("a response of %s matched no request waiting for it", scope[SCOPE_KEY])
            await Response(status_code=202)(scope, replay, send)
            return
        if _accepts_stream(request) and message is not None and message.get("method") == "tools/call":
            await self._call_on_channel(scope, replay, send, message)
            return
        await self._for(message, request, scope)(scope, replay, send)

    async def _event_stream(
        self,
        scope: Scope,
        receive: Receive,
        send: Send,
        request: Request,
        session_id: str | None,
        principal: str,
    ) -> None:
        """A session's standalone SSE stream: server notices until the host disconnects."""
        if "text/event-stream" not in request.headers.get("accept", ""):
            await _error(406, "Not Acceptable: a GET must accept text/event-stream")(scope, receive, send)
            return
        if not session_id:
            await _error(400, "Bad Request: Mcp-Session-Id header is required; send initialize first")(
                scope, receive, send
            )
            return
        if not await _owned(self.keen.store, session_id, principal, self.keen.session_ttl):
            await _error(404, "Session not found")(scope, receive, send)
            return
        # A GET is a request of the session as a POST is: what lives as long as the session
        # (its authorizations, the record of what its host saw) is renewed with it.
        await self.keen.store.renew(f"session:{session_id}", self.keen.session_ttl)
        async with self.keen.notifier.open_stream(f"session:{session_id}") as notices:
            if notices is None:
                await _error(503, "Too many open event streams; retry later")(scope, receive, send)
                return
            await send({"type": "http.response.start", "status": 200, "headers": SSE_HEADERS})
            async with anyio.create_task_group() as tg:

                async def disconnected() -> None:
                    while (await receive())["type"] != "http.disconnect":
                        pass
                    tg.cancel_scope.cancel()

                tg.start_soon(disconnected)
                async for frame, notice in _frames(notices):
                    await send({"type": "http.response.body", "body": frame, "more_body": True})
                    if notice is not None:
                        # uvicorn drops what is sent to a connection already gone, and a write
                        # the kernel refuses (a reset connection) is told only as a disconnect,
                        # three loop turns on: asyncio's transport schedules connection_lost
                        # (call_soon), which sets uvicorn's `disconnected` and wakes the
                        # watcher's `receive`; the watcher then cancels this task. Let all three
                        # run before the notice counts as told.
                        for _ in range(_DISCONNECT_TURNS):
                            await anyio.lowlevel.checkpoint()
                        await notices.sent(notice)
                await send({"type": "http.response.body", "body": b"", "more_body": False})
                tg.cancel_scope.cancel()


_DISCONNECT_TURNS = 3
"""Event-loop turns from a failed write to the stream's cancel (see ``_event_stream``)."""


async def _frames(notices: NoticeStream) -> AsyncIterator[tuple[bytes, Notice | None]]:
    """SSE frames: one ``message`` event per notice (with it), a comment when idle; ends
    with ``notices``."""
    while True:
        notice: Notice | None = None
        with anyio.move_on_after(SSE_PING_SECONDS):
            try:
                notice = await anext(notices)
            except StopAsyncIteration:
                return
        if notice is None:
            yield b": ping\r\n\r\n", None
            continue
        data = json.dumps({"jsonrpc": "2.0", "method": notice.method}, separators=(",", ":"))
        yield f"event: message\r\ndata: {data}\r\n\r\n".encode(), notice


async def _owned(store: Any, session_id: str, principal: str, ttl: float) -> bool:
    return await _session_of(store, session_id, principal, ttl) is not None


async def _session_of(store: Any, session_id: str, principal: str, ttl: float) -> dict[str, Any] | None:
    """The session's data, or None when it is unknown, expired, or another credential's."""
    # A session answers only to the credential that opened it (as the SDK's own manager does).
    data = await store.get_session(session_id[:128], ttl)
    return data if data is not None and data.get("principal") == principal else None


def _error(status: int, message: str, headers: dict[str, str] | None = None) -> Response:
    body = {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": message}}
    return JSONResponse(body, status_code=status, headers=headers)


async def _read_body(receive: Receive) -> bytes | None:
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            return None
        chunks.append(chunk)
        if not message.get("more_body", False):
            break
    return b"".join(chunks)


def _replay(body: bytes, receive: Receive) -> Receive:
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


def _message(body: bytes) -> dict[str, Any] | None:
    """A POST body as one JSON-RPC message object; ``None`` for anything else (a batch, not
    JSON, nested past Python's recursion limit: "[[[[..."), which the SDK's parser answers
    with a JSON-RPC error."""
    try:
        data = json.loads(body) if body else None
    except (ValueError, RecursionError):
        return None
    return data if isinstance(data, dict) else None


def _request_id(message: dict[str, Any] | None) -> str | int | None:
    """The JSON-RPC id of a request, ``None`` for a notification or anything else."""
    found = message.get("id") if message is not None else None
    # A bool is an int to Python, never a JSON-RPC id.
    return found if isinstance(found, str | int) and not isinstance(found, bool) else None


def _wants_stream(message: dict[str, Any] | None) -> bool:
    """Whether a message is a ``tools/call`` carrying a progress token or a log level."""
    if message is None or message.get("method") != "tools/call":
        return False
    params = message.get("params")
    meta = params.get("_meta") if isinstance(params, dict) else None
    return isinstance(meta, dict) and (
        meta.get("progressToken") is not None or meta.get(LOG_LEVEL_META_KEY) is not None
    )


def _accepts_stream(request: Request) -> bool:
    return "text/event-stream" in request.headers.get("accept", "")


def _is_response(message: dict[str, Any] | None) -> bool:
    """Whether a message is a JSON-RPC response (an id, a result or an error, no method)."""
    return (
        message is not None
        and "method" not in message
        and "id" in message
        and ("result" in message or "error" in message)
    )


def _is_initialize(message: dict[str, Any] | None) -> bool:
    return message is not None and message.get("method") == "initialize"


def _with_session_header(send: Send, session_id: str) -> Send:
    async def wrapped(message: Message) -> None:
        if message["type"] == "http.response.start" and message.get("status", 500) < 400:
            headers = list(message.get("headers", []))
            headers.append((MCP_SESSION_ID_HEADER.lower().encode(), session_id.encode()))
            message = {**message, "headers": headers}
        await send(message)

    return wrapped


def build_app(keen: KeenServer, security: HttpSecurity, *, path: str = "/mcp") -> Starlette:
    """The ASGI app: ``path`` serves MCP; the lifespan starts and stops ``keen`` (upstreams, store).

    Raises nothing itself; serving it with uvicorn on ``security.host`` is the caller's part.
    """
    managers = [
        StreamableHTTPSessionManager(
            app=keen.server,
            json_response=json_response,
            stateless=True,
            security_settings=security.transport_settings(),
        )
        # One JSON response a request; an event stream for calls that asked for progress.
        for json_response in (True, False)
    ]
    gate = _Gate(keen, security, *(StreamableHTTPASGIApp(m) for m in managers))

    @contextlib.asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        # Upstream sessions are opened and closed by this one task, as the SDK requires.
        async with keen, managers[0].run(), managers[1].run():
            yield

    return Starlette(
        routes=[Route(path, endpoint=gate, methods=["GET", "POST", "DELETE"])], lifespan=lifespan
    )
