"""Ctrl-C and SIGTERM stop ``keen serve`` while its host still holds the connection open.

Over stdio, ``keen serve`` used to read stdin the SDK's way, in a worker thread no signal can
cancel: with the host's pipe still open (a call in flight, or just idle) Ctrl-C and SIGTERM
did nothing until the host closed stdin. Over HTTP, a call in flight made uvicorn print
tracebacks (``Exception in ASGI application``, the lifespan's ``CancelledError``) and, on
Ctrl-C, wait its graceful timeout first. Here a real ``keen serve`` process has a 60 s
upstream call in flight and gets the signal: it exits 130 / 143 in bounded time, prints no
traceback, its upstream stdio server is stopped, and an HTTP caller gets a clear error.

``keen serve`` is forked from the worker's warm process (``tests/helpers/forkserver.py``):
the process the test starts is the launcher, which forwards SIGINT and SIGTERM to keen and
ends as keen ended (the same exit status), with keen on its stdin and stdout; keen's signal
handling is what is under test, not its interpreter's start.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import IO, Any

import anyio
import anyio.to_thread
import pytest
from mcp.shared.exceptions import MCPError

from conftest import stdio_server
from helpers.changing import wait_until as wait_until_async
from helpers.forkserver import forked
from helpers.hostile import hostile_entry
from helpers.loopback import alive, wait_listening, wait_until
from helpers.serve import KEEN, KeenServeProcess, connect, free_port, serve_env, write_upstream
from keen._terminal import STILL_STOPPING

pytestmark = [
    pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals"),
    pytest.mark.e2e,
    pytest.mark.slow_file,
]


def _default_sigint() -> None:
    # A shell's Ctrl-C reaches a foreground child with SIGINT's default disposition (a test
    # runner's worker may ignore it, and an ignored signal stays ignored across exec).
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _send(stdin: IO[bytes], message: dict[str, Any]) -> None:
    stdin.write((json.dumps({"jsonrpc": "2.0", **message}) + "\n").encode())
    stdin.flush()


def _answer(stdout: IO[bytes], request_id: int) -> dict[str, Any]:
    while line := stdout.readline():
        message = json.loads(line)
        if message.get("id") == request_id:
            return message
    raise AssertionError(f"keen serve closed stdout before answering request {request_id}")


def _upstream(home: Path) -> Path:
    """``basic`` upstream, logging each ``sleep`` call as it starts; returns the log's path."""
    log = home / "sleeps.log"
    basic = stdio_server("basic_stdio.py", "--tools", "0", "--sleep-log", str(log))
    write_upstream(home, extra={"basic": basic})
    return log


def _in_flight(log: Path) -> bool:
    return log.exists() and "sleep 60" in log.read_text()


def _assert_gone(upstream: int) -> None:
    """The upstream stdio server ``upstream`` (a pid) exits within 10 s."""
    assert wait_until(lambda: not alive(upstream), 10), "the upstream stdio server outlived keen serve"


