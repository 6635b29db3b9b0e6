"""Real third-party MCP servers through the Manager (servers from npm and PyPI, as users run them).

Peers come from npm and PyPI (``make peers``): server-everything over stdio and over
Streamable HTTP, server-filesystem and server-memory (Node), mcp-server-time and
mcp-server-git (Python). Everything runs on this machine: HTTP servers are forced onto
127.0.0.1 and the only URL a peer is asked to fetch is a closed loopback port.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import SERVERS, peer
from helpers.loopback import free_port, stop, wait_listening
from keen.errors import InvalidArguments
from keen.mcp import Manager, ServerState
from keen.mcp.types import ToolResult
from keen.trust import PinGuard

pytestmark = pytest.mark.anyio

READY_TIMEOUT = 60.0
EVERYTHING_TOOLS = {
    "echo",
    "get-annotated-message",
    "get-env",
    "get-resource-links",
    "get-resource-reference",
    "get-structured-content",
    "get-sum",
    "get-tiny-image",
    "gzip-file-as-resource",
    "toggle-simulated-logging",
    "toggle-subscriber-updates",
    "trigger-long-running-operation",
    "simulate-research-query",
}
# gzip-file-as-resource fetches a URL: allow loopback only, and point it at a closed port.
LOOPBACK_ONLY_FETCH = {"GZIP_ALLOWED_DOMAINS": "127.0.0.1", "GZIP_MAX_FETCH_TIME_MILLIS": "5000"}
CLOSED_LOOPBACK_URL = "http://127.0.0.1:9/x"

WriteConfig = Callable[[dict[str, Any]], Path]


async def _connected(config_path: Path) -> Manager:
    manager = Manager(config_path, trust=PinGuard())
    await manager.start()
    assert await manager.wait_ready(READY_TIMEOUT), "peers did not settle in time"
    return manager


def _assert_connected(manager: Manager, name: str) -> None:
    status = manager.status(name)
    assert status.state is ServerState.CONNECTED, f"{name}: {status.state} {status.last_error}"


# -- server-everything ----------------------------------------------------------------------------


async def _check_everything(manager: Manager, name: str) -> None:
    _assert_connected(manager, name)
    info = manager.server_info(name)
    assert info is not None
    assert info.name == "mcp-servers/everything"
    assert info.protocol_version
    assert info.instructions and "trigger-long-running-operation" in info.instructions

    tools = manager.list_tools(name)
    assert {t.name for t in tools} == EVERYTHING_TOOLS
    assert manager.status(name).tool_count == 13
    get_sum = next(t for t in tools if t.name == "get-sum")
    assert set(get_sum.input_schema["required"]) == {"a", "b"}

    result = await manager.call_tool(name, "get-sum", {"a": 19, "b": 23})
    assert isinstance(result, ToolResult)
    assert not result.is_error
    assert "42" in result.text

    updates: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        updates.append((progress, total, message))

    long = await manager.call_tool(
        name, "trigger-long-running-operation", {"duration": 1, "steps": 3}, progress=on_progress
    )
    assert not long.is_error, long.text
    assert "Steps: 3" in long.text
    assert [(p, t) for p, t, _ in updates] == [(1, 3), (2, 3), (3, 3)]

    failed = await manager.call_tool(
        name, "gzip-file-as-resource", {"name": "x.gz", "data": CLOSED_LOOPBACK_URL}
    )
    assert failed.is_error
    assert failed.text

    with pytest.raises(
        InvalidArguments,
        match=re.escape(f"invalid arguments for \"{name}/get-sum\": $.a: 'nineteen' is not of type 'number'"),
    ) as info_err:
        await manager.call_tool(name, "get-sum", {"a": "nineteen", "b": 23})
    assert info_err.value.errors[0][0] == "$.a"


async def test_everything_over_stdio(write_config: WriteConfig) -> None:
    path = write_config(
        {
            "everything": {
                "command": peer("node", "mcp-server-everything"),
                "args": ["stdio"],
                "env": LOOPBACK_ONLY_FETCH,
            }
        }
    )
    manager = await _connected(path)
    try:
        assert manager.status("everything").transport == "stdio"
        await _check_everything(manager, "everything")
    finally:
        await manager.aclose()
    assert manager.status("everything").state is ServerState.DISCONNECTED


def _listening_addresses(port: int) -> set[str]:
    """Local addresses of LISTEN sockets on ``port``, from /proc/net/tcp{,6} (hex, as the kernel writes them)."""
    found: set[str] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except FileNotFoundError:
            continue
        for line in lines:
            fields = line.split()
            address, port_hex = fields[1].rsplit(":", 1)
            if int(port_hex, 16) == port and fields[3] == "0A":
                found.add(address)
    return found


@pytest.fixture
def everything_http(tmp_path: Path) -> Iterator[str]:
    """`mcp-server-everything streamableHttp` on a free loopback port; yields its /mcp URL."""
    port = free_port()
    log = tmp_path / "everything-http.log"
    preload = f"--require {SERVERS / 'force_loopback.cjs'}"
    env = {
        **os.environ,
        **LOOPBACK_ONLY_FETCH,
        "PORT": str(port),
        "NODE_OPTIONS": f"{os.environ.get('NODE_OPTIONS', '')} {preload}".strip(),
    }
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [peer("node", "mcp-server-everything"), "streamableHttp"],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        wait_listening(port, proc, "server-everything", log=log.read_text)
        # 0100007F is 127.0.0.1 in /proc's little-endian hex; nothing may listen on 0.0.0.0 or ::.
        assert _listening_addresses(port) == {"0100007F"}, log.read_text()
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        stop(proc)


async def test_everything_over_streamable_http(write_config: WriteConfig, everything_http: str) -> None:
    path = write_config({"everything-http": {"url": everything_http}})
    manager = await _connected(path)
    try:
        status = manager.status("everything-http")
        assert (status.transport, status.auth) == ("streamable_http", "none")
        await _check_everything(manager, "everything-http")
    finally:
        await manager.aclose()


# -- mcp-server-time and mcp-server-git (PyPI) ----------------------------------------------------


async def test_time_server(write_config: WriteConfig) -> None:
    path = write_config(
        {"time": {"command": peer("py", "mcp-server-time"), "args": ["--local-timezone", "UTC"]}}
    )
    manager = await _connected(path)
    try:
        _assert_connected(manager, "time")
        assert {t.name for t in manager.list_tools("time")} == {"get_current_time", "convert_time"}

        now = await manager.call_tool("time", "get_current_time", {"timezone": "Europe/Paris"})
        assert not now.is_error, now.text
        body = json.loads(now.text)
        assert body["timezone"] == "Europe/Paris"
        assert body["datetime"][-6:] in ("+01:00", "+02:00")

        converted = await manager.call_tool(
            "time",
            "convert_time",
            {"source_timezone": "Europe/Paris", "time": "14:30", "target_timezone": "Asia/Tokyo"},
        )
        assert not converted.is_error, converted.text
        body = json.loads(converted.text)
        assert body["source"]["datetime"][11:16] == "14:30"
        assert body["target"]["timezone"] == "Asia/Tokyo"
        assert body["target"]["datetime"][11:16] in ("21:30", "22:30")
        assert body["time_difference"] in ("+7.0h", "+8.0h")

        bad_zone = await manager.call_tool("time", "get_current_time", {"timezone": "Mars/Olympus"})
        assert bad_zone.is_error
    finally:
        await manager.aclose()


def _git(repo: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.name=Keen Test", "-c", "user.email=keen@example.invalid", *args],
        cwd=repo,
        check=True,
        capture_output=True,
        env={**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"},
    )


async def test_git_server(write_config: WriteConfig, tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    (repo / "README.md").write_text("hello\n")
    _git(repo, "add", "README.md")
    _git(repo, "commit", "-q", "-m", "first commit from the keen peer test")
    (repo / "untracked.txt").write_text("new\n")
    path = write_config(
        {"git": {"command": peer("py", "mcp-server-git"), "args": ["--repository", str(repo)]}}
    )
    manager = await _connected(path)
    try:
        _assert_connected(manager, "git")
        assert {"git_status", "git_log", "git_diff", "git_commit"} <= {
            t.name for t in manager.list_tools("git")
        }

        status = await manager.call_tool("git", "git_status", {"repo_path": str(repo)})
        assert not status.is_error, status.text
        assert "On branch main" in status.text
        assert "untracked.txt" in status.text

        log = await manager.call_tool("git", "git_log", {"repo_path": str(repo)})
        assert not log.is_error, log.text
        assert "first commit from the keen peer test" in log.text
        assert "Keen Test" in log.text
    finally:
        await manager.aclose()


# -- server-filesystem and server-memory ----------------------------------------------------------


async def test_filesystem_and_memory_servers(write_config: WriteConfig, tmp_path: Path) -> None:
    root = tmp_path / "files"
    root.mkdir()
    (root / "hello.txt").write_text("hi from keen\n")
    memory_file = tmp_path / "memory.jsonl"
    path = write_config(
        {
            "files": {"command": peer("node", "mcp-server-filesystem"), "args": [str(root)]},
            "memory": {
                "command": peer("node", "mcp-server-memory"),
                "env": {"MEMORY_FILE_PATH": str(memory_file)},
            },
        }
    )
    manager = await _connected(path)
    try:
        _assert_connected(manager, "files")
        _assert_connected(manager, "memory")
        assert {"read_text_file", "list_directory", "write_file"} <= {
            t.name for t in manager.list_tools("files")
        }
        assert {"create_entities", "read_graph"} <= {t.name for t in manager.list_tools("memory")}

        listing = await manager.call_tool("files", "list_directory", {"path": str(root)})
        assert not listing.is_error, listing.text
        assert "[FILE] hello.txt" in listing.text
        # The filesystem server declares draft-07 schemas; Keen validates with that dialect.
        with pytest.raises(InvalidArguments, match=re.escape("$.path: 7 is not of type 'string'")):
            await manager.call_tool("files", "list_directory", {"path": 7})

        created = await manager.call_tool(
            "memory",
            "create_entities",
            {"entities": [{"name": "Keen", "entityType": "project", "observations": ["talks MCP"]}]},
        )
        assert not created.is_error, created.text
        assert "Keen" in memory_file.read_text()
    finally:
        await manager.aclose()
