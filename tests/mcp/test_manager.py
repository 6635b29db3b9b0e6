"""Manager behaviour against real servers: in-process FastMCP over
loopback HTTP and subprocess stdio servers."""

from __future__ import annotations

import logging
import os
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

from conftest import stdio_server
from helpers.http_servers import make_basic_server, serve_http
from helpers.loopback import alive
from keen.errors import (
    AuthRequired,
    CallTimeout,
    ConfigError,
    InvalidArguments,
    KeenError,
    Remedy,
    ServerDisabled,
    ServerDisconnected,
    ServerMisconfigured,
    ServerNotConfigured,
    ToolNotFound,
)
from keen.mcp import Manager, ServerState, in_memory_transport
from keen.runtime import connect_server
from keen.trust import PinGuard

pytestmark = pytest.mark.anyio

SECRET = "sk-test-9f8e7d6c5b4a"


def http_entry(url: str, **extra: Any) -> dict[str, Any]:
    return {"transport": "streamable_http", "url": url, **extra}


async def started(path: Path, timeout: float = 30) -> Manager:
    manager = Manager(path, trust=PinGuard())
    await manager.start()
    assert await manager.wait_ready(timeout)
    return manager


async def test_http_no_auth_connect_list_call(write_config: Callable[..., Path]) -> None:
    with serve_http(make_basic_server(instructions="Use for echo tests.")) as srv:
        path = write_config({"web": http_entry(srv.url)})
        async with Manager(path, trust=PinGuard()) as manager:
            assert await manager.wait_ready(20)
            status = manager.status("web")
            assert status.state is ServerState.CONNECTED, status.last_error
            assert status.last_connected_at is not None and status.last_refresh_at is not None
            names = {t.name for t in manager.list_tools("web")}
            assert {"echo", "add", "fail", "sleep"} <= names
            info = manager.server_info("web")
            assert info is not None and info.instructions == "Use for echo tests."
            result = await manager.call_tool("web", "add", {"a": 2, "b": 40})
            assert not result.is_error and "42" in result.text
            # FastMCP serves both eras: Keen's probe (server/discover) finds the stateless one, and
            # every request says its version (MCP 2026-07-28, Streamable HTTP headers).
            assert status.protocol_version == "2026-07-28"
            posts = [r for r in srv.requests if r.method == "POST"]
            assert posts and all(r.headers.get("mcp-protocol-version") == "2026-07-28" for r in posts)
            assert "application/json" in posts[0].headers["accept"]
            assert "text/event-stream" in posts[0].headers["accept"]


async def test_pagination_lists_every_page(write_config: Callable[..., Path]) -> None:
    with serve_http(make_basic_server(n_extra_tools=45, list_page_size=7)) as srv:
        path = write_config({"paged": http_entry(srv.url)})
        async with Manager(path, trust=PinGuard()) as manager:
            assert await manager.wait_ready(20)
            tools = manager.list_tools("paged")
            assert len(tools) == len({t.name for t in tools}) == 45 + 7
            list_posts = [r for r in srv.requests if r.method == "POST"]
            assert len(list_posts) >= 8  # initialize + initialized + >= 8 pages
            # A tool from the last page is callable (the SDK's own cache saw every page too).
            last = sorted(t.name for t in tools if t.name.startswith("extra_"))[-1]
            result = await manager.call_tool("paged", last, {"query": "q"})
            assert result.text.endswith(":q:10")


@pytest.mark.parametrize(("header", "scheme"), [("Authorization", "Bearer"), ("X-API-Key", "")])
async def test_api_key_header_injected(write_config: Callable[..., Path], header: str, scheme: str) -> None:
    with serve_http(make_basic_server(), api_key=SECRET, api_key_header=header, api_key_scheme=scheme) as srv:
        auth = {"type": "api_key", "header": header, "scheme": scheme, "key": SECRET}
        path = write_config({"keyed": http_entry(srv.url, auth=auth)})
        async with Manager(path, trust=PinGuard()) as manager:
            assert await manager.wait_ready(20)
            assert manager.status("keyed").state is ServerState.CONNECTED, manager.status("keyed").last_error
            expected = f"{scheme} {SECRET}" if scheme else SECRET
            assert all(r.headers.get(header.lower()) == expected for r in srv.requests)
            assert (await manager.call_tool("keyed", "echo", {"text": "hi"})).text == "hi"


