"""What a connected stdio server costs Keen: no thread, nothing on the event loop's thread.

The event loop watches every server's pipes and exit (keen.mcp.connection._stderr, keen.mcp.connection._stdio),
with no limit on a descriptor's number: a stderr copier built on ``select()`` cannot watch a
descriptor of 1024 or more and stopped copying without a word once Keen held that many
(about 300 servers). A server is started in a worker thread: ``fork``/``exec`` on the loop
held every other server's messages until the child had exec'd.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import re
import resource
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import mcp_types as mt
import pytest
from mcp.client.stdio import StdioServerParameters
from mcp.shared.message import SessionMessage

from conftest import stdio_server
from helpers.hostile import hostile_entry
from helpers.loopback import alive
from keen.errors import InvalidArguments, ServerDisconnected
from keen.mcp import Manager, ServerState
from keen.mcp.connection import _stdio, message_size
from keen.mcp.connection._stdio import pidfd_supported, spawned_stdio_client
from keen.mcp.connection.spawn import _setpriv  # pyright: ignore[reportPrivateUsage]
from keen.trust import PinGuard

pytestmark = pytest.mark.anyio

_HIGH_FD = 1100


@pytest.fixture(params=["pidfd", "thread"])
def exit_watch(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """How the transport learns that a server exited: through a pidfd (Linux 5.3 and later), or,
    as where there is none (macOS), a thread waiting for it."""
    if request.param == "thread":
        monkeypatch.setattr(_stdio, "pidfd_supported", lambda: False)
    elif not pidfd_supported():
        pytest.fail("no pidfd here (Linux 5.3 or later has it): this machine cannot run the pidfd case")
    return str(request.param)


@pytest.fixture
def bound_1mb(monkeypatch: pytest.MonkeyPatch) -> int:
    """The bound on one message (``keen.mcp.connection.message_size``) set to a million
    characters for the test."""
    monkeypatch.setattr(message_size, "MAX_MESSAGE_SIZE", 1_000_000)
    return 1_000_000


@contextlib.contextmanager
def _descriptors_below(fd: int) -> Iterator[None]:
    """Every descriptor number below ``fd`` in use for the block, so the next ones are higher."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < fd + 200:
        if hard != resource.RLIM_INFINITY and hard < fd + 200:
            pytest.fail(f"this test needs {fd + 200} open files; the hard limit here is {hard}")
        resource.setrlimit(resource.RLIMIT_NOFILE, (fd + 200, hard))
    held: list[int] = []
    try:
        while not held or held[-1] < fd:
            held.append(os.open(os.devnull, os.O_RDONLY))
        yield
    finally:
        for handle in held:
            os.close(handle)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


async def test_stderr_is_copied_from_a_pipe_past_descriptor_1024(
    write_config: Callable[..., Path], keen_home: Path, tmp_path: Path
) -> None:
    spec = {
        "tools": [{"name": "speak", "description": "Speaks.", "inputSchema": {"type": "object"}}],
        "stderr_at_start": "hello from a high descriptor",
        "stderr_on_call": "called with a high descriptor",
    }
    path = write_config({"high": hostile_entry(tmp_path / "high.json", spec)})
    with _descriptors_below(_HIGH_FD):
        async with Manager(path, trust=PinGuard()) as manager:
            assert await manager.wait_ready(30)
            assert manager.status("high").state is ServerState.CONNECTED, manager.status("high").last_error
            result = await manager.call_tool("high", "speak", {})
            assert not result.is_error, result.text
    # The Manager has stopped the server and its copy has read the pipe to its end.
    log = (keen_home / "logs" / "high.stderr.log").read_text(encoding="utf-8")
    assert "hello from a high descriptor" in log and "called with a high descriptor" in log, log


