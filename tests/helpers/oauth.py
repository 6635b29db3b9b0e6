"""A real OAuth-protected MCP server on loopback, and a scripted "browser", for the OAuth tests.

``OAuthTestServer`` runs FastMCP with its in-memory OAuth authorization server (dynamic
client registration, PKCE S256, refresh with rotation, revocation)
under uvicorn on ``127.0.0.1:<ephemeral port>`` in a thread. Knobs:

* ``advertised_lifetime`` - the ``expires_in`` told to clients; ``server_lifetime`` - when
  the server really stops accepting an access token (seconds).
* ``step_up_tool`` - ``tools/call`` of ``admin_task`` answers 403 ``insufficient_scope``
  (scope ``read admin``) unless the token carries ``admin``; ``step_up_listing`` - the same
  for ``tools/list``; ``scope_never_enough`` - every signed-in request answers that 403,
  whatever the token carries (a scope the account will never be granted).
* ``modern_only`` - a server of the 2026-07-28 era alone: a signed-in POST without a
  2026-07-28 ``MCP-Protocol-Version`` header (an ``initialize`` handshake) answers HTTP 400
  with JSON-RPC -32020 "Missing MCP-Protocol-Version header", as the conformance package's
  2026-07-28 servers do; ``eras`` records each signed-in POST's ``(method, header)``.
* ``malformed_metadata`` - every ``/.well-known/`` document is broken JSON and the OAuth
  endpoints are not at their 2025-03-26 default paths either (as when the authorization
  server lives elsewhere), so nothing can be discovered.
* ``revoke_all()`` - what a user does in the provider's settings page.
* ``move_to(other)`` - the resource moves to ``other``'s authorization server: its protected
  resource metadata names that one (``authorization_servers``), tokens this server issued
  are revoked, and tokens ``other`` issued are accepted (SEP-2352's migration).

``Browser`` replaces the human: it GETs the authorization URL (the server approves at
once and redirects to Keen's loopback callback) and follows the redirect, over real
HTTP. ``tamper_state`` rewrites ``state`` on the way; ``visits`` keeps the URLs it saw.
Shared by the tests of ``keen.mcp.auth`` (tests/mcp/auth).
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit, urlunsplit

import httpx2
import uvicorn
from fastmcp import FastMCP
from fastmcp.server.auth.providers.in_memory import InMemoryOAuthProvider
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.server.auth.provider import AuthorizationCode, RefreshToken
from mcp.server.auth.settings import ClientRegistrationOptions, RevocationOptions
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from helpers.loopback import free_port
from helpers.serve import tls
from keen.mcp.auth import FileTokenStore, KeenOAuthProvider, create_oauth_auth
from keen.mcp.config import HttpServerConfig, OAuthAuth
from keen.mcp.connection.sdk_private import negotiate_auto

__all__ = [
    "MCP_TIMEOUT",
    "MODERN_VERSION",
    "Browser",
    "OAuthTestServer",
    "RecordingProvider",
    "background_auth",
    "call_tools",
    "free_port",
    "list_tool_names",
    "oauth_config",
    "serve_oauth",
    "text_of",
]


MODERN_VERSION = "2026-07-28"


class RecordingProvider(InMemoryOAuthProvider):
    """FastMCP's in-memory authorization server, recording what it issues, with chosen lifetimes."""

    def __init__(
        self, *, advertised_lifetime: int = 3600, server_lifetime: int = 3600, **kwargs: Any
    ) -> None:
        super().__init__(**kwargs)
        self.advertised_lifetime = advertised_lifetime
        self.server_lifetime = server_lifetime
        self.issued: list[OAuthToken] = []
        self.codes: list[str] = []
        self.refreshes = 0

    async def authorize(self, client: OAuthClientInformationFull, params: Any) -> str:
        url = await super().authorize(client, params)
        self.codes.extend(parse_qs(urlsplit(url).query).get("code", []))
        return url

    async def exchange_authorization_code(
        self, client: OAuthClientInformationFull, authorization_code: AuthorizationCode
    ) -> OAuthToken:
        return self._adjust(await super().exchange_authorization_code(client, authorization_code))

    async def exchange_refresh_token(
        self, client: OAuthClientInformationFull, refresh_token: RefreshToken, scopes: list[str]
    ) -> OAuthToken:
        self.refreshes += 1
        return self._adjust(await super().exchange_refresh_token(client, refresh_token, scopes))

    def _adjust(self, token: OAuthToken) -> OAuthToken:
        stored = self.access_tokens[token.access_token]
        stored.expires_at = int(time.time()) + self.server_lifetime
        token.expires_in = self.advertised_lifetime
        self.issued.append(token)
        return token

    def scopes_of(self, access_token: str) -> list[str]:
        found = self.access_tokens.get(access_token)
        return list(found.scopes) if found else []

    def revoke_all(self) -> None:
        for token in list(self.access_tokens):
            self._revoke_internal(access_token_str=token)
        for token in list(self.refresh_tokens):
            self._revoke_internal(refresh_token_str=token)

    def secrets(self) -> list[str]:
        """Every token and code this server ever issued."""
        values = list(self.codes)
        for token in self.issued:
            values.append(token.access_token)
            if token.refresh_token:
                values.append(token.refresh_token)
        return values


