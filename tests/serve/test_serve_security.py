"""HTTP front: DNS-rebinding checks, the bearer check, non-loopback refusal, the stateless
era without a principal, the fetch rate limit, sessions that expire or were never opened."""

from __future__ import annotations

import subprocess
from pathlib import Path

import anyio
import httpx2
import pytest
from mcp.client.client import Client
from mcp.types import CallToolResult

from helpers.forkserver import forked
from helpers.serve import (
    INITIALIZE,
    JSON_HEADERS,
    KEEN,
    MODERN,
    KeenServeProcess,
    StoreClock,
    connect,
    http_in_process,
    read_json,
    serve_env,
    tls,
    write_upstream,
)
from keen.serve.http import HttpSecurity, is_loopback, tokens_from_env
from keen.serve.store import MemoryStore

pytestmark = pytest.mark.anyio
TOKEN = "sec-token-abcdefghijklmnop"


@pytest.fixture(scope="module")
def guarded(tmp_path_factory: pytest.TempPathFactory):
    home = tmp_path_factory.mktemp("sec")
    write_upstream(home)
    with KeenServeProcess(
        home, ["--mode", "extension", "--fetch-limit", "3"], {"KEEN_SERVE_TOKEN": TOKEN}
    ) as proc:
        yield proc


def _post(url: str, headers: dict[str, str], body: dict | None = None) -> httpx2.Response:
    return httpx2.post(
        url, headers={**JSON_HEADERS, **headers}, json=body or INITIALIZE, timeout=30, verify=tls()
    )


def test_foreign_host_header_is_refused(guarded: KeenServeProcess) -> None:
    response = _post(guarded.url, {"Host": "attacker.example:80", "Authorization": f"Bearer {TOKEN}"})
    assert response.status_code == 421


def test_foreign_origin_is_refused(guarded: KeenServeProcess) -> None:
    response = _post(guarded.url, {"Origin": "http://attacker.example", "Authorization": f"Bearer {TOKEN}"})
    assert response.status_code == 403
    ok = _post(
        guarded.url, {"Origin": f"http://localhost:{guarded.port}", "Authorization": f"Bearer {TOKEN}"}
    )
    assert ok.status_code == 200


@pytest.mark.parametrize("auth", [None, "Bearer wrong-token", f"Basic {TOKEN}", f"Bearer {TOKEN}x"])
def test_bearer_required_when_configured(guarded: KeenServeProcess, auth: str | None) -> None:
    response = _post(guarded.url, {"Authorization": auth} if auth else {})
    assert response.status_code == 401
    assert response.headers["www-authenticate"] == "Bearer"
    assert TOKEN not in response.text


def test_session_needs_initialize_and_answers_only_its_owner(
    guarded: KeenServeProcess, tmp_path: Path
) -> None:
    auth = {"Authorization": f"Bearer {TOKEN}", "MCP-Protocol-Version": "2025-11-25"}
    call = {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}}
    assert _post(guarded.url, auth, call).status_code == 400
    assert _post(guarded.url, {**auth, "Mcp-Session-Id": "f" * 32}, call).status_code == 404
    sid = _post(guarded.url, auth).headers["mcp-session-id"]
    assert _post(guarded.url, {**auth, "Mcp-Session-Id": sid}, call).status_code == 200
    # The session's event stream (change notices) needs an SSE accept and the owner's session.
    assert httpx2.get(guarded.url, headers={**auth, "Mcp-Session-Id": sid}, verify=tls()).status_code == 406
    sse = {**auth, "Accept": "text/event-stream"}
    assert (
        httpx2.get(guarded.url, headers={**sse, "Mcp-Session-Id": "f" * 32}, verify=tls()).status_code == 404
    )
    assert httpx2.get(guarded.url, headers=sse, verify=tls()).status_code == 400


async def test_description_fetches_are_rate_limited(guarded: KeenServeProcess) -> None:
    async with connect(guarded, "session", token=TOKEN) as client:
        bodies = [
            read_json(await client.read_resource("resource:///tool_descriptions?tools=mcp__basic__echo"))
            for _ in range(4)
        ]
        # A fetch without a selection is an error anyway and costs nothing.
        await client.read_resource("resource:///tool_descriptions")
    assert all("mcp__basic__echo" in b for b in bodies[:3])
    assert bodies[3]["error"]["code"] == "RATE_LIMITED"


