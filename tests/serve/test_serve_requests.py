"""What an upstream server asks or logs during a call reaches the host that made it
(docs/serve.md).

Real processes: server-everything (stdio, twice) and ``log_stdio.py`` upstream of ``keen
serve``, the SDK's ``Client`` as host(s). Before, Keen advertised neither elicitation nor
sampling nor roots to its upstreams, so server-everything did not even list
``trigger-elicitation-request``, ``trigger-sampling-request``, ``trigger-url-elicitation`` or
``get-roots-list`` (a call to them was ``TOOL_NOT_FOUND``), and an upstream's log messages
went to Keen's own debug log only.
"""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp_types as mt
import pytest
from mcp.client.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from conftest import peer
from helpers import server_script
from helpers.forkserver import script_args
from helpers.serve import KeenServeProcess, stdio_params, tls, write_upstream

pytestmark = [
    pytest.mark.anyio,
    # logging/setLevel is deprecated as of 2026-07-28; 2025-11-25 hosts still send it.
    pytest.mark.filterwarnings("ignore:The logging capability is deprecated"),
]


def _home(home: Path, *, more: bool = True) -> Path:
    """``home`` with server-everything upstream; with ``more``, ``basic``, two more
    server-everything (one with a 1 s call limit), ``log_stdio.py`` and ``ask_stdio.py``."""
    everything = {"transport": "stdio", "command": peer("node", "mcp-server-everything"), "args": ["stdio"]}
    logs = {
        "transport": "stdio",
        "command": sys.executable,
        "args": script_args(str(server_script("log_stdio"))),
    }
    ask = {
        "transport": "stdio",
        "command": sys.executable,
        "args": script_args(str(server_script("ask_stdio"))),
    }
    # "quick": server-everything again, whose calls Keen gives up on after a second.
    quick = {**everything, "timeouts": {"call_tool": 1}}
    if more:
        extra = {
            "everything": everything,
            "everything2": everything,
            "logs": logs,
            "ask": ask,
            "quick": quick,
        }
        write_upstream(home, extra=extra)
    else:
        (home / "mcp").mkdir(parents=True, exist_ok=True)
        (home / "mcp" / "configs.json").write_text(
            json.dumps({"version": 1, "servers": {"everything": everything}})
        )
    return home


@pytest.fixture(scope="module")
def search(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KeenServeProcess]:
    with KeenServeProcess(_home(tmp_path_factory.mktemp("requests")), ["--mode", "search"]) as proc:
        yield proc