class _Guard:
    """ASGI middleware: records requests; optional step-up and broken metadata."""

    def __init__(self, app: ASGIApp, owner: OAuthTestServer) -> None:
        self._app = app
        self._owner = owner

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        owner = self._owner
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        query = scope.get("query_string", b"").decode("latin-1")
        owner.requests.append((scope["method"], scope["path"] + (f"?{query}" if query else ""), headers))
        moved = owner.moved_to
        if moved is not None and scope["path"] == f"/.well-known/oauth-protected-resource{owner.path}":
            metadata = {
                "resource": owner.url,
                "authorization_servers": [moved.base_url + "/"],
                "scopes_supported": owner.valid_scopes,
                "bearer_methods_supported": ["header"],
            }
            await _send(send, 200, json.dumps(metadata).encode(), [(b"content-type", b"application/json")])
            return
        issued_there = moved.provider.access_tokens.get(_bearer(headers)) if moved is not None else None
        if issued_there is not None:
            # This resource server trusts the new authorization server's tokens.
            owner.provider.access_tokens[issued_there.token] = issued_there
        if owner.malformed_metadata and scope["path"].startswith("/.well-known/"):
            await _send(send, 200, b'{"resource": "http://', [(b"content-type", b"application/json")])
            return
        if owner.malformed_metadata and scope["path"] in ("/register", "/authorize", "/token"):
            await _send(send, 404, b"not here", [(b"content-type", b"text/plain")])
            return
        guarded = owner.step_up_tool or owner.step_up_listing or owner.scope_never_enough or owner.modern_only
        if guarded and scope["method"] == "POST" and scope["path"] == owner.path:
            body = b""
            more = True
            while more:
                message = await receive()
                body += message.get("body", b"")
                more = message.get("more_body", False)
            request = _jsonrpc(body)
            granted = owner.provider.scopes_of(_bearer(headers))
            if granted:  # signed in: the app's own 401 comes first otherwise
                version = headers.get("mcp-protocol-version")
                owner.eras.append((str(request.get("method")), version))
                if owner.modern_only and version != MODERN_VERSION:
                    error = {"code": -32020, "message": "Missing MCP-Protocol-Version header"}
                    reply = {"jsonrpc": "2.0", "id": request.get("id"), "error": error}
                    await _send(
                        send, 400, json.dumps(reply).encode(), [(b"content-type", b"application/json")]
                    )
                    return
                if owner.scope_never_enough or (_needs_admin(owner, request) and "admin" not in granted):
                    challenge = (
                        f'Bearer error="insufficient_scope", scope="read admin", '
                        f'resource_metadata="{owner.base_url}/.well-known/oauth-protected-resource{owner.path}"'
                    )
                    await _send(
                        send,
                        403,
                        b'{"error": "insufficient_scope"}',
                        [(b"www-authenticate", challenge.encode())],
                    )
                    return
            replayed = False

            async def replay() -> Message:
                nonlocal replayed
                if not replayed:
                    replayed = True
                    return {"type": "http.request", "body": body, "more_body": False}
                return await receive()

            await self._app(scope, replay, send)
            return
        await self._app(scope, receive, send)