async def test_servers_stderr_costs_no_thread(
    write_config: Callable[..., Path], tmp_path: Path, exit_watch: str
) -> None:
    def threads() -> int:
        # AnyIO's idle worker threads (any to_thread call leaves some for 10 s) hold no server.
        return sum(t.name != "AnyIO worker thread" for t in threading.enumerate())

    servers = 4
    spec = {"tools": [{"name": "t", "inputSchema": {"type": "object"}}], "stderr_at_start": "up"}
    path = write_config({f"s{i}": hostile_entry(tmp_path / f"s{i}.json", spec) for i in range(servers)})
    before = threads()
    async with Manager(path, trust=PinGuard()) as manager:
        assert await manager.wait_ready(60)
        assert all(s.state is ServerState.CONNECTED for s in manager.servers()), manager.servers()
        held = threads() - before
    # One thread of the process starts every server (it is there from the first one on).
    # Where there is no pidfd, one thread more per server waits for its exit.
    assert held <= (1 if exit_watch == "pidfd" else 1 + servers), [t.name for t in threading.enumerate()]


async def test_a_server_is_started_off_the_event_loops_thread(
    write_config: Callable[..., Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    started_in: list[str] = []
    popen = subprocess.Popen

    def recording(*args: Any, **kwargs: Any) -> subprocess.Popen[Any]:
        started_in.append(threading.current_thread().name)
        return popen(*args, **kwargs)

    spec = {"tools": [{"name": "t", "inputSchema": {"type": "object"}}]}
    path = write_config({"s": hostile_entry(tmp_path / "s.json", spec)})
    # Asked once per process, before the first start, whether setpriv knows --pdeathsig:
    # not a server's start, and done here so that the test's outcome does not hang on
    # whether another test in this process started a server first.
    _setpriv()
    monkeypatch.setattr(subprocess, "Popen", recording)
    async with Manager(path, trust=PinGuard()) as manager:
        assert await manager.wait_ready(30)
        assert manager.status("s").state is ServerState.CONNECTED, manager.status("s").last_error
        result = await manager.call_tool("s", "t", {})
        assert not result.is_error, result.text
    assert started_in and threading.main_thread().name not in started_in, started_in


async def test_tool_versions_name_the_connected_servers_and_their_lists(
    write_config: Callable[..., Path], tmp_path: Path
) -> None:
    two = {"tools": [{"name": n, "inputSchema": {"type": "object"}} for n in ("a", "b")]}
    path = write_config(
        {
            "two": hostile_entry(tmp_path / "two.json", two),
            "dead": hostile_entry(tmp_path / "dead.json", {"exit_at_start": 3}),
            "off": {**hostile_entry(tmp_path / "off.json", two), "enabled": False},
        }
    )
    async with Manager(path, trust=PinGuard()) as manager:
        assert await manager.wait_ready(30)
        versions = manager.tool_versions()
        assert [(name, count) for name, _, count in versions] == [("two", 2)], manager.servers()
        assert versions[0][1] == manager.status("two").last_refresh_at is not None
        await manager.refresh_tools("two")
        assert manager.tool_versions()[0][1] == manager.status("two").last_refresh_at != versions[0][1]


async def test_a_write_to_a_server_that_closed_its_stdin_ends_the_call(
    write_config: Callable[..., Path], tmp_path: Path
) -> None:
    # The server lives on but reads nothing (it closed its stdin before its tool list came):
    # the write fails, and the call ends with the connection instead of waiting for an
    # answer that cannot come.
    spec = {"tools": [{"name": "t", "inputSchema": {"type": "object"}}], "close_stdin_at_list": True}
    path = write_config({"deaf": hostile_entry(tmp_path / "deaf.json", spec)})
    async with Manager(path, trust=PinGuard()) as manager:
        assert await manager.wait_ready(30)
        assert manager.status("deaf").state is ServerState.CONNECTED, manager.status("deaf").last_error
        with anyio.fail_after(30), pytest.raises(ServerDisconnected, match="went away"):
            await manager.call_tool("deaf", "t", {})
        assert manager.status("deaf").state is ServerState.DISCONNECTED


async def test_a_write_failing_before_the_loop_polls_ends_the_read_side(tmp_path: Path) -> None:
    # The server closes its stdin while the loop is busy elsewhere: the next write fails
    # inside asyncio's transport, which tells the protocol only a step later. The read side
    # must end at that send, not when the request times out.
    marker = tmp_path / "deaf"
    child = (
        "import os, sys, time; sys.stdin.buffer.readline(); os.close(0); "
        f"open({str(marker)!r}, 'w').close(); time.sleep(60)"
    )
    server = StdioServerParameters(command=sys.executable, args=["-c", child])
    request = functools.partial(mt.JSONRPCRequest, jsonrpc="2.0", method="tools/call", params={"name": "t"})
    with (tmp_path / "err.log").open("w") as errlog:
        async with spawned_stdio_client(server, errlog) as (read, write):
            await write.send(SessionMessage(message=request(id=1)))
            for _ in range(1000):  # blocks the loop on purpose: no poll sees the close
                if marker.exists():
                    break
                time.sleep(0.01)  # noqa: ASYNC251 (the loop must not run meanwhile)
            assert marker.exists(), "the child never closed its stdin"
            await write.send(SessionMessage(message=request(id=2)))
            # anyio's end-of-stream errors carry no message: match says so.
            with anyio.fail_after(10), pytest.raises(anyio.EndOfStream, match=r"^$"):
                await read.receive()
            with pytest.raises(anyio.BrokenResourceError, match=r"^$"):
                await write.send(SessionMessage(message=request(id=3)))


async def test_a_message_of_many_reads_and_messages_sharing_a_read_arrive_whole(
    tmp_path: Path, exit_watch: str
) -> None:
    # One 3 MB line (about fifty reads of the pipe, with characters of two to four UTF-8
    # bytes cut at the reads' edges), then three messages in one write, the last one's
    # newline written apart: each arrives once, whole, in order.
    child = """
import json, sys
out = sys.stdout.buffer
text = ("caf\\u00e9 \\u20ac \\U0001d11e " * 150_000)[:3_000_000]
def message(i, t):
    return json.dumps({"jsonrpc": "2.0", "id": i, "result": {"t": t}}, ensure_ascii=False).encode()
out.write(message(1, text) + b"\\n" + message(2, "a") + b"\\n" + message(3, "\\u00e9") + b"\\n")
out.write(message(4, "last"))
out.flush()
out.write(b"\\n")
out.flush()
sys.stdin.buffer.read()
"""
    server = StdioServerParameters(command=sys.executable, args=["-c", child])
    expected = {1: ("caf\u00e9 \u20ac \U0001d11e " * 150_000)[:3_000_000], 2: "a", 3: "\u00e9", 4: "last"}
    with (tmp_path / "err.log").open("w") as errlog:
        async with spawned_stdio_client(server, errlog) as (read, _write):
            got: dict[int, str] = {}
            with anyio.fail_after(30):
                while len(got) < len(expected):
                    item = await read.receive()
                    assert isinstance(item, SessionMessage), item
                    message = item.message
                    assert isinstance(message, mt.JSONRPCResponse), message
                    assert isinstance(message.id, int) and message.id not in got, message.id
                    got[message.id] = message.result["t"]
    assert list(got) == [1, 2, 3, 4]
    assert got == expected


async def test_a_message_longer_than_the_bound_ends_the_stream_with_why(
    tmp_path: Path, bound_1mb: int, exit_watch: str
) -> None:
    # 3 MB of one line against a bound of 1 MB: the session is told why, its stream ends, and
    # the message written after the line's end never arrives (nothing kept past the bound).
    child = """
import json, sys
out = sys.stdout.buffer
out.write(b'{"jsonrpc": "2.0", "id": 1, "result": {"t": "' + b"x" * 3_000_000 + b'"}}\\n')
out.write(json.dumps({"jsonrpc": "2.0", "id": 2, "result": {}}).encode() + b"\\n")
out.flush()
sys.stdin.buffer.read()
"""
    server = StdioServerParameters(command=sys.executable, args=["-c", child])
    with (tmp_path / "err.log").open("w") as errlog:
        async with spawned_stdio_client(server, errlog) as (read, _write):
            with anyio.fail_after(30):
                first = await read.receive()
                assert isinstance(first, message_size.MessageTooLarge), first
                assert "more than the 1,000,000 Keen reads of a message" in str(first)
                with pytest.raises(anyio.EndOfStream, match=r"^$"):
                    await read.receive()


async def test_a_result_longer_than_the_bound_fails_its_call_and_the_log_says_why(
    write_config: Callable[..., Path],
    tmp_path: Path,
    bound_1mb: int,
    caplog: pytest.LogCaptureFixture,
    exit_watch: str,
) -> None:
    spec = {
        "tools": [{"name": "big", "inputSchema": {"type": "object"}}],
        "results": {"big": {"content": [{"type": "text", "text": "y" * 2_000_000}]}},
    }
    path = write_config({"flood": hostile_entry(tmp_path / "flood.json", spec)})
    caplog.set_level(logging.WARNING, logger="keen.mcp.connection.server")
    async with Manager(path, trust=PinGuard()) as manager:
        assert await manager.wait_ready(30)
        why = "more than the 1,000,000 Keen reads of a message; Keen closed its connection"
        with (
            anyio.fail_after(30),
            pytest.raises(ServerDisconnected, match=f'"flood" went away during "big": .*{why}'),
        ):
            await manager.call_tool("flood", "big", {})
        # The status says what Keen did, not that the server exited.
        status = manager.status("flood")
        assert status.state is ServerState.DISCONNECTED and why in str(status.last_error), status
    assert any(
        "server flood: it sent" in r.getMessage() and "Keen closed its connection" in r.getMessage()
        for r in caplog.records
    ), caplog.text


async def test_a_tool_list_longer_than_the_bound_fails_the_connect_and_its_status_says_why(
    write_config: Callable[..., Path], tmp_path: Path, bound_1mb: int
) -> None:
    spec = {"tools": [{"name": "t", "description": "z" * 2_000_000, "inputSchema": {"type": "object"}}]}
    path = write_config({"flood": hostile_entry(tmp_path / "flood.json", spec)})
    async with Manager(path, trust=PinGuard()) as manager:
        await manager.wait_ready(30)
        status = manager.status("flood")
    assert status.state is ServerState.DISCONNECTED, status
    assert "more than the 1,000,000 Keen reads of a message; Keen closed its connection" in str(
        status.last_error
    ), status.last_error


async def test_a_server_that_exits_mid_call_is_seen_gone_and_a_stopped_one_leaves_no_process(
    write_config: Callable[..., Path], tmp_path: Path, exit_watch: str
) -> None:
    spec = {
        "tools": [{"name": n, "inputSchema": {"type": "object"}} for n in ("t", "bye")],
        "exit_on_call": {"bye": 3},
    }
    pidfile = tmp_path / "pid"
    path = write_config(
        {
            "gone": hostile_entry(tmp_path / "gone.json", spec),
            "kept": hostile_entry(tmp_path / "kept.json", {**spec, "pidfile": str(pidfile)}),
        }
    )
    async with Manager(path, trust=PinGuard()) as manager:
        assert await manager.wait_ready(30)
        assert not (await manager.call_tool("gone", "t", {})).is_error
        with anyio.fail_after(30), pytest.raises(ServerDisconnected, match='"gone" went away during "bye"'):
            await manager.call_tool("gone", "bye", {})
        assert not (await manager.call_tool("kept", "t", {})).is_error
        pid = int(pidfile.read_text())
    # Stopped with the Manager: its process is gone, reaped (no zombie left to signal).
    with pytest.raises(ProcessLookupError, match="No such process"):
        os.kill(pid, 0)


async def test_arguments_that_are_not_json_text_are_refused_and_the_server_stays(
    write_config: Callable[..., Path], tmp_path: Path
) -> None:
    # A lone surrogate parses from JSON ("\\ud800") but cannot be written as UTF-8: Keen's
    # own failure to send, worded as the caller's arguments, not as the server's answer.
    spec = {"tools": [{"name": "t", "inputSchema": {"type": "object"}}]}
    path = write_config({"s": hostile_entry(tmp_path / "s.json", spec)})
    async with Manager(path, trust=PinGuard()) as manager:
        assert await manager.wait_ready(30)
        with anyio.fail_after(30), pytest.raises(InvalidArguments, match="cannot be sent as JSON") as caught:
            await manager.call_tool("s", "t", {"x": "abc\ud800"})
        assert caught.value.tool == "t"
        assert manager.status("s").state is ServerState.CONNECTED
        with anyio.fail_after(30):
            result = await manager.call_tool("s", "t", {"x": "abc"})
        assert not result.is_error


async def test_a_log_folder_removed_meanwhile_is_made_again(
    write_config: Callable[..., Path], keen_home: Path, tmp_path: Path
) -> None:
    # The folder is checked once per process; a start after it was deleted still gets its log.
    spec = {"tools": [{"name": "t", "inputSchema": {"type": "object"}}], "stderr_at_start": "second run"}
    path = write_config({"s": hostile_entry(tmp_path / "s.json", spec)})
    async with Manager(path, trust=PinGuard()) as manager:
        assert await manager.wait_ready(30)
        logs = keen_home / "logs"
        assert (logs / "s.stderr.log").is_file()
        for item in logs.iterdir():
            item.unlink()
        logs.rmdir()
        status = await manager.refresh("s")
        assert status.state is ServerState.CONNECTED, status.last_error
    # Read once the Manager has stopped the server and its copy read the pipe to its end.
    log = (keen_home / "logs" / "s.stderr.log").read_text(encoding="utf-8")
    assert "--- keen: starting s" in log and "second run" in log, log
    assert (keen_home / "logs").stat().st_mode & 0o777 == 0o700


async def test_a_server_that_stops_reading_its_stdin_ends_the_call_past_its_timeout_saying_why(
    write_config: Callable[..., Path],
) -> None:
    # A stopped server (SIGSTOP: as one whose event loop is blocked) reads nothing: Keen's
    # write of a call larger than the pipe waited for ever, past timeouts.call_tool (the
    # SDK's clock starts once the write returns), and so did every call behind it.
    stalled = stdio_server("basic_stdio.py", timeouts={"call_tool": 2})
    path = write_config({"stalled": stalled, "other": stdio_server("basic_stdio.py")})
    async with Manager(path, trust=PinGuard()) as manager:
        assert await manager.wait_ready(30)
        pid = int((await manager.call_tool("stalled", "pid", {})).text)
        os.kill(pid, signal.SIGSTOP)
        try:
            why = (
                r"it read nothing of its stdin for 2 s \(its timeouts.call_tool\) while Keen had more to send"
            )
            with anyio.fail_after(30), pytest.raises(ServerDisconnected, match=why):
                await manager.call_tool("stalled", "echo", {"text": "x" * 4_000_000})
            status = manager.status("stalled")
            assert status.state is ServerState.DISCONNECTED and re.search(why, status.last_error), status
            assert (await manager.call_tool("other", "echo", {"text": "fine"})).text == "fine"
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)
    assert not alive(pid)


async def test_a_server_that_reads_its_stdin_slowly_is_not_taken_for_a_stalled_one(
    write_config: Callable[..., Path],
) -> None:
    # The stall bound timed the whole flush: a server reading 4 KB every 10 ms got a
    # 1.2 MB argument (about 3 s of reading) cut at its 1 s call_tool, "read nothing".
    path = write_config({"slow": stdio_server("slow_reader_stdio.py", timeouts={"call_tool": 1})})
    async with Manager(path, trust=PinGuard()) as manager:
        assert await manager.wait_ready(30)
        with anyio.fail_after(60):
            assert (await manager.call_tool("slow", "size", {"text": "x" * 1_200_000})).text == "1200000"
