"""The whole OAuth flow against a real OAuth-protected MCP server on loopback.

Sign-in (registration, PKCE S256, resource, loopback callback), the 0600 token file, reuse
after a restart without a browser, refresh on expiry and on an early rejection, revocation
-> auth_failed and ``connect`` recovering it, scope selection, step-up. Driven through the
SDK's ``ClientSession`` + ``streamable_http_client`` with Keen's auth, as the Manager does.
"""

from __future__ import annotations

import json
import re
import stat
import time
from pathlib import Path

import anyio
import httpx2
import pytest
from mcp.shared.exceptions import MCPError

from helpers.oauth import (
    Browser,
    background_auth,
    call_tools,
    list_tool_names,
    oauth_config,
    serve_oauth,
    text_of,
)
from helpers.serve import tls
from keen.cli._wording import describe
from keen.errors import AuthFailed, AuthRequired, Remedy
from keen.mcp.auth import FileTokenStore, authorize_interactively, classify_auth_failure, create_oauth_auth

pytestmark = pytest.mark.anyio


async def test_sign_in_registers_keen_uses_pkce_and_saves_a_private_token_file(keen_home: Path) -> None:
    with serve_oauth() as srv:
        config = oauth_config(srv.url)
        browser = Browser()
        result = await authorize_interactively("demo", config, open_browser=browser, timeout=30)

        assert result.signed_in and result.scope == "read"
        assert len(browser.visits) == 1
        port = config.auth.callback_port  # type: ignore[union-attr]
        assert browser.param(0, "redirect_uri") == f"http://127.0.0.1:{port}/auth/mcp/callback"
        assert browser.param(0, "code_challenge_method") == "S256"
        assert len(browser.param(0, "code_challenge") or "") == 43
        assert browser.param(0, "resource") == srv.url
        assert browser.statuses == [200] and "You can close this tab" in browser.pages[0]
        assert browser.codes[0] not in browser.pages[0]

        (client,) = srv.provider.clients.values()
        assert client.client_name == "Keen"
        assert [str(u) for u in client.redirect_uris or []] == [f"http://127.0.0.1:{port}/auth/mcp/callback"]
        assert client.token_endpoint_auth_method == "none"
        assert set(client.grant_types) == {"authorization_code", "refresh_token"}

        path = keen_home / "mcp" / "auth" / "demo.json"
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
        saved = json.loads(path.read_text())
        assert saved["tokens"]["access_token"] == srv.provider.issued[-1].access_token
        assert saved["resource_url"] == srv.url
        assert saved["authorization_server"]["token_endpoint"] == f"{srv.base_url}/token"
        assert [p.name for p in path.parent.iterdir()] == ["demo.json"]  # no temp files left behind
        assert not (keen_home / "mcp" / "configs.json").exists()
        assert not (keen_home / "skills").exists()


async def test_saved_token_is_reused_after_restart_without_a_browser(keen_home: Path) -> None:
    with serve_oauth() as srv:
        config = oauth_config(srv.url)
        await authorize_interactively("demo", config, open_browser=Browser(), timeout=30)
        registrations, issued = len(srv.provider.clients), len(srv.provider.issued)

        untouched = Browser()
        auth = background_auth("demo", config, open_browser=untouched)
        assert await list_tool_names(auth, srv.url) == ["echo", "admin_task"]

        assert untouched.visits == []
        assert len(srv.provider.clients) == registrations and len(srv.provider.issued) == issued
        assert auth.has_token and auth.failure is None


async def test_background_start_without_token_fails_fast_with_auth_required(keen_home: Path) -> None:
    with serve_oauth() as srv:
        config = oauth_config(srv.url)
        browser = Browser()
        auth = background_auth("demo", config, open_browser=browser)
        with pytest.RaisesGroup(
            # The SDK raises it from its task group; Keen's own error is the leaf.
            pytest.RaisesExc(AuthRequired, match='MCP server "demo" needs you to sign in'),
            allow_unwrapped=True,
            flatten_subgroups=True,
        ) as caught:
            await list_tool_names(auth, srv.url)

        error = classify_auth_failure(caught.value, server="demo", auth=auth)
        assert isinstance(error, AuthRequired)
        assert str(error) == 'MCP server "demo" needs you to sign in' and error.remedy is Remedy.SIGN_IN
        assert describe(error) == 'MCP server "demo" needs you to sign in; run: keen mcp connect demo'
        assert browser.visits == []
        # Fast: no discovery, no registration, no authorization before the user asks for it.
        assert srv.provider.clients == {}
        assert not [
            path
            for _, path, _ in srv.requests
            if path.startswith(("/.well-known", "/register", "/authorize"))
        ]


