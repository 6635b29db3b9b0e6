"""Upstream prompts and resources pass through ``keen serve`` (docs/serve.md).

Real processes: server-everything (the npm reference server, stdio) and ``basic`` upstream of
``keen serve --transport http``, the SDK's ``Client`` as the host, both protocol eras.
Before, ``prompts/list`` and ``resources/templates/list`` answered -32601, ``resources/list``
had only ``tool_descriptions`` and 2026-07-28 ``server/discover`` claimed resource
subscriptions that the 2025-11-25 handshake denied.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import anyio
import httpx2
import mcp_types as mt
import pytest
from mcp.client.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ResourceNotFoundError
from mcp.shared.exceptions import MCPError

from conftest import peer
from helpers.changing import wait_until
from helpers.serve import (
    MODERN,
    KeenServeProcess,
    connect,
    http_in_process,
    in_process,
    tls,
    write_everything,
    write_upstream,
)
from keen.mcp import in_memory_transport

pytestmark = pytest.mark.anyio

DOC = "keen://everything/demo://resource/static/document/architecture.md"


@pytest.fixture(scope="module")
def extension(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KeenServeProcess]:
    with KeenServeProcess(write_everything(tmp_path_factory.mktemp("pt-ext"))) as proc:
        yield proc


@pytest.fixture(scope="module")
def search(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KeenServeProcess]:
    with KeenServeProcess(
        write_everything(tmp_path_factory.mktemp("pt-search")), ["--mode", "search"]
    ) as proc:
        yield proc


def _capabilities(client: Client, era: str) -> dict[str, object]:
    session = client.session
    result = session.initialize_result if era == "session" else session.discover_result
    assert result is not None
    return result.capabilities.model_dump(mode="json", by_alias=True, exclude_none=True)


@pytest.mark.parametrize("era", ["session", "stateless"])
async def test_prompts_and_resources_pass_through_namespaced(extension: KeenServeProcess, era: str) -> None:
    async with connect(extension, era) as client:
        assert _capabilities(client, era) == {
            # Upstreams' log messages during a call reach its host (test_serve_requests.py).
            "logging": {},
            "prompts": {"listChanged": True},
            "resources": {"subscribe": False, "listChanged": True},
            "tools": {"listChanged": True},
        }
        prompts = {p.name: p for p in (await client.list_prompts()).prompts}
        assert {"mcp__everything__simple-prompt", "mcp__everything__args-prompt"} <= set(prompts)
        args = prompts["mcp__everything__args-prompt"].arguments or []
        got = await client.get_prompt("mcp__everything__args-prompt", {a.name: "Lisbon" for a in args})
        assert "Lisbon" in json.dumps(got.model_dump(mode="json"))

        uris = [r.uri for r in (await client.list_resources()).resources]
        assert uris[0] == "resource:///tool_descriptions" and DOC in uris
        read = await client.read_resource(DOC)
        assert read.contents[0].uri == DOC and "Architecture" in read.contents[0].text  # type: ignore[union-attr]

        templates = [t.uri_template for t in (await client.list_resource_templates()).resource_templates]
        assert "keen://everything/demo://resource/dynamic/text/{resourceId}" in templates
        expanded = "keen://everything/demo://resource/dynamic/text/7"
        assert (await client.read_resource(expanded)).contents[0].uri == expanded

        # Only what a server listed (or its template matches) is forwarded, to that server.
        for unlisted in ("keen://everything/file:///etc/passwd", "keen://basic/" + DOC.split("/", 3)[3]):
            with pytest.raises(MCPError, match="Resource not found") as refused:
                await client.read_resource(unlisted)
            assert refused.value.code == -32602 and refused.value.error.data == {"uri": unlisted}
        with pytest.raises(MCPError, match="Unknown prompt: 'simple-prompt'") as unknown:
            await client.get_prompt("simple-prompt")
        assert unknown.value.code == -32602
        # A prompt's missing argument is the host's to fix, as an unknown name is (-32602, not
        # -32603), and it is told where the arguments are, not sent to tool descriptions.
        with pytest.raises(MCPError, match="prompts/list gives the prompt's arguments") as unargued:
            await client.get_prompt("mcp__everything__args-prompt")
        assert unargued.value.code == -32602 and "tool_descriptions" not in unargued.value.error.message


async def test_the_audit_log_records_each_prompt_and_read(extension: KeenServeProcess) -> None:
    async with connect(extension, "stateless") as client:
        await client.get_prompt("mcp__everything__simple-prompt")
        await client.read_resource(DOC)
        with pytest.raises(MCPError, match="Resource not found"):
            await client.read_resource("keen://everything/demo://nope")
    events = [
        json.loads(line) for line in (extension.home / "logs" / "serve-audit.jsonl").read_text().splitlines()
    ]
    seen = [
        (e["type"], e["server"], e["name"], e["outcome"], e["by"])
        for e in events
        if e["type"] in ("prompt.get", "resource.read") and e["caller"] == "principal:anonymous"
    ]
    assert seen[-3:] == [
        ("prompt.get", "everything", "simple-prompt", "ok", "MCP host"),
        ("resource.read", "everything", "demo://resource/static/document/architecture.md", "ok", "MCP host"),
        ("resource.read", "everything", "keen://everything/demo://nope", "denied", "MCP host"),
    ]


@pytest.mark.parametrize("era", ["session", "stateless"])
async def test_search_mode_passes_them_through_without_change_notices(
    search: KeenServeProcess, era: str
) -> None:
    async with connect(search, era) as client:
        # It sends no list_changed notices (no event stream), so it advertises none, in both eras.
        assert _capabilities(client, era) == {
            "logging": {},
            "prompts": {"listChanged": False},
            "resources": {"subscribe": False, "listChanged": False},
            "tools": {"listChanged": False},
        }
        uris = [r.uri for r in (await client.list_resources()).resources]
        assert "resource:///tool_descriptions" not in uris and DOC in uris
        assert "Architecture" in (await client.read_resource(DOC)).contents[0].text  # type: ignore[union-attr]
        got = await client.get_prompt("mcp__everything__simple-prompt")
        assert got.messages[0].content.text == "This is a simple prompt without arguments."  # type: ignore[union-attr]


async def test_hosts_are_told_when_the_resource_and_prompt_lists_change(tmp_path: Path) -> None:
    """server-everything starts only once ``go`` exists, after a host of each era listed
    without it: its arrival changes what keen serve lists, and both hosts are told (before,
    nothing was): the 2025-11-25 host by list_changed notices on its session, the 2026-07-28
    host on its subscriptions/listen stream. One keen serve and one server-everything for both."""
    go = tmp_path / "go"
    command = (
        f'while [ ! -e "{go}" ]; do sleep 0.05; done; exec "{peer("node", "mcp-server-everything")}" stdio'
    )
    late = {"transport": "stdio", "command": "sh", "args": ["-c", command], "timeouts": {"connect": 60}}
    write_upstream(tmp_path, extra={"everything": late})
    told: list[str] = []

    async def on_message(message: object) -> None:
        root = getattr(message, "root", message)
        if isinstance(root, mt.ResourceListChangedNotification | mt.PromptListChangedNotification):
            told.append(root.method)

    args = ["--mode", "extension", "--notify-interval", "0.2", "--ready-wait", "0"]
    with KeenServeProcess(tmp_path, args) as proc:
        async with (
            httpx2.AsyncClient(timeout=30, verify=tls()) as http,
            Client(
                streamable_http_client(proc.url, http_client=http),
                mode="legacy",
                cache=None,
                message_handler=on_message,
            ) as session_host,
            Client(
                streamable_http_client(proc.url, http_client=http), mode="auto", cache=None
            ) as modern_host,
        ):
            assert session_host.protocol_version == "2025-11-25"
            assert modern_host.protocol_version == MODERN
            for client in (session_host, modern_host):
                assert DOC not in [r.uri for r in (await client.list_resources()).resources]
            async with modern_host.listen(resources_list_changed=True, prompts_list_changed=True) as sub:
                go.touch()
                with anyio.fail_after(30):
                    events = [await sub.__aiter__().__anext__(), await sub.__aiter__().__anext__()]
            assert sorted(type(e).__name__ for e in events) == ["PromptsListChanged", "ResourcesListChanged"]
            await wait_until(lambda: len(told) >= 2, "both list_changed notices", 30)
            assert sorted(told) == [
                "notifications/prompts/list_changed",
                "notifications/resources/list_changed",
            ]
            for client in (session_host, modern_host):
                assert DOC in [r.uri for r in (await client.list_resources()).resources]
                assert "mcp__everything__simple-prompt" in [
                    p.name for p in (await client.list_prompts()).prompts
                ]


async def test_a_stdio_host_that_listens_for_resources_later_hears_of_an_earlier_change(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A 2026-07-28 stdio host lists resources, then listens for tool changes only. An
    upstream arrives with tools and resources: that stream takes the tools notice (the SDK's
    filter drops a resources one), so the host's resources list is not marked seen; when it
    listens for resources later, that stream tells it the list changed. keen serve runs in
    this process (its stdio session over memory streams) so the test can wait for its round."""
    go = tmp_path / "go"
    command = (
        f'while [ ! -e "{go}" ]; do sleep 0.05; done; exec "{peer("node", "mcp-server-everything")}" stdio'
    )
    late = {"transport": "stdio", "command": "sh", "args": ["-c", command], "timeouts": {"connect": 60}}
    write_upstream(tmp_path, extra={"everything": late})
    monkeypatch.setenv("KEEN_HOME", str(tmp_path))
    options = {"mode": "extension", "notify_interval": 0.2, "ready_wait": 0}
    async with in_process(tmp_path, "stateless", **options) as (keen, host):
        assert DOC not in [r.uri for r in (await host.list_resources()).resources]
        async with host.listen(tools_list_changed=True) as tools:
            go.touch()
            with anyio.fail_after(60):
                event = await tools.__aiter__().__anext__()
            assert type(event).__name__ == "ToolsListChanged", event

            # The round that compared the new resources ran while only this stream was open.
            def compared() -> bool:
                served = [str(r.uri) for r in keen.served.listing().resources]
                return DOC in served and not keen.notifier.pending

            await wait_until(compared, "the round of the new resources", 30)
            async with host.listen(resources_list_changed=True) as resources:
                with anyio.fail_after(20):
                    event = await resources.__aiter__().__anext__()
        assert type(event).__name__ == "ResourcesListChanged", event
        assert DOC in [r.uri for r in (await host.list_resources()).resources]


