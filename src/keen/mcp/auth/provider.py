"""MCP-standard OAuth for Streamable HTTP servers, on the SDK's ``OAuthClientProvider``.

The MCP 2025-11-25 authorization specification, through the SDK:
protected resource metadata (RFC 9728) and authorization server metadata / OIDC
discovery (RFC 8414), dynamic client registration (RFC 7591) or a client ID metadata
document where the server supports it, Authorization Code + PKCE (S256), the
``resource`` parameter (RFC 8707), bearer injection, refresh and step-up on
``insufficient_scope``. The SDK does all of that; Keen adds:

* **Two modes.** ``interactive=True`` runs the SDK flow with a browser and the loopback
  listener of :mod:`keen.mcp.auth.callback`. ``interactive=False`` (background startup,
  every Manager connection) never opens a browser: it sends the saved token, refreshes
  it when it has expired (or when the server rejects it once), and otherwise fails fast
  with :class:`~keen.errors.AuthRequired` (no usable sign-in) or
  :class:`~keen.errors.AuthFailed` (the saved sign-in was rejected or could not be
  renewed), before any discovery or registration request.
* **Scopes**: the configured ``scopes`` win over the challenge's;
  with none configured the SDK's choice stands (``WWW-Authenticate`` scope, then
  ``scopes_supported``). A step-up requests the union (SEP-2350). In the background a
  403 ``insufficient_scope`` is not re-authorized: the scopes are saved as
  ``pending_scope`` and the next ``keen mcp connect`` asks for them too.
* **Persistence across restarts**: the discovered metadata is saved with the tokens, so
  a refresh in a new process goes to the real token endpoint, and tokens are bound to
  the server URL they were issued for (a changed URL never receives old tokens).
* **Errors** from the SDK (``OAuthFlowError`` and kin) become Keen errors with the next
  step in the message; secrets are registered with the redactor as they appear.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import webbrowser
from collections.abc import AsyncGenerator, Callable
from typing import Any
from urllib.parse import parse_qs, urlsplit

import anyio
import anyio.to_thread
import httpx2
from mcp.client.auth import OAuthClientProvider, OAuthFlowError
from mcp.client.auth.utils import extract_field_from_www_auth, union_scopes
from mcp.shared.auth import (
    AuthorizationCodeResult,
    OAuthClientInformationFull,
    OAuthClientMetadata,
    OAuthMetadata,
    OAuthToken,
    ProtectedResourceMetadata,
)
from mcp.shared.auth_utils import resource_url_from_server_url
from mcp.shared.inbound import MCP_PROTOCOL_VERSION_HEADER
from pydantic import AnyUrl, PrivateAttr, ValidationError

from keen._redact import redactor
from keen.errors import AuthFailed, AuthRequired, KeenError, Remedy
from keen.mcp.auth._wording import flow_error, oauth_error_text, short, sign_in_message
from keen.mcp.auth.callback import CallbackListener, redirect_uri
from keen.mcp.auth.store import AuthMetadata, TokenStore
from keen.mcp.config.servers import OAuthAuth

__all__ = [
    "AUTHORIZATION_TIMEOUT",
    "CLIENT_NAME",
    "MAX_AUTHORIZATIONS",
    "KeenOAuthProvider",
    "OpenBrowser",
    "ShowUrl",
    "create_oauth_auth",
    "default_open_browser",
]

logger = logging.getLogger(__name__)

CLIENT_NAME = "Keen"
AUTHORIZATION_TIMEOUT = 300.0
"""``keen mcp connect`` waits up to 5 minutes for the browser sign-in (docs/architecture.md "Servers and their states")."""
MAX_AUTHORIZATIONS = 3
"""Browser authorizations one interactive provider runs before giving up on a server that keeps
answering 403 ``insufficient_scope``: the first sign-in and two step-ups."""

OpenBrowser = Callable[[str], bool]
"""Opens the authorization URL; returns False when it could not (no browser)."""
ShowUrl = Callable[[str, bool], None]
"""Told ``(authorization_url, opened)`` so a CLI can print the URL, always or when not opened."""


def default_open_browser(url: str) -> bool:
    """Open ``url`` with :mod:`webbrowser`; False without a graphical session on Linux, where
    ``webbrowser`` would otherwise start a text browser inside Keen's own terminal."""
    if sys.platform.startswith("linux") and not (
        os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")
    ):
        return False
    try:
        return webbrowser.open(url)
    except webbrowser.Error:
        return False


