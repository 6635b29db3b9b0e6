"""Bad input during sign-in: each a clear message, the right error type, nothing saved.

Metadata missing or malformed, registration refused, a callback with the wrong ``state``,
the user denying access, a port already in use, no answer in time, an unusable token file.
"""

from __future__ import annotations

import re
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from helpers.http_servers import make_basic_server, serve_http
from helpers.oauth import Browser, background_auth, free_port, list_tool_names, oauth_config, serve_oauth
from keen.cli._wording import describe
from keen.errors import AuthFailed, AuthRequired, ConfigError, Remedy
from keen.mcp.auth import CallbackListener, FileTokenStore, authorize_interactively, classify_auth_failure
from keen.mcp.config import ApiKeyAuth, HttpServerConfig, parse_config
from keen.mcp.connection.translate import ConnectFacts, classify_connect_failure
from keen.mcp.manager import Manager
from keen.mcp.types import ServerState
from keen.runtime import connect_server

pytestmark = pytest.mark.anyio


def _nothing_saved(keen_home: Path) -> bool:
    return not (keen_home / "mcp" / "auth" / "demo.json").exists() or not FileTokenStore("demo").has_tokens()


async def test_server_without_oauth_metadata_is_a_clear_auth_failure(keen_home: Path) -> None:
    # Answers 401 "Bearer" but publishes neither RFC 9728 nor RFC 8414 metadata.
    with serve_http(make_basic_server(), api_key="not-oauth") as srv:
        browser = Browser()
        with pytest.raises(AuthFailed, match="its OAuth metadata is missing or malformed") as caught:
            await authorize_interactively("demo", oauth_config(srv.url), open_browser=browser, timeout=10)
    message = str(caught.value)
    assert message.startswith(
        'MCP server "demo" asked for OAuth sign-in, but its OAuth metadata is missing or malformed'
    )
    assert "/.well-known/oauth-protected-resource/mcp -> HTTP 401" in message
    assert "Check the server's url in configs.json" in message
    assert browser.visits == [] and _nothing_saved(keen_home)


async def test_malformed_metadata_is_a_clear_auth_failure(keen_home: Path) -> None:
    with serve_oauth(malformed_metadata=True) as srv:
        browser = Browser()
        with pytest.raises(AuthFailed, match="its OAuth metadata is missing or malformed") as caught:
            await authorize_interactively("demo", oauth_config(srv.url), open_browser=browser, timeout=10)
        assert srv.provider.clients == {}
    assert "OAuth metadata is missing or malformed" in str(caught.value)
    assert "-> HTTP 200" in str(caught.value)
    assert browser.visits == [] and _nothing_saved(keen_home)


async def test_refused_registration_says_how_to_use_a_preregistered_client(keen_home: Path) -> None:
    with serve_oauth() as srv:
        browser = Browser()
        config = oauth_config(srv.url, scopes=["bogus"])  # the server rejects clients asking for it
        with pytest.raises(
            AuthFailed, match='MCP server "demo" refused to register Keen as a client'
        ) as caught:
            await authorize_interactively("demo", config, open_browser=browser, timeout=10)
    message = str(caught.value)
    assert message.startswith(
        'the authorization server of MCP server "demo" refused to register Keen as a client'
    )
    assert "invalid_client_metadata" in message
    assert 'set "client_id" (and "client_secret")' in message
    assert browser.visits == [] and _nothing_saved(keen_home)


async def test_callback_with_the_wrong_state_is_rejected_and_nothing_saved(keen_home: Path) -> None:
    with serve_oauth() as srv:
        browser = Browser(tamper_state=True)
        with pytest.raises(
            AuthFailed, match="carried a state that does not match the request Keen made"
        ) as caught:
            await authorize_interactively("demo", oauth_config(srv.url), open_browser=browser, timeout=10)
        assert srv.provider.issued == []  # the code was never exchanged
    assert "carried a state that does not match the request Keen made" in str(caught.value)
    assert caught.value.remedy is Remedy.SIGN_IN
    assert describe(caught.value).endswith("nothing was saved; run: keen mcp connect demo")
    assert browser.statuses == [400]
    assert _nothing_saved(keen_home)


async def test_user_denying_access_is_reported_with_the_servers_reason(keen_home: Path) -> None:
    with (
        serve_oauth() as srv,
        pytest.raises(
            AuthFailed, match=re.escape("refused the sign-in: access_denied (The user said no)")
        ) as caught,
    ):
        await authorize_interactively(
            "demo", oauth_config(srv.url), open_browser=Browser(deny=True), timeout=10
        )
    assert "refused the sign-in: access_denied (The user said no)" in str(caught.value)
    assert _nothing_saved(keen_home)