async def test_expired_token_is_refreshed_at_the_next_start(keen_home: Path) -> None:
    with serve_oauth(advertised_lifetime=2) as srv:
        config = oauth_config(srv.url)
        await authorize_interactively("demo", config, open_browser=Browser(), timeout=30)
        before = srv.provider.refreshes
        old = await FileTokenStore("demo").get_tokens()
        await anyio.sleep(2.2)

        auth = background_auth("demo", config)
        assert await list_tool_names(auth, srv.url) == ["echo", "admin_task"]

        assert srv.provider.refreshes >= before + 1
        new = await FileTokenStore("demo").get_tokens()
        assert old is not None and new is not None
        assert new.access_token != old.access_token
        assert new.access_token == srv.provider.issued[-1].access_token


async def test_token_the_server_rejects_early_is_refreshed_once_and_retried(keen_home: Path) -> None:
    with serve_oauth() as srv:
        config = oauth_config(srv.url)
        await authorize_interactively("demo", config, open_browser=Browser(), timeout=30)
        # The server forgets its access tokens ahead of their advertised expiry (the refresh tokens stay).
        srv.provider.access_tokens.clear()
        before = srv.provider.refreshes

        auth = background_auth("demo", config)
        assert await list_tool_names(auth, srv.url) == ["echo", "admin_task"]
        assert srv.provider.refreshes == before + 1


async def test_revoked_token_is_auth_failed_and_connect_recovers(keen_home: Path) -> None:
    with serve_oauth() as srv:
        config = oauth_config(srv.url)
        await authorize_interactively("demo", config, open_browser=Browser(), timeout=30)
        tokens = await FileTokenStore("demo").get_tokens()
        client = await FileTokenStore("demo").get_client_info()
        assert tokens is not None and tokens.refresh_token and client is not None
        async with httpx2.AsyncClient(verify=tls()) as http:  # the user revokes Keen at the provider
            answer = await http.post(
                f"{srv.base_url}/revoke",
                data={"token": tokens.refresh_token, "client_id": client.client_id, "client_secret": ""},
            )
        assert answer.status_code == 200

        auth = background_auth("demo", config)
        with pytest.RaisesGroup(
            # The SDK raises it from its task group; Keen's own error is the leaf.
            pytest.RaisesExc(
                AuthFailed, match=re.escape("the saved sign-in could not be renewed (invalid_grant")
            ),
            allow_unwrapped=True,
            flatten_subgroups=True,
        ) as caught:
            await list_tool_names(auth, srv.url)
        error = classify_auth_failure(caught.value, server="demo", auth=auth)
        assert isinstance(error, AuthFailed)
        assert "could not be renewed (invalid_grant" in str(error)
        assert error.remedy is Remedy.SIGN_IN and describe(error).endswith("run: keen mcp connect demo")

        browser = Browser()
        result = await authorize_interactively("demo", config, open_browser=browser, timeout=30)
        assert result.signed_in and len(browser.visits) == 1
        assert await list_tool_names(background_auth("demo", config), srv.url) == ["echo", "admin_task"]


async def test_configured_scopes_win_over_the_servers_suggestion(keen_home: Path) -> None:
    with serve_oauth() as srv:
        browser = Browser()
        config = oauth_config(srv.url, scopes=["write", "read"])
        result = await authorize_interactively("demo", config, open_browser=browser, timeout=30)
        assert browser.scope_of(0) == "write read"
        assert set((result.scope or "").split()) == {"write", "read"}


