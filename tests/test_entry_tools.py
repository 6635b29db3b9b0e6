"""The search tool and the call tool: one definition each, and their input checked against it."""

from __future__ import annotations

from pathlib import Path

import pytest

from keen.entry_tools import (
    CALL_TOOL,
    SEARCH_TOOL,
    call_tool_definition,
    parse_call,
    parse_search,
    search_tool_definition,
)
from keen.gateway import tool_definition
from keen.harness.entries import entry_schema


def test_the_harness_offers_the_shared_definitions(keen_home: Path) -> None:
    # One definition each: what a model in keen chat is offered is the shared one.
    assert entry_schema(SEARCH_TOOL) == (
        search_tool_definition("mcp")["description"],
        search_tool_definition("mcp")["inputSchema"],
    )
    assert entry_schema(CALL_TOOL)[1] == call_tool_definition("mcp")["inputSchema"]
    assert f"{keen_home / 'skills'}/mcp:<server>/SKILL.md" in entry_schema(CALL_TOOL)[0]


def test_definition_shapes() -> None:
    openai = search_tool_definition("openai")
    assert openai["function"]["name"] == "search_tools"
    assert search_tool_definition("anthropic")["input_schema"]["required"] == ["query"]
    assert search_tool_definition("mcp")["annotations"]["readOnlyHint"] is True
    assert "kinds" not in search_tool_definition("mcp", kinds=False)["inputSchema"]["properties"]
    assert call_tool_definition("mcp")["annotations"]["destructiveHint"] is True
    with pytest.raises(ValueError, match="openai, anthropic or mcp"):
        search_tool_definition("gemini")  # type: ignore[arg-type]
    # No default shape: search_tools' was "mcp" and call_mcp_tool's "openai", so a loop that
    # named neither offered its model one tool of each shape.
    for definition in (search_tool_definition, call_tool_definition, tool_definition):
        with pytest.raises(TypeError, match="missing 1 required positional argument: 'style'"):
            definition()  # type: ignore[call-arg]


def test_search_input_is_checked_against_its_schema() -> None:
    assert parse_search({"query": "add numbers"}).limit == 10
    found = parse_search({"query": "notes", "limit": 3, "kinds": ["resource"]})
    assert (found.query, found.limit, found.kinds) == ("notes", 3, ("resource",))
    with pytest.raises(ValueError, match=r"search_tools arguments at limit: 0 is less than the minimum of 1"):
        parse_search({"query": "x", "limit": 0})
    with pytest.raises(ValueError, match=r"Additional properties are not allowed \('kinds' was unexpected\)"):
        parse_search({"query": "x", "kinds": ["tool"]}, kinds=False)
    with pytest.raises(ValueError, match='needs a "query" of a few words; it was blank'):
        parse_search({"query": "   "})
    # JSON text, as the OpenAI SDK gives a tool call's arguments (parse_call takes it too).
    assert parse_search('{"query": "notes", "limit": 3}', kinds=False)[:2] == ("notes", 3)
    with pytest.raises(ValueError, match=r"search_tools input is not valid JSON \(Expecting value\); send"):
        parse_search("notes", kinds=False)


def test_call_input_is_checked_against_its_schema() -> None:
    assert parse_call('{"server": "s", "tool": "t"}').arguments == {}
    # Arguments sent as JSON text of an object, as some models send them.
    assert parse_call({"server": "s", "tool": "t", "arguments": '{"a": 1}'}).arguments == {"a": 1}
    with pytest.raises(ValueError, match=r"call_mcp_tool input is not valid JSON \(Expecting value\); send"):
        parse_call("not json")
    with pytest.raises(
        ValueError, match=r"call_mcp_tool arguments at arguments: \[1\] is not of type 'object'"
    ):
        parse_call({"server": "s", "tool": "t", "arguments": "[1]"})
    with pytest.raises(ValueError, match="call_mcp_tool arguments: 'tool' is a required property"):
        parse_call({"server": "s"})


def test_json_text_nested_too_deep_is_refused_as_not_valid_json() -> None:
    # "[[[[..." past Python's recursion limit: the decoder's RecursionError got past every
    # `except ValueError` of an agent loop.
    deep = "[" * 100000
    with pytest.raises(ValueError, match=r"^search_tools input is not valid JSON \(nested too deep\); send"):
        parse_search(deep)
    with pytest.raises(ValueError, match=r"^call_mcp_tool input is not valid JSON \(nested too deep\); send"):
        parse_call(deep)
    with pytest.raises(
        ValueError, match=r"^call_mcp_tool arguments at arguments: '\[\[\[.* is not of type 'object'"
    ):
        parse_call({"server": "s", "tool": "t", "arguments": deep})


def test_a_valid_call_builds_no_schema_validator_and_an_invalid_one_is_still_worded(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import jsonschema

    real = jsonschema.Draft202012Validator
    built: list[object] = []

    def counting(schema: object) -> object:
        built.append(schema)
        return real(schema)  # pyright: ignore[reportArgumentType]

    monkeypatch.setattr(jsonschema, "Draft202012Validator", counting)
    # Every call a model or host makes passes the plain checks: no validator per call.
    call = parse_call({"server": "s", "tool": "t", "arguments": {"a": [1, {"b": None}]}})
    assert (call.server, call.tool, call.arguments) == ("s", "t", {"a": [1, {"b": None}]})
    assert parse_call({"server": "s", "tool": "t"}).arguments == {}
    assert built == []
    # What fails them goes to jsonschema, which words the error.
    for data, why in (
        ({"server": "s", "tool": "t", "extra": 1}, r"Additional properties are not allowed \('extra'"),
        ({"server": True, "tool": "t"}, r"at server: True is not of type 'string'"),
        ({"server": "s", "tool": "t", "arguments": [1]}, r"at arguments: \[1\] is not of type 'object'"),
        (["s", "t"], r"\['s', 't'\] is not of type 'object'"),
    ):
        with pytest.raises(ValueError, match=why):
            parse_call(data)
    assert len(built) == 4
