"""The loopback callback listener (127.0.0.1:1456/auth/mcp/callback), over real sockets.

Only the right path with the right ``state`` ends the wait; other requests get 404 and an
idle connection (a browser's pre-connect) does not block the real callback. Ctrl-C during
``keen mcp connect`` ends the process cleanly and frees the port.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
from pathlib import Path

import anyio
import httpx2
import pytest

from helpers.forkserver import forked
from helpers.oauth import free_port, serve_oauth
from helpers.serve import tls
from keen.errors import AuthFailed, Remedy
from keen.mcp.auth import CALLBACK_PATH, DEFAULT_CALLBACK_PORT, CallbackListener, FileTokenStore, redirect_uri

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parents[3]


async def _get(url: str) -> httpx2.Response:
    async with httpx2.AsyncClient(timeout=10, verify=tls()) as client:
        return await client.get(url)


def test_the_default_redirect_uri_is_loopback_1456() -> None:
    assert DEFAULT_CALLBACK_PORT == 1456
    assert redirect_uri() == "http://127.0.0.1:1456/auth/mcp/callback"
    assert CALLBACK_PATH == "/auth/mcp/callback"


async def test_only_the_callback_with_the_right_state_ends_the_wait() -> None:
    port = free_port()
    listener = CallbackListener(server="demo", port=port)
    await listener.open()
    answers: list[int] = []

    async def browser() -> None:
        idle = await anyio.connect_tcp("127.0.0.1", port)  # a pre-connect that never sends a byte
        answers.append((await _get(f"http://127.0.0.1:{port}/favicon.ico")).status_code)
        ok = await _get(
            f"http://127.0.0.1:{port}{CALLBACK_PATH}?code=the-code-1234&state=s1&iss=https%3A%2F%2Fas"
        )
        answers.append(ok.status_code)
        await idle.aclose()

    results = []
    async with anyio.create_task_group() as tg:
        tg.start_soon(browser)
        results.append(await listener.wait("s1", timeout=20))

    assert answers == [404, 200]
    assert [(r.code, r.state, r.iss) for r in results] == [("the-code-1234", "s1", "https://as")]
    assert not listener.is_open
    await _listen_again(port)


async def _listen_again(port: int) -> None:
    """The port is free for the next sign-in: a new listener binds it."""
    again = CallbackListener(server="demo", port=port)
    await again.open()
    await again.aclose()


async def test_a_callback_without_a_code_fails_clearly() -> None:
    port = free_port()
    listener = CallbackListener(server="demo", port=port)
    await listener.open()
    failures: list[AuthFailed] = []
    async with anyio.create_task_group() as tg:
        tg.start_soon(_get, f"http://127.0.0.1:{port}{CALLBACK_PATH}?state=s1")
        try:
            await listener.wait("s1", timeout=20)
        except AuthFailed as exc:
            failures.append(exc)
    assert [str(f) for f in failures] == [
        'the sign-in callback for MCP server "demo" carried no authorization code'
    ]
    assert failures[0].remedy is Remedy.SIGN_IN


_CONNECT_SCRIPT = """
import sys, anyio
from keen.mcp.config import HttpServerConfig, OAuthAuth
from keen.mcp.auth import authorize_interactively

def announce(url):
    print("BROWSER", flush=True)  # the user never comes back
    return True

config = HttpServerConfig(transport="streamable_http", url=sys.argv[1],
                          auth=OAuthAuth(type="oauth", callback_port=int(sys.argv[2])))
anyio.run(lambda: authorize_interactively("demo", config, open_browser=announce))
"""


def _default_sigint() -> None:
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_ctrl_c_during_connect_stops_cleanly_and_frees_the_port(tmp_path: Path) -> None:
    port = free_port()
    with serve_oauth() as srv:
        env = {**os.environ, "KEEN_HOME": str(tmp_path / "home")}
        # Forked from the worker's warm process (tests/helpers/forkserver.py: the SDK and
        # keen.mcp.auth imported, about 1.2 s of CPU in a new interpreter); its launcher is
        # the process signalled, and forwards the SIGINT to it.
        proc = subprocess.Popen(
            forked("-c", _CONNECT_SCRIPT, srv.url, str(port)),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            cwd=ROOT,
            # Ctrl-C as a terminal's foreground process gets it: SIGINT at its default and not
            # blocked, whatever this pytest worker inherited (in the full suite the child
            # ignored SIGINT and never ended, while alone it always did).
            preexec_fn=_default_sigint,
        )
        try:
            assert proc.stdout is not None
            assert proc.stdout.readline().strip() == "BROWSER"  # the listener is bound by now
            with socket.socket() as probe, pytest.raises(OSError, match="Address already in use"):
                probe.bind(("127.0.0.1", port))
            proc.send_signal(signal.SIGINT)
            _, stderr = proc.communicate(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
    assert proc.returncode != 0
    # Ended by the Ctrl-C: a traceback naming it, killed by SIGINT, or the fork server's
    # child ending on its KeyboardInterrupt (exit 128 + SIGINT, as a shell reports it).
    assert "KeyboardInterrupt" in stderr or proc.returncode in (-signal.SIGINT, 128 + signal.SIGINT), (
        proc.returncode,
        stderr,
    )
    anyio.run(_listen_again, port)
    assert not FileTokenStore("demo", tmp_path / "home" / "mcp" / "auth").has_tokens()
