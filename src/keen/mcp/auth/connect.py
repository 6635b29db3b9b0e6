"""Signing in (``keen mcp connect``) and the Manager's auth factory.

For an OAuth server, connect clears the
saved token, runs the browser flow on ``http://127.0.0.1:1456/auth/mcp/callback`` and
waits up to 5 minutes; the caller then refreshes the server (tools, skill). Background
connections use :func:`oauth_auth_factory` with ``interactive=False`` and never open a
browser.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import anyio
import httpx2
import mcp_types as mt
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client

from keen._redact import redactor
from keen._version import __version__
from keen.errors import (
    AuthFailed,
    CallTimeout,
    ConfigError,
    KeenError,
    Remedy,
    ServerDisconnected,
    exception_leaves,
)
from keen.mcp.auth.classify import classify_auth_failure
from keen.mcp.auth.provider import (
    AUTHORIZATION_TIMEOUT,
    OpenBrowser,
    ShowUrl,
    create_oauth_auth,
    default_open_browser,
)
from keen.mcp.auth.store import FileTokenStore, TokenStore
from keen.mcp.config.servers import AuthFactory, HttpServerConfig, OAuthAuth
from keen.mcp.connection.sdk_private import negotiate_auto
from keen.mcp.connection.translate import unreachable_message

__all__ = ["SignInResult", "authorize_interactively", "oauth_auth_factory"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class SignInResult:
    """The end of :func:`authorize_interactively`: ``signed_in`` is False when the server never
    asked for a sign-in (it serves without auth); ``scope`` is what the server granted."""

    server: str
    signed_in: bool
    scope: str | None = None


async def authorize_interactively(
    server: str,
    config: HttpServerConfig,
    *,
    store: TokenStore | None = None,
    open_browser: OpenBrowser | None = default_open_browser,
    on_authorization_url: ShowUrl | None = None,
    timeout: float = AUTHORIZATION_TIMEOUT,
    client_metadata_url: str | None = None,
    config_name: str = "configs.json",
) -> SignInResult:
    """Sign in to an OAuth server from scratch; what ``keen mcp connect SERVER`` runs first.

    Clears the saved sign-in (keeping a pending step-up scope to ask for), then opens one
    MCP session (the server's era, negotiated as every connection does: ``server/discover``
    for 2026-07-28, else ``initialize``; then the first tools/list page) with an interactive provider, so
    whichever request the server challenges starts the browser flow: the authorization
    URL goes to ``open_browser`` (and ``on_authorization_url``), the callback is awaited
    on ``config.auth.callback_port`` for up to ``timeout`` seconds, tokens are saved 0600.
    Afterwards call ``Manager.refresh(server)``: it reuses the saved token. ``config_name``:
    where ``config`` is, as the messages' fixes name it (``Manager.config_name``).

    Raises ``ConfigError`` (not an OAuth server), ``AuthRequired`` (timed out, port in use),
    ``AuthFailed`` (wrong ``state``, refusal, registration or token errors, missing or
    malformed metadata), ``ServerDisconnected`` (unreachable), ``CallTimeout``. Cancelling
    (Ctrl-C) stops the flow and frees the callback port.
    """
    if not isinstance(config.auth, OAuthAuth):
        raise ConfigError(
            f'MCP server "{server}" does not use OAuth (auth.type is "{config.auth.type}"); there is nothing to '
            f'sign in to. Set "auth": {{"type": "oauth"}} in {config_name} if it needs a browser sign-in',
            server=server,
            field="auth.type",
        )
    store = store or FileTokenStore(server)
    try:
        pending = (await store.get_metadata()).pending_scope
    except AuthFailed:  # an unusable file is exactly what a fresh sign-in replaces
        pending = None
    await store.clear()
    auth = create_oauth_auth(
        server,
        config.url,
        config.auth,
        store=store,
        interactive=True,
        open_browser=open_browser,
        on_authorization_url=on_authorization_url,
        timeout=timeout,
        client_metadata_url=client_metadata_url or config.auth.client_metadata_url,
        extra_scope=pending,
        config_name=config_name,
    )
    budget = timeout + config.timeouts.connect + config.timeouts.list_tools
    client = httpx2.AsyncClient(
        headers=dict(config.headers), auth=auth, timeout=httpx2.Timeout(config.timeouts.connect, read=300.0)
    )
    try:
        with anyio.fail_after(budget):
            async with (
                client,
                streamable_http_client(config.url, http_client=client) as (read, write),
                ClientSession(
                    read, write, client_info=mt.Implementation(name="keen", version=__version__)
                ) as session,
            ):
                # The server's era, as every connection negotiates it (keen.mcp.connection.server):
                # probe server/discover (2026-07-28), else the initialize handshake. A server
                # of the new era alone refuses a bare initialize after the token exchange.
                await negotiate_auto(session)
                await session.list_tools()
    except Exception as exc:
        raise _sign_in_error(exc, server, config.url, auth, budget) from exc
    tokens = await store.get_tokens()
    return SignInResult(server=server, signed_in=tokens is not None, scope=tokens.scope if tokens else None)


def oauth_auth_factory(
    *,
    directory: Path | None = None,
    open_browser: OpenBrowser | None = default_open_browser,
    on_authorization_url: ShowUrl | None = None,
    timeout: float = AUTHORIZATION_TIMEOUT,
    client_metadata_url: str | None = None,
    config_name: str | None = None,
) -> AuthFactory:
    """An ``AuthFactory`` for ``Manager(auth_factory=...)`` over :class:`FileTokenStore` files in
    ``directory`` (default ``$KEEN_HOME/mcp/auth``). Background connections get
    ``interactive=False``; the browser hooks apply only when the Manager asks for interactive.
    ``config_name``: where the servers' entries are, as a failed sign-in's fix names it;
    default: the Manager's (:attr:`keen.mcp.Manager.config_name`, which it passes to a factory
    with a parameter named ``config_name``, as this one's keyword-only one), else
    ``configs.json``."""
    named = config_name

    def factory(
        server: str,
        config: HttpServerConfig,
        oauth: OAuthAuth,
        interactive: bool,
        *,
        config_name: str | None = None,
    ) -> tuple[httpx2.Auth, bool]:
        store = FileTokenStore(server, directory)
        auth = create_oauth_auth(
            server,
            config.url,
            oauth,
            store=store,
            interactive=interactive,
            open_browser=open_browser if interactive else None,
            on_authorization_url=on_authorization_url if interactive else None,
            timeout=timeout,
            client_metadata_url=client_metadata_url or oauth.client_metadata_url,
            config_name=named or config_name or "configs.json",
        )
        return auth, store.has_tokens()

    return factory


def _sign_in_error(exc: Exception, server: str, url: str, auth: httpx2.Auth, budget: float) -> KeenError:
    found = classify_auth_failure(exc, server=server, auth=auth)
    if found is not None:
        return found
    leaves = list(exception_leaves(exc))
    for leaf in leaves:
        if isinstance(leaf, KeenError):
            return leaf
    for leaf in leaves:
        if isinstance(leaf, TimeoutError):
            return CallTimeout(
                f'signing in to MCP server "{server}" took longer than {budget:g} s',
                server=server,
                seconds=budget,
                remedy=Remedy.SIGN_IN,
            )
        if isinstance(leaf, httpx2.HTTPError | OSError):
            return ServerDisconnected(
                redactor.redact(unreachable_message(server, url, leaf)), server=server, remedy=Remedy.SIGN_IN
            )
    first = leaves[0] if leaves else exc
    return AuthFailed(
        redactor.redact(f'signing in to MCP server "{server}" failed: {first.__class__.__name__}: {first}'),
        server=server,
        remedy=Remedy.SIGN_IN,
    )
