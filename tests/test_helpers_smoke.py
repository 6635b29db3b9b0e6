"""The test-server toolkit does what it promises, checked with the raw MCP SDK client.

Stdio scripts in ``tests/servers`` and the in-process FastMCP HTTP servers of
``helpers.http_servers`` are what the Manager tests build on; these tests pin their
behaviour so a Manager failure is never a toolkit failure in disguise.
"""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TextIO

import anyio
import httpx2
import pytest
from mcp.client.session import IncomingMessage, MessageHandlerFnT
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_types import CallToolResult, PaginatedRequestParams, TextContent

from helpers import server_script, stdio_entry, stdio_params
from helpers.forkserver import launch_args
from helpers.http_servers import make_basic_server, serve_http
from helpers.serve import tls
from keen.mcp.config import parse_config
from mcp import ClientSession

BASIC_TOOLS = {"echo", "add", "fail", "sleep", "die", "env", "cwd", "pid"}


def text_of(result: CallToolResult) -> str:
    return "".join(block.text for block in result.content if isinstance(block, TextContent))


def leaf_errors(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for sub in exc.exceptions for leaf in leaf_errors(sub)]
    return [exc]


@asynccontextmanager
async def stdio_session(
    params: StdioServerParameters,
    errlog: TextIO,
    handler: MessageHandlerFnT | None = None,
) -> AsyncIterator[ClientSession]:
    async with (
        stdio_client(params, errlog=errlog) as (read, write),
        ClientSession(read, write, message_handler=handler) as session,
    ):
        yield session


# The timeouts the MCP SDK gives its own HTTP client (create_mcp_http_client: 30 s, 300 s to
# read a stream): with httpx2's default 5 s read timeout a loaded machine ended a response
# stream before its answer, and the call failed "SSE stream ended without a response".
MCP_TIMEOUT = httpx2.Timeout(30.0, read=300.0)