def _shelf() -> MCPServer:
    """An upstream with a resource template whose reads it refuses as invalid params
    (``-32602``: no memo on that topic) or fails (``-32603``), as MCPServer answers them."""
    server = MCPServer("shelf")

    @server.resource("memo://shelf/{topic}", name="shelf", description="Memos on a topic.")
    def shelf(topic: str) -> str:
        if topic == "boom":
            raise ResourceError("the shelf fell over")
        if topic != "lisbon":
            raise ResourceNotFoundError(f"no memo on {topic}")
        return "memos on lisbon"

    return server


@pytest.mark.parametrize("era", ["session", "stateless"])
async def test_a_read_the_upstream_refuses_as_invalid_is_invalid_params(
    era: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # keen serve forwards a URI its upstream's template matches; the upstream refuses the
    # template's value with -32602. The host got -32603 and keen serve's remedy words, where a
    # refused prompt argument got -32602: the host's request is what is wrong, not the server.
    write_upstream(tmp_path, extra={"shelf": {"transport": "stdio", "command": "unused-in-memory"}})
    monkeypatch.setenv("KEEN_HOME", str(tmp_path))
    shelf = {"shelf": in_memory_transport(_shelf())}
    async with (
        http_in_process(tmp_path, mode="extension", transports=shelf) as served,
        connect(served, era) as client,
    ):
        found = await client.read_resource("keen://shelf/memo://shelf/lisbon")
        assert found.contents[0].text == "memos on lisbon"  # type: ignore[union-attr]
        refused_uri = "keen://shelf/memo://shelf/oslo"
        with pytest.raises(MCPError, match="no memo on oslo") as refused:
            await client.read_resource(refused_uri)
        assert refused.value.code == -32602, refused.value.error
        assert refused.value.error.data == {"uri": refused_uri}
        message = refused.value.error.message
        assert "resources/list and resources/templates/list give the URIs it serves" in message, message
        assert "tool_descriptions" not in message and "inputSchema" not in message, message
        # Any other refusal of the upstream's stays an internal error (-32603).
        with pytest.raises(MCPError, match="with JSON-RPC error -32603: the shelf fell over") as failed:
            await client.read_resource("keen://shelf/memo://shelf/boom")
        assert failed.value.code == -32603, failed.value.error
    events = [json.loads(line) for line in (tmp_path / "logs" / "serve-audit.jsonl").read_text().splitlines()]
    reads = [(e["name"], e["outcome"], e["code"]) for e in events if e["type"] == "resource.read"]
    assert reads == [
        ("memo://shelf/lisbon", "ok", None),
        ("memo://shelf/oslo", "error", "invalid_arguments"),
        ("memo://shelf/boom", "error", "remote_protocol_error"),
    ]