async def test_callback_port_in_use_fails_before_the_browser_opens(keen_home: Path) -> None:
    port = free_port()
    with serve_oauth() as srv, socket.socket() as squatter:
        squatter.bind(("127.0.0.1", port))
        squatter.listen(1)
        browser = Browser()
        with pytest.raises(AuthRequired, match=f"on 127.0.0.1:{port}: the port is already in use") as caught:
            await authorize_interactively(
                "demo", oauth_config(srv.url, callback_port=port), open_browser=browser
            )
    message = str(caught.value)
    assert f"on 127.0.0.1:{port}: the port is already in use" in message
    assert 'set "callback_port"' in message and caught.value.remedy is Remedy.SIGN_IN
    assert describe(caught.value).endswith("in configs.json; run: keen mcp connect demo")
    assert browser.visits == []


async def test_no_answer_from_the_browser_times_out_and_frees_the_port(keen_home: Path) -> None:
    seen: list[str] = []
    with serve_oauth() as srv:
        config = oauth_config(srv.url)
        with pytest.raises(
            AuthRequired,
            match='sign-in for MCP server "demo" timed out: no answer from the browser within 1 s',
        ) as caught:
            await authorize_interactively(
                "demo", config, open_browser=lambda url: seen.append(url) or True, timeout=1
            )
    assert 'sign-in for MCP server "demo" timed out: no answer from the browser within 1 s' in str(
        caught.value
    )
    assert len(seen) == 1
    again = CallbackListener(server="demo", port=config.auth.callback_port)  # type: ignore[union-attr]
    await again.open()  # the port is free for the next sign-in
    await again.aclose()


async def test_an_unusable_token_file_is_auth_failed_and_connect_replaces_it(keen_home: Path) -> None:
    path = keen_home / "mcp" / "auth" / "demo.json"
    path.parent.mkdir(parents=True)
    path.write_text('{"version": 1, "tokens": {"access_token": "tok_in_a_broken_file_123"')
    with serve_oauth() as srv:
        config = oauth_config(srv.url)
        auth = background_auth("demo", config)
        with pytest.RaisesGroup(
            # The SDK raises it from its task group; Keen's own error is the leaf.
            pytest.RaisesExc(
                AuthFailed,
                match=r"the saved sign-in for MCP server \"demo\" at .* is unusable \(invalid JSON",
            ),
            allow_unwrapped=True,
            flatten_subgroups=True,
        ) as caught:
            await list_tool_names(auth, srv.url)
        error = classify_auth_failure(caught.value, server="demo", auth=auth)
        assert isinstance(error, AuthFailed)
        assert f'the saved sign-in for MCP server "demo" at {path} is unusable (invalid JSON' in str(error)
        assert "tok_in_a_broken_file_123" not in str(error)

        result = await authorize_interactively("demo", config, open_browser=Browser(), timeout=30)
        assert result.signed_in
        assert await list_tool_names(background_auth("demo", config), srv.url) == ["echo", "admin_task"]


async def test_connect_on_a_server_without_oauth_is_a_config_error(keen_home: Path) -> None:
    config = HttpServerConfig(transport="streamable_http", url="http://127.0.0.1:9/mcp")
    with pytest.raises(
        ConfigError, match=re.escape('MCP server "plain" does not use OAuth (auth.type is "none")')
    ) as caught:
        await authorize_interactively("plain", config, open_browser=Browser())
    assert 'MCP server "plain" does not use OAuth (auth.type is "none")' in str(caught.value)


@pytest.mark.parametrize(("status", "has_token"), [(401, False), (401, True), (403, True)])
def test_an_http_auth_status_reads_the_same_at_connect_and_at_a_call(status: int, has_token: bool) -> None:
    """One mapping of 401/403 (keen.mcp.connection.translate.auth_status_error): the connection's state
    and the OAuth classifier of a failed call agree on the error and its words."""
    facts = ConnectFacts(server="demo", transport="streamable_http", auth="oauth", http_status=status)
    facts.has_token = has_token
    state, message = classify_connect_failure(RuntimeError("refused"), facts)
    error = classify_auth_failure(None, server="demo", status_code=status, has_token=has_token)
    assert error is not None and message == error.message and error.remedy is Remedy.SIGN_IN
    expected = ServerState.AUTH_FAILED if has_token else ServerState.AUTH_REQUIRED
    assert state is expected and isinstance(error, AuthFailed if has_token else AuthRequired)
    if has_token:
        assert message == f'MCP server "demo" rejected the saved sign-in (HTTP {status})'
    else:
        assert message == 'MCP server "demo" needs you to sign in'


GIVEN = "the config this Manager was given"


