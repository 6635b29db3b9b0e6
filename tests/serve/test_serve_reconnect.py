"""``keen serve`` reconnects an upstream server that went away, on demand (docs/serve.md
"When an upstream server goes away"; :mod:`keen.mcp.connection.reconnect`).

``keen serve``'s server in this process (``helpers.serve.in_process``: the back-off runs on
the test's clock, so no test waits out a window) and a real ``keen serve`` HTTP process, in
front of the real ``basic_stdio.py`` started through a small launcher that counts its
launches and refuses to start while a ``down`` file exists: a crashed server is respawned by
the next call that needs it, at most once per back-off window, and concurrent calls share one
respawn.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

from helpers.changing import changing_http
from helpers.forkserver import script_args
from helpers.serve import BASIC, KeenServeProcess, connect, free_port, in_process, read_json, write_upstream
from keen.mcp.connection.reconnect import KICK_LIMIT, Reconnector
from keen.mcp.manager import Manager
from keen.mcp.types import ServerState
from keen.trust import PinGuard

pytestmark = pytest.mark.anyio

_LAUNCHER = """
import os, sys, time
here = os.path.dirname(os.path.abspath(__file__))
with open(os.path.join(here, "launches"), "a") as f:
    f.write("x\\n")
if os.path.exists(os.path.join(here, "down")):
    sys.stderr.write("fatal: the server is down\\n")
    sys.exit(3)
if os.path.exists(os.path.join(here, "slow")):
    time.sleep(1)
os.execv(sys.executable, [sys.executable, *sys.argv[1:]])
"""


def launcher_upstream(home: Path, **extra: Any) -> Path:
    """``basic`` through the counting launcher; returns the launcher's folder."""
    folder = home / "upstream"
    folder.mkdir()
    (folder / "launch.py").write_text(_LAUNCHER)
    # The launcher execs basic_stdio.py forked from the worker's warm process (script_args).
    basic = {
        "transport": "stdio",
        "command": sys.executable,
        "args": [str(folder / "launch.py"), *script_args(str(BASIC), "--tools", "0")],
    }
    write_upstream(home, extra={"basic": basic, **extra})
    return folder


def launches(folder: Path) -> int:
    path = folder / "launches"
    return len(path.read_text().splitlines()) if path.exists() else 0


def text(result: Any) -> str:
    return "".join(getattr(c, "text", "") for c in result.content)


async def test_failed_reconnect_says_when_backs_off_then_recovers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = launcher_upstream(tmp_path, broken={"transport": "stdio", "command": "${KEEN_TEST_NO_SUCH_VAR}"})
    monkeypatch.setenv("KEEN_HOME", str(tmp_path))
    now = [100.0]
    async with in_process(tmp_path, "session", mode="search") as (keen, client):
        keen.reconnector.clock = lambda: now[0]

        async def call(tool: str, arguments: dict[str, Any] | None = None, server: str = "basic") -> Any:
            return await client.call_tool(
                "call_mcp_tool", {"server": server, "tool": tool, "arguments": arguments or {}}
            )

        first = await call("pid")
        assert not first.is_error and launches(folder) == 1
        (folder / "down").touch()
        died = await call("die")
        assert read_json(died)["error"]["code"] == "server_disconnected"
        # The next call tries one reconnect; the launcher refuses, so the call fails and says
        # when keen serve tries again.
        failed = await call("echo", {"text": "hi"})
        assert failed.is_error and launches(folder) == 2
        message = read_json(failed)["error"]["message"]
        assert "keen serve reconnects this server on a call made 1 s from now or later" in message, message
        assert "restart keen serve" not in message
        # Within the back-off window no new attempt is made.
        again = await call("echo", {"text": "hi"})
        assert again.is_error and launches(folder) == 2
        (folder / "down").unlink()
        now[0] += 1.2
        back = await call("echo", {"text": "hi"})
        assert not back.is_error, text(back)
        assert launches(folder) == 3 and text(await call("pid")) != text(first)
        # A success reset the back-off to 1 s: a crash after that is reconnected at once, and
        # calls that arrive together (during a slow start) share that one reconnect.
        now[0] += 1.1
        await call("die")
        (folder / "slow").touch()
        results: list[Any] = []

        async def echo(i: int) -> None:
            results.append(await call("echo", {"text": f"hi {i}"}))

        async with anyio.create_task_group() as tg:
            for i in range(5):
                tg.start_soon(echo, i)
        assert [r.is_error for r in results] == [False] * 5, [text(r) for r in results]
        assert launches(folder) == 4
        # A misconfigured server needs the user: no reconnect, and a restart is still the remedy.
        broken = await call("echo", {"text": "hi"}, server="broken")
        assert "restart keen serve" in read_json(broken)["error"]["message"]


