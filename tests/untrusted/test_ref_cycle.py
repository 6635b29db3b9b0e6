"""``ref_cycle`` finds a schema's loops that never reach a type before any instance is checked.

Found this way, a tool with such a schema is left to its server (inputSchema) or refused
(outputSchema) with the same words on any machine; found by running into it, the answer
depended on whether Python's recursion limit or the validation time budget came first.
"""

from __future__ import annotations

import contextlib
import functools
import json
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from keen.errors import InvalidArguments
from keen.mcp.listing import _keywords, validation
from keen.mcp.listing.validation import (
    ArgumentValidator,
    SchemaNotChecked,
    StructuredContentValidator,
    checked_errors,
    recursion_panic,
    ref_cycle,
)
from keen.mcp.types import Tool


@pytest.mark.parametrize(
    "schema",
    [
        {
            "$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}},
            "properties": {"x": {"$ref": "#/$defs/a"}},
        },
        {"$ref": "#"},
        {"allOf": [{"type": "object"}, {"$ref": "#/$defs/x"}], "$defs": {"x": {"allOf": [{"$ref": "#"}]}}},
        {"$defs": {"a/b": {"allOf": [{"$ref": "#/$defs/a~1b"}]}}, "$ref": "#/$defs/a~1b"},
        {
            "$defs": {"a b": {"$ref": "#/$defs/a%20b", "type": "string"}},
            "properties": {"s": {"$ref": "#/$defs/a%20b"}},
        },
        # Example data with an "id" is data, not a resource that changes what "#" means.
        {
            "$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}},
            "properties": {"x": {"$ref": "#/$defs/a"}},
            "examples": [{"id": "42", "x": 1}],
            "default": {"id": "42"},
        },
        # A property may be named like a data keyword.
        {"properties": {"default": {"allOf": [{"$ref": "#/properties/default"}]}}},
        {"allOf": [{"$ref": "#/allOf/1"}, {"$ref": "#/allOf/0"}]},
    ],
    ids=["defs", "root", "allOf", "escaped", "percent", "examples", "property-named-default", "index"],
)
def test_loops_at_one_place_are_found(schema: dict[str, Any]) -> None:
    assert ref_cycle(schema)


@pytest.mark.parametrize(
    "schema",
    [
        # Taken or not by the instance (a branch that matched first, a subschema's first
        # error): checked, and left to the server at run time when one does recurse.
        {"anyOf": [{"type": "string"}, {"$ref": "#"}]},
        {
            "type": "object",
            "anyOf": [{"type": "object"}, {"$ref": "#"}],
            "properties": {"n": {"type": "integer"}},
        },
        {"not": {"$ref": "#"}},
        {"if": {"type": "object"}, "then": {"$ref": "#"}},
        {"dependentSchemas": {"k": {"oneOf": [{"$ref": "#"}]}}},
        # Keywords this draft does not apply.
        {"then": {"allOf": [{"$ref": "#"}]}},
        {
            "$schema": "http://json-schema.org/draft-07/schema#",
            "$ref": "#/definitions/a",
            "definitions": {"a": {}},
            "allOf": [{"$ref": "#"}],
        },
        {"x-self": {"allOf": [{"$ref": "#/x-self"}]}},
        {"$defs": {"a": {"$ref": "#/$defs/a"}}},
    ],
    ids=[
        "anyOf",
        "anyOf-object",
        "not",
        "then",
        "dependentSchemas",
        "then-alone",
        "draft7-sibling",
        "unknown-keyword",
        "unreached",
    ],
)
def test_loops_an_instance_may_not_take_or_no_validator_reaches_are_not_called_one(
    schema: dict[str, Any],
) -> None:
    assert not ref_cycle(schema)


