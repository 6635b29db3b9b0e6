"""``keen serve --mode search``: three tools, the workflow in the instructions, real calls
to the upstream through the harness pipeline and the gateway, audited in the harness's
event log."""

from __future__ import annotations

import contextlib
import json
import logging
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import anyio
import pytest
from mcp.client.client import Client

from helpers.forkserver import script_args
from helpers.serve import (
    BASIC,
    KeenServeProcess,
    connect,
    http_in_process,
    in_process,
    read_json,
    write_upstream,
)
from keen.harness import approvals

pytestmark = [pytest.mark.anyio, pytest.mark.slow_file]


@contextlib.asynccontextmanager
async def _in_memory(home: Path, era: str) -> AsyncIterator[Client]:
    """A client of ``keen serve --mode search``'s server for ``home``, run in this process."""
    async with in_process(home, era, mode="search") as (_, client):
        yield client


# The workflow is the same logic in both eras: it runs in this process; one `keen serve`
# process over HTTP shows the command line's --mode search end to end (the eras over both
# transports are the new_caller fixture's, tests/serve/conftest.py).
@pytest.mark.parametrize(
    ("transport", "era"),
    [("memory", "session"), ("memory", "stateless"), ("http", "stateless")],
)
async def test_search_describe_call(
    tmp_path: Path, transport: str, era: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_upstream(tmp_path, extra_tools=5)
    monkeypatch.setenv("KEEN_HOME", str(tmp_path))
    proc = KeenServeProcess(tmp_path, ["--mode", "search"]).start() if transport == "http" else None
    opened = connect(proc, era) if proc is not None else _in_memory(tmp_path, era)
    try:
        async with opened as client:
            assert "search_tools" in (client.instructions or "")
            tools = {t.name: t for t in (await client.list_tools()).tools}
            assert set(tools) == {"search_tools", "describe_tools", "call_mcp_tool"}
            assert tools["search_tools"].annotations.read_only_hint is True
            assert tools["describe_tools"].annotations.read_only_hint is True
            assert tools["call_mcp_tool"].annotations.read_only_hint is False

            found = read_json(
                await client.call_tool("search_tools", {"query": "add two integers", "limit": 3})
            )
            assert found["tools"][0]["name"] == "mcp__basic__add"
            assert found["total_tools"] == 13
            described = read_json(
                await client.call_tool("describe_tools", {"names": ["mcp__basic__add", "nope"]})
            )
            assert described["mcp__basic__add"]["inputSchema"]["required"] == ["a", "b"]
            assert "available_tools" in described["nope"]
            # The shape its error asks for is the names' own (it asked for "server__tool",
            # a name describe_tools does not know).
            unlisted = read_json(await client.call_tool("describe_tools", {"names": "mcp__basic__add"}))
            assert unlisted["error"]["message"].endswith('send {"names": ["mcp__server__tool", ...]}')
            result = await client.call_tool(
                "call_mcp_tool", {"server": "basic", "tool": "add", "arguments": {"a": 2, "b": 3}}
            )
            assert not result.is_error and result.content[0].text == "5"
            # Unannotated (so destructive by the spec's defaults): the host approved it, it runs.
            failed = await client.call_tool(
                "call_mcp_tool", {"server": "basic", "tool": "fail", "arguments": {"message": "boom"}}
            )
            assert failed.is_error and failed.content[0].text.endswith("boom")
            wrong = await client.call_tool(
                "call_mcp_tool", {"server": "basic", "tool": "add", "arguments": {"a": "x"}}
            )
            assert wrong.is_error and read_json(wrong)["error"]["code"] == "invalid_arguments"
            missing = await client.call_tool(
                "call_mcp_tool", {"server": "nosuch", "tool": "add", "arguments": {}}
            )
            assert missing.is_error and "not configured" in read_json(missing)["error"]["message"]
            # Input that is not a call at all is refused by the pipeline's validate stage too,
            # so the audit log has it (one pipeline, parse included: docs/architecture.md).
            shapeless = await client.call_tool("call_mcp_tool", {"server": "basic", "arguments": {}})
            error = read_json(shapeless)["error"]
            assert shapeless.is_error and error["code"] == "invalid_arguments"
            assert "'tool' is a required property" in error["message"]
    finally:
        if proc is not None:
            proc.stop()
    events = [json.loads(line) for line in (tmp_path / "logs" / "serve-audit.jsonl").read_text().splitlines()]
    records = [e for e in events if e["type"] == "result"]
    assert [(r["server"], r["tool"], r["outcome"], r["gate"], r["code"]) for r in records] == [
        ("basic", "add", "ok", None, None),
        ("basic", "fail", "error", None, "tool_error"),
        ("basic", "add", "denied", "validate", "invalid_arguments"),
        ("nosuch", "add", "denied", "validate", "server_not_configured"),
        (None, None, "denied", "validate", "invalid_arguments"),
    ]
    assert all(r["caller"] for r in records)
    # The calls that ran passed every stage of the pipeline; the host approved the write.
    assert records[0]["stages"] == [
        "validate",
        "visibility",
        "mcp_checks",
        "pin_check",
        "permission",
        "pre_hooks",
        "execute",
        "truncate",
        "post_hooks",
        "audit",
    ]
    approved = approvals(events)
    # basic annotates add readOnlyHint, but keen serve's config does not trust its annotations:
    # the claim grants nothing, so the host approved both calls.
    assert [(a["decision"], a["by"], a["reason"]) for a in approved] == [
        ("allow", "MCP host", "approved by the MCP host"),
        ("allow", "MCP host", "approved by the MCP host"),
    ]


async def test_search_names_the_servers_with_an_identical_tool(tmp_path: Path) -> None:
    """Two servers with the same tools: one result per tool, naming the other server, and
    call_tool runs on either."""
    copy = {"transport": "stdio", "command": sys.executable, "args": script_args(str(BASIC), "--tools", "2")}
    write_upstream(tmp_path, extra_tools=2, extra={"basic-copy": copy})
    async with connect("stdio", "session", home=tmp_path, serve_args=["--mode", "search"]) as client:
        found = read_json(await client.call_tool("search_tools", {"query": "add two integers", "limit": 5}))
        adds = [t for t in found["tools"] if t["tool"] == "add"]
        assert len(adds) == 1, found
        other = {"basic": "basic-copy", "basic-copy": "basic"}[adds[0]["server"]]
        assert adds[0]["also_on_servers"] == [other], adds[0]
        for server in ("basic", "basic-copy"):
            result = await client.call_tool(
                "call_mcp_tool", {"server": server, "tool": "add", "arguments": {"a": 2, "b": 3}}
            )
            assert not result.is_error and result.content[0].text == "5", result


async def test_search_mode_lists_the_one_search_and_call_tool(tmp_path: Path) -> None:
    """The host gets the definitions a model in keen chat gets (keen.entry_tools), their input
    is checked against the schemas it was shown, and ``call_tool``, search mode's name for the
    call tool before the names were one, still runs a call (docs/architecture.md "Names")."""
    from keen.entry_tools import call_tool_definition, search_tool_definition

    write_upstream(tmp_path, extra_tools=1)
    async with connect("stdio", "session", home=tmp_path, serve_args=["--mode", "search"]) as client:
        listed = {
            t.name: t.model_dump(by_alias=True, exclude_none=True) for t in (await client.list_tools()).tools
        }
        search = search_tool_definition("mcp", kinds=False)
        assert listed["search_tools"]["inputSchema"] == search["inputSchema"]
        assert listed["search_tools"]["description"] == search["description"]
        call = call_tool_definition("mcp", schema_reader="describe_tools")
        assert listed["call_mcp_tool"]["inputSchema"] == call["inputSchema"]
        assert listed["call_mcp_tool"]["description"] == call["description"]

        old = await client.call_tool(
            "call_tool", {"server": "basic", "tool": "add", "arguments": {"a": 1, "b": 2}}
        )
        assert not old.is_error and old.content[0].text == "3"
        too_many = await client.call_tool("search_tools", {"query": "add", "limit": 500})
        error = read_json(too_many)["error"]
        assert too_many.is_error and error["code"] == "invalid_arguments"
        assert error["message"].startswith(
            "search_tools arguments at limit: 500 is greater than the maximum of 50"
        )
        no_tool = await client.call_tool("call_mcp_tool", {"server": "basic"})
        assert no_tool.is_error and "'tool' is a required property" in read_json(no_tool)["error"]["message"]
        # A name it does not serve is quoted escaped once (its backslash not doubled by repr).
        unknown = await client.call_tool("no\x1bsuch", {})
        said = read_json(unknown)["error"]["message"]
        assert unknown.is_error and said.startswith("unknown tool 'no\\x1bsuch'; use search_tools"), said


async def test_search_with_no_server_configured_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # No configs.json (a host that runs keen with another HOME): search_tools answered
    # {"tools": [], "total_tools": 0}, which reads as "no tool fits" to the host's model.
    monkeypatch.setenv("KEEN_HOME", str(tmp_path))
    async with _in_memory(tmp_path, "session") as client:
        found = read_json(await client.call_tool("search_tools", {"query": "what time is it"}))
    assert found["tools"] == [] and found["total_tools"] == 0
    assert found["note"].startswith("keen serve has no MCP server configured"), found
    assert "keen mcp add" in found["note"]


@pytest.fixture
def broken_model(tmp_path: Path) -> Iterator[Path]:
    """This process's transformer encoder loads a model file that is not the model (its
    hash check fails, naming the file); the installed one is loaded again afterwards."""
    from keen.capabilities import encoder

    model = tmp_path / "models" / "model.onnx"
    model.parent.mkdir()
    model.write_bytes(b"not the model")
    encoder.reset(encoder.ModelFiles(model, encoder.model_files().tokenizer))
    yield model
    encoder.reset()


async def test_search_says_the_transformer_is_unavailable_without_the_models_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, broken_model: Path
) -> None:
    """Why the model did not load names a local file: the host is told only that it is
    unavailable; keen serve's log has the reason."""
    write_upstream(tmp_path, extra_tools=2)
    monkeypatch.setenv("KEEN_HOME", str(tmp_path))
    caplog.set_level(logging.WARNING, logger="keen.serve")
    async with http_in_process(tmp_path, mode="search") as served, connect(served, "session") as client:
        with anyio.fail_after(60):
            while True:  # the vectors' thread fails to load the model in the background
                found = await client.call_tool("search_tools", {"query": "add two integers"})
                if "unavailable" in (note := read_json(found).get("note", "")):
                    break
                await anyio.sleep(0.05)
    assert found.structured_content is not None and found.structured_content["tools"], found
    assert note == (
        "semantic ranking by wordllama: the transformer model is unavailable (keen serve's log says why)"
    ), note
    assert str(tmp_path) not in json.dumps(found.structured_content), found
    assert str(broken_model) in caplog.text, caplog.text
