"""OAuth servers through ``keen.mcp.Manager`` (states, sign-in through keen mcp connect).

Background startup never opens a browser: no token -> ``auth_required`` with the connect
hint; a revoked sign-in -> ``auth_failed``. ``authorize_interactively`` (what ``keen mcp
connect`` runs) + ``Manager.refresh`` connects, and a restarted Manager reuses the token.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from helpers.oauth import Browser, OAuthTestServer, free_port, serve_oauth
from keen.errors import AuthFailed, AuthRequired, Remedy
from keen.mcp import Manager, ServerState
from keen.mcp.auth import FileTokenStore, authorize_interactively, oauth_auth_factory
from keen.mcp.config import HttpServerConfig
from keen.trust import PinGuard

pytestmark = pytest.mark.anyio

WriteConfig = Callable[[dict[str, Any]], Path]


def _configure(write_config: WriteConfig, srv: OAuthTestServer) -> None:
    write_config({"demo": {"url": srv.url, "auth": {"type": "oauth", "callback_port": free_port()}}})


async def _connect(manager: Manager, browser: Browser) -> None:
    """``keen mcp connect demo``: sign in, then refresh the server."""
    config = manager.config.servers["demo"]
    assert isinstance(config, HttpServerConfig)
    await authorize_interactively("demo", config, open_browser=browser, timeout=30)
    status = await manager.refresh("demo")
    assert status.state is ServerState.CONNECTED, status.last_error


async def test_background_start_without_a_token_is_auth_required_and_opens_no_browser(
    keen_home: Path, write_config: WriteConfig
) -> None:
    with serve_oauth() as srv:
        _configure(write_config, srv)
        browser = Browser()
        async with Manager(
            auth_factory=oauth_auth_factory(open_browser=browser), trust=PinGuard()
        ) as manager:
            assert await manager.wait_ready(30)
            status = manager.status("demo")
            assert status.state is ServerState.AUTH_REQUIRED
            assert status.last_error == 'MCP server "demo" needs you to sign in'
            assert status.remedy is Remedy.SIGN_IN
            assert status.to_dict()["state"] == "auth_required" and status.auth == "oauth"
            with pytest.raises(AuthRequired, match='MCP server "demo" needs you to sign in'):
                manager.list_tools("demo")
        assert browser.visits == [] and srv.provider.clients == {}


async def test_connect_signs_in_and_a_restarted_manager_reuses_the_token(
    keen_home: Path, write_config: WriteConfig
) -> None:
    with serve_oauth() as srv:
        _configure(write_config, srv)
        async with Manager(auth_factory=oauth_auth_factory(open_browser=None), trust=PinGuard()) as manager:
            await manager.wait_ready(30)
            await _connect(manager, Browser())
            assert [t.name for t in manager.list_tools("demo")] == ["echo", "admin_task"]
            result = await manager.call_tool("demo", "echo", {"text": "hi"})
            assert result.text == "hi" and not result.is_error
        issued = len(srv.provider.issued)

        browser = Browser()
        async with Manager(
            auth_factory=oauth_auth_factory(open_browser=browser), trust=PinGuard()
        ) as manager:
            await manager.wait_ready(30)
            assert manager.status("demo").state is ServerState.CONNECTED
            assert (await manager.call_tool("demo", "echo", {"text": "again"})).text == "again"
        assert browser.visits == [] and len(srv.provider.issued) == issued


async def test_revoked_sign_in_is_auth_failed_and_connect_recovers(
    keen_home: Path, write_config: WriteConfig
) -> None:
    with serve_oauth() as srv:
        _configure(write_config, srv)
        async with Manager(auth_factory=oauth_auth_factory(open_browser=None), trust=PinGuard()) as manager:
            await manager.wait_ready(30)
            await _connect(manager, Browser())
        srv.provider.revoke_all()

        async with Manager(auth_factory=oauth_auth_factory(open_browser=None), trust=PinGuard()) as manager:
            await manager.wait_ready(30)
            status = manager.status("demo")
            assert status.state is ServerState.AUTH_FAILED
            assert "the saved sign-in could not be renewed (invalid_grant" in status.last_error
            assert status.remedy is Remedy.SIGN_IN
            with pytest.raises(
                AuthFailed, match=re.escape("the saved sign-in could not be renewed (invalid_grant")
            ):
                await manager.call_tool("demo", "echo", {"text": "x"})

            await _connect(manager, Browser())
            assert (await manager.call_tool("demo", "echo", {"text": "back"})).text == "back"


async def test_a_tool_needing_more_scope_is_granted_by_connect(
    keen_home: Path, write_config: WriteConfig
) -> None:
    with serve_oauth(step_up_tool=True) as srv:
        _configure(write_config, srv)
        async with Manager(auth_factory=oauth_auth_factory(open_browser=None), trust=PinGuard()) as manager:
            await manager.wait_ready(30)
            await _connect(manager, Browser())
            with pytest.raises(
                (AuthRequired, AuthFailed),
                match=re.escape("needs more permission for this request (scope: read admin)"),
            ):
                await manager.call_tool("demo", "admin_task", {})
            assert manager.status("demo").state is ServerState.CONNECTED  # other tools still work
            assert (await manager.call_tool("demo", "echo", {"text": "ok"})).text == "ok"
            assert "admin" in ((await FileTokenStore("demo").get_metadata()).pending_scope or "")

            browser = Browser()
            await _connect(manager, browser)
            assert set((browser.scope_of(0) or "").split()) == {"read", "admin"}
            assert (await manager.call_tool("demo", "admin_task", {})).text == "admin done"


async def test_a_tool_needing_a_wider_scope_says_so_and_the_session_stays(
    keen_home: Path, write_config: WriteConfig
) -> None:
    with serve_oauth(step_up_tool=True) as srv:
        _configure(write_config, srv)
        async with Manager(auth_factory=oauth_auth_factory(open_browser=None), trust=PinGuard()) as manager:
            await manager.wait_ready(30)
            await _connect(manager, Browser())
            with pytest.raises(
                AuthRequired, match=r"needs more permission.*signing in again grants it"
            ) as more:
                await manager.call_tool("demo", "admin_task", {})
            assert more.value.remedy is Remedy.SIGN_IN
            assert manager.status("demo").state is ServerState.CONNECTED
            assert (await manager.call_tool("demo", "echo", {"text": "still"})).text == "still"
            await _connect(manager, Browser())  # connect asks for the saved wider scope
            assert (await manager.call_tool("demo", "admin_task", {})).text == "admin done"


async def test_a_pass_through_auth_factory_gets_the_four_arguments_and_connects(keen_home: Path) -> None:
    # A user's logging wrapper (*args, **kwargs, handing both on) around a factory of the four
    # arguments: the Manager gave it config_name= because of its **kwargs, which the wrapped
    # factory refused ("unexpected keyword argument 'config_name'"), so the server never
    # connected. Only a parameter named config_name gets the keyword.
    own = oauth_auth_factory(open_browser=None)
    seen: list[tuple[tuple[Any, ...], dict[str, Any]]] = []

    def four(server: str, config: HttpServerConfig, oauth: Any, interactive: bool) -> Any:
        return own(server, config, oauth, interactive)

    def logged(*args: Any, **kwargs: Any) -> Any:
        seen.append((args, kwargs))
        return four(*args, **kwargs)

    with serve_oauth() as srv:
        config = {"version": 1, "servers": {"demo": {"url": srv.url, "auth": {"type": "oauth"}}}}
        async with Manager(config=config, trust=None) as manager:
            entry = manager.config.servers["demo"]
            assert isinstance(entry, HttpServerConfig)
            await authorize_interactively("demo", entry, open_browser=Browser(), timeout=30)
        async with Manager(config=config, auth_factory=logged, trust=None) as manager:
            await manager.wait_ready(30)
            status = manager.status("demo")
            assert status.state is ServerState.CONNECTED, status.last_error
            assert (await manager.call_tool("demo", "echo", {"text": "hi"})).text == "hi"
    assert seen and all(len(args) == 4 and kwargs == {} for args, kwargs in seen), seen