@pytest.mark.parametrize(("signum", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_stops_keen_serve_with_stdin_open_and_a_call_in_flight(
    tmp_path: Path, signum: signal.Signals, code: int
) -> None:
    sleeps = _upstream(tmp_path)
    proc = subprocess.Popen(
        [*forked(KEEN), "serve", "--mode", "search"],
        env=serve_env(tmp_path),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        preexec_fn=_default_sigint,
    )
    assert proc.stdin is not None and proc.stdout is not None
    try:
        _send(
            proc.stdin,
            {
                "id": 1,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-11-25",
                    "capabilities": {},
                    "clientInfo": {"name": "signal-test", "version": "1"},
                },
            },
        )
        assert "result" in _answer(proc.stdout, 1)
        _send(proc.stdin, {"method": "notifications/initialized"})
        _send(
            proc.stdin,
            {
                "id": 2,
                "method": "tools/call",
                "params": {
                    "name": "call_mcp_tool",
                    "arguments": {"server": "basic", "tool": "pid", "arguments": {}},
                },
            },
        )
        upstream = int(_answer(proc.stdout, 2)["result"]["content"][0]["text"])
        assert alive(upstream)
        _send(
            proc.stdin,
            {
                "id": 3,
                "method": "tools/call",
                "params": {
                    "name": "call_mcp_tool",
                    "arguments": {"server": "basic", "tool": "sleep", "arguments": {"seconds": 60}},
                },
            },
        )
        assert wait_until(lambda: _in_flight(sleeps), 30), "the call never reached the upstream server"
        proc.send_signal(signum)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            pytest.fail(f"keen serve still runs 30 s after {signum.name} with its stdin open")
        stderr = proc.stderr.read().decode() if proc.stderr else ""
        assert proc.returncode == code, stderr
        assert "Traceback" not in stderr, stderr
        _assert_gone(upstream)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        proc.stdin.close()
        proc.stdout.close()
        if proc.stderr is not None:
            proc.stderr.close()


async def _signal_mid_call(
    proc: subprocess.Popen[bytes], port: int, signum: int, home: Path
) -> tuple[int, str]:
    """Start a 60 s call through ``keen serve`` on ``port``, signal it; (upstream pid, what the
    caller got)."""
    outcome: list[str] = []
    answered = anyio.Event()
    async with connect(KeenServeProcess(home, port=port), "session") as client:
        pid = await client.call_tool("call_mcp_tool", {"server": "basic", "tool": "pid", "arguments": {}})
        upstream = int(pid.content[0].text)  # type: ignore[union-attr]

        async def slow_call() -> None:
            try:
                await client.call_tool(
                    "call_mcp_tool", {"server": "basic", "tool": "sleep", "arguments": {"seconds": 60}}
                )
                outcome.append("answered")
            except MCPError as exc:
                outcome.append(str(exc))
            answered.set()

        async with anyio.create_task_group() as tg:
            tg.start_soon(slow_call)
            await wait_until_async(lambda: _in_flight(home / "sleeps.log"), "the call upstream", 30)
            proc.send_signal(signum)
            await anyio.to_thread.run_sync(proc.wait, 30)
            with anyio.fail_after(30):
                await answered.wait()
    return upstream, outcome[0]


@pytest.mark.parametrize(("signum", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_stops_keen_serve_http_cleanly_with_a_call_in_flight(
    tmp_path: Path, signum: signal.Signals, code: int
) -> None:
    _upstream(tmp_path)
    port = free_port()
    log = tmp_path / "serve.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [*forked(KEEN), "serve", "--transport", "http", "--port", str(port), "--mode", "search"],
            env=serve_env(tmp_path),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=out,
            preexec_fn=_default_sigint,
        )
    try:
        wait_listening(port, proc, "keen serve", timeout=60, log=log.read_text)
        upstream, caller_got = anyio.run(_signal_mid_call, proc, port, signum, tmp_path)
        output = log.read_text()
        assert proc.returncode == code, output
        assert "Traceback" not in output and "Exception in ASGI application" not in output, output
        assert "keen serve is shutting down" in caller_got, caller_got
        _assert_gone(upstream)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


def test_a_second_ctrl_c_lets_keen_serves_stop_finish(tmp_path: Path) -> None:
    """Before, the first Ctrl-C closed keen serve's signal receiver, so a second one raised
    KeyboardInterrupt into the shutdown: "unhandled exception during asyncio.run() shutdown"
    on stderr, and the upstream's stop cut short. The upstream outwaits EOF and SIGTERM, and
    says when its stdin closes (the stop has begun)."""
    pidfile, log = tmp_path / "h.pid", tmp_path / "logs" / "h.stderr.log"
    spec = {
        "tools": [{"name": "hang", "inputSchema": {"type": "object"}}],
        "hang_on_call": ["hang"],
        "stderr_on_call": "call started",
        "stderr_at_eof": "stdin closed",
        "ignore_eof": True,
        "ignore_signals": True,
        "pidfile": str(pidfile),
    }
    write_upstream(tmp_path, extra={"h": hostile_entry(tmp_path / "spec.json", spec)})
    proc = subprocess.Popen(
        [*forked(KEEN), "serve", "--mode", "search"],
        env=serve_env(tmp_path),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        preexec_fn=_default_sigint,
    )
    assert proc.stdin is not None and proc.stdout is not None
    try:
        hello = {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"},
        }
        _send(proc.stdin, {"id": 1, "method": "initialize", "params": hello})
        assert "result" in _answer(proc.stdout, 1)
        _send(proc.stdin, {"method": "notifications/initialized"})
        call = {"name": "call_mcp_tool", "arguments": {"server": "h", "tool": "hang", "arguments": {}}}
        _send(proc.stdin, {"id": 2, "method": "tools/call", "params": call})
        assert wait_until(lambda: log.exists() and "call started" in log.read_text(), 30), proc.stderr
        server = int(pidfile.read_text())
        proc.send_signal(signal.SIGINT)
        assert wait_until(lambda: "stdin closed" in log.read_text(), 30), log.read_text()
        proc.send_signal(signal.SIGINT)
        _out, err = proc.communicate(timeout=60)
        assert proc.returncode == 130, err
        assert STILL_STOPPING in err and b"unhandled exception" not in err, err
        assert not alive(server), "the upstream stdio server outlived keen serve"
    finally:
        if proc.poll() is None:
            proc.kill()
        if pidfile.exists() and alive(int(pidfile.read_text())):
            os.kill(int(pidfile.read_text()), signal.SIGKILL)