class _ScopedClientMetadata(OAuthClientMetadata):
    """Client metadata that applies Keen's scope policy whenever the SDK assigns ``scope``.

    The SDK picks scopes inside its flow (from the challenge, metadata, a step-up union)
    and writes them here just before registration and authorization; routing that write
    through the policy is the one hook that keeps configured scopes authoritative.
    """

    _policy: Callable[[str | None], str | None] | None = PrivateAttr(default=None)

    def __setattr__(self, name: str, value: Any) -> None:
        if name == "scope" and self._policy is not None:
            value = self._policy(value)
        super().__setattr__(name, value)


class KeenOAuthProvider(OAuthClientProvider):
    """The ``httpx2.Auth`` for one OAuth server; build it with :func:`create_oauth_auth`.

    ``failure`` holds the last :class:`~keen.errors.AuthRequired` / :class:`~keen.errors.AuthFailed`
    this provider raised or recorded (a background step-up is recorded, not raised, so the
    session survives), for :func:`keen.mcp.auth.classify_auth_failure`.
    """

    def __init__(
        self,
        server: str,
        url: str,
        cfg: OAuthAuth,
        *,
        store: TokenStore,
        interactive: bool,
        open_browser: OpenBrowser | None = None,
        on_authorization_url: ShowUrl | None = None,
        timeout: float = AUTHORIZATION_TIMEOUT,
        client_metadata_url: str | None = None,
        extra_scope: str | None = None,
        config_name: str = "configs.json",
    ) -> None:
        configured = " ".join(cfg.scopes) or None
        metadata = _ScopedClientMetadata(
            client_name=CLIENT_NAME,
            redirect_uris=[AnyUrl(redirect_uri(cfg.callback_port))],
            grant_types=["authorization_code", "refresh_token"],
            response_types=["code"],
            token_endpoint_auth_method="client_secret_post" if cfg.client_secret else "none",
            scope=union_scopes(configured, extra_scope),
        )
        metadata._policy = self._choose_scope
        super().__init__(
            server_url=url,
            client_metadata=metadata,
            storage=store,
            redirect_handler=self._redirect,
            callback_handler=self._callback,
            client_metadata_url=client_metadata_url,
        )
        self.server = server
        self.config_name = config_name
        """Where the server's entry is, as the fixes of a failed sign-in name it."""
        self.interactive = interactive
        self.failure: AuthRequired | AuthFailed | None = None
        self._cfg = cfg
        self._store = store
        self._configured_scope = configured
        self._extra_scope = extra_scope
        self._open_browser = open_browser
        self._show_url = on_authorization_url
        self._timeout = timeout
        self._step_up = False
        self._had_token = False
        self._refresh_error: str | None = None
        self._discovery: list[str] = []
        self._authorizations = 0
        self._callback_result: AuthorizationCodeResult | None = None
        redactor.add(cfg.client_secret)

    @property
    def has_token(self) -> bool:
        """Whether a token was loaded or obtained (after the first request)."""
        return self._had_token

    # -- the flow ------------------------------------------------------------------------------------

    async def _auth_flow(self, request: httpx2.Request) -> AsyncGenerator[httpx2.Request, httpx2.Response]:
        inner = self._interactive_flow(request) if self.interactive else self._background_flow(request)
        try:
            outgoing = await inner.__anext__()
            while True:
                response = yield outgoing
                outgoing = await inner.asend(response)
        except StopAsyncIteration:
            return
        finally:
            await inner.aclose()

    async def _interactive_flow(
        self, request: httpx2.Request
    ) -> AsyncGenerator[httpx2.Request, httpx2.Response]:
        """The SDK's flow, observed (step-up, discovery attempts) and with its errors translated.

        The SDK re-authorizes once per request on 403 ``insufficient_scope``; a server that
        still answers 403 after that gets another authorization with the wider scope, up to
        :data:`MAX_AUTHORIZATIONS` in all (the MCP authorization spec's scope challenge
        handling: clients bound these retries), then :class:`~keen.errors.AuthFailed`.
        Passing that last 403 on instead would read as an era verdict to the
        ``server/discover`` probe, which then falls back to a handshake the server refuses.
        """
        final: httpx2.Response | None = None
        for _round in range(MAX_AUTHORIZATIONS):
            final = None
            flow = super()._auth_flow(request)
            try:
                outgoing = await flow.__anext__()
                while True:
                    response = yield outgoing
                    if outgoing is request:
                        final = response
                        if response.status_code in (401, 403):
                            self._step_up = _is_step_up(response)
                            if self._step_up:
                                self._forget_narrow_registration(
                                    extract_field_from_www_auth(response, "scope")
                                )
                    elif "/.well-known/" in outgoing.url.path:
                        attempt = f"{_bare(outgoing.url)} -> HTTP {response.status_code}"
                        if attempt not in self._discovery:
                            self._discovery.append(attempt)
                    outgoing = await flow.asend(response)
            except StopAsyncIteration:
                pass
            except KeenError as exc:
                if isinstance(exc, AuthRequired | AuthFailed):
                    self.failure = exc
                raise
            except (OAuthFlowError, ValidationError) as exc:
                no_metadata = self.context.oauth_metadata is None
                error = flow_error(
                    self.server,
                    exc,
                    no_metadata=no_metadata,
                    discovery=self._discovery,
                    config_name=self.config_name,
                )
                self.failure = error
                raise error from exc
            finally:
                await flow.aclose()
            if final is None or not _is_step_up(final):
                return
            if self._authorizations >= MAX_AUTHORIZATIONS:
                break
            # The next round's SDK flow meets the same 403 first and steps up with the union.
            logger.debug("server %s: still short of scope after signing in; authorizing again", self.server)
        assert final is not None  # every round that did not return saw a 403
        await final.aread()
        self.failure = error = self._step_up_refused(final)
        raise error

    async def _background_flow(
        self, request: httpx2.Request
    ) -> AsyncGenerator[httpx2.Request, httpx2.Response]:
        """Saved token, refresh, or a fast AuthRequired/AuthFailed: never a browser."""
        async with self.context.lock:
            if not self._initialized:
                await self._initialize()
            self.context.protocol_version = request.headers.get(MCP_PROTOCOL_VERSION_HEADER)
            refreshed = False
            if not self.context.is_token_valid():
                await self._adopt_newer_sign_in()
            if not self.context.is_token_valid() and self.context.can_refresh_token():
                refreshed = True
                refresh_response = yield await self._refresh_token()
                await self._handle_refresh_response(refresh_response)
            if self.context.is_token_valid():
                self._add_auth_header(request)
            response = yield request
            if (
                response.status_code == 401
                and not refreshed
                and await self._adopt_newer_sign_in()
                and self.context.is_token_valid()
            ):
                # Another connection or `keen mcp connect` signed in since this one loaded its token.
                self._add_auth_header(request)
                refreshed = True
                response = yield request
            if response.status_code == 401 and not refreshed and self.context.can_refresh_token():
                # A token we believed valid was refused (revoked, expired early, clock skew): renew once.
                refresh_response = yield await self._refresh_token()
                if await self._handle_refresh_response(refresh_response):
                    self._add_auth_header(request)
                    response = yield request
            if response.status_code == 401:
                await response.aread()
                self.failure = self._unauthorized(response)
                raise self.failure
            if _is_step_up(response):
                error = await self._note_step_up(response)
                if _jsonrpc_method(request) != "tools/call":
                    # initialize or tools/list needing more scope leaves the server unusable: fail
                    # the connection (auth_required). One tool needing more keeps the session alive.
                    await response.aread()
                    raise error

    # -- SDK hooks -----------------------------------------------------------------------------------

    async def _initialize(self) -> None:
        metadata = await self._store.get_metadata()
        here = resource_url_from_server_url(self.context.server_url)
        tokens: OAuthToken | None = None
        client_info: OAuthClientInformationFull | None = None
        if metadata.resource_url is None or metadata.resource_url == here:
            tokens = await self._store.get_tokens()
            client_info = await self._store.get_client_info()
            self._restore_metadata(metadata)
        else:
            # Never present tokens issued for one URL to another (the config's url changed).
            logger.debug("server %s: saved sign-in belongs to another URL; ignoring it", self.server)
        if client_info is None and self._cfg.client_id:
            client_info = self._preregistered_client()
        self.context.current_tokens = tokens
        self.context.token_expiry_time = None
        if tokens is not None and tokens.expires_in is not None:
            self.context.update_token_expiry(tokens)
        self.context.client_info = client_info
        self._had_token = self._had_token or tokens is not None
        self._initialized = True

    async def _adopt_newer_sign_in(self) -> bool:
        """Before renewing, take the saved sign-in if it is not the one this connection holds.

        Tokens live in memory for the life of a connection while the store is shared: a
        ``keen mcp connect`` (a step-up, say) or another connection may have saved a newer
        sign-in since. Refreshing the stale in-memory token would then overwrite that newer
        sign-in in the store with a renewal of the old grant (without the step-up scope), and
        the old refresh token may still be accepted. True when the saved sign-in was adopted.
        """
        saved = await self._store.get_tokens()
        held = self.context.current_tokens
        if saved is None or (held is not None and saved.access_token == held.access_token):
            return False
        await self._initialize()
        logger.debug("server %s: using the sign-in saved since this connection started", self.server)
        return self.context.current_tokens is not None

    async def _handle_token_response(self, response: httpx2.Response) -> None:
        await super()._handle_token_response(response)
        self._had_token = True
        self.failure = None
        await self._store.set_metadata(self._metadata_to_save(pending_scope=None))
        logger.debug("server %s: signed in", self.server)

    async def _handle_refresh_response(self, response: httpx2.Response) -> bool:
        if response.status_code != 200:
            self._refresh_error = await oauth_error_text(response)
        ok = await super()._handle_refresh_response(response)
        if ok:
            self._refresh_error = None
            logger.debug("server %s: token refreshed", self.server)
        return ok

    async def _redirect(self, authorization_url: str) -> None:
        """Bind the callback port, send the user to the authorization URL, and serve the
        callback until it arrives; :meth:`_callback` hands the result to the SDK."""
        if not self.interactive:  # defensive: the background flow never reaches the SDK's redirect
            raise AuthRequired(sign_in_message(self.server), server=self.server)
        self._authorizations += 1
        state = parse_qs(urlsplit(authorization_url).query).get("state", [""])[0]
        listener = CallbackListener(
            server=self.server, port=self._cfg.callback_port, config_name=self.config_name
        )
        await listener.open()
        outcome: list[AuthorizationCodeResult | KeenError] = []
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._announce, authorization_url)
            try:
                outcome.append(await listener.wait(state, self._timeout))
            except KeenError as exc:
                outcome.append(exc)
            tg.cancel_scope.cancel()
        if isinstance(outcome[0], KeenError):
            raise outcome[0]
        self._callback_result = outcome[0]

    async def _callback(self) -> AuthorizationCodeResult:
        result, self._callback_result = self._callback_result, None
        if result is None:
            raise AuthFailed(f'sign-in for MCP server "{self.server}" got no callback', server=self.server)
        return result

    # -- helpers -------------------------------------------------------------------------------------

    async def _announce(self, url: str) -> None:
        opened = False
        if self._open_browser is not None:
            try:
                opened = bool(await anyio.to_thread.run_sync(self._open_browser, url, abandon_on_cancel=True))
            except Exception as exc:  # a broken opener must not end the sign-in; the URL is still shown
                logger.debug("server %s: opening the browser failed: %r", self.server, exc)
        if self._show_url is not None:
            self._show_url(url, opened)
        elif not opened:
            logger.warning("To sign in to MCP server %s, open this URL in a browser: %s", self.server, url)

    def _choose_scope(self, sdk_choice: str | None) -> str | None:
        if self._step_up:
            return union_scopes(self._configured_scope, sdk_choice)
        base = self._configured_scope or sdk_choice
        if self._configured_scope and sdk_choice and "offline_access" in sdk_choice.split():
            base = union_scopes(base, "offline_access")
        return union_scopes(base, self._extra_scope)

    def _forget_narrow_registration(self, challenged: str | None) -> None:
        """Before a step-up, drop a dynamic registration whose scope does not cover the challenge:
        authorization servers may refuse scopes a client was not registered with (RFC 7591 ``scope``),
        so the SDK registers again with the union instead."""
        info = self.context.client_info
        if info is None or info.scope is None or not challenged or self._cfg.client_id:
            return
        if info.client_id == self.context.client_metadata_url:
            return  # a CIMD client id is not a registration
        if not set(challenged.split()) <= set(info.scope.split()):
            logger.debug("server %s: registering again for the step-up scopes", self.server)
            self.context.client_info = None

    def _preregistered_client(self) -> OAuthClientInformationFull:
        return OAuthClientInformationFull(
            client_id=self._cfg.client_id or "",
            client_secret=self._cfg.client_secret,
            redirect_uris=[AnyUrl(redirect_uri(self._cfg.callback_port))],
            token_endpoint_auth_method="client_secret_basic" if self._cfg.client_secret else "none",
        )

    def _restore_metadata(self, metadata: AuthMetadata) -> None:
        try:
            if metadata.protected_resource:
                prm = ProtectedResourceMetadata.model_validate(metadata.protected_resource)
                self.context.protected_resource_metadata = prm
                self.context.auth_server_url = str(prm.authorization_servers[0])
            if metadata.authorization_server:
                self.context.oauth_metadata = OAuthMetadata.model_validate(metadata.authorization_server)
        except ValidationError:
            # Stale or hand-edited: the next full sign-in rediscovers it.
            logger.debug("server %s: saved OAuth metadata is invalid; ignoring it", self.server)

    def _metadata_to_save(self, *, pending_scope: str | None) -> AuthMetadata:
        prm, asm = self.context.protected_resource_metadata, self.context.oauth_metadata
        return AuthMetadata(
            resource_url=resource_url_from_server_url(self.context.server_url),
            protected_resource=prm.model_dump(mode="json", exclude_none=True) if prm else None,
            authorization_server=asm.model_dump(mode="json", exclude_none=True) if asm else None,
            pending_scope=pending_scope,
        )

    async def _note_step_up(self, response: httpx2.Response) -> AuthRequired:
        challenged = extract_field_from_www_auth(response, "scope")
        granted = self.context.current_tokens.scope if self.context.current_tokens else None
        wanted = union_scopes(union_scopes(granted, self._configured_scope), challenged)
        saved = await self._store.get_metadata()
        await self._store.set_metadata(
            AuthMetadata(
                resource_url=saved.resource_url,
                protected_resource=saved.protected_resource,
                authorization_server=saved.authorization_server,
                pending_scope=union_scopes(saved.pending_scope, wanted),
            )
        )
        self.failure = error = AuthRequired(
            f'MCP server "{self.server}" needs more permission for this request'
            + (f" (scope: {challenged})" if challenged else "")
            + "; signing in again grants it",
            server=self.server,
            remedy=Remedy.SIGN_IN,
        )
        logger.debug("server %s: step-up needed (scope %s)", self.server, challenged)
        return error

    def _step_up_refused(self, response: httpx2.Response) -> AuthFailed:
        challenged = extract_field_from_www_auth(response, "scope")
        granted = self.context.current_tokens.scope if self.context.current_tokens else None
        return AuthFailed(
            f'MCP server "{self.server}" still needs more permission'
            + (f" (scope: {redactor.redact(short(challenged))})" if challenged else "")
            + f" after {self._authorizations} sign-ins"
            + (f" that granted {redactor.redact(short(granted))}" if granted else "")
            + "; the account may not be allowed that scope: ask the server's administrator, "
            f'or check "scopes" in the server\'s entry in {self.config_name}',
            server=self.server,
            remedy=Remedy.FIX_CONFIG,
        )

    def _unauthorized(self, response: httpx2.Response) -> AuthRequired | AuthFailed:
        name = self.server
        if self._refresh_error is not None:
            return AuthFailed(
                f'MCP server "{name}": the saved sign-in could not be renewed ({self._refresh_error})',
                server=name,
                remedy=Remedy.SIGN_IN,
            )
        if self._had_token and self.context.current_tokens is not None and self.context.is_token_valid():
            reason = extract_field_from_www_auth(
                response, "error_description"
            ) or extract_field_from_www_auth(response, "error")
            return AuthFailed(
                f'MCP server "{name}" rejected the saved sign-in (HTTP 401'
                + (f": {redactor.redact(short(reason))}" if reason else "")
                + ")",
                server=name,
                remedy=Remedy.SIGN_IN,
            )
        if self._had_token:
            return AuthRequired(
                f'the sign-in for MCP server "{name}" has expired and cannot be renewed',
                server=name,
                remedy=Remedy.SIGN_IN,
            )
        return AuthRequired(sign_in_message(name), server=name, remedy=Remedy.SIGN_IN)


