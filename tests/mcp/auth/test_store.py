"""The file token store: ``$KEEN_HOME/mcp/auth/<server>.json``, 0600, atomic, separate."""

from __future__ import annotations

import json
import re
import stat
import time
from pathlib import Path

import pytest
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken

from keen._redact import redactor
from keen.errors import AuthFailed, Remedy
from keen.mcp.auth import AuthMetadata, FileTokenStore, TokenStore

pytestmark = pytest.mark.anyio


async def test_round_trip_keeps_tokens_registration_and_metadata_in_one_private_file(keen_home: Path) -> None:
    store = FileTokenStore("github")
    assert isinstance(store, TokenStore)
    assert store.path == keen_home / "mcp" / "auth" / "github.json"
    assert await store.get_tokens() is None and not store.has_tokens()

    await store.set_client_info(
        OAuthClientInformationFull(client_id="cid-1", client_secret="csecret-store-1")
    )
    await store.set_tokens(
        OAuthToken(access_token="at-store-1", refresh_token="rt-store-1", expires_in=120, scope="repo")
    )
    await store.set_metadata(AuthMetadata(resource_url="https://h/mcp", pending_scope="repo admin"))

    tokens = await store.get_tokens()
    assert tokens is not None and (tokens.access_token, tokens.refresh_token, tokens.scope) == (
        "at-store-1",
        "rt-store-1",
        "repo",
    )
    assert tokens.expires_in is not None and 0 < tokens.expires_in <= 120
    info = await store.get_client_info()
    assert info is not None and info.client_secret == "csecret-store-1"
    assert await store.get_metadata() == AuthMetadata(
        resource_url="https://h/mcp", pending_scope="repo admin"
    )
    assert store.has_tokens()

    assert stat.S_IMODE(store.path.stat().st_mode) == 0o600
    assert stat.S_IMODE(store.path.parent.stat().st_mode) == 0o700
    assert sorted(p.name for p in store.path.parent.iterdir()) == ["github.json"]
    raw = json.loads(store.path.read_text())
    assert raw["version"] == 1 and raw["server"] == "github"
    assert raw["tokens"]["expires_at"] == pytest.approx(time.time() + 120, abs=5)
    for secret in ("at-store-1", "rt-store-1", "csecret-store-1"):
        assert redactor.redact(f"x {secret} y") == "x [REDACTED] y"


async def test_expiry_is_absolute_so_a_later_process_sees_the_token_expired(keen_home: Path) -> None:
    store = FileTokenStore("s")
    await store.set_tokens(OAuthToken(access_token="at-expiring", expires_in=100))
    record = json.loads(store.path.read_text())
    record["tokens"]["expires_at"] = time.time() - 10  # a day later, say
    store.path.write_text(json.dumps(record))
    tokens = await FileTokenStore("s").get_tokens()
    assert tokens is not None and tokens.expires_in == 0


async def test_clear_forgets_everything_and_other_servers_are_untouched(keen_home: Path) -> None:
    first, second = FileTokenStore("a"), FileTokenStore("b")
    await first.set_tokens(OAuthToken(access_token="at-a-123"))
    await second.set_tokens(OAuthToken(access_token="at-b-123"))
    await first.clear()
    await first.clear()  # idempotent
    assert not first.path.exists() and await first.get_tokens() is None
    tokens = await second.get_tokens()
    assert tokens is not None and tokens.access_token == "at-b-123"


async def test_setting_metadata_to_none_removes_it(keen_home: Path) -> None:
    store = FileTokenStore("s")
    await store.set_metadata(AuthMetadata(pending_scope="admin"))
    await store.set_metadata(AuthMetadata())
    assert "pending_scope" not in json.loads(store.path.read_text())


@pytest.mark.parametrize(
    ("content", "why", "unreadable"),
    [
        ('{"version": 1, "tokens": {"access_token": "at-leak-9999"', "invalid JSON at line 1", True),
        ('["at-leak-9999"]', "it is not a JSON object", True),
        ('{"version": 7, "tokens": {"access_token": "at-leak-9999"}}', "unsupported version 7", True),
        ('{"version": 1, "tokens": {"refresh_token": "at-leak-9999"}}', 'field "tokens.access_token"', False),
    ],
)
async def test_an_unusable_file_is_a_clear_error_that_never_quotes_it(
    keen_home: Path, content: str, why: str, unreadable: bool
) -> None:
    store = FileTokenStore("s")
    store.path.parent.mkdir(parents=True)
    store.path.write_text(content)
    with pytest.raises(AuthFailed, match=rf"is unusable \({re.escape(why)}") as caught:
        await store.get_tokens()
    message = str(caught.value)
    assert why in message and str(store.path) in message
    assert message.endswith("signing in again replaces the file") and caught.value.remedy is Remedy.SIGN_IN
    assert "at-leak-9999" not in message
    if unreadable:  # a partial update never overwrites a file it cannot read
        with pytest.raises(AuthFailed, match=rf"is unusable \({re.escape(why)}"):
            await store.set_tokens(OAuthToken(access_token="at-new-1234"))
        assert store.path.read_text() == content
    else:  # a readable file with one bad field takes the new tokens
        await store.set_tokens(OAuthToken(access_token="at-new-1234"))
        tokens = await store.get_tokens()
        assert tokens is not None and tokens.access_token == "at-new-1234"


async def test_directory_can_be_given_explicitly(tmp_path: Path) -> None:
    store = FileTokenStore("x", tmp_path / "elsewhere")
    await store.set_tokens(OAuthToken(access_token="at-else-123"))
    assert (tmp_path / "elsewhere" / "x.json").exists()


async def test_metadata_of_the_wrong_type_is_a_clear_error(keen_home: Path) -> None:
    store = FileTokenStore("s")
    store.path.parent.mkdir(parents=True)
    store.path.write_text(json.dumps({"version": 1, "server": "s", "pending_scope": ["at-leak-9999"]}))
    with pytest.raises(AuthFailed, match=r'field "metadata\.pending_scope" is invalid') as caught:
        await store.get_metadata()
    assert "at-leak-9999" not in str(caught.value) and caught.value.remedy is Remedy.SIGN_IN
