"""The eight conformance criteria of the tool_descriptions extension (its section 9), each its
own test, over HTTP (a ``keen serve`` process) and over the SDK's memory streams (its server
in this process, one per caller as a stdio host gets: stdio's framing and process are tested
in test_serve_notices.py and test_serve_requests.py), in the 2025-11-25 session era and the
2026-07-28 stateless era."""

from __future__ import annotations

import anyio
import pytest
from mcp.client.client import Client

from helpers.serve import read_json
from keen._terminal import NAME_CHARS

pytestmark = pytest.mark.anyio


@pytest.fixture(params=["http", "memory"])
def transport(request: pytest.FixtureRequest) -> str:
    return str(request.param)


LOOSE = {"type": "object", "additionalProperties": True}
RESOURCE = "resource:///tool_descriptions"
UPSTREAM_TOOLS = {"add", "cwd", "die", "echo", "env", "fail", "pid", "sleep", "extra_0000", "extra_0001"}


async def _read(client: Client, query: str = "") -> dict:
    return read_json(await client.read_resource(RESOURCE + query))


async def test_1_minimal_descriptions_in_tools_list(new_caller) -> None:
    async with new_caller() as client:
        before = (await client.list_tools()).tools
        assert {t.name for t in before} == {f"mcp__basic__{n}" for n in UPSTREAM_TOOLS}
        for tool in before:
            assert tool.input_schema == LOOSE, tool.name
            assert "\n" not in (tool.description or "") and len(tool.description or "") <= 170
        # The generated extras carry ~200-character descriptions: the list keeps only a sentence.
        extra = next(t for t in before if t.name == "mcp__basic__extra_0000")
        full = (await _read(client, "?tools=mcp__basic__extra_0000"))["mcp__basic__extra_0000"]
        assert len(extra.description or "") < len(full["description"])
        # tools/list never varies as a side effect of a read (2026-07-28 forbids per-caller lists).
        after = (await client.list_tools()).tools
        assert [t.model_dump() for t in after] == [t.model_dump() for t in before]
    async with new_caller() as other:
        assert [t.model_dump() for t in (await other.list_tools()).tools] == [t.model_dump() for t in before]


async def test_2_tool_descriptions_resource_listed(new_caller) -> None:
    async with new_caller() as client:
        resources = (await client.list_resources()).resources
    found = [r for r in resources if str(r.uri) == RESOURCE]
    assert len(found) == 1
    resource = found[0]
    assert "tool descriptions" in resource.name.lower()
    assert resource.mime_type == "application/json"
    text = resource.description or ""
    # Section 4.2: tools/list vs this resource, fetch first, the ?tools= syntax, the consequence.
    for needed in ("tools/list", "?tools=", "TOOL_DESCRIPTION_REQUIRED", "authorizes"):
        assert needed in text


async def test_3_resource_accepts_tools_parameter(new_caller) -> None:
    async with new_caller() as client:
        one = await _read(client, "?tools=mcp__basic__echo")
        two = await _read(client, "?tools=mcp__basic__add,mcp__basic__env")
    assert list(one) == ["mcp__basic__echo"]
    assert sorted(two) == ["mcp__basic__add", "mcp__basic__env"]


async def test_4_full_descriptions_for_the_selected_tools(new_caller) -> None:
    async with new_caller() as client:
        body = await _read(client, "?tools=mcp__basic__add,no_such_tool")
        listed = sorted(t.name for t in (await client.list_tools()).tools)
    add = body["mcp__basic__add"]
    assert add["name"] == "mcp__basic__add"
    assert add["description"] == "Add two integers."
    assert add["inputSchema"]["required"] == ["a", "b"]
    assert add["inputSchema"]["properties"]["a"]["type"] == "integer"
    assert add["examples"][0]["input"] == {"a": 0, "b": 0}
    assert add["usage_guidance"]["upstream_tool"] == "add"
    # Section 6.3: an unknown name gets its own entry listing what exists; nothing else is added.
    assert body["no_such_tool"] == {"error": "Tool 'no_such_tool' not found", "available_tools": listed}
    assert sorted(body) == ["mcp__basic__add", "no_such_tool"]


async def test_an_unknown_long_name_is_cut_in_its_error(new_caller) -> None:
    """The error of an unknown name quoted it whole: a host's (or its model's) name of 5,000
    characters came back in it. Now it is cut to ``NAME_CHARS``; the entry's key stays the
    name asked for, so the host can match it."""
    long_name = "mcp__basic__" + "z" * 5_000
    async with new_caller() as client:
        body = await _read(client, f"?tools={long_name}")
    error = body[long_name]["error"]
    assert error.startswith("Tool 'mcp__basic__zzz") and error.endswith("…' not found"), error
    assert len(error) == NAME_CHARS + len("Tool '' not found"), error


async def test_5_missing_tool_selection(new_caller) -> None:
    async with new_caller() as client:
        bare = await _read(client)
        empty = await _read(client, "?tools=")
    expected = {
        "error": {
            "code": "MISSING_TOOL_SELECTION",
            "message": "You must specify one or more tool names in the 'tools' parameter.",
            "examples": [f"{RESOURCE}?tools=tool_name", f"{RESOURCE}?tools=tool1,tool2"],
        }
    }
    assert bare == expected
    assert empty == expected


async def test_6_authorization_enforced(new_caller) -> None:
    async with new_caller() as client:
        await _read(client, "?tools=mcp__basic__echo")
        ok = await client.call_tool("mcp__basic__echo", {"text": "hello"})
        assert not ok.is_error and ok.content[0].text == "hello"
        # Only the fetched tool is authorized.
        other = await client.call_tool("mcp__basic__add", {"a": 1, "b": 2})
        assert other.is_error and read_json(other)["error"]["code"] == "TOOL_DESCRIPTION_REQUIRED"
        # Authorization does not bypass the gateway's own checks (section 5.3 layering).
        bad = await client.call_tool("mcp__basic__echo", {"text": 5})
        assert bad.is_error and read_json(bad)["error"]["code"] == "invalid_arguments"


async def test_7_call_without_fetch_is_tool_description_required(new_caller) -> None:
    async with new_caller() as client:
        result = await client.call_tool("mcp__basic__add", {"a": 1, "b": 2})
    assert result.is_error
    assert read_json(result) == {
        "error": {
            "code": "TOOL_DESCRIPTION_REQUIRED",
            "message": "Tool 'mcp__basic__add' requires fetching its description before use.",
            "resource_uri": f"{RESOURCE}?tools=mcp__basic__add",
        }
    }
    assert result.structured_content == read_json(result)


async def test_8_authorization_isolated_per_session(new_caller) -> None:
    """Two callers at once: what one fetched never authorizes the other."""
    results: dict[str, list[bool]] = {"a": [], "b": []}
    async with new_caller() as a, new_caller() as b:
        await _read(a, "?tools=mcp__basic__echo")

        async def calls(name: str, client: Client) -> None:
            for i in range(5):
                result = await client.call_tool("mcp__basic__echo", {"text": f"{name}{i}"})
                results[name].append(bool(result.is_error))

        async with anyio.create_task_group() as tg:
            tg.start_soon(calls, "a", a)
            tg.start_soon(calls, "b", b)
        await _read(b, "?tools=mcp__basic__add")
        a_add = await a.call_tool("mcp__basic__add", {"a": 1, "b": 1})
    assert results == {"a": [False] * 5, "b": [True] * 5}
    assert a_add.is_error
