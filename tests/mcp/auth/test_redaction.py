"""Tokens and codes never reach a log, an error, the terminal or any file but the token store
(docs/architecture.md "Secrets").

One journey through every OAuth path - background start without a token, a sign-in, a
refused ``state``, a denial, a restart with an expired token (refresh), a step-up, a
revocation (``auth_failed``) and the recovery - with every log record at DEBUG, every
error message and status, everything written to stdout/stderr and every file under
``KEEN_HOME`` collected, then searched for every token and authorization code the
authorization server issued.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

from helpers.oauth import Browser, free_port, serve_oauth
from keen.errors import KeenError
from keen.mcp import Manager
from keen.mcp.auth import authorize_interactively, oauth_auth_factory
from keen.mcp.config import HttpServerConfig
from keen.trust import PinGuard

pytestmark = [pytest.mark.anyio, pytest.mark.slow_file]


class _Collect(logging.Handler):
    """Every record Keen's thread emits, formatted with its traceback (``exc_info``)."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.setFormatter(logging.Formatter("%(name)s %(levelname)s %(message)s"))
        self.lines: list[str] = []
        self.thread = threading.get_ident()

    def emit(self, record: logging.LogRecord) -> None:
        # The test's scripted browser and the test server run in other threads: they are the
        # user's browser and the remote service, not Keen.
        if record.thread == self.thread:
            self.lines.append(self.format(record))


async def test_no_token_or_code_leaks_anywhere(
    keen_home: Path, write_config: Callable[[dict[str, Any]], Path], capfd: pytest.CaptureFixture[str]
) -> None:
    collect = _Collect()
    root = logging.getLogger()
    old_level = root.level
    root.addHandler(collect)
    root.setLevel(logging.DEBUG)
    errors: list[str] = []
    try:
        with serve_oauth(step_up_tool=True, advertised_lifetime=2) as srv:
            write_config({"demo": {"url": srv.url, "auth": {"type": "oauth", "callback_port": free_port()}}})
            await _journey(srv, errors)
            secrets = srv.provider.secrets()
    finally:
        root.removeHandler(collect)
        root.setLevel(old_level)
    out, err = capfd.readouterr()

    assert len(secrets) >= 8  # codes, access and refresh tokens from several sign-ins and refreshes
    assert len(collect.lines) > 20 and len(errors) >= 5
    files = _files_outside_the_token_store(keen_home)
    assert keen_home / "mcp" / "configs.json" in files
    haystacks = {"logs": "\n".join(collect.lines), "errors": "\n".join(errors), "stdout": out, "stderr": err}
    haystacks.update({str(path): text for path, text in files.items()})
    for where, text in haystacks.items():
        for secret in secrets:
            assert secret not in text, f"a token or code leaked into {where}"


def _files_outside_the_token_store(home: Path) -> dict[Path, str]:
    store = home / "mcp" / "auth"
    return {p: p.read_text(errors="replace") for p in home.rglob("*") if p.is_file() and p.parent != store}


async def _journey(srv: Any, errors: list[str]) -> None:
    factory = oauth_auth_factory(open_browser=None)
    async with Manager(auth_factory=factory, trust=PinGuard()) as manager:
        await manager.wait_ready(30)
        errors.append(manager.status("demo").last_error)  # auth_required
        config = manager.config.servers["demo"]
        assert isinstance(config, HttpServerConfig)

        for browser in (Browser(tamper_state=True), Browser(deny=True)):
            try:
                await authorize_interactively("demo", config, open_browser=browser, timeout=20)
            except KeenError as exc:
                errors.append(str(exc))
        await authorize_interactively("demo", config, open_browser=Browser(), timeout=20)
        await manager.refresh("demo")
        try:
            await manager.call_tool("demo", "admin_task", {})
        except KeenError as exc:
            errors.append(str(exc))
        await authorize_interactively("demo", config, open_browser=Browser(), timeout=20)
        await manager.refresh("demo")
        await manager.call_tool("demo", "admin_task", {})

    await anyio.sleep(2.2)  # the access token expires: the next start refreshes it
    async with Manager(auth_factory=factory, trust=PinGuard()) as manager:
        await manager.wait_ready(30)
        await manager.call_tool("demo", "echo", {"text": "after refresh"})

    srv.provider.revoke_all()
    async with Manager(auth_factory=factory, trust=PinGuard()) as manager:
        await manager.wait_ready(30)
        errors.append(manager.status("demo").last_error)  # auth_failed
        try:
            await manager.call_tool("demo", "echo", {"text": "x"})
        except KeenError as exc:
            errors.append(str(exc))
        errors.extend(repr(status) for status in manager.servers())