class Host:
    """An SDK client's callbacks that say what reached them, and answer as ``name``."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.elicited: list[mt.ElicitRequestParams] = []
        self.sampled: list[mt.CreateMessageRequestParams] = []
        self.roots_asked = 0
        self.logs: list[tuple[str, str | None, Any]] = []
        self.asked = anyio.Event()
        self.release: anyio.Event | None = None
        """When set, an elicitation waits for it before it is answered."""

    async def elicit(self, _ctx: Any, params: mt.ElicitRequestParams) -> mt.ElicitResult:
        self.elicited.append(params)
        self.asked.set()
        if self.release is not None:
            await self.release.wait()
        if isinstance(params, mt.ElicitRequestURLParams):
            return mt.ElicitResult(action="accept")
        return mt.ElicitResult(action="accept", content={"name": self.name})

    async def sample(self, _ctx: Any, params: mt.CreateMessageRequestParams) -> mt.CreateMessageResult:
        self.sampled.append(params)
        text = mt.TextContent(type="text", text=f"{self.name} says hello")
        return mt.CreateMessageResult(role="assistant", content=text, model="host-model")

    async def roots(self, _ctx: Any) -> mt.ListRootsResult:
        self.roots_asked += 1
        return mt.ListRootsResult(roots=[mt.Root(uri=f"file:///work/{self.name}", name=self.name)])

    async def log(self, params: mt.LoggingMessageNotificationParams) -> None:
        self.logs.append((params.level, params.logger, params.data))

    def callbacks(self) -> dict[str, Any]:
        return {
            "elicitation_callback": self.elicit,
            "sampling_callback": self.sample,
            "list_roots_callback": self.roots,
            "logging_callback": self.log,
        }


@contextlib.asynccontextmanager
async def _http(proc: KeenServeProcess, era: str = "session", **kwargs: Any) -> AsyncIterator[Client]:
    mode = "legacy" if era == "session" else "auto"
    async with (
        httpx2.AsyncClient(timeout=30, verify=tls()) as http,
        Client(streamable_http_client(proc.url, http_client=http), mode=mode, cache=None, **kwargs) as client,
    ):
        yield client


async def _call(
    client: Client, server: str, tool: str, arguments: dict[str, Any] | None = None
) -> mt.CallToolResult:
    return await client.call_tool(
        "call_mcp_tool", {"server": server, "tool": tool, "arguments": arguments or {}}
    )


def _text(result: mt.CallToolResult) -> str:
    return "\n".join(c.text for c in result.content if isinstance(c, mt.TextContent))


async def _asks_reach_the_host(client: Client, host: Host) -> None:
    form = await _call(client, "everything", "trigger-elicitation-request")
    assert "- Name: ada" in _text(form), _text(form)
    assert [p.message for p in host.elicited] == ["Please provide inputs for the following fields:"]

    page = "https://example.com/sign-in"
    url = await _call(client, "everything", "trigger-url-elicitation", {"url": page})
    assert not url.is_error, _text(url)
    assert isinstance(host.elicited[-1], mt.ElicitRequestURLParams) and host.elicited[-1].url == page

    sampled = await _call(client, "everything", "trigger-sampling-request", {"prompt": "greet"})
    assert "ada says hello" in _text(sampled), _text(sampled)
    assert host.sampled[0].messages[0].content.text.endswith("greet")  # type: ignore[union-attr]

    # server-everything asks for roots 350 ms after it connected: outside any call Keen declines
    # (it serves many hosts), and the tool asks again during this call; on a loaded machine
    # that first question may come during one of the calls above, and go to their host.
    roots = await _call(client, "everything", "get-roots-list")
    assert "file:///work/ada" in _text(roots), _text(roots)
    assert host.roots_asked >= 1


async def test_elicitation_sampling_and_roots_reach_the_http_host(search: KeenServeProcess) -> None:
    before = len(_audit(search))
    host = Host("ada")
    async with _http(search, **host.callbacks()) as client:
        await _asks_reach_the_host(client, host)
    audited = sorted((e["server"], e["name"], e["outcome"]) for e in _audit(search)[before:])
    roots = [a for a in audited if a[1] == "roots/list"]
    assert [a for a in audited if a[1] != "roots/list"] == sorted(
        [
            ("everything", "elicitation/create", "relayed"),
            ("everything", "elicitation/create", "relayed"),
            ("everything", "sampling/createMessage", "relayed"),
        ]
    )
    # Each roots question the host saw is relayed; the early one, when it came during a call
    # that ended before the host's answer (a loaded machine), is withdrawn with that call
    # ("cancelled", as keen.serve.relay audits it). get-roots-list's own is relayed.
    assert len(roots) == host.roots_asked, audited
    assert set(roots) <= {("everything", "roots/list", "relayed"), ("everything", "roots/list", "cancelled")}
    assert ("everything", "roots/list", "relayed") in roots, audited


def _audit(proc: KeenServeProcess) -> list[dict[str, Any]]:
    """The audit log's ``upstream.request`` events (relayed or declined requests)."""
    lines = (proc.home / "logs" / "serve-audit.jsonl").read_text().splitlines()
    return [e for e in map(json.loads, lines) if e["type"] == "upstream.request"]


@pytest.mark.parametrize("era", ["session", "stateless"])
async def test_elicitation_sampling_and_roots_reach_the_stdio_host(tmp_path: Path, era: str) -> None:
    host = Host("ada")
    params = stdio_params(_home(tmp_path, more=False), ["--mode", "search"])
    # A 2026-07-28 host is asked in InputRequiredResult rounds, and gets the log levels it asks for.
    mode: Any = {"mode": "legacy"} if era == "session" else {"mode": "auto", "log_level": "info"}
    async with Client(params, cache=None, **mode, **host.callbacks()) as client:
        assert client.protocol_version == ("2025-11-25" if era == "session" else "2026-07-28")
        await _asks_reach_the_host(client, host)


