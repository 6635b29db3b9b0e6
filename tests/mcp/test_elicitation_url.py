"""URL-mode elicitation (MCP 2025-11-25 "Elicitation > URL Mode"): a real stdio server asks
the user to open a page mid-call, or fails a call with ``-32042`` until they have."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from conftest import stdio_server
from keen.errors import UserActionRequired
from keen.mcp import Manager, ServerState
from keen.mcp.connection.elicitation import ElicitAnswer, check_url
from keen.trust import PinGuard

pytestmark = pytest.mark.anyio

PAGE = "https://auth.example.com/connect?state=abc123"
# What the model reads when the only link the server named is one Keen will not show.
UNSHOWN = (
    'needs the user to open a page before "needs_sign_in" can run, but named none Keen will show'
    " (1 link refused as unsafe); ask the server's owner"
)


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        (PAGE, None),
        ("http://127.0.0.1:8765/callback", None),
        ("http://localhost/sign-in", None),
        ("http://auth.example.com/connect", "plain http"),
        ("javascript:alert(1)", "scheme"),
        ("file:///etc/passwd", "scheme"),
        ("https://trusted.example.com@evil.example.net/", "user name or password"),
        ("https://examp\u200ble.com/", "non-ASCII"),
        ("https://example.com/\u202etxt.exe", "non-ASCII"),
        ("https://example.com/a b", "whitespace"),
        ("https:///no-host", "no host"),
        ("https://example.com/" + "a" * 3000, "longer than"),
    ],
)
def test_check_url(url: str, problem: str | None) -> None:
    found = check_url(url)
    if problem is None:
        assert found is None
    else:
        assert found is not None and problem in found


async def _manager(write_config: Callable[..., Path], **callbacks: Any) -> Manager:
    path = write_config({"cloud": stdio_server("elicit_stdio.py")})

    async def form(server: str, message: str, schema: dict[str, Any]) -> ElicitAnswer:
        return ElicitAnswer("decline")

    return Manager(path, elicitation=form, **callbacks, trust=PinGuard())


async def test_the_page_reaches_the_callback_and_its_answer_the_server(
    write_config: Callable[..., Path],
) -> None:
    asked: list[tuple[str, str, str]] = []

    async def page(server: str, message: str, url: str) -> ElicitAnswer:
        asked.append((server, message, url))
        return ElicitAnswer("accept")

    async with await _manager(write_config, elicitation_url=page) as manager:
        assert await manager.wait_ready(30)
        assert manager.status("cloud").state is ServerState.CONNECTED, manager.status("cloud").last_error
        result = await manager.call_tool("cloud", "sign_in", {"url": PAGE})
        assert result.text == "accept"
        assert asked == [("cloud", "Sign in to Example Cloud to connect your account.", PAGE)]


@pytest.mark.parametrize("action", ["accept", "decline"])
async def test_a_completion_notice_reaches_the_accepted_page_once(
    write_config: Callable[..., Path], action: str
) -> None:
    """MCP 2025-11-25 "Completion Notifications for URL Mode Elicitation": the notice for the
    request the person accepted calls its ``on_complete`` once; notices for an unknown id, an
    already-completed one, or a request that was declined are ignored."""
    completed: list[str] = []

    async def page(server: str, message: str, url: str) -> ElicitAnswer:
        return ElicitAnswer(action, on_complete=lambda: completed.append(f"{server} {url}"))  # type: ignore[arg-type]

    async with await _manager(write_config, elicitation_url=page) as manager:
        assert await manager.wait_ready(30)
        assert (await manager.call_tool("cloud", "sign_in_and_report", {"url": PAGE})).text == action
        # The notices were sent before the result, on the same stream: handled by now.
        assert (await manager.call_tool("cloud", "sign_in", {"url": PAGE})).text == action
        assert completed == ([f"cloud {PAGE}"] if action == "accept" else [])


@pytest.mark.parametrize("url", ["javascript:alert(1)", "https://bank.example.com@evil.example.net/"])
async def test_an_unsafe_page_is_declined_without_asking(write_config: Callable[..., Path], url: str) -> None:
    asked: list[str] = []

    async def page(server: str, message: str, url: str) -> ElicitAnswer:
        asked.append(url)
        return ElicitAnswer("accept")

    async with await _manager(write_config, elicitation_url=page) as manager:
        assert await manager.wait_ready(30)
        assert (await manager.call_tool("cloud", "sign_in", {"url": url})).text == "decline"
        assert asked == []


async def test_without_a_url_callback_pages_are_declined(write_config: Callable[..., Path]) -> None:
    async with await _manager(write_config) as manager:
        assert await manager.wait_ready(30)
        assert (await manager.call_tool("cloud", "sign_in", {"url": PAGE})).text == "decline"


async def test_url_elicitation_required_names_the_page(write_config: Callable[..., Path]) -> None:
    async with await _manager(write_config) as manager:
        assert await manager.wait_ready(30)
        with pytest.raises(
            UserActionRequired,
            match=r"needs the user to open a page before \"needs_sign_in\" can run: Sign in",
        ) as caught:
            await manager.call_tool("cloud", "needs_sign_in", {"url": PAGE})
        err = caught.value
        assert err.code == "user_action_required" and err.server == "cloud" and err.tool == "needs_sign_in"
        assert err.pages == [("Sign in to Example Cloud first.", PAGE)]
        assert PAGE in err.message and "then call the tool again" in err.message

        # A link Keen will not show is left out, and the message says so.
        with pytest.raises(UserActionRequired, match=re.escape(UNSHOWN)) as caught:
            await manager.call_tool("cloud", "needs_sign_in", {"url": "javascript:alert(1)"})
        assert caught.value.pages == [] and "javascript" not in caught.value.message
        assert "1 link refused as unsafe" in caught.value.message


async def test_a_page_holding_a_configured_secret_is_not_passed_on(
    write_config: Callable[..., Path], keen_home: Path
) -> None:
    secret = "sk-test-URLSECRET0042"
    path = write_config({"cloud": stdio_server("elicit_stdio.py", env={"CLOUD_TOKEN": secret})})
    async with Manager(path, trust=PinGuard()) as manager:
        assert await manager.wait_ready(30)
        with pytest.raises(UserActionRequired, match=re.escape(UNSHOWN)) as caught:
            await manager.call_tool("cloud", "needs_sign_in", {"url": f"{PAGE}&token={secret}"})
        assert caught.value.pages == []
        assert secret not in caught.value.message and secret not in json.dumps(caught.value.pages)
