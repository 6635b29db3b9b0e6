"""A call's result in wire shape is what dumping the whole result model gives."""

from __future__ import annotations

from typing import Any

import mcp_types as mt
import pydantic
import pytest

from keen.mcp.calls.send import wire_parts

_TEXT = {"type": "text", "text": 'caf\u00e9 "q"\n'}
_RESULTS: list[dict[str, Any]] = [
    {"content": [_TEXT], "isError": False},
    {
        "content": [_TEXT, {"type": "text", "text": ""}],
        "structuredContent": {"a": [1, 2.5, None, True], "b": {"c": None}},
    },
    {"content": [], "structuredContent": {}},
    {"content": [{**_TEXT, "annotations": {"audience": ["user"], "priority": 0.5}}]},
    {"content": [{**_TEXT, "_meta": {"k": "v"}}], "isError": True},
    {"content": [_TEXT, {"type": "image", "data": "aGk=", "mimeType": "image/png"}]},
    {"content": [{"type": "resource_link", "uri": "file:///x", "name": "x"}], "structuredContent": {"n": 1}},
    {"content": [{"type": "resource", "resource": {"uri": "file:///x", "text": "hi"}}]},
    {"content": [_TEXT], "structuredContent": {"when": "2026-11-27T00:00:00Z"}, "_meta": {"m": 1}},
]


@pytest.mark.parametrize("wire", _RESULTS)
def test_a_results_content_and_structured_content_are_what_the_whole_dump_gives(wire: dict[str, Any]) -> None:
    raw = mt.CallToolResult.model_validate(wire)
    dumped = raw.model_dump(by_alias=True, mode="json", exclude_none=True)
    content, structured = wire_parts(raw)
    assert (content, structured) == (dumped.get("content", []), dumped.get("structuredContent"))
    # Fresh containers: a front end changing them does not change the SDK's result object.
    if structured is not None:
        assert structured is not raw.structured_content


@pytest.mark.parametrize(
    "text",
    [
        '{"content": [], "structuredContent": {"p": NaN, "q": Infinity, "r": [-Infinity, 1.5]}}',
        '{"content": [{"type": "text", "text": "x"}], "structuredContent": {"p": NaN}}',
    ],
)
def test_nan_and_infinities_a_server_sent_become_null_as_the_dump_makes_them(text: str) -> None:
    # pydantic's JSON parser takes NaN and Infinity off the wire; the JSON-mode dump writes
    # them as null, and the text a model reads must stay valid JSON.
    raw = mt.CallToolResult.model_validate_json(text)
    dumped = raw.model_dump(by_alias=True, mode="json", exclude_none=True)
    content, structured = wire_parts(raw)
    assert (content, structured) == (dumped.get("content", []), dumped.get("structuredContent"))
    assert structured is not None and structured["p"] is None


def test_a_model_inside_structured_content_leaves_out_its_none_fields_as_the_dump_does() -> None:
    # A server in the same process may put a model in the structured content.
    class Inner(pydantic.BaseModel):
        a: int | None = None
        b_c: int = 1

    raw = mt.CallToolResult(content=[], structuredContent={"m": Inner()})
    dumped = raw.model_dump(by_alias=True, mode="json", exclude_none=True)
    assert wire_parts(raw)[1] == dumped["structuredContent"] == {"m": {"b_c": 1}}


@pytest.mark.parametrize(
    ("content", "structured", "is_error"),
    [([], None, False), ([_TEXT], {"a": [1, None]}, True), ([_TEXT, _TEXT], None, True)],
)
def test_a_calls_tool_result_is_the_dataclass_made_with_every_field(
    content: list[dict[str, Any]], structured: Any, is_error: bool
) -> None:
    from dataclasses import FrozenInstanceError, fields

    from keen.mcp.calls.send import _tool_result  # pyright: ignore[reportPrivateUsage]
    from keen.mcp.types import ToolResult

    # Made without the frozen dataclass's __init__ (its slots set directly): the same object,
    # every field set, still frozen; a field added to ToolResult fails the last assertion.
    made = _tool_result("s", "t", content, structured, is_error)
    given = ToolResult(
        server="s", tool="t", content=content, structured_content=structured, is_error=is_error
    )
    assert made == given and repr(made) == repr(given) and type(made) is ToolResult
    assert made.content is content and made.structured_content is structured
    with pytest.raises(FrozenInstanceError, match="cannot assign to field 'tool'"):
        made.tool = "x"  # type: ignore[misc]
    assert [f.name for f in fields(ToolResult)] == [
        "server",
        "tool",
        "content",
        "structured_content",
        "is_error",
    ]
    assert ToolResult.__slots__ == ("server", "tool", "content", "structured_content", "is_error")