async def test_stateless_era_without_tokens_shares_one_anonymous_principal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The documented behaviour: on loopback with no token, stateless callers share
    authorization. ``keen serve``'s HTTP front in this process (``helpers.serve.http_in_process``)."""
    write_upstream(tmp_path)
    monkeypatch.setenv("KEEN_HOME", str(tmp_path))
    async with http_in_process(tmp_path, mode="extension") as proc:
        async with connect(proc, "stateless") as first:
            await first.read_resource("resource:///tool_descriptions?tools=mcp__basic__echo")
        async with connect(proc, "stateless") as second:
            result = await second.call_tool("mcp__basic__echo", {"text": "shared"})
        assert not result.is_error
        # The session era keeps its own per-session isolation on the same server.
        async with connect(proc, "session") as session:
            refused = await session.call_tool("mcp__basic__echo", {"text": "x"})
        assert refused.is_error


TTL = 3
"""``--auth-ttl`` (seconds) in the expiry test below."""


async def test_authorization_expires_without_a_session_and_lasts_the_session(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--auth-ttl bounds the stateless era's authorizations, which belong to no session; a
    handshake-era session's and a stdio connection's last as long as it (the extension's
    section 5.1.3). Before, --auth-ttl expired them inside a live session.

    ``keen serve``'s HTTP front runs in this process (``helpers.serve.http_in_process``: the
    same app, bearer check and caller scopes) with its store on a clock the test moves past
    the TTL; the stdio connection's scope is that of a session over memory streams (no HTTP
    request: ``KeenServer.caller_scope``), on the same server."""
    write_upstream(tmp_path)
    monkeypatch.setenv("KEEN_HOME", str(tmp_path))
    clock = StoreClock()
    late: dict[str, CallToolResult] = {}
    async with (
        http_in_process(tmp_path, store=MemoryStore(clock=clock), mode="extension", auth_ttl=TTL) as served,
        connect(served, "session") as session,
        connect(served, "stateless") as stateless,
        Client(served.keen.server, mode="legacy", cache=None) as stdio,
    ):
        clients = {"session": session, "stateless": stateless, "stdio": stdio}
        for client in clients.values():
            await client.read_resource("resource:///tool_descriptions?tools=mcp__basic__echo")
            assert not (await client.call_tool("mcp__basic__echo", {"text": "now"})).is_error
        clock.now += TTL + 0.3  # past --auth-ttl: the expiry under test
        for name, client in clients.items():
            late[name] = await client.call_tool("mcp__basic__echo", {"text": "late"})
    assert read_json(late["stateless"])["error"]["code"] == "TOOL_DESCRIPTION_REQUIRED"
    assert not late["session"].is_error, late["session"]
    assert not late["stdio"].is_error, late["stdio"]


async def test_the_console_script_passes_its_session_cap_and_auth_ttl(tmp_path: Path) -> None:
    """``--max-sessions`` and ``--auth-ttl`` as the console script reads them: the tests of
    both limits build the server in this process, so only this one shows the options reach
    it. A caller's second session is refused (``--max-sessions 1``); a stateless
    authorization lets a call through at once and is refused once 3 s have passed without a
    call (each call renews it), where the default TTL would keep it for an hour."""
    write_upstream(tmp_path)
    args = ["--mode", "extension", "--max-sessions", "1", "--auth-ttl", str(TTL)]
    with KeenServeProcess(tmp_path, args) as proc:
        answers = [_post(proc.url, {"MCP-Protocol-Version": "2025-11-25"}) for _ in range(2)]
        assert [r.status_code for r in answers] == [200, 429], [r.text for r in answers]
        assert "--max-sessions" in answers[1].text
        async with connect(proc, "stateless") as client:
            read = await client.read_resource("resource:///tool_descriptions?tools=mcp__basic__echo")
            assert "mcp__basic__echo" in str(read)
            now = await client.call_tool("mcp__basic__echo", {"text": "now"})
            await anyio.sleep(TTL + 0.5)  # the real process's TTL, in real time: what is tested
            late = await client.call_tool("mcp__basic__echo", {"text": "late"})
    assert not now.is_error, now
    assert read_json(late)["error"]["code"] == "TOOL_DESCRIPTION_REQUIRED"


# The refusals below run the console script as a process for its exit code and stderr, forked
# from the worker's warm process (helpers.forkserver): the interpreter's start is not tested.
def test_non_loopback_bind_needs_a_token(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="KEEN_SERVE_TOKEN"):
        HttpSecurity(host="0.0.0.0")
    assert HttpSecurity(host="0.0.0.0", tokens=["t"]).tokens == ["t"]
    done = subprocess.run(
        [*forked(KEEN), "serve", "--transport", "http", "--host", "0.0.0.0", "--port", "1"],
        env=serve_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert "KEEN_SERVE_TOKEN" in done.stderr


def test_loopback_and_token_parsing() -> None:
    assert (
        is_loopback("127.0.0.1")
        and is_loopback("localhost")
        and is_loopback("::1")
        and is_loopback("127.3.4.5")
    )
    assert not is_loopback("0.0.0.0") and not is_loopback("10.0.0.1") and not is_loopback("example.com")
    assert tokens_from_env({"KEEN_SERVE_TOKEN": " a ", "KEEN_SERVE_TOKENS": "b,,c"}) == ["a", "b", "c"]
    sec = HttpSecurity(tokens=["a", "b"])
    assert sec.principal("Bearer a") != sec.principal("Bearer b")
    assert sec.principal("Bearer a") is not None and TOKEN not in str(sec.principal("Bearer a"))
    assert sec.principal("Bearer c") is None
    assert HttpSecurity().principal(None) == "anonymous"


def test_tokens_never_reach_logs_or_audit(guarded: KeenServeProcess) -> None:
    _post(guarded.url, {"Authorization": "Bearer wrong-secret-value"})
    texts = [guarded.log()]
    texts += [p.read_text() for p in (guarded.home / "logs").glob("*") if p.is_file()]
    assert all(TOKEN not in t and "wrong-secret-value" not in t for t in texts)


async def test_stateless_era_checks_the_bearer_and_opens_no_session(guarded: KeenServeProcess) -> None:
    body = {"jsonrpc": "2.0", "id": 3, "method": "tools/list", "params": {}}
    refused = _post(guarded.url, {"MCP-Protocol-Version": MODERN}, body)
    assert refused.status_code == 401
    async with connect(guarded, "stateless", token=TOKEN) as client:
        assert client.protocol_version == MODERN
        assert len((await client.list_tools()).tools) == 10
    served = _post(guarded.url, {"MCP-Protocol-Version": MODERN, "Authorization": f"Bearer {TOKEN}"}, body)
    assert "mcp-session-id" not in served.headers


def test_unreachable_redis_store_is_a_clear_error(tmp_path: Path) -> None:
    write_upstream(tmp_path)
    done = subprocess.run(
        [
            *forked(KEEN),
            "serve",
            "--transport",
            "http",
            "--port",
            "1",
            "--store",
            "redis://user:pw-secret@127.0.0.1:1/0",
        ],
        env=serve_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert "cannot reach the --store Redis" in done.stderr and "pw-secret" not in done.stderr
    # The failure is worded once, never as an internal error (before: "ExceptionGroup").
    assert "internal error" not in done.stderr, done.stderr
    assert not (tmp_path / "logs" / "serve-audit.jsonl").exists()  # no session.start for a failed start


def test_a_port_already_in_use_is_a_clear_error(tmp_path: Path) -> None:
    """uvicorn's bind failure ended keen serve with an ExceptionGroup traceback (SystemExit 3)
    and exit 1; it is the CLI's error, exit 2, saying which address and what to do."""
    import socket

    write_upstream(tmp_path)
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        done = subprocess.run(
            [*forked(KEEN), "serve", "--transport", "http", "--port", str(port)],
            env=serve_env(tmp_path),
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr and "SystemExit" not in done.stderr, done.stderr
    assert f"127.0.0.1:{port}" in done.stderr and "--port" in done.stderr, done.stderr
    assert "--host" not in done.stderr, done.stderr  # the port is what to change


@pytest.mark.parametrize(
    ("host", "why"),
    [("192.0.2.1", "Cannot assign requested address"), ("no-such-host.invalid", "not known")],
)
def test_a_host_keen_serve_cannot_bind_says_to_change_the_host(tmp_path: Path, host: str, why: str) -> None:
    """An address not of this machine (TEST-NET-1) or a name that does not resolve: the
    error names the host as the thing to change, with the resolver's own words (it printed
    '(Unknown error -2)' and advised another --port)."""
    write_upstream(tmp_path)
    done = subprocess.run(
        [*forked(KEEN), "serve", "--transport", "http", "--host", host, "--port", "0"],
        env={**serve_env(tmp_path), "KEEN_SERVE_TOKEN": "a-token-long-enough-for-keen-serve-0123456789"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2, done.stderr
    assert f"cannot listen on {host}:0" in done.stderr and why in done.stderr, done.stderr
    assert "--host" in done.stderr and "--port" not in done.stderr, done.stderr
    assert "Unknown error" not in done.stderr, done.stderr