async def test_step_up_in_an_interactive_session_asks_for_the_union_of_scopes(keen_home: Path) -> None:
    with serve_oauth(step_up_tool=True) as srv:
        config = oauth_config(srv.url)
        browser = Browser()
        assert config.auth.type == "oauth"
        auth = create_oauth_auth(
            "demo", srv.url, config.auth, store=FileTokenStore("demo"), interactive=True, open_browser=browser
        )
        (outcome,) = await call_tools(auth, srv.url, ("admin_task", {}))

        assert len(browser.visits) == 2
        assert browser.scope_of(0) == "read"
        assert set((browser.scope_of(1) or "").split()) == {"read", "admin"}
        # This authorization server refuses scopes a client was not registered with, so Keen
        # registered again with the union; this MCP server binds a session to the client that
        # opened it, so the call in that session fails and the next session has the scope.
        assert [c.scope for c in srv.provider.clients.values()] == ["read", "read admin"]
        assert isinstance(outcome, MCPError) and "Session not found" in str(outcome)
        saved = await FileTokenStore("demo").get_tokens()
        assert saved is not None and set((saved.scope or "").split()) == {"read", "admin"}
        (done,) = await call_tools(background_auth("demo", config), srv.url, ("admin_task", {}))
        assert text_of(done) == "admin done"


async def test_step_up_in_the_background_keeps_the_session_and_connect_grants_it(keen_home: Path) -> None:
    with serve_oauth(step_up_tool=True) as srv:
        config = oauth_config(srv.url)
        await authorize_interactively("demo", config, open_browser=Browser(), timeout=30)

        auth = background_auth("demo", config)
        refused, echoed = await call_tools(
            auth, srv.url, ("admin_task", {}), ("echo", {"text": "still here"})
        )
        assert isinstance(refused, MCPError)
        assert text_of(echoed) == "still here"  # one tool needing more scope does not end the session
        error = classify_auth_failure(refused, server="demo", auth=auth)
        assert isinstance(error, AuthRequired)
        assert "needs more permission for this request (scope: read admin)" in str(error)
        assert "admin" in ((await FileTokenStore("demo").get_metadata()).pending_scope or "")

        browser = Browser()
        await authorize_interactively("demo", config, open_browser=browser, timeout=30)
        assert set((browser.scope_of(0) or "").split()) == {"read", "admin"}
        assert (await FileTokenStore("demo").get_metadata()).pending_scope is None
        (done,) = await call_tools(background_auth("demo", config), srv.url, ("admin_task", {}))
        assert text_of(done) == "admin done"


async def test_tokens_are_never_sent_to_a_changed_url(keen_home: Path) -> None:
    with serve_oauth() as first, serve_oauth() as second:
        await authorize_interactively("demo", oauth_config(first.url), open_browser=Browser(), timeout=30)
        token = first.provider.issued[-1].access_token

        auth = background_auth("demo", oauth_config(second.url))
        with pytest.RaisesGroup(
            # The SDK raises it from its task group; Keen's own error is the leaf.
            pytest.RaisesExc(AuthRequired, match='MCP server "demo" needs you to sign in'),
            allow_unwrapped=True,
            flatten_subgroups=True,
        ) as caught:
            await list_tool_names(auth, second.url)
        assert isinstance(classify_auth_failure(caught.value, server="demo", auth=auth), AuthRequired)
        assert all(token not in " ".join(headers.values()) for _, _, headers in second.requests)


async def test_a_stale_connection_adopts_a_newer_sign_in_instead_of_refreshing_over_it(
    keen_home: Path,
) -> None:
    """A connection that loaded its token before a step-up sign-in must not renew that old
    grant over the newer one in the shared store once its own token expires (the SDK keeps
    tokens in memory per connection; the old refresh token is still accepted)."""
    with serve_oauth(step_up_tool=True) as srv:
        config = oauth_config(srv.url)
        await authorize_interactively("demo", config, open_browser=Browser(), timeout=30)
        stale = background_auth("demo", config)
        (refused,) = await call_tools(stale, srv.url, ("admin_task", {}))
        assert isinstance(refused, MCPError)  # "read" only; the step-up scope is now pending
        await authorize_interactively("demo", config, open_browser=Browser(), timeout=30)
        granted = await FileTokenStore("demo").get_tokens()
        assert granted is not None and "admin" in (granted.scope or "").split()
        refreshes = srv.provider.refreshes

        # The stale connection's token expires (deterministically, instead of waiting it out).
        stale.context.token_expiry_time = time.time() - 1
        (done,) = await call_tools(stale, srv.url, ("admin_task", {}))

        assert not isinstance(done, Exception), f"refused after the step-up sign-in: {done}"
        assert text_of(done) == "admin done"
        assert srv.provider.refreshes == refreshes  # the newer sign-in was valid: nothing renewed
        saved = await FileTokenStore("demo").get_tokens()
        assert saved is not None and saved.access_token == granted.access_token