@asynccontextmanager
async def http_session(url: str, http: httpx2.AsyncClient) -> AsyncIterator[ClientSession]:
    async with (
        streamable_http_client(url, http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        yield session


@pytest.fixture
def errlog(tmp_path: Path) -> Iterator[TextIO]:
    # The SDK hands errlog to the subprocess, so it must be a real file, not StringIO.
    with (tmp_path / "stderr.log").open("w+", encoding="utf-8") as handle:
        yield handle


def same_dir(a: str | Path, b: str | Path) -> bool:
    return Path(a).resolve() == Path(b).resolve()


def read_log(errlog: TextIO) -> str:
    errlog.flush()
    errlog.seek(0)
    return errlog.read()


# --- stdio scripts -----------------------------------------------------------------------------


@pytest.mark.anyio
async def test_basic_stdio_tools(errlog: TextIO, tmp_path: Path) -> None:
    params = stdio_params(
        "basic_stdio", "--instructions", "use me", env={"KEEN_PROBE": "merged"}, cwd=tmp_path
    )
    async with stdio_session(params, errlog) as session:
        init = await session.initialize()
        assert init.server_info.name == "basic-stdio"
        assert init.instructions == "use me"
        assert {tool.name for tool in (await session.list_tools()).tools} == BASIC_TOOLS
        assert text_of(await session.call_tool("echo", {"text": "héllo"})) == "héllo"
        added = await session.call_tool("add", {"a": 2, "b": 40})
        assert text_of(added) == "42"
        failed = await session.call_tool("fail", {"message": "boom: disk full"})
        assert failed.is_error and "boom: disk full" in text_of(failed)
        assert text_of(await session.call_tool("sleep", {"seconds": 0.01})) == "slept 0.01"
        assert text_of(await session.call_tool("env", {"name": "KEEN_PROBE"})) == "merged"
        assert text_of(await session.call_tool("env", {"name": "KEEN_UNSET_VAR"})) == ""
        assert same_dir(text_of(await session.call_tool("cwd", {})), tmp_path)
        assert int(text_of(await session.call_tool("pid", {}))) > 0


@pytest.mark.anyio
async def test_basic_stdio_extra_tools(errlog: TextIO) -> None:
    async with stdio_session(stdio_params("basic_stdio", "--tools", "25"), errlog) as session:
        await session.initialize()
        tools = (await session.list_tools()).tools
        extras = sorted(tool.name for tool in tools if tool.name.startswith("extra_"))
        assert extras == [f"extra_{i:04d}" for i in range(25)]
        result = await session.call_tool("extra_0007", {"query": "q", "limit": 3})
        assert text_of(result) == "extra_0007:q:3"


@pytest.mark.anyio
async def test_basic_stdio_die_closes_connection_and_logs(errlog: TextIO) -> None:
    # The SDK wraps the error in ExceptionGroups.
    with pytest.RaisesGroup(
        pytest.RaisesExc(MCPError, match="Connection closed"), allow_unwrapped=True, flatten_subgroups=True
    ) as caught:
        async with stdio_session(stdio_params("basic_stdio"), errlog) as session:
            await session.initialize()
            await session.call_tool("die", {})
    assert any(
        isinstance(leaf, MCPError) and "Connection closed" in str(leaf) for leaf in leaf_errors(caught.value)
    )
    assert "fatal: die called" in read_log(errlog)


@pytest.mark.anyio
async def test_hang_init_never_answers(errlog: TextIO) -> None:
    # fail_after's own timeout carries no message: not a timeout raised inside the session.
    with pytest.raises(TimeoutError, match=r"^$"):
        with anyio.fail_after(1.0):
            async with stdio_session(stdio_params("hang_init"), errlog) as session:
                await session.initialize()
    assert "hang_init: started" in read_log(errlog)


def test_hang_init_ignore_flags_need_sigkill() -> None:
    with subprocess.Popen(
        [sys.executable, str(server_script("hang_init")), "--ignore-eof", "--ignore-sigterm"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    ) as proc:
        try:
            assert proc.stderr is not None and proc.stdin is not None and proc.stdout is not None
            assert proc.stderr.readline() == b"hang_init: started, will not answer\n"  # handlers installed
            proc.stdin.write(b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}\n')
            proc.stdin.close()
            with pytest.raises(subprocess.TimeoutExpired, match=r"timed out after 0\.3 seconds"):
                proc.wait(timeout=0.3)
            proc.send_signal(signal.SIGTERM)
            with pytest.raises(subprocess.TimeoutExpired, match=r"timed out after 0\.3 seconds"):
                proc.wait(timeout=0.3)
        finally:
            proc.kill()
            proc.wait()
        assert proc.returncode == -signal.SIGKILL
        assert proc.stdout.read() == b""


def test_garbage_stdout_answers_only_garbage() -> None:
    proc = subprocess.run(
        [sys.executable, str(server_script("garbage_stdout"))],
        input=b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}\n{}\n',
        capture_output=True,
        timeout=30,
    )
    lines = proc.stdout.decode().splitlines()
    assert lines == ["this is not json 1", "this is not json 2"]
    for line in lines:
        with pytest.raises(json.JSONDecodeError, match="Expecting value: line 1 column 1"):
            json.loads(line)


@pytest.mark.anyio
async def test_garbage_stdout_initialize_never_completes(errlog: TextIO) -> None:
    # fail_after's own timeout carries no message: not a timeout raised inside the session.
    with pytest.raises(TimeoutError, match=r"^$"):
        with anyio.fail_after(1.0):
            async with stdio_session(stdio_params("garbage_stdout"), errlog) as session:
                await session.initialize()


@pytest.mark.anyio
async def test_garbage_then_serve_still_works(errlog: TextIO) -> None:
    stream_errors: list[Exception] = []
    all_seen = anyio.Event()

    async def handler(message: IncomingMessage) -> None:
        if isinstance(message, Exception):
            stream_errors.append(message)
            if len(stream_errors) == 3:
                all_seen.set()

    # Forked from the worker's warm process (its SDK imported: about 1.5 s of CPU in a new
    # interpreter); the garbage it prints is written to the same pipe either way.
    garbage = str(server_script("garbage_stdout"))
    params = StdioServerParameters(command=sys.executable, args=launch_args(garbage, "--then-serve"))
    async with stdio_session(params, errlog, handler) as session:
        init = await session.initialize()
        assert init.server_info.name == "garbage-then-serve"
        assert text_of(await session.call_tool("echo", {"text": "ok"})) == "ok"
        with anyio.fail_after(5):  # delivered to the handler from a spawned task
            await all_seen.wait()
    assert len(stream_errors) == 3


@pytest.mark.anyio
async def test_exit_now_crashes_before_initialize(errlog: TextIO) -> None:
    with pytest.RaisesGroup(
        pytest.RaisesExc(MCPError, match="Connection closed"), allow_unwrapped=True, flatten_subgroups=True
    ) as caught:
        async with stdio_session(stdio_params("exit_now"), errlog) as session:
            await session.initialize()
    assert any(isinstance(leaf, MCPError) for leaf in leaf_errors(caught.value))
    assert "fatal: demo crash" in read_log(errlog)


def test_exit_now_exit_code_and_stderr() -> None:
    proc = subprocess.run([sys.executable, str(server_script("exit_now"))], capture_output=True, timeout=30)
    assert proc.returncode == 3 and proc.stderr == b"fatal: demo crash\n"


def test_stdio_entry_is_a_valid_keen_config(tmp_path: Path) -> None:
    entry = stdio_entry("basic_stdio", "--tools", "3", env={"A": "b"}, cwd=tmp_path, timeouts={"connect": 5})
    config = parse_config(json.dumps({"version": 1, "servers": {"basic": entry}}))
    server = config.servers["basic"]
    assert server.transport == "stdio" and server.timeouts.connect == 5
    with pytest.raises(FileNotFoundError, match="basic_stdio"):
        server_script("no_such_server")


# --- in-process HTTP servers -------------------------------------------------------------------


@pytest.mark.anyio
async def test_http_basic_server_and_request_log() -> None:
    with serve_http(make_basic_server(instructions="http instructions")) as srv:
        assert srv.url.startswith("http://127.0.0.1:") and srv.url.endswith("/mcp") and str(srv) == srv.url
        async with (
            httpx2.AsyncClient(headers={"X-Custom": "v1"}, verify=tls(), timeout=MCP_TIMEOUT) as http,
            http_session(srv.url, http) as session,
        ):
            init = await session.initialize()
            assert init.server_info.name == "basic-http"
            assert init.instructions == "http instructions"
            assert {tool.name for tool in (await session.list_tools()).tools} == BASIC_TOOLS - {"die"}
            assert text_of(await session.call_tool("add", {"a": 1, "b": 2})) == "3"
            failed = await session.call_tool("fail", {"message": "nope"})
            assert failed.is_error and "nope" in text_of(failed)
        assert srv.requests and all(r.headers.get("x-custom") == "v1" for r in srv.requests)
        assert {r.path for r in srv.requests} == {"/mcp"}


@pytest.mark.anyio
async def test_http_pagination_with_list_page_size() -> None:
    expected = (BASIC_TOOLS - {"die"}) | {f"extra_{i:04d}" for i in range(13)}
    with serve_http(make_basic_server(n_extra_tools=13, list_page_size=6)) as srv:
        async with (
            httpx2.AsyncClient(verify=tls(), timeout=MCP_TIMEOUT) as http,
            http_session(srv.url, http) as session,
        ):
            await session.initialize()
            names: list[str] = []
            cursor: str | None = None
            pages = 0
            while True:
                params = PaginatedRequestParams(cursor=cursor) if cursor else None
                page = await session.list_tools(params=params)
                pages += 1
                assert len(page.tools) <= 6
                names += [tool.name for tool in page.tools]
                cursor = page.next_cursor
                if cursor is None:
                    break
    assert pages == -(-len(expected) // 6)
    assert len(names) == len(set(names)) and set(names) == expected


@pytest.mark.anyio
async def test_http_api_key_401_and_success() -> None:
    seen: list[tuple[int, str | None]] = []

    async def hook(response: httpx2.Response) -> None:
        seen.append((response.status_code, response.headers.get("www-authenticate")))

    with serve_http(make_basic_server(), api_key="k-123456") as srv:
        for headers in ({}, {"Authorization": "Bearer wrong"}):
            seen.clear()
            # The SDK's words for the 401 it met; the status itself is checked from the hook below.
            with pytest.RaisesGroup(
                pytest.RaisesExc(MCPError, match="Server returned an error response"),
                allow_unwrapped=True,
                flatten_subgroups=True,
            ) as caught:
                async with (
                    httpx2.AsyncClient(
                        headers=headers, event_hooks={"response": [hook]}, verify=tls(), timeout=MCP_TIMEOUT
                    ) as http,
                    http_session(srv.url, http) as session,
                ):
                    await session.initialize()
            assert any(isinstance(leaf, MCPError) for leaf in leaf_errors(caught.value))
            assert seen and seen[0][0] == 401 and (seen[0][1] or "").startswith("Bearer")
        seen.clear()
        good = {"Authorization": "Bearer k-123456"}
        async with (
            httpx2.AsyncClient(
                headers=good, event_hooks={"response": [hook]}, verify=tls(), timeout=MCP_TIMEOUT
            ) as http,
            http_session(srv.url, http) as session,
        ):
            await session.initialize()
            assert text_of(await session.call_tool("echo", {"text": "in"})) == "in"
        assert seen and all(status < 400 for status, _ in seen)


@pytest.mark.anyio
async def test_http_api_key_custom_header_raw_value() -> None:
    with serve_http(
        make_basic_server(), api_key="raw-key", api_key_header="X-API-Key", api_key_scheme=""
    ) as srv:
        async with (
            httpx2.AsyncClient(headers={"X-API-Key": "raw-key"}, verify=tls(), timeout=MCP_TIMEOUT) as http,
            http_session(srv.url, http) as s,
        ):
            await s.initialize()
            assert text_of(await s.call_tool("echo", {"text": "x"})) == "x"
        assert srv.requests[0].headers["x-api-key"] == "raw-key"


@pytest.mark.anyio
async def test_http_stop_mid_session_then_restart_on_same_port() -> None:
    with serve_http(make_basic_server()) as srv:
        port = srv.port
        async with httpx2.AsyncClient(verify=tls(), timeout=MCP_TIMEOUT) as http:
            async with http_session(srv.url, http) as session:
                await session.initialize()
                srv.stop()
                assert not srv.running
                with pytest.raises(ConnectionRefusedError, match="Connection refused"):
                    socket.create_connection(("127.0.0.1", port), timeout=5).close()
                with pytest.raises(MCPError, match="Connection closed"), anyio.fail_after(10):
                    await session.call_tool("echo", {"text": "gone"})
            srv.start()
            assert srv.port == port and srv.running
            async with http_session(srv.url, http) as session:
                await session.initialize()
                assert text_of(await session.call_tool("echo", {"text": "back"})) == "back"


def test_http_server_usable_from_sync_code_and_stops_on_exit() -> None:
    with serve_http(make_basic_server()) as srv:
        socket.create_connection(("127.0.0.1", srv.port), timeout=5).close()
        assert srv.running
    assert not srv.running
    with pytest.raises(ConnectionRefusedError, match="Connection refused"):
        socket.create_connection(("127.0.0.1", srv.port), timeout=5).close()
