"""``keen serve`` errors tell the host's model what to do, in terms of keen serve's own tools.

The host's model has no skill files and cannot reconnect a server: a refusal says to use
``describe_tools`` / ``search_tools`` (search mode) or the ``tool_descriptions`` resource
(extension mode), and a server that crashed says keen serve reconnects it on the next call,
which it does (the stdio server is respawned).
``keen serve``'s server in this process, its host over memory streams (what it says is under
test, not its transport), in front of ``tests/servers/basic_stdio.py``.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp.client.client import Client

from conftest import stdio_server
from helpers.serve import (
    KeenServeProcess,
    basic_in_memory,
    connect,
    free_port,
    http_in_process,
    in_process,
    read_json,
    tls,
    write_upstream,
)
from keen.agent import slash
from keen.cli import _wording
from keen.errors import Remedy, ServerDisabled, ServerDisconnected, ServerMisconfigured
from keen.gateway import for_model
from keen.mcp import Manager, Tool
from keen.mcp.connection.translate import translate_call_error
from keen.mcp.listing.changes import ToolsChanged
from keen.serve import KeenServer
from keen.serve.calls import Withheld, host_remedy_words
from keen.trust import PinGuard

pytestmark = pytest.mark.anyio

RECONNECTS = "keen serve reconnects this server on the next call to it"


async def test_search_mode_errors_point_at_its_tools_and_a_crashed_server_comes_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_upstream(tmp_path, extra_tools=0)
    monkeypatch.setenv("KEEN_HOME", str(tmp_path))
    async with in_process(tmp_path, "session", mode="search") as (_, client):

        async def call(tool: str, arguments: dict[str, object]) -> dict[str, str]:
            result = await client.call_tool(
                "call_mcp_tool", {"server": "basic", "tool": tool, "arguments": arguments}
            )
            assert result.is_error
            return read_json(result)["error"]

        wrong = await call("add", {"a": "x"})
        assert wrong["code"] == "invalid_arguments"
        assert wrong["message"].endswith(
            "Call describe_tools for its inputSchema and pass arguments that match it exactly."
        )
        unknown = await call("ad", {})
        assert unknown["code"] == "tool_not_found"
        assert unknown["message"].endswith("Use search_tools to find the tool's exact server and name.")
        assert "SKILL.md" not in json.dumps([wrong, unknown])
        # The server dies mid-call: that call fails (it is never repeated) and says keen serve
        # reconnects; the next call respawns the server and runs on the new process.
        pid = await client.call_tool("call_mcp_tool", {"server": "basic", "tool": "pid", "arguments": {}})
        died = await call("die", {})
        assert died["code"] == "server_disconnected", died
        assert RECONNECTS in died["message"]
        assert "restart keen serve" not in died["message"]
        assert "keen mcp connect" not in json.dumps(died)
        later = await client.call_tool(
            "call_mcp_tool", {"server": "basic", "tool": "echo", "arguments": {"text": "hi"}}
        )
        assert not later.is_error, later
        assert "hi" in json.dumps(later.model_dump(mode="json"))
        again = await client.call_tool("call_mcp_tool", {"server": "basic", "tool": "pid", "arguments": {}})
        assert _text(again) != _text(pid)
    audit = (tmp_path / "logs" / "serve-audit.jsonl").read_text()
    assert RECONNECTS in audit


def _text(result: Any) -> str:
    return "".join(getattr(c, "text", "") for c in result.content)


async def test_extension_mode_errors_point_at_the_tool_descriptions_resource(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_upstream(tmp_path, extra_tools=0)
    monkeypatch.setenv("KEEN_HOME", str(tmp_path))
    async with in_process(tmp_path, "stateless", mode="extension") as (_, client):
        await client.read_resource("resource:///tool_descriptions?tools=mcp__basic__add")
        wrong = await client.call_tool("mcp__basic__add", {"a": "x"})
        assert wrong.is_error
        error = read_json(wrong)["error"]
        assert error["code"] == "invalid_arguments"
        assert error["message"].endswith(
            "Read resource:///tool_descriptions?tools=NAME for its inputSchema and pass arguments"
            " that match it exactly."
        )


@pytest.mark.parametrize("mode", ["search", "extension"])
def test_an_unreachable_server_gets_each_front_ends_own_advice(mode: str) -> None:
    """A call whose HTTP server refuses the connection: the message says what happened, the
    remedy is data, and each front end words it for what works there (keen serve reconnects
    by itself; keen chat has /mcp connect; the CLI keen mcp connect), never "restart Keen"."""
    with pytest.raises(
        httpx2.ConnectError, match="Connection refused"
    ) as refused:  # a real refusal, as the transport meets it
        httpx2.post(f"http://127.0.0.1:{free_port()}/mcp", json={}, verify=tls())
    error = translate_call_error(ExceptionGroup("call", [refused.value]), server="h", tool="echo", timeout=5)
    assert isinstance(error, ServerDisconnected) and error.remedy is Remedy.RECONNECT, error
    assert error.message.startswith('MCP server "h" is unreachable'), error.message
    served = host_remedy_words(mode, lambda server: 0.0)(error, "h")
    assert RECONNECTS in served and "keen mcp" not in served and "/mcp" not in served, served
    to_model, to_person = for_model(error, "h"), slash.describe(error)
    assert "The user has to fix and reconnect this server" in to_model, to_model
    assert "/mcp connect h" in to_person, to_person
    assert "keen mcp connect h" in _wording.describe(error)
    for text in (error.message, served, to_model, to_person, _wording.describe(error)):
        assert "restart" not in text.lower(), text


@pytest.mark.parametrize("mode", ["search", "extension"])
def test_a_host_remedy_starts_its_own_sentence_after_a_servers_text(mode: str) -> None:
    # A crashed server's last stderr line ends the message with no full stop: the host's
    # model read "... running on stdio keen serve reconnects this server ...".
    down = ServerDisconnected(
        'MCP server "memory" exited unexpectedly; last stderr: Knowledge Graph MCP Server running on stdio',
        server="memory",
        remedy=Remedy.RECONNECT,
    )
    served = host_remedy_words(mode, lambda server: 0.0)(down, "memory")
    assert "running on stdio. keen serve reconnects this server" in served, served
    # An invalid configs.json entry's text never reaches the host (the test below).


@pytest.mark.parametrize("mode", ["search", "extension"])
async def test_a_disabled_server_gets_each_front_ends_own_advice(mode: str, tmp_path: Path) -> None:
    entry = {"command": "never-run", "enabled": False}
    path = tmp_path / "configs.json"  # keen serve's Manager reads its configs.json
    path.write_text(json.dumps({"version": 1, "servers": {"off": entry}}))
    async with Manager(path, logs_dir=tmp_path, trust=PinGuard()) as manager:
        with pytest.raises(
            ServerDisabled, match=re.escape('MCP server "off" is disabled in configs.json ("enabled": false)')
        ) as refused:
            await manager.call_tool("off", "echo", {})
    error = refused.value
    assert error.remedy is Remedy.ENABLE_SERVER and "restart" not in error.message.lower(), error
    served = host_remedy_words(mode, lambda server: 0.0)(error, "off")
    assert served.endswith(
        ' The user has to enable it (keen mcp enable off, or "enabled": true in the configs.json keen serve'
        " was started with), then restart keen serve (or the MCP host running it); tell them."
    ), served
    # keen chat's /mcp connect reads the entry again (Manager.reload_server): no restart there.
    assert slash.describe(error).endswith("run keen mcp enable off in a shell, then /mcp connect off")
    assert "keen serve" not in slash.describe(error) and "restart" not in slash.describe(error)
    assert "restart" not in _wording.describe(error)  # each keen command reads configs.json anew


async def test_a_host_is_told_what_is_wrong_with_a_server_without_local_paths(tmp_path: Path) -> None:
    """A remote host learns which server cannot be used and why in words; the configs.json
    path, a stdio command's path and the config's variable names stay in keen serve's log."""
    missing = tmp_path / "private-bin" / "no-such-server"
    config = write_upstream(
        tmp_path,
        extra_tools=0,
        extra={
            "broken": {"transport": "stdio", "command": str(missing), "args": 5},
            "unset": {"transport": "stdio", "command": "srv", "env": {"K": "${KEEN_TEST_NEVER_SET_42}"}},
            "gone": {"transport": "stdio", "command": str(missing)},
        },
    )
    # A pin file that cannot be read holds its server's tools whole; its error names the file.
    pins = tmp_path / "mcp" / "pins" / "basic.json"
    pins.parent.mkdir(parents=True)
    pins.write_text("{not json")
    with KeenServeProcess(tmp_path, ["--mode", "search"]) as proc:
        async with connect(proc, "session") as client:
            found = await client.call_tool("search_tools", {"query": "echo"})
            held = (found.structured_content or {})["held"]
            assert held == [
                "The tools of basic are held: keen serve cannot read their pins (keen serve's log says why);"
                " the user has to fix them; tell them."
            ], held
            told: dict[str, dict[str, str]] = {}
            for server in ("broken", "unset", "gone"):
                result = await client.call_tool(
                    "call_mcp_tool", {"server": server, "tool": "echo", "arguments": {"text": "hi"}}
                )
                assert result.is_error, result
                told[server] = read_json(result)["error"]
        log = (tmp_path / f"serve-{proc.port}.log").read_text()
    for server in ("broken", "unset"):
        assert told[server]["code"] == "server_misconfigured", told[server]
        assert (
            f'MCP server "{server}" cannot be used: its entry in the configs.json' in told[server]["message"]
        )
        assert "restart keen serve" in told[server]["message"], told[server]
    assert told["gone"]["code"] == "server_disconnected", told["gone"]
    assert 'MCP server "gone" is disconnected (keen serve\'s log says why).' in told["gone"]["message"]
    shown = json.dumps(told)
    for local in (str(tmp_path), str(config), "private-bin", "KEEN_TEST_NEVER_SET_42", "'args'"):
        assert local not in shown, (local, shown)
    # The operator's log has what the host was not told.
    for local in (str(config), str(missing), "KEEN_TEST_NEVER_SET_42", str(pins)):
        assert local in log, (local, log)