async def test_auth_states_and_redaction(
    write_config: Callable[..., Path], keen_home: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    wrong = "sk-wrong-0a1b2c3d4e5f"
    with serve_http(make_basic_server(), api_key=SECRET) as srv:
        path = write_config(
            {
                "wrongkey": http_entry(srv.url, auth={"type": "api_key", "key": wrong}),
                "nokey": http_entry(srv.url),
                "oauth": http_entry(srv.url, auth={"type": "oauth"}),
                "good": http_entry(srv.url, auth={"type": "api_key", "key": SECRET}),
            }
        )
        async with Manager(path, trust=PinGuard()) as manager:
            assert await manager.wait_ready(20)
            states = {s.name: s for s in manager.servers()}
            assert states["wrongkey"].state is ServerState.AUTH_FAILED
            assert "auth.key" in states["wrongkey"].last_error
            assert states["nokey"].state is ServerState.AUTH_REQUIRED
            assert '"auth"' in states["nokey"].last_error
            assert states["oauth"].state is ServerState.AUTH_REQUIRED
            assert "needs you to sign in" in states["oauth"].last_error
            assert states["oauth"].remedy is Remedy.SIGN_IN
            assert states["wrongkey"].remedy is Remedy.RECONNECT  # fix the key, then reconnect
            assert states["good"].state is ServerState.CONNECTED  # the others did not disturb it
            with pytest.raises(AuthRequired, match='MCP server "oauth" needs you to sign in') as excinfo:
                await manager.call_tool("oauth", "echo", {"text": "x"})
            errors = [str(excinfo.value)] + [s.last_error for s in manager.servers()]
    captured = caplog.text + "\n".join(errors) + _written_files(keen_home)
    assert wrong not in captured and SECRET not in captured
    assert srv.requests, "the server saw the requests, so the secrets were really sent"


async def test_stdio_launch_env_cwd_and_no_orphans(write_config: Callable[..., Path], tmp_path: Path) -> None:
    path = write_config(
        {
            "local": stdio_server(
                "basic_stdio.py",
                env={"KEEN_TEST_VAR": "from-config"},
                cwd=str(tmp_path),
                inherit_env=["KEEN_NAMED_VAR"],
            ),
        }
    )
    os.environ["KEEN_PARENT_VAR"] = "from-parent"
    os.environ["KEEN_NAMED_VAR"] = "named"
    try:
        manager = await started(path)
        try:
            assert manager.status("local").state is ServerState.CONNECTED
            assert (await manager.call_tool("local", "env", {"name": "KEEN_TEST_VAR"})).text == "from-config"
            # env goes over a minimal environment, not Keen's: only what inherit_env names passes
            assert (await manager.call_tool("local", "env", {"name": "KEEN_PARENT_VAR"})).text == ""
            assert (await manager.call_tool("local", "env", {"name": "KEEN_NAMED_VAR"})).text == "named"
            assert (await manager.call_tool("local", "env", {"name": "PATH"})).text == os.environ["PATH"]
            assert (await manager.call_tool("local", "cwd", {})).text == str(tmp_path)
            pid = int((await manager.call_tool("local", "pid", {})).text)
        finally:
            await manager.aclose()
    finally:
        del os.environ["KEEN_PARENT_VAR"], os.environ["KEEN_NAMED_VAR"]
    assert not alive(pid), "the stdio server survived aclose()"
    assert manager.status("local").state is ServerState.DISCONNECTED


async def test_stdio_failures_each_get_a_state_and_a_message(write_config: Callable[..., Path]) -> None:
    path = write_config(
        {
            "missing": {"transport": "stdio", "command": "keen-no-such-command-xyz"},
            "hangs": stdio_server("hang_init.py", timeouts={"connect": 1.5}),
            "exits": stdio_server("exit_now.py"),
            "garbage": stdio_server("garbage_stdout.py", timeouts={"connect": 1.5}),
            "healthy": stdio_server("basic_stdio.py"),
        }
    )
    began = time.monotonic()
    manager = await started(path, timeout=20)
    try:
        elapsed = time.monotonic() - began
        s = {st.name: st for st in manager.servers()}
        assert s["healthy"].state is ServerState.CONNECTED
        assert s["missing"].state is ServerState.DISCONNECTED
        assert (
            "keen-no-such-command-xyz" in s["missing"].last_error and "not found" in s["missing"].last_error
        )
        assert s["hangs"].state is ServerState.DISCONNECTED
        assert "initialize within 1.5 s" in s["hangs"].last_error
        assert s["exits"].state is ServerState.DISCONNECTED
        assert "fatal: demo crash" in s["exits"].last_error  # the stderr tail says why
        assert s["garbage"].state is ServerState.DISCONNECTED
        assert "stdout" in s["garbage"].last_error
        assert elapsed < 15, "a hanging server must not hold discovery past its timeout"
        with pytest.raises(ServerDisconnected, match='"exits" is disconnected') as gone:
            await manager.call_tool("exits", "echo", {"text": "x"})
        assert gone.value.remedy is Remedy.RECONNECT
        assert (await manager.call_tool("healthy", "echo", {"text": "still fine"})).text == "still fine"
    finally:
        await manager.aclose()


async def test_server_dies_mid_call(write_config: Callable[..., Path]) -> None:
    path = write_config({"mortal": stdio_server("basic_stdio.py")})
    async with Manager(path, trust=PinGuard()) as manager:
        assert await manager.wait_ready(20)
        gone = anyio.Event()
        manager.subscribe(lambda s: gone.set() if s.state is ServerState.DISCONNECTED else None)
        with pytest.raises(ServerDisconnected, match="went away"):
            await manager.call_tool("mortal", "die", {})
        with anyio.fail_after(10):
            await gone.wait()
        # Two sentences: 'went away during "die" Last stderr: ...' ran them together.
        assert manager.status("mortal").last_error.startswith(
            'MCP server "mortal" went away during "die". Last stderr: fatal: die called'
        )
        # refresh brings it back
        status = await manager.refresh("mortal")
        assert status.state is ServerState.CONNECTED
        assert (await manager.call_tool("mortal", "add", {"a": 1, "b": 1})).text == "2"


async def test_call_errors(write_config: Callable[..., Path]) -> None:
    path = write_config(
        {
            "local": stdio_server("basic_stdio.py", timeouts={"call_tool": 0.5}),
            "off": stdio_server("basic_stdio.py", enabled=False),
        }
    )
    async with Manager(path, trust=PinGuard()) as manager:
        assert await manager.wait_ready(20)
        with pytest.raises(ServerNotConfigured, match='"nowhere" is not configured'):
            await manager.call_tool("nowhere", "echo", {})
        with pytest.raises(ServerDisabled, match='"enabled": false'):
            await manager.call_tool("off", "echo", {"text": "x"})
        assert manager.status("off").state is ServerState.CONFIGURED
        with pytest.raises(ToolNotFound, match="Did you mean: echo"):
            await manager.call_tool("local", "echoo", {"text": "x"})
        with pytest.raises(
            InvalidArguments,
            match=re.escape(
                "invalid arguments for \"local/add\": $: 'b' is a required property; $.a: 'one' is not"
            ),
        ) as bad:
            await manager.call_tool("local", "add", {"a": "one"})
        assert {p for p, _ in bad.value.errors} == {"$", "$.a"}  # b missing, a wrong type
        # a remote tool error comes back as a result, not an exception
        result = await manager.call_tool("local", "fail", {"message": "boom"})
        assert result.is_error and "boom" in result.text
        # CallTimeout is raised by the 0.5 s limit only: the 30 s sleep did not have to end.
        with pytest.raises(CallTimeout, match=r"0\.5 s"):
            await manager.call_tool("local", "sleep", {"seconds": 30})
        # the session survives a timed-out call
        assert (await manager.call_tool("local", "echo", {"text": "after"})).text == "after"


async def test_http_server_going_away_and_refresh(write_config: Callable[..., Path]) -> None:
    with serve_http(make_basic_server()) as srv:
        path = write_config({"web": http_entry(srv.url, timeouts={"connect": 5, "call_tool": 5})})
        async with Manager(path, trust=PinGuard()) as manager:
            assert await manager.wait_ready(20)
            srv.stop()
            with pytest.raises(ServerDisconnected, match='MCP server "web" went away during "echo"'):
                await manager.call_tool("web", "echo", {"text": "x"})
            assert manager.status("web").state is ServerState.DISCONNECTED
            refused = await manager.refresh("web")
            assert refused.state is ServerState.DISCONNECTED and "cannot reach" in refused.last_error
            srv.start()
            status = await manager.refresh("web")
            assert status.state is ServerState.CONNECTED, status.last_error
            assert (await manager.call_tool("web", "echo", {"text": "back"})).text == "back"


async def test_start_returns_at_once_and_observers_see_states(write_config: Callable[..., Path]) -> None:
    path = write_config(
        {
            "slow": stdio_server("hang_init.py", timeouts={"connect": 2}),
            "local": stdio_server("basic_stdio.py"),
        }
    )
    seen: list[tuple[str, str]] = []
    manager = Manager(path, trust=PinGuard())
    manager.subscribe(lambda s: seen.append((s.name, s.state.value)))
    await manager.start()
    try:
        # start() returned before the slow server's first attempt ended (its 2 s connect limit):
        # not every first attempt is done yet.
        assert not await manager.wait_ready(0.01)
        assert await manager.wait_ready(20)
    finally:
        await manager.aclose()
    assert ("local", "connecting") in seen and ("local", "connected") in seen
    assert ("slow", "disconnected") in seen


async def test_tool_list_debug_log_is_compact(
    write_config: Callable[..., Path], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="keen.mcp")
    path = write_config({"local": stdio_server("basic_stdio.py", "--tools", "3")})
    async with Manager(path, trust=PinGuard()) as manager:
        assert await manager.wait_ready(20)
    lines = [r.getMessage() for r in caplog.records if "tool extra_0001" in r.getMessage()]
    assert len(lines) == 1
    assert lines[0].startswith("server local: tool extra_0001: Generated tool")
    assert len(lines[0]) < 140 and "inputSchema" not in lines[0]


def _written_files(keen_home: Path) -> str:
    """Every file Keen wrote under KEEN_HOME (not configs.json: the user's own file holds keys)."""
    return "".join(
        p.read_text(errors="replace")
        for p in keen_home.rglob("*")
        if p.is_file() and p.name != "configs.json"
    )


async def test_manager_takes_a_claude_desktop_dict_like_fastmcp_client(keen_home: Path) -> None:
    entry = stdio_server("basic_stdio.py")
    entry.pop("transport")  # as Claude Desktop writes it: command/args only
    config = {"mcpServers": {"local": entry, "broken": {"command": "${KEEN_TEST_NEVER_SET}"}}}
    async with Manager(config=config, trust=PinGuard()) as manager:
        assert await manager.wait_ready(20)
        assert manager.status("local").state is ServerState.CONNECTED
        assert (await manager.call_tool("local", "add", {"a": 2, "b": 3})).text == "5"
        assert manager.status("broken").state is ServerState.CONFIG_ERROR
        assert "KEEN_TEST_NEVER_SET" in manager.status("broken").last_error


async def test_a_claude_desktop_dict_entry_its_conversion_refuses_breaks_no_other_server(
    keen_home: Path,
) -> None:
    # An entry the mcpServers conversion refuses (no command, a command that is no string)
    # raised ConfigError from Manager(config=...) itself, so no server of the dict started.
    config = {
        "mcpServers": {
            "local": stdio_server("basic_stdio.py"),
            "typo": {"comand": "npx"},
            "number": {"command": 5},
        }
    }
    async with Manager(config=config, trust=PinGuard()) as manager:
        assert await manager.wait_ready(20)
        assert (await manager.call_tool("local", "add", {"a": 2, "b": 3})).text == "5"
        assert manager.status("typo").state is ServerState.CONFIG_ERROR
        assert 'neither "command"' in manager.status("typo").last_error
        assert "rename 'comand' to 'command' (a misspelling?)" in manager.status("typo").last_error
        assert manager.status("number").state is ServerState.CONFIG_ERROR
        assert '"command" must be a non-empty string' in manager.status("number").last_error
        # Named as what it is: the config given in code, not a configs.json never read.
        assert manager.status("typo").last_error.startswith(
            "the config this Manager was given: server 'typo'"
        )
        assert "configs.json: server" not in manager.status("number").last_error
        with pytest.raises(ServerMisconfigured, match='neither "command"'):
            await manager.call_tool("typo", "add", {})


async def test_a_manager_not_started_says_so_not_that_its_server_is_not_configured(keen_home: Path) -> None:
    # Without `async with` (or start()), a call to a configured server said it was "not
    # configured (configured: none)".
    manager = Manager(config={"mcpServers": {"local": stdio_server("basic_stdio.py")}}, trust=PinGuard())
    with pytest.raises(ServerNotConfigured, match="this Manager has not started its servers") as caught:
        await manager.call_tool("local", "add", {"a": 1, "b": 2})
    assert "not configured" not in caught.value.message and "await manager.start()" in caught.value.message


async def test_waiting_on_a_manager_not_started_says_to_start_it(keen_home: Path, tmp_path: Path) -> None:
    # wait_ready() on a Manager never started returned True at once, as if every server were
    # ready; the call after it then failed with words about a server, not about the wait.
    config = {"mcpServers": {"local": stdio_server("basic_stdio.py")}}
    manager = Manager(config=config, trust=PinGuard())
    start_it = r"has not started its servers; start it first \(async with Manager"
    with pytest.raises(
        KeenError, match=r"Manager\.wait_ready\(\) has nothing to wait for: this Manager " + start_it
    ):
        await manager.wait_ready(5)
    with pytest.raises(ServerNotConfigured, match=start_it):
        await manager.wait_attempt("local", 5)
    with pytest.raises(KeenError, match=r"Manager\.reload_server\(\) has no server to reload: .*" + start_it):
        await Manager(tmp_path / "configs.json", trust=PinGuard()).reload_server("local")
    with pytest.raises(KeenError, match=r"Manager\.refresh\(\) has no server to reconnect: .*" + start_it):
        await manager.refresh("local")
    async with manager:  # started, the same Manager waits and calls
        assert await manager.wait_ready(20)
        assert (await manager.call_tool("local", "add", {"a": 1, "b": 2})).text == "3"


async def test_a_closed_manager_says_so_when_used_or_opened_again(keen_home: Path) -> None:
    # Entered again after it closed, a Manager returned at once with every server stopped
    # (a program opening one Manager per task got "is disconnected" at each call after the first).
    manager = Manager(config={"mcpServers": {"local": stdio_server("basic_stdio.py")}}, trust=PinGuard())
    async with manager:
        assert await manager.wait_ready(20)
        assert (await manager.call_tool("local", "add", {"a": 1, "b": 2})).text == "3"
    closed = "this Manager was closed"
    with pytest.raises(
        ServerDisconnected, match=rf'MCP server "local" is disconnected: {closed}; make a new one'
    ):
        await manager.call_tool("local", "add", {"a": 1, "b": 2})
    again = rf"{closed} and cannot start again; make a new one \(Manager\(\.\.\.\)\) for another session$"
    with pytest.raises(KeenError, match=rf"^{again}"):
        async with manager:
            pytest.fail("a closed Manager must not open again")
    # The ways the README gives to recover a server: each let a bare RuntimeError out ("This
    # task group is not active") from the closed Manager's task group.
    for what, use in (
        ("refresh() has no server to reconnect", lambda: manager.refresh("local")),
        ("refresh_tools() has no server to list", lambda: manager.refresh_tools("local")),
        ("reload_server() has no server to reload", lambda: manager.reload_server("local")),
        (
            "reload_server() has no server to reload",
            lambda: connect_server(manager, "local", skills_root=keen_home / "skills"),
        ),
    ):
        with pytest.raises(KeenError, match=rf"^Manager\.{re.escape(what)}: {again}"):
            await use()
    assert not (keen_home / "skills").exists()  # connect_server wrote no skill
    # wait_ready said True (every server stopped, as if each were ready), and the two info
    # reads named refresh_tools() in their refusal.
    with pytest.raises(KeenError, match=rf"^Manager\.wait_ready\(\) has no server to wait for: {again}"):
        await manager.wait_ready(1)
    with pytest.raises(KeenError, match=rf"^Manager\.server_info\(\) has no server to read: {again}"):
        manager.server_info("local")
    with pytest.raises(KeenError, match=rf"^Manager\.live_info\(\) has no server to read: {again}"):
        manager.live_info("local")


def test_a_config_given_in_code_that_is_no_mapping_is_refused_at_construction(tmp_path: Path) -> None:
    # Manager(config=[]) was accepted and failed later with an AttributeError on `.servers`;
    # a path string was not read as a path.
    with pytest.raises(
        ConfigError, match=r"the config this Manager was given: the top level must be an object"
    ):
        Manager(config=[], trust=None)  # type: ignore[arg-type]
    for given in (str(tmp_path / "configs.json"), tmp_path / "configs.json"):
        with pytest.raises(
            ConfigError, match=r"config= takes the config itself .*pass its path as config_path"
        ):
            Manager(config=given, trust=None)  # type: ignore[arg-type]


async def test_only_naming_a_server_the_config_lacks_is_refused_at_start(keen_home: Path) -> None:
    # Manager(only={"lcoal"}) started nothing and said nothing: every server stayed
    # "configured" and a call to the real one said this session connects only some servers.
    config = {"mcpServers": {"local": stdio_server("basic_stdio.py")}}
    manager = Manager(config=config, only={"lcoal"}, trust=PinGuard())
    given = r'MCP server "lcoal" is not configured \(configured: local\); add it to the config this Manager was given'
    with pytest.raises(ServerNotConfigured, match=given):
        await manager.start()
    assert not manager.servers()  # nothing started
    async with Manager(config=config, only={"local"}, trust=PinGuard()) as started:
        assert await started.wait_ready(20)
        assert (await started.call_tool("local", "add", {"a": 1, "b": 2})).text == "3"


async def test_a_transport_for_a_server_the_config_lacks_is_refused_naming_both(
    keen_home: Path, write_config: Callable[..., Path]
) -> None:
    # Manager(transports={"dosc": ...}) beside a config of "docs" was ignored: the misspelt
    # transport was never used, and nothing said so.
    server = make_basic_server()._mcp_server
    entry = {"command": "in-memory"}
    given = r'the config this Manager was given: no server "dosc" for Manager\(transports=\.\.\.\) '
    with pytest.raises(
        ConfigError, match=given + r'\(configured: docs\);.* \("dosc" is perhaps "docs"\)'
    ) as caught:
        Manager(
            config={"mcpServers": {"docs": entry}},
            transports={"dosc": in_memory_transport(server)},
            trust=None,
        )
    assert caught.value.server == "dosc" and caught.value.field == "transports"
    # configs.json is read at start(): refused there, before any server starts.
    path = write_config({"docs": entry, "other": entry})
    manager = Manager(path, transports={"dosc": in_memory_transport(server)}, trust=None)
    with pytest.raises(
        ConfigError, match=re.escape(f'{path}: no server "dosc"') + r".*\(configured: docs, other\)"
    ):
        await manager.start()
    assert not manager.started
    # Named right, the transport is the server's.
    async with Manager(
        path, transports={"docs": in_memory_transport(server)}, only={"docs"}, trust=None
    ) as manager:
        assert await manager.wait_ready(20)
        assert (await manager.call_tool("docs", "add", {"a": 2, "b": 3})).text == "5"


async def test_timeout_remedies_name_the_config_given_in_code_not_configs_json(
    keen_home: Path, write_config: Callable[..., Path]
) -> None:
    # A Manager(config=...) whose server timed out said to raise its timeouts "in
    # configs.json", a file it never read (and a missing command, to fix it there).
    servers = {
        "hangs": stdio_server("hang_init.py", timeouts={"connect": 1}),
        "missing": {"command": "keen-no-such-command-xyz"},
        "docs": {"command": "in-memory"},
        "off": {"command": "in-memory", "enabled": False},
    }
    transports = {"docs": in_memory_transport(make_basic_server()._mcp_server)}
    given = "the config this Manager was given"
    async with Manager(config={"mcpServers": servers}, transports=transports, trust=None) as manager:
        assert await manager.wait_ready(20)
        hangs = manager.status("hangs").last_error
        assert hangs.endswith(
            f'to give it more time, raise "timeouts.connect" in {given} or KEEN_MCP_TIMEOUT'
        ), hangs
        assert manager.status("missing").last_error.endswith(f'fix "command" in {given}')
        with pytest.raises(CallTimeout, match=re.escape(f'raise "timeouts.call_tool" for "docs" in {given}')):
            await manager.call_tool("docs", "sleep", {"seconds": 5}, timeout=0.2)
        assert manager.status("off").last_error == f'disabled in {given} ("enabled": false)'
        with pytest.raises(ServerDisabled, match=re.escape(f'"off" is disabled in {given}')):
            await manager.call_tool("off", "echo", {"text": "x"})
    # Read from configs.json, the same words name that file.
    path = write_config({"hangs": servers["hangs"], "docs": servers["docs"]})
    async with Manager(path, transports=transports, trust=None) as manager:
        assert await manager.wait_ready(20)
        assert manager.status("hangs").last_error.endswith(
            'raise "timeouts.connect" in configs.json or KEEN_MCP_TIMEOUT'
        )
        with pytest.raises(
            CallTimeout, match=re.escape('raise "timeouts.call_tool" for "docs" in configs.json')
        ):
            await manager.call_tool("docs", "sleep", {"seconds": 5}, timeout=0.2)


async def test_an_http_servers_auth_remedies_name_the_config_given_in_code(keen_home: Path) -> None:
    # A server answering 401 to a Manager(config=...) said to add "auth" to it (or check its
    # key) "in configs.json", a file that Manager never read.
    with serve_http(make_basic_server(), api_key=SECRET) as srv:
        servers = {
            "bare": http_entry(srv.url),
            "wrong": http_entry(srv.url, auth={"type": "api_key", "key": "not-the-key"}),
        }
        async with Manager(config={"version": 1, "servers": servers}, trust=None) as manager:
            assert await manager.wait_ready(20)
            bare, wrong = manager.status("bare"), manager.status("wrong")
    given = "the config this Manager was given"
    assert bare.state is ServerState.AUTH_REQUIRED and f'add "auth" to it in {given}:' in bare.last_error
    assert wrong.state is ServerState.AUTH_FAILED and wrong.last_error.endswith(f'"auth.scheme" in {given}')


async def test_a_server_left_out_by_only_is_not_said_to_be_connecting(keen_home: Path) -> None:
    # A server `only` left out was "still connecting; try again in a moment", for ever.
    config = {"mcpServers": {"on": stdio_server("basic_stdio.py"), "off": stdio_server("basic_stdio.py")}}
    async with Manager(config=config, only={"on"}, trust=PinGuard()) as manager:
        assert await manager.wait_ready(20)
        with pytest.raises(ServerDisconnected, match='"off" is not started in this session') as caught:
            await manager.call_tool("off", "add", {"a": 1, "b": 2})
        assert "try again" not in caught.value.message and caught.value.remedy is Remedy.RECONNECT
        assert (await manager.call_tool("on", "add", {"a": 1, "b": 2})).text == "3"


async def test_a_server_missing_from_a_config_given_in_code_is_not_sent_to_configs_json(
    keen_home: Path,
) -> None:
    # A misspelt server of a Manager(config=...) said to add it to $KEEN_HOME/mcp/configs.json,
    # a file that Manager never reads.
    async with Manager(
        config={"mcpServers": {"local": stdio_server("basic_stdio.py")}}, trust=PinGuard()
    ) as manager:
        assert await manager.wait_ready(20)
        with pytest.raises(
            ServerNotConfigured, match="add it to the config this Manager was given"
        ) as caught:
            await manager.call_tool("lokal", "add", {"a": 1, "b": 2})
        assert "configs.json" not in caught.value.message