def create_oauth_auth(
    server: str,
    url: str,
    cfg: OAuthAuth,
    *,
    store: TokenStore,
    interactive: bool,
    open_browser: OpenBrowser | None = None,
    on_authorization_url: ShowUrl | None = None,
    timeout: float = AUTHORIZATION_TIMEOUT,
    client_metadata_url: str | None = None,
    extra_scope: str | None = None,
    config_name: str = "configs.json",
) -> KeenOAuthProvider:
    """The ``httpx2.Auth`` for an ``auth.type == "oauth"`` server; pass it as ``httpx2.AsyncClient(auth=...)``.

    Args:
        server: the configured name (messages, the store's file name).
        url: the MCP endpoint (the OAuth protected resource).
        cfg: the server's ``OAuthAuth``: ``scopes``, ``client_id``/``client_secret`` for a
            pre-registered client (else dynamic registration), ``callback_port`` (1456).
        store: where tokens, registration and metadata live (:class:`FileTokenStore`).
        interactive: True lets a full authorization open the browser and wait (``timeout``
            seconds, default 300) on ``http://127.0.0.1:<callback_port>/auth/mcp/callback``;
            False fails fast instead (see the module docstring).
        open_browser: opens the URL, returns False when it could not; None means "do not open"
            (pass :func:`default_open_browser` for the system browser).
        on_authorization_url: told ``(url, opened)``; without it an unopened URL is logged at WARNING.
        client_metadata_url: an https URL of Keen's client ID metadata document, used instead of
            registration when the authorization server advertises ``client_id_metadata_document_supported``.
        extra_scope: scopes to request on top of the policy's (a saved step-up's ``pending_scope``).
        config_name: where the server's entry is, as a failed sign-in's fix names it
            (``"the config this Manager was given"`` for one given in code).

    Raised from requests made with it (inside the transport's exception group):
    :class:`~keen.errors.AuthRequired`, :class:`~keen.errors.AuthFailed`.
    """
    return KeenOAuthProvider(
        server,
        url,
        cfg,
        store=store,
        interactive=interactive,
        open_browser=open_browser,
        on_authorization_url=on_authorization_url,
        timeout=timeout,
        client_metadata_url=client_metadata_url,
        extra_scope=extra_scope,
        config_name=config_name,
    )


def _jsonrpc_method(request: httpx2.Request) -> str | None:
    try:
        message = json.loads(request.content)
    except ValueError:
        return None
    return message.get("method") if isinstance(message, dict) else None


def _is_step_up(response: httpx2.Response) -> bool:
    return (
        response.status_code == 403 and extract_field_from_www_auth(response, "error") == "insufficient_scope"
    )


def _bare(url: httpx2.URL) -> str:
    return str(url.copy_with(query=None, fragment=None))