def test_each_keen_server_logs_what_it_withheld_from_hosts(caplog: pytest.LogCaptureFixture) -> None:
    """Each keen serve logs a withheld text once for itself: a second server in the same
    process (a test, an embedding app) logs it again for whoever runs that one."""
    broken = ServerMisconfigured("configs.json /home/me/mcp: servers.x.args must be a list", server="x")
    caplog.set_level(logging.WARNING, logger="keen.serve")
    for _ in range(2):  # two servers' words, each told of the same error twice
        words = host_remedy_words("search", lambda server: 0.0, Withheld())
        for _ in range(2):
            assert "/home/me" not in words(broken, "x")
    assert caplog.text.count("servers.x.args must be a list") == 2, caplog.text


@pytest.mark.parametrize("mode", ["search", "extension"])
async def test_a_pins_folder_that_cannot_be_looked_at_reaches_no_host_as_a_path(
    mode: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """``$KEEN_HOME/mcp/pins`` is a file: each pin file's path cannot even be looked at. The
    server's tools are held whole (as for an unreadable pin file), every answer is a result
    in words, and the path stays in keen serve's log."""
    monkeypatch.setenv("KEEN_HOME", str(tmp_path))
    write_upstream(tmp_path, extra_tools=0)
    (tmp_path / "mcp" / "pins").write_text("not a folder")
    caplog.set_level(logging.WARNING, logger="keen.serve")
    shown: list[object] = []
    async with http_in_process(tmp_path, mode=mode) as served, connect(served, "session") as client:
        if mode == "search":
            found = await client.call_tool("search_tools", {"query": "echo"})
            assert not found.is_error and read_json(found)["tools"] == [], found
            assert read_json(found)["held"] == [
                "The tools of basic are held: keen serve cannot read their pins (keen serve's log says why);"
                " the user has to fix them; tell them."
            ], found
            described = await client.call_tool("describe_tools", {"names": ["mcp__basic__echo"]})
            called = await client.call_tool(
                "call_mcp_tool", {"server": "basic", "tool": "echo", "arguments": {"text": "hi"}}
            )
            shown += [found.content, described.content]
        else:
            listed = await client.list_tools()
            assert "mcp__basic__echo" not in {t.name for t in listed.tools}, listed
            read = await client.read_resource("resource:///tool_descriptions?tools=mcp__basic__echo")
            called = await client.call_tool("mcp__basic__echo", {"text": "hi"})
            shown += [listed.tools, read.contents]
        shown.append(called.content)
    assert called.is_error, called
    error = read_json(called)["error"]
    if mode == "search":  # held, as for an unreadable pin file: search_tools' "held" said why
        assert error["code"] == "not_visible", error
        assert error["message"].endswith("basic/echo is not served here"), error
    else:  # a held tool is served by no name
        assert error["code"] == "TOOL_NOT_FOUND", error
    text = json.dumps(shown, default=repr)
    assert str(tmp_path) not in text and "pins/basic.json" not in text, text
    assert str(tmp_path / "mcp" / "pins" / "basic.json") in caplog.text, caplog.text


@pytest.mark.parametrize("mode", ["search", "extension"])
async def test_a_pins_folder_that_cannot_be_looked_at_holds_only_the_servers_that_read_pins(
    mode: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``$KEEN_HOME/mcp/pins`` is a file: the pinned server is held whole, and a server with
    ``"pinning": "off"``, which never reads pins, is found, listed and called as usual."""
    monkeypatch.setenv("KEEN_HOME", str(tmp_path))
    off = stdio_server("basic_stdio.py", "--tools", "0")
    off["pinning"] = "off"
    write_upstream(tmp_path, extra_tools=0, extra={"offsrv": off})
    (tmp_path / "mcp" / "pins").write_text("not a folder")
    async with http_in_process(tmp_path, mode=mode) as served, connect(served, "session") as client:
        if mode == "search":
            found = read_json(await client.call_tool("search_tools", {"query": "echo"}))
            assert {t["server"] for t in found["tools"]} == {"offsrv"}, found
            assert found["held"] == [
                "The tools of basic are held: keen serve cannot read their pins (keen serve's log says why);"
                " the user has to fix them; tell them."
            ], found
            called = await client.call_tool(
                "call_mcp_tool", {"server": "offsrv", "tool": "echo", "arguments": {"text": "hi"}}
            )
            refused = await client.call_tool(
                "call_mcp_tool", {"server": "basic", "tool": "echo", "arguments": {"text": "hi"}}
            )
        else:
            names = {t.name for t in (await client.list_tools()).tools}
            assert "mcp__offsrv__echo" in names and "mcp__basic__echo" not in names, names
            await client.read_resource("resource:///tool_descriptions?tools=mcp__offsrv__echo")
            called = await client.call_tool("mcp__offsrv__echo", {"text": "hi"})
            refused = await client.call_tool("mcp__basic__echo", {"text": "hi"})
        assert {t.server for t in served.keen.served.catalog().tools()} == {"offsrv"}
    assert not called.is_error and called.content[0].text == "hi", called
    assert refused.is_error, refused


@dataclass(frozen=True)
class _ViewWithoutError:
    """A third-party trust's view written before views had ``error``."""

    tools: Sequence[Tool]
    held: Sequence[Any] = ()
    note: str = ""


class _TrustWithoutError:
    """A third-party ToolTrust that shows the tools as listed, in views without ``error``."""

    version: Hashable = 0

    def shown(self, server: str, tools: Sequence[Tool], config: Any) -> _ViewWithoutError:
        return _ViewWithoutError(tuple(tools))

    def stamp(self, server: str) -> Hashable:
        return None

    def flagged(self, change: ToolsChanged, tools_by_name: Mapping[str, Tool], others: Any) -> ToolsChanged:
        return change


async def test_a_trust_whose_views_have_no_error_is_searched_and_called(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """keen serve reads a view's ``error`` as ``""`` when a third-party trust's view has none:
    search_tools lists its tools, holds nothing, and a call goes through."""
    monkeypatch.setenv("KEEN_HOME", str(tmp_path))
    config = write_upstream(tmp_path, extra_tools=0)
    manager = Manager(config, trust=_TrustWithoutError(), transports=basic_in_memory(0))
    keen = KeenServer(manager, mode="search")
    async with keen, Client(keen.server, mode="legacy", cache=None) as client:
        assert await manager.wait_ready(30)
        found = read_json(await client.call_tool("search_tools", {"query": "echo"}))
        called = await client.call_tool(
            "call_mcp_tool", {"server": "basic", "tool": "echo", "arguments": {"text": "hi"}}
        )
    assert "mcp__basic__echo" in {t["name"] for t in found["tools"]}, found
    assert "held" not in found, found
    assert not called.is_error and called.content[0].text == "hi", called