async def test_extension_mode_relays_too(tmp_path: Path) -> None:
    host = Host("ada")
    params = stdio_params(_home(tmp_path, more=False), ["--mode", "extension"])
    name = "mcp__everything__trigger-elicitation-request"
    async with Client(params, mode="legacy", cache=None, **host.callbacks()) as client:
        await client.read_resource(f"resource:///tool_descriptions?tools={name}")
        result = await client.call_tool(name, {})
    assert "- Name: ada" in _text(result), _text(result)
    assert len(host.elicited) == 1


async def test_a_url_elicitations_completion_reaches_the_host_that_accepted_it(tmp_path: Path) -> None:
    """elicit_stdio.py's sign_in_and_report asks for a page (id sign-in-3), then reports an
    id it never asked under and sign-in-3 twice: the host hears of sign-in-3 once."""
    elicit = {
        "transport": "stdio",
        "command": sys.executable,
        "args": script_args(str(server_script("elicit_stdio"))),
    }
    (tmp_path / "mcp").mkdir()
    (tmp_path / "mcp" / "configs.json").write_text(json.dumps({"version": 1, "servers": {"elicit": elicit}}))
    host, completed = Host("ada"), []

    async def notices(message: Any) -> None:
        if isinstance(message, mt.ElicitCompleteNotification):
            completed.append(message.params.elicitation_id)

    params = stdio_params(tmp_path, ["--mode", "search"])
    async with Client(
        params, mode="legacy", cache=None, message_handler=notices, **host.callbacks()
    ) as client:
        page = "https://example.com/sign-in"
        result = await _call(client, "elicit", "sign_in_and_report", {"url": page})
    assert _text(result) == "accept"
    assert [(p.url, p.elicitation_id) for p in host.elicited] == [(page, "sign-in-3")]  # type: ignore[union-attr]
    assert completed == ["sign-in-3"]


async def test_a_request_goes_only_to_the_host_whose_call_caused_it(search: KeenServeProcess) -> None:
    ada, bob = Host("ada"), Host("bob")
    ada.release = anyio.Event()
    async with (
        _http(search, **ada.callbacks()) as a,
        _http(search, **bob.callbacks()) as b,
        anyio.create_task_group() as tg,
    ):
        results: dict[str, mt.CallToolResult] = {}

        async def ada_calls() -> None:
            results["ada"] = await _call(a, "everything", "trigger-elicitation-request")

        tg.start_soon(ada_calls)
        with anyio.fail_after(20):
            await ada.asked.wait()
        # Ada's call waits on her answer; Bob's call to another server is asked, and answered, by Bob.
        other = await _call(b, "everything2", "trigger-elicitation-request")
        assert "- Name: bob" in _text(other), _text(other)
        # Bob's call to Ada's server while her call runs there: the request names no call, so
        # Keen declines it rather than ask either host.
        same = await _call(b, "everything", "trigger-elicitation-request")
        assert "calls of 2 MCP hosts were running on it" in _text(same), _text(same)
        assert len(bob.elicited) == 1 and len(ada.elicited) == 1
        ada.release.set()
    assert "- Name: ada" in _text(results["ada"]), _text(results["ada"])
    assert len(ada.elicited) == 1 and len(bob.elicited) == 1


async def test_a_2026_upstream_asks_each_host_its_own_question_at_once(search: KeenServeProcess) -> None:
    """A 2026-07-28 upstream asks inside each call's own result, answered in the task that
    made the call: two hosts' calls running at once on one upstream connection each get
    their own question (a 2025-11-25 upstream's would be declined, as above)."""
    ada, bob = Host("ada"), Host("bob")
    both = anyio.Event()
    ada.release = bob.release = both
    results: dict[str, str] = {}
    async with _http(search, **ada.callbacks()) as a, _http(search, **bob.callbacks()) as b:

        async def call(name: str, client: Client) -> None:
            results[name] = _text(await _call(client, "ask", "greet"))

        async with anyio.create_task_group() as tg:
            tg.start_soon(call, "ada", a)
            tg.start_soon(call, "bob", b)
            with anyio.fail_after(20):
                await ada.asked.wait()
                await bob.asked.wait()
            both.set()
    assert results == {"ada": "hello ada", "bob": "hello bob"}
    assert [p.message for p in ada.elicited] == [p.message for p in bob.elicited] == ["What is your name?"]