@pytest.mark.parametrize(
    "schema",
    [
        # A tree: each step goes one level into the instance.
        {
            "$defs": {"node": {"type": "object", "properties": {"child": {"$ref": "#/$defs/node"}}}},
            "$ref": "#/$defs/node",
        },
        {"type": "array", "items": {"$ref": "#"}},
        # An $id below the root changes what "#" means there: not followed.
        {"$defs": {"a": {"$id": "https://example.com/a", "$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"},
        {"$ref": "#/$defs/missing"},
        {"$ref": "https://example.com/s.json"},
        {"$ref": "#anchor"},
        {"$ref": 5},
        # Pointers that name no array index: "²" is a digit to str.isdigit, not to int.
        {"allOf": [{"type": "object"}], "properties": {"x": {"$ref": "#/allOf/²"}}},
        {"allOf": [{"type": "object"}], "properties": {"x": {"$ref": "#/allOf/" + "9" * 5000}}},
        {"allOf": [{"type": "object"}], "properties": {"x": {"$ref": "#/allOf/-1"}}},
    ],
    ids=[
        "tree",
        "items",
        "nested-id",
        "missing",
        "remote",
        "anchor",
        "not-a-string",
        "superscript",
        "huge-index",
        "negative",
    ],
)
def test_what_is_no_loop_or_cannot_be_followed_is_not_called_one(schema: dict[str, Any]) -> None:
    assert not ref_cycle(schema)


_NAMES = st.sampled_from(["a", "b", "c"])
# Only the steps a validator always takes: anyOf, not and if stop at their first answer.
_NODE = st.fixed_dictionaries(
    {},
    optional={
        "$ref": _NAMES.map(lambda n: f"#/$defs/{n}"),
        "allOf": st.lists(_NAMES.map(lambda n: {"$ref": f"#/$defs/{n}"}), max_size=2),
        "properties": st.dictionaries(
            st.just("p"), _NAMES.map(lambda n: {"$ref": f"#/$defs/{n}"}), max_size=1
        ),
        "type": st.just("object"),
    },
)


@settings(max_examples=60, deadline=None)
@given(defs=st.fixed_dictionaries({"a": _NODE, "b": _NODE, "c": _NODE}))
def test_a_loop_found_is_one_jsonschema_runs_into(defs: dict[str, Any]) -> None:
    # Soundness against the real validator: whenever a loop is named, jsonschema recurses
    # without end on an instance that reaches every definition.
    schema = {"$defs": defs, "properties": {n: {"$ref": f"#/$defs/{n}"} for n in defs}}
    if not ref_cycle(schema):
        return
    deep: dict[str, Any] = {}
    for _ in range(6):
        deep = {"p": deep}
    with pytest.raises(BaseException, match=r"recursion|RecursionError") as info:
        list(Draft202012Validator(schema).iter_errors(dict.fromkeys(defs, deep)))
    assert isinstance(info.value, RecursionError) or recursion_panic(info.value), info.value


_BRANCH = _NAMES.map(lambda n: {"$ref": f"#/$defs/{n}"})
_ANY_NODE = st.fixed_dictionaries(
    {},
    optional={
        "$ref": _NAMES.map(lambda n: f"#/$defs/{n}"),
        "anyOf": st.lists(_BRANCH, min_size=1, max_size=2),
        "oneOf": st.lists(_BRANCH, min_size=1, max_size=2),
        "allOf": st.lists(_BRANCH, min_size=1, max_size=2),
        "not": _BRANCH,
        "properties": st.dictionaries(st.just("p"), _BRANCH, max_size=1),
        "items": _BRANCH,
        "type": st.sampled_from(["object", "array"]),
    },
)


@settings(max_examples=60, deadline=None)
@given(
    defs=st.fixed_dictionaries({"a": _ANY_NODE, "b": _ANY_NODE, "c": _ANY_NODE}),
    depth=st.sampled_from([1, 400]),
    lists=st.booleans(),
)
def test_no_schema_of_loops_and_no_nesting_gets_past_keens_validators(
    defs: dict[str, Any], depth: int, lists: bool
) -> None:
    # Whatever the loops and the nesting, each validator passes, refuses in its own terms,
    # or leaves the check to the server: nothing else gets out.
    schema = {"type": "object", "$defs": defs, "properties": {n: {"$ref": f"#/$defs/{n}"} for n in defs}}
    deep: Any = {}
    for _ in range(depth):
        deep = {"p": [deep] if lists else deep}
    arguments = dict.fromkeys(defs, deep)
    with contextlib.suppress(InvalidArguments):
        ArgumentValidator("s").validate(Tool(server="s", name="t", input_schema=schema), arguments)
    with contextlib.suppress(RuntimeError):
        StructuredContentValidator("s").validate("t", schema, arguments)


# Found by a fuzzer: a loop through anyOf that, met at run time, reaches Python's recursion
# limit inside referencing's Rust registry at one stack depth in four, where pyo3 raises
# PanicException. It derives from BaseException, so it passed every `except Exception` up to
# the event loop (keen chat's turn, keen serve's request). ref_cycle leaves a loop through
# anyOf to the run, as it leaves one written with $anchor: the validators meet it and must
# still answer.
_PANICS = {
    "type": "object",
    "$defs": {
        "a": {"not": {"$ref": "#/$defs/b"}, "items": {"$ref": "#/$defs/b"}},
        "b": {"type": "object"},
        "c": {
            "$ref": "#/$defs/a",
            "anyOf": [{"$ref": "#/$defs/c"}],
            "properties": {"p": {"$ref": "#/$defs/c"}},
            "type": "object",
        },
    },
    "properties": {"a": {"$ref": "#/$defs/a"}, "b": {"$ref": "#/$defs/b"}, "c": {"$ref": "#/$defs/c"}},
}
_PANICS_BY_ANCHOR = json.loads(json.dumps(_PANICS).replace('"#/$defs/', '"#x'))
for _name in ("a", "b", "c"):
    _PANICS_BY_ANCHOR["$defs"][_name]["$anchor"] = f"x{_name}"


def _at_depth(depth: int, run: Callable[[], None]) -> None:
    if depth == 0:
        run()
    else:
        _at_depth(depth - 1, run)


@pytest.mark.parametrize("schema", [_PANICS, _PANICS_BY_ANCHOR], ids=["pointers", "anchors"])
def test_a_loop_met_at_the_recursion_limit_in_rust_is_answered(
    schema: dict[str, Any], caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert not ref_cycle(schema)  # through anyOf: met at run time
    # Running into the loop takes thousands of frames: on a loaded machine the 0.5 s budget
    # ran out first and the check was refused as too slow. This test is about the limit.
    monkeypatch.setattr(validation, "bounded", functools.partial(_keywords.bounded, 600.0))
    tool = Tool(server="s", name="t", input_schema=schema)
    for depth in range(8):  # the limit falls inside Rust at one depth in four
        _at_depth(depth, lambda: ArgumentValidator("s").validate(tool, {"c": {}}))
        with pytest.raises(RuntimeError, match=r"a \$ref cycle in it never reaches a type"):
            _at_depth(depth, lambda: StructuredContentValidator("s").validate("t", schema, {"c": {}}))
    assert "the server will validate" in caplog.text


def test_a_pointer_that_names_no_index_leaves_the_check_to_the_server(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # ref_cycle's int("²") raised ValueError out of Gateway.call (no KeenError, no audit) and
    # out of keen chat's form, where the old code logged it and let the call through.
    schema = {"type": "object", "allOf": [{"type": "object"}], "properties": {"x": {"$ref": "#/allOf/²"}}}
    ArgumentValidator("s").validate(Tool(server="s", name="t", input_schema=schema), {"x": 1})
    assert "the server will validate" in caplog.text
    with pytest.raises(SchemaNotChecked, match="cannot be used"):
        checked_errors(schema, {"x": 1})


def test_a_schema_nested_past_the_metaschema_checks_limit_is_not_checked(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # check_schema itself recursed: a RecursionError out of the form's question.
    deep: dict[str, Any] = {"type": "string"}
    for _ in range(400):
        deep = {"not": deep}
    schema = {"type": "object", "properties": {"a": deep}}
    ArgumentValidator("s").validate(Tool(server="s", name="t", input_schema=schema), {"a": "x"})
    assert "nests too deeply" in caplog.text
    with pytest.raises(SchemaNotChecked, match="nests too deeply"):
        checked_errors(schema, {"a": "x"})
    with pytest.raises(RuntimeError, match="outputSchema nests too deeply"):
        StructuredContentValidator("s").validate("t", schema, {"a": "x"})