@pytest.mark.e2e
async def test_concurrent_calls_share_one_reconnect_over_http_extension_mode(tmp_path: Path) -> None:
    folder = launcher_upstream(tmp_path)
    with KeenServeProcess(tmp_path) as proc:
        async with connect(proc, "stateless") as client:
            names = {t.name for t in (await client.list_tools()).tools}
            assert {"mcp__basic__echo", "mcp__basic__pid"} <= names
            await client.read_resource("resource:///tool_descriptions?tools=mcp__basic__echo,mcp__basic__pid")
            pid = int(text(await client.call_tool("mcp__basic__pid", {})))
            assert launches(folder) == 1
            # The upstream goes away on its own (killed, not during a call).
            os.kill(pid, signal.SIGKILL)
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                listed = {t.name for t in (await client.list_tools()).tools}
                if "mcp__basic__echo" not in listed or launches(folder) > 1:
                    break
                await anyio.sleep(0.1)
            results: list[Any] = []

            async def echo(i: int) -> None:
                results.append(await client.call_tool("mcp__basic__echo", {"text": f"hi {i}"}))

            async with anyio.create_task_group() as tg:
                for i in range(5):
                    tg.start_soon(echo, i)
            assert [r.is_error for r in results] == [False] * 5, [text(r) for r in results]
            assert sorted(text(r) for r in results) == [f"hi {i}" for i in range(5)]
            # listing tools may have started the reconnect in the background: one launch either way.
            assert launches(folder) == 2
            assert int(text(await client.call_tool("mcp__basic__pid", {}))) != pid


async def test_extension_mode_says_when_it_reconnects_and_a_description_read_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = launcher_upstream(tmp_path)
    monkeypatch.setenv("KEEN_HOME", str(tmp_path))
    now = [100.0]
    async with in_process(tmp_path, "session", mode="extension") as (keen, client):
        keen.reconnector.clock = lambda: now[0]
        await client.read_resource("resource:///tool_descriptions?tools=mcp__basic__die,mcp__basic__echo")
        (folder / "down").touch()
        died = await client.call_tool("mcp__basic__die", {})
        assert died.is_error and launches(folder) == 1
        # The reconnect fails: the tool is not "not found", its server is down for now.
        down = read_json(await client.call_tool("mcp__basic__echo", {"text": "x"}))["error"]
        assert launches(folder) == 2
        assert down["code"] == "server_disconnected", down
        assert "keen serve reconnects this server on a call made 1 s from now or later" in down["message"]
        (folder / "down").unlink()
        now[0] += 1.1
        body = read_json(await client.read_resource("resource:///tool_descriptions?tools=mcp__basic__echo"))
        assert "inputSchema" in body["mcp__basic__echo"], body
        assert launches(folder) == 3
        assert text(await client.call_tool("mcp__basic__echo", {"text": "back"})) == "back"