async def test_sign_in_fixes_name_the_config_a_manager_was_given_in_code(keen_home: Path) -> None:
    # An interactive refresh of a Manager(config=...) (its own OAuth factory) and keen mcp
    # connect's sign-in said to fix the url or the "auth" "in configs.json", never read.
    def given(url: str, **auth: object) -> dict[str, object]:
        entry = {"url": url, "auth": {"type": "oauth", "callback_port": free_port(), **auth}}
        return {"version": 1, "servers": {"demo": entry}}

    with serve_http(make_basic_server(), api_key="not-oauth") as srv:
        async with Manager(config=given(srv.url), trust=None) as manager:
            await manager.wait_ready(20)
            status = await manager.refresh("demo", interactive=True)
    assert "its OAuth metadata is missing or malformed" in status.last_error, status.last_error
    assert f"Check the server's url in {GIVEN}," in status.last_error
    with serve_oauth() as srv:
        async with Manager(config=given(srv.url, scopes=["bogus"]), trust=None) as manager:
            await manager.wait_ready(20)
            status = await manager.refresh("demo", interactive=True)
            assert f'in the server\'s "auth" in {GIVEN}' in status.last_error, status.last_error
            with pytest.raises(AuthFailed, match=re.escape(f'"auth" in {GIVEN}')):
                await connect_server(manager, "demo")
    with serve_oauth() as srv, socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        config = given(srv.url, callback_port=busy.getsockname()[1])  # its callback port taken
        async with Manager(config=config, trust=None) as manager:
            await manager.wait_ready(20)
            status = await manager.refresh("demo", interactive=True)
    assert f'set "callback_port" in the server\'s "auth" in {GIVEN}' in status.last_error, status.last_error
    assert _nothing_saved(keen_home)


async def test_a_refused_api_key_names_the_variable_it_came_from_never_its_value(
    write_config: Callable[[dict[str, Any]], Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    # The hint said check "auth.key" when the key came from ${KEEN_DOCS_TOKEN}: the expanded
    # config kept only the value. It keeps the variable's name now (never its value, nor
    # anything configs.json could set), and the hint names it.
    wrong = "kd-wrong-7c2e9a41f0"
    monkeypatch.setenv("KEEN_DOCS_TOKEN", wrong)
    with serve_http(make_basic_server(), api_key="kd-right-3b8f1d6e2a") as srv:
        path = write_config(
            {
                "docs": {"url": srv.url, "auth": {"type": "api_key", "key": "${KEEN_DOCS_TOKEN}"}},
                "plain": {"url": srv.url, "auth": {"type": "api_key", "key": wrong}},
            }
        )
        async with Manager(path, trust=None) as manager:
            await manager.wait_ready(20)
            docs, plain = manager.status("docs"), manager.status("plain")
    assert docs.state is ServerState.AUTH_FAILED, docs
    assert docs.last_error == (
        'MCP server "docs" rejected the API key (HTTP 401); check KEEN_DOCS_TOKEN, which "auth.key" reads, '
        '"auth.header" and "auth.scheme" in configs.json'
    )
    assert plain.last_error == (
        'MCP server "plain" rejected the API key (HTTP 401); check "auth.key", "auth.header" and '
        '"auth.scheme" in configs.json'
    )
    entry = manager.config.servers["docs"]
    assert isinstance(entry, HttpServerConfig) and isinstance(entry.auth, ApiKeyAuth)
    assert entry.auth.key_from == ("KEEN_DOCS_TOKEN",) and wrong not in repr(entry)
    forged = {"type": "api_key", "key": "k", "_key_from": ["HOME"]}  # configs.json cannot set it
    with pytest.raises(ConfigError, match=re.escape("unknown field 'auth._key_from'")):
        parse_config({"version": 1, "servers": {"x": {"url": srv.url, "auth": forged}}})


async def test_a_users_auth_factory_is_given_the_managers_config_name(
    keen_home: Path, tmp_path: Path
) -> None:
    # A factory of the caller's own (oauth_auth_factory with another token folder) got no
    # config name: its fixes said configs.json for a Manager given its config in code. The
    # Manager passes its config_name to a factory that takes the keyword; one written for the
    # four arguments alone is still called with those.
    from keen.mcp.auth import oauth_auth_factory

    own = oauth_auth_factory(directory=tmp_path / "tokens", open_browser=None)
    seen: list[str] = []

    def four_arguments(server: str, config: HttpServerConfig, oauth: Any, interactive: bool) -> Any:
        seen.append(server)
        return own(server, config, oauth, interactive)

    with serve_http(make_basic_server(), api_key="not-oauth") as srv:
        config = {"version": 1, "servers": {"demo": {"url": srv.url, "auth": {"type": "oauth"}}}}
        async with Manager(config=config, auth_factory=own, trust=None) as manager:
            await manager.wait_ready(20)
            status = await manager.refresh("demo", interactive=True)
        assert "its OAuth metadata is missing or malformed" in status.last_error, status.last_error
        assert f"Check the server's url in {GIVEN}," in status.last_error, status.last_error
        async with Manager(config=config, auth_factory=four_arguments, trust=None) as manager:
            await manager.wait_ready(20)
            status = await manager.refresh("demo", interactive=True)
    assert seen and set(seen) == {"demo"}
    assert "Check the server's url in configs.json," in status.last_error, status.last_error
