"""Signing in to an OAuth server of the 2026-07-28 era alone (``keen mcp connect``).

The server (:class:`helpers.oauth.OAuthTestServer` with ``modern_only``) answers a signed-in
request without the 2026-07-28 ``MCP-Protocol-Version`` header with HTTP 400 / -32020, as the
conformance package's servers do. Sign-in negotiates the era the way every connection does
(``server/discover``, else ``initialize``), steps up when a request needs a wider scope, and
stops after a bounded number of authorizations when the server never has enough; a resource
that moves to another authorization server is signed in there (SEP-2352).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from helpers.oauth import (
    MODERN_VERSION,
    Browser,
    background_auth,
    free_port,
    list_tool_names,
    oauth_config,
    serve_oauth,
)
from keen.errors import AuthFailed, AuthRequired, Remedy
from keen.mcp import Manager, ServerState
from keen.mcp.auth import FileTokenStore, authorize_interactively, oauth_auth_factory
from keen.mcp.auth.provider import MAX_AUTHORIZATIONS
from keen.mcp.config import HttpServerConfig
from keen.trust import PinGuard

pytestmark = pytest.mark.anyio

WriteConfig = Callable[[dict[str, Any]], Path]


async def test_connect_speaks_the_new_era_to_a_server_that_serves_only_it(
    keen_home: Path, write_config: WriteConfig
) -> None:
    with serve_oauth(modern_only=True) as srv:
        write_config({"demo": {"url": srv.url, "auth": {"type": "oauth", "callback_port": free_port()}}})
        async with Manager(auth_factory=oauth_auth_factory(open_browser=None), trust=PinGuard()) as manager:
            await manager.wait_ready(30)
            assert manager.status("demo").state is ServerState.AUTH_REQUIRED
            config = manager.config.servers["demo"]
            assert isinstance(config, HttpServerConfig)
            browser = Browser()

            result = await authorize_interactively("demo", config, open_browser=browser, timeout=30)

            assert result.signed_in and result.scope == "read" and len(browser.visits) == 1
            # Every signed-in request of the sign-in carried the new era's header; no handshake.
            assert srv.eras[:2] == [("server/discover", MODERN_VERSION), ("tools/list", MODERN_VERSION)]
            assert all(version == MODERN_VERSION for _, version in srv.eras)
            status = await manager.refresh("demo")
            assert status.state is ServerState.CONNECTED, status.last_error
            assert status.protocol_version == MODERN_VERSION
            assert (await manager.call_tool("demo", "echo", {"text": "new era"})).text == "new era"


async def test_a_listing_that_needs_a_wider_scope_is_authorized_again_during_sign_in(keen_home: Path) -> None:
    with serve_oauth(modern_only=True, step_up_listing=True) as srv:
        browser = Browser()

        result = await authorize_interactively(
            "demo", oauth_config(srv.url), open_browser=browser, timeout=30
        )

        assert len(browser.visits) == 2
        assert browser.scope_of(0) == "read"
        assert set((browser.scope_of(1) or "").split()) == {"read", "admin"}
        assert set((result.scope or "").split()) == {"read", "admin"}
        assert [method for method, _ in srv.eras].count("tools/list") == 2  # refused, then served
        assert all(version == MODERN_VERSION for _, version in srv.eras)


async def test_a_server_that_never_has_enough_scope_stops_the_sign_in_after_bounded_tries(
    keen_home: Path,
) -> None:
    with serve_oauth(modern_only=True, scope_never_enough=True) as srv:
        browser = Browser()

        with pytest.raises(
            AuthFailed,
            match=re.escape(
                f'MCP server "demo" still needs more permission (scope: read admin) after '
                f"{MAX_AUTHORIZATIONS} sign-ins that granted read admin; the account may not be allowed"
            ),
        ) as refused:
            await authorize_interactively("demo", oauth_config(srv.url), open_browser=browser, timeout=30)

        assert MAX_AUTHORIZATIONS == 3 and len(browser.visits) == MAX_AUTHORIZATIONS
        assert refused.value.remedy is Remedy.FIX_CONFIG
        # Never a handshake in the old era after a refusal: every request spoke 2026-07-28.
        assert {version for _, version in srv.eras} == {MODERN_VERSION}
        assert all(token.access_token not in str(refused.value) for token in srv.provider.issued)
        assert await FileTokenStore("demo").get_tokens() is not None  # the last grant is kept


async def test_a_resource_that_moves_to_another_authorization_server_is_signed_in_there(
    keen_home: Path,
) -> None:
    with serve_oauth(modern_only=True) as srv, serve_oauth() as new_home:
        config = oauth_config(srv.url)
        await authorize_interactively("demo", config, open_browser=Browser(), timeout=30)
        assert len(srv.provider.clients) == 1
        srv.move_to(new_home)

        # The background connection cannot renew the sign-in at the old authorization server.
        with pytest.RaisesGroup(
            pytest.RaisesExc((AuthFailed, AuthRequired), match='MCP server "demo"'),
            allow_unwrapped=True,
            flatten_subgroups=True,
        ):
            await list_tool_names(background_auth("demo", config), srv.url, negotiate=True)
        browser = Browser()
        result = await authorize_interactively("demo", config, open_browser=browser, timeout=30)

        assert result.signed_in
        assert browser.visits[0].startswith(f"{new_home.base_url}/authorize?")
        (registered,) = new_home.provider.clients.values()  # registered with the new one
        assert registered.client_id != next(iter(srv.provider.clients))
        saved = json.loads((keen_home / "mcp" / "auth" / "demo.json").read_text())
        assert saved["authorization_server"]["token_endpoint"] == f"{new_home.base_url}/token"
        assert saved["tokens"]["access_token"] == new_home.provider.issued[-1].access_token
        listed = await list_tool_names(background_auth("demo", config), srv.url, negotiate=True)
        assert listed == ["echo", "admin_task"]
        assert srv.eras[-1] == ("tools/list", MODERN_VERSION)