async def test_a_question_is_withdrawn_when_the_call_ends_first(search: KeenServeProcess) -> None:
    """Keen gives up on the upstream call (its 1 s limit) while the host's user is still
    asked: the host is told the question is withdrawn (notifications/cancelled) before the
    call's result, so it can stop asking."""
    asked, withdrawn = anyio.Event(), anyio.Event()

    async def elicit(_ctx: Any, _params: mt.ElicitRequestParams) -> mt.ElicitResult:
        asked.set()
        try:
            await anyio.sleep_forever()
        finally:
            withdrawn.set()
        raise AssertionError("unreachable")

    async with _http(search, elicitation_callback=elicit) as client:
        result = await _call(client, "quick", "trigger-elicitation-request")
        assert result.is_error and asked.is_set(), _text(result)
        with anyio.fail_after(10):
            await withdrawn.wait()


async def test_keen_declines_what_the_host_cannot_answer(search: KeenServeProcess) -> None:
    # A host that declared no elicitation: Keen declines on its behalf and says so.
    before = len(_audit(search))
    async with _http(search) as bare:
        refused = await _call(bare, "everything", "trigger-elicitation-request")
    assert "did not declare the elicitation.form capability" in _text(refused), _text(refused)
    declined = [(e["name"], e["outcome"], e["code"]) for e in _audit(search)[before:]]
    assert declined == [("elicitation/create", "declined", "capability_not_declared")]


async def test_a_2026_host_is_asked_in_input_required_rounds(search: KeenServeProcess) -> None:
    """A 2026-07-28 host cannot be sent a request: the upstream's question comes back as the
    call's InputRequiredResult, and the host's retry carries the answer (the SDK's Client
    drives the rounds with its callbacks)."""
    host = Host("ada")
    async with _http(search, "stateless", **host.callbacks()) as client:
        form = await _call(client, "everything", "trigger-elicitation-request")
        assert "- Name: ada" in _text(form), _text(form)
        sampled = await _call(client, "everything", "trigger-sampling-request", {"prompt": "hi"})
        assert "ada says hello" in _text(sampled), _text(sampled)
        assert len(host.elicited) == 1 and len(host.sampled) == 1
        # A requestState Keen did not give this caller finds nothing.
        with pytest.raises(MCPError, match="Unknown or expired requestState"):
            await client.session.call_tool(
                "call_mcp_tool",
                {"server": "everything", "tool": "echo", "arguments": {"message": "x"}},
                input_responses={},
                request_state="forged",
                allow_input_required=True,
            )


@pytest.mark.parametrize("era", ["session", "stateless"])
async def test_log_messages_reach_the_host_at_its_level(search: KeenServeProcess, era: str) -> None:
    quiet, chatty = Host("quiet"), Host("chatty")
    # 2025-11-25: logging/setLevel; 2026-07-28: the level each request asks for in its _meta.
    levels = {"log_level": "warning"} if era == "stateless" else {}
    async with _http(search, era, logging_callback=quiet.log, **levels) as client:
        if era == "session":
            await client.set_logging_level("warning")
        assert _text(await _call(client, "logs", "log_each", {"word": "q"})) == "logged q"
    assert quiet.logs == [("warning", "logs/logs", "warning q"), ("error", "logs/logs", "error q")]
    levels = {"log_level": "debug"} if era == "stateless" else {}
    async with _http(search, era, logging_callback=chatty.log, **levels) as client:
        await _call(client, "logs", "log_each", {"word": "c"})
    assert [data for _, _, data in chatty.logs] == ["debug c", "info c", "warning c", "error c"]