async def test_backoff_doubles_up_to_its_cap_and_no_attempt_runs_inside_a_window(tmp_path: Path) -> None:
    folder = launcher_upstream(tmp_path)
    (folder / "down").touch()
    now = [100.0]
    async with Manager(
        tmp_path / "mcp" / "configs.json", logs_dir=tmp_path / "logs", trust=PinGuard()
    ) as manager:
        await manager.wait_ready(15)
        assert manager.status("basic").state is ServerState.DISCONNECTED
        reconnector = Reconnector(manager, clock=lambda: now[0])
        assert reconnector.reconnectable("basic") and reconnector.retry_in("basic") == 0
        windows: list[float] = []
        for attempt in range(7):
            await reconnector.ensure(["basic"])
            assert launches(folder) == 2 + attempt
            windows.append(reconnector.retry_in("basic"))
            now[0] += windows[-1] - 0.01
            await reconnector.ensure(["basic"])  # still inside the window: no attempt
            assert launches(folder) == 2 + attempt
            now[0] += 0.01
        assert windows == [1, 2, 4, 8, 16, 30, 30]
        (folder / "down").unlink()
        await reconnector.ensure(["basic"])
        assert manager.status("basic").state is ServerState.CONNECTED
        assert not reconnector.reconnectable("basic")


async def test_an_http_upstream_that_restarts_is_reconnected(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    port = free_port()
    write_upstream(tmp_path, extra={"changing": {"url": f"http://127.0.0.1:{port}/mcp"}})
    monkeypatch.setenv("KEEN_HOME", str(tmp_path))
    now = [100.0]
    with contextlib.ExitStack() as upstream:
        upstream.enter_context(changing_http(tmp_path, port=port))
        async with in_process(tmp_path, "session", mode="search") as (keen, client):
            keen.reconnector.clock = lambda: now[0]

            async def echo(value: str) -> Any:
                return await client.call_tool(
                    "call_mcp_tool", {"server": "changing", "tool": "echo", "arguments": {"text": value}}
                )

            assert text(await echo("one")) == "one"
            upstream.close()  # the upstream stops (its port refuses connections)
            down = read_json(await echo("two"))["error"]
            assert down["code"] == "server_disconnected", down
            assert "keen serve reconnects this server" in down["message"], down
            # The advice is keen serve's own (it reconnects by itself), not the other front ends'.
            assert "restart" not in down["message"].lower() and "keen mcp" not in down["message"], down
            upstream.enter_context(changing_http(tmp_path, port=port))  # the same server is back
            now[0] += 1.1  # past the back-off window of a failed attempt, if any
            back = await echo("three")
            assert not back.is_error and text(back) == "three", text(back)


async def test_kicks_give_up_after_the_kick_limit_but_a_request_that_needs_the_server_still_tries(
    tmp_path: Path,
) -> None:
    # What keen serve's tools/list and search_tools do for every server that went away: a
    # server that never comes back is not restarted every 30 s for ever (module docstring).
    folder = launcher_upstream(tmp_path)
    (folder / "down").touch()
    now = [100.0]
    async with Manager(
        tmp_path / "mcp" / "configs.json", logs_dir=tmp_path / "logs", trust=PinGuard()
    ) as manager:
        await manager.wait_ready(15)
        reconnector = Reconnector(manager, clock=lambda: now[0])
        assert reconnector.kick(["basic"]) == []  # no task group: nothing runs in the background
        async with anyio.create_task_group() as tg:
            reconnector.task_group = tg
            for attempt in range(KICK_LIMIT):
                assert reconnector.kick(["basic"]) == ["basic"]
                assert await reconnector.ensure(["basic"]) == ["basic"]  # joins the kicked attempt
                assert launches(folder) == 2 + attempt and reconnector.failures("basic") == attempt + 1
                now[0] += reconnector.retry_in("basic")
            assert reconnector.retry_in("basic") == 0  # the window allows an attempt, yet
            assert reconnector.kick(["basic"]) == [] and launches(folder) == 1 + KICK_LIMIT
            # A request that needs the server tries, and a success clears the count.
            (folder / "down").unlink()
            assert await reconnector.ensure(["basic"]) == ["basic"]
            assert manager.status("basic").state is ServerState.CONNECTED
            assert reconnector.failures("basic") == 0 and launches(folder) == 2 + KICK_LIMIT
            reconnector.task_group = None
