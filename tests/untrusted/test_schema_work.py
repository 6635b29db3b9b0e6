"""A schema whose ``$ref`` graph multiplies its paths cannot freeze Keen.

A hostile server's schema is small but its ``$defs`` chain says, for each ``dN``, ``{"allOf":
[{"$ref": "#/$defs/dN+1"}, {"$ref": "#/$defs/dN+1"}]}``: jsonschema visits ``d30`` 2^30
times, hours on the event loop, and every other call of every server would wait. Every
keyword now draws on the validation's time budget, as regex searches did: the call fails
saying the schema could not be checked in time, and the other server's call is answered.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

from helpers.hostile import hostile_entry
from keen.errors import InvalidArguments, RemoteProtocolError
from keen.gateway import Gateway, allow_all
from keen.mcp import Manager
from keen.mcp.listing.validation import ArgumentValidator, StructuredContentValidator
from keen.mcp.types import Tool
from keen.trust import PinGuard

pytestmark = pytest.mark.anyio

DEPTH = 30  # 2^30 visits of the last definition: without the budget, no test run would end


def _dag(depth: int = DEPTH, keyword: str = "allOf") -> dict[str, Any]:
    defs: dict[str, Any] = {
        f"d{i}": {keyword: [{"$ref": f"#/$defs/d{i + 1}"}, {"$ref": f"#/$defs/d{i + 1}"}]}
        for i in range(depth)
    }
    defs[f"d{depth}"] = {"type": "object"}
    return {"type": "object", "$defs": defs, "properties": {"x": {"$ref": "#/$defs/d0"}}}


INPUT_SLOW = r'"s/t": checking them against the inputSchema took over 0\.5 s, so the call was not sent'
OUTPUT_SLOW = r"tool t could not be checked against its outputSchema: checking it took over 0\.5 s"


# Each keyword with a value that makes it try both branches at every level: anyOf stops at
# the first branch that holds, so it multiplies on a value that fails; oneOf tries all.
WORK = [("allOf", {"x": {}}), ("anyOf", {"x": 1}), ("oneOf", {"x": {}})]


@pytest.mark.parametrize(("keyword", "value"), WORK)
def test_arguments_against_a_multiplying_schema_are_refused(keyword: str, value: dict[str, Any]) -> None:
    tool = Tool(server="s", name="t", description="", input_schema=_dag(keyword=keyword))
    with pytest.raises(InvalidArguments, match=INPUT_SLOW) as info:
        ArgumentValidator("s").validate(tool, value)
    assert info.value.errors == [("$", "too slow to check against the inputSchema")]


@pytest.mark.parametrize(("keyword", "value"), WORK)
def test_a_result_against_a_multiplying_schema_is_refused(keyword: str, value: dict[str, Any]) -> None:
    with pytest.raises(RuntimeError, match=OUTPUT_SLOW):
        StructuredContentValidator("s").validate("t", _dag(keyword=keyword), value)


def test_a_shallow_chain_is_checked_as_before() -> None:
    tool = Tool(server="s", name="small", description="", input_schema=_dag(4))
    arguments = ArgumentValidator("s")
    arguments.validate(tool, {"x": {}})
    with pytest.raises(InvalidArguments, match=r"\$\.x: 1 is not of type 'object'"):
        arguments.validate(tool, {"x": 1})
    results = StructuredContentValidator("s")
    results.validate("small", _dag(4), {"x": {}})
    with pytest.raises(RuntimeError, match=r"returned by tool small: \$\.x: 1 is not of type 'object'"):
        results.validate("small", _dag(4), {"x": 1})


def test_unevaluated_properties_over_a_multiplying_schema_is_refused() -> None:
    # unevaluatedProperties walks the subschemas again to learn which names they evaluate.
    defs: dict[str, Any] = {
        f"d{i}": {"allOf": [{"$ref": f"#/$defs/d{i + 1}"}, {"$ref": f"#/$defs/d{i + 1}"}]}
        for i in range(DEPTH)
    }
    defs[f"d{DEPTH}"] = {"properties": {"a": {}}}
    schema = {"unevaluatedProperties": False, "$defs": defs, "allOf": [{"$ref": "#/$defs/d0"}]}
    with pytest.raises(RuntimeError, match=OUTPUT_SLOW):
        StructuredContentValidator("s").validate("t", schema, {"a": 1, "b": 2})


async def test_a_multiplying_schema_fails_its_call_and_another_server_is_answered(
    write_config: Callable[..., Path], tmp_path: Path
) -> None:
    tools = [
        {"name": "out", "description": "out", "inputSchema": {"type": "object"}, "outputSchema": _dag()},
        {"name": "arg", "description": "arg", "inputSchema": _dag()},
    ]
    result = {"content": [{"type": "text", "text": "done"}], "structuredContent": {"x": {}}}
    spec = {"tools": tools, "results": {"out": result, "arg": result}}
    other = {"tools": [{"name": "fine", "description": "fine", "inputSchema": {"type": "object"}}]}
    path = write_config(
        {"h": hostile_entry(tmp_path / "h.json", spec), "o": hostile_entry(tmp_path / "o.json", other)}
    )
    async with Manager(path, trust=PinGuard()) as manager:
        assert await manager.wait_ready(20)
        gateway = Gateway(manager, approval=allow_all)
        answered: list[str] = []

        async def out() -> None:
            with pytest.raises(
                RemoteProtocolError, match=r"could not be checked against its outputSchema: checking"
            ):
                await gateway.call("h", "out", {})

        async def arg() -> None:
            with pytest.raises(InvalidArguments, match=r"checking them against the inputSchema took over"):
                await gateway.call("h", "arg", {"x": {}})

        async def fine() -> None:
            answered.append((await gateway.call("o", "fine", {})).text)

        async with anyio.create_task_group() as group:
            group.start_soon(out)
            group.start_soon(fine)
            group.start_soon(arg)
        assert answered == ["ok"]  # the hostile test server's answer to a tool it has no result for