def _jsonrpc(body: bytes) -> dict[str, Any]:
    try:
        message = json.loads(body)
    except ValueError:
        return {}
    return message if isinstance(message, dict) else {}


def _needs_admin(owner: OAuthTestServer, request: dict[str, Any]) -> bool:
    method = request.get("method")
    params = request.get("params")
    name = params.get("name") if isinstance(params, dict) else None
    return (owner.step_up_tool and method == "tools/call" and name == "admin_task") or (
        owner.step_up_listing and method == "tools/list"
    )


def _bearer(headers: dict[str, str]) -> str:
    value = headers.get("authorization", "")
    return value[7:] if value.lower().startswith("bearer ") else ""


async def _send(send: Send, status: int, body: bytes, headers: list[tuple[bytes, bytes]]) -> None:
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


@dataclass
class OAuthTestServer:
    """A FastMCP server with ``echo``, ``whoami`` and ``admin_task`` behind OAuth on 127.0.0.1."""

    advertised_lifetime: int = 3600
    server_lifetime: int = 3600
    required_scopes: list[str] = field(default_factory=lambda: ["read"])
    valid_scopes: list[str] = field(default_factory=lambda: ["read", "write", "admin"])
    registration: bool = True
    step_up_tool: bool = False
    step_up_listing: bool = False
    scope_never_enough: bool = False
    modern_only: bool = False
    malformed_metadata: bool = False
    path: str = "/mcp"
    port: int = field(default_factory=free_port)
    requests: list[tuple[str, str, dict[str, str]]] = field(default_factory=list)
    eras: list[tuple[str, str | None]] = field(default_factory=list)
    moved_to: OAuthTestServer | None = None
    provider: RecordingProvider = field(init=False)
    _server: uvicorn.Server | None = field(default=None, init=False, repr=False)
    _thread: threading.Thread | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        self.provider = RecordingProvider(
            base_url=self.base_url,
            advertised_lifetime=self.advertised_lifetime,
            server_lifetime=self.server_lifetime,
            client_registration_options=ClientRegistrationOptions(
                enabled=self.registration, valid_scopes=self.valid_scopes, default_scopes=self.required_scopes
            ),
            revocation_options=RevocationOptions(enabled=True),
            required_scopes=self.required_scopes,
        )
        self.mcp = FastMCP("oauth-test", auth=self.provider)

        @self.mcp.tool(description="Return the text unchanged.")
        def echo(text: str) -> str:
            return text

        @self.mcp.tool(description="An operation that needs the admin scope.")
        def admin_task() -> str:
            return "admin done"

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        return self.base_url + self.path

    def start(self) -> None:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", self.port))
        sock.listen(128)
        app = _Guard(self.mcp.http_app(path=self.path), self)
        server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on", ws="none"))
        self._server = server

        def run() -> None:
            try:
                asyncio.run(server.serve(sockets=[sock]))
            finally:
                sock.close()

        self._thread = threading.Thread(target=run, name=f"oauth-server-{self.port}", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 15
        while not server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the OAuth test server did not start")
            time.sleep(0.01)

    def move_to(self, other: OAuthTestServer) -> None:
        """Hand this resource's authorization to ``other``'s authorization server (see the module doc)."""
        self.moved_to = other
        self.provider.revoke_all()

    def stop(self) -> None:
        if self._server is None or self._thread is None:
            return
        self._server.should_exit = True
        self._thread.join(10)
        self._server = self._thread = None


@contextmanager
def serve_oauth(**options: Any) -> Iterator[OAuthTestServer]:
    """Run an :class:`OAuthTestServer` for the ``with`` block."""
    server = OAuthTestServer(**options)
    server.start()
    try:
        yield server
    finally:
        server.stop()


class Browser:
    """The user's browser, scripted: approve at the authorization server, follow the redirect.

    Called from a worker thread by Keen (``open_browser``), like ``webbrowser.open``.
    ``tamper_state`` sends the callback a different ``state``, ``deny`` a refusal; ``visits`` holds every
    authorization URL; ``pages`` the callback page bodies; ``codes`` the codes seen.
    """

    def __init__(self, *, tamper_state: bool = False, deny: bool = False) -> None:
        self.tamper_state = tamper_state
        self.deny = deny
        self.visits: list[str] = []
        self.pages: list[str] = []
        self.statuses: list[int] = []
        self.codes: list[str] = []

    def __call__(self, url: str) -> bool:
        self.visits.append(url)
        with httpx2.Client(timeout=30, verify=tls()) as client:
            answer = client.get(url)
            location = answer.headers.get("location")
            if answer.status_code not in (302, 303, 307) or not location:
                self.pages.append(answer.text)
                self.statuses.append(answer.status_code)
                return True
            parts = urlsplit(location)
            query = {k: v[0] for k, v in parse_qs(parts.query).items()}
            self.codes.extend([query["code"]] if "code" in query else [])
            if self.tamper_state:
                query["state"] = "not-the-state-keen-sent"
            if self.deny:  # the user clicked "Deny": RFC 6749 section 4.1.2.1 error response
                query = {
                    "error": "access_denied",
                    "error_description": "The user said no",
                    "state": query["state"],
                }
            location = urlunsplit(parts._replace(query=urlencode(query)))
            page = client.get(location)
            self.pages.append(page.text)
            self.statuses.append(page.status_code)
        return True

    def scope_of(self, visit: int) -> str | None:
        return parse_qs(urlsplit(self.visits[visit]).query).get("scope", [None])[0]

    def param(self, visit: int, name: str) -> str | None:
        return parse_qs(urlsplit(self.visits[visit]).query).get(name, [None])[0]


def oauth_config(url: str, **auth: Any) -> HttpServerConfig:
    """An ``oauth`` server entry for ``url`` with a free callback port (tests run in parallel)."""
    auth.setdefault("callback_port", free_port())
    return HttpServerConfig(transport="streamable_http", url=url, auth=OAuthAuth(type="oauth", **auth))


def background_auth(server: str, config: HttpServerConfig, **options: Any) -> KeenOAuthProvider:
    """What the Manager builds at startup: a non-interactive provider over the file store."""
    assert isinstance(config.auth, OAuthAuth)
    return create_oauth_auth(
        server, config.url, config.auth, store=FileTokenStore(server), interactive=False, **options
    )


MCP_TIMEOUT = httpx2.Timeout(30.0, read=300.0)
"""The timeouts the MCP SDK gives its own HTTP client (``create_mcp_http_client``): with
httpx2's default 5 s read timeout a loaded machine can end a response stream before its
answer ("SSE stream ended without a response")."""


async def list_tool_names(auth: httpx2.Auth, url: str, *, negotiate: bool = False) -> list[str]:
    """initialize + tools/list over the SDK client with ``auth``; with ``negotiate``, the era as
    the Manager negotiates it (``server/discover``, else initialize) instead of initialize."""
    async with (
        httpx2.AsyncClient(auth=auth, verify=tls(), timeout=MCP_TIMEOUT) as client,
        streamable_http_client(url, http_client=client) as (read, write),
        ClientSession(read, write) as session,
    ):
        if negotiate:
            await negotiate_auto(session)
        else:
            await session.initialize()
        return [tool.name for tool in (await session.list_tools()).tools]


async def call_tools(auth: httpx2.Auth, url: str, *calls: tuple[str, dict[str, Any]]) -> list[Any]:
    """One session, several ``tools/call``s; each entry is the result or the exception raised."""
    outcomes: list[Any] = []
    async with (
        httpx2.AsyncClient(auth=auth, verify=tls(), timeout=MCP_TIMEOUT) as client,
        streamable_http_client(url, http_client=client) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        for name, arguments in calls:
            try:
                outcomes.append(await session.call_tool(name, arguments))
            except Exception as exc:
                outcomes.append(exc)
    return outcomes


def text_of(result: Any) -> str:
    return " ".join(getattr(block, "text", "") for block in result.content)
