"""The elicitation form builder: every primitive the MCP spec allows, defaults, bad input."""

from __future__ import annotations

import json
import logging
import re
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from helpers.hostile import counting_listener
from keen.agent.form import MISSING, FormError, check_content, form_fields

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "title": "Your name", "default": "Ada", "minLength": 2},
        "email": {"type": "string", "format": "email", "description": "Where to  write"},
        "party": {"type": "integer", "minimum": 1, "maximum": 12, "default": 2},
        "budget": {"type": "number", "minimum": 0},
        "outdoor": {"type": "boolean", "default": False},
        "time": {"type": "string", "enum": ["18:00", "20:00"], "default": "20:00"},
        "legacy": {"type": "string", "enum": ["s", "m"], "enumNames": ["Small", "Medium"]},
        "room": {
            "type": "string",
            "oneOf": [{"const": "a", "title": "Garden"}, {"const": "b", "title": "Hall"}],
        },
        "extras": {
            "type": "array",
            "items": {"anyOf": [{"const": "wine", "title": "Wine"}, {"const": "cake", "title": "Cake"}]},
            "default": ["cake"],
        },
    },
    "required": ["name", "party"],
}


def by_name() -> dict[str, Any]:
    return {f.name: f for f in form_fields(SCHEMA)}


def test_fields_follow_the_schema_order_kinds_and_defaults() -> None:
    fields = form_fields(SCHEMA)
    assert [f.name for f in fields] == list(SCHEMA["properties"])
    kinds = {f.name: f.kind for f in fields}
    assert kinds == {
        "name": "string", "email": "string", "party": "integer", "budget": "number", "outdoor": "boolean",
        "time": "choice", "legacy": "choice", "room": "choice", "extras": "choices",
    }  # fmt: skip
    f = by_name()
    assert f["name"].title == "Your name" and f["name"].required and f["name"].initial_text() == "Ada"
    assert f["email"].description == "Where to write" and f["email"].initial_text() == ""
    assert f["party"].initial_text() == "2" and f["outdoor"].initial_text() == "no"
    assert f["extras"].initial_text() == "cake"
    assert [o.label for o in f["legacy"].options] == ["Small", "Medium"]
    assert [o.label for o in f["room"].options] == ["Garden", "Hall"]
    assert (
        "1) Garden" in f["room"].hint() and "<= 12" in f["party"].hint() and f["outdoor"].hint() == "yes/no"
    )


def test_parse_reads_each_kind_back_into_json() -> None:
    f = by_name()
    assert f["name"].parse(" Grace ") == "Grace"
    assert f["party"].parse("4") == 4
    assert f["budget"].parse("12.5") == 12.5 and f["budget"].parse("3") == 3
    assert f["outdoor"].parse("YES") is True and f["outdoor"].parse("n") is False
    assert f["time"].parse("2") == "20:00" and f["time"].parse("18:00") == "18:00"
    assert f["legacy"].parse("medium") == "m"
    assert f["room"].parse("hall") == "b"
    assert f["extras"].parse("wine, 2, wine") == ["wine", "cake"]
    assert f["email"].parse("") is MISSING


@pytest.mark.parametrize(
    ("name", "text", "says"),
    [
        ("name", "", "is required"),
        ("name", "A", "too short"),
        ("party", "two", "whole number"),
        ("party", "40", "maximum"),
        ("budget", "nan", "finite"),
        ("budget", "-1", "minimum"),
        ("outdoor", "maybe", "yes or no"),
        ("time", "3", "pick one of 18:00, 20:00"),
        ("email", "not-an-address", "email"),
    ],
)
def test_bad_text_is_refused_with_what_to_type(name: str, text: str, says: str) -> None:
    with pytest.raises(ValueError, match=says):
        by_name()[name].parse(text)


@pytest.mark.parametrize(
    ("schema", "says"),
    [
        ({"type": "array"}, "the requested schema must be an object"),
        (
            {"type": "object", "properties": {"x": {"type": "object"}}},
            "property 'x' has type 'object'; a form takes string, number, integer, boolean or enum",
        ),
        (
            {"type": "object", "properties": {"x": {"type": "array", "items": {"type": "string"}}}},
            "property 'x': an array must list its choices (items.enum or items.anyOf)",
        ),
        ({"type": "object", "properties": {"x": 3}}, "property 'x' is not a schema object"),
    ],
)
def test_schemas_that_are_not_flat_forms_are_refused(schema: dict[str, Any], says: str) -> None:
    with pytest.raises(FormError, match=re.escape(says)):
        form_fields(schema)


def test_check_content_names_the_field_at_fault() -> None:
    assert check_content(SCHEMA, {"name": "Ada", "party": 2}) is None
    assert check_content(SCHEMA, {"name": "Ada"}) == "'party' is a required property"
    assert (check_content(SCHEMA, {"name": "Ada", "party": 0}) or "").startswith("party:")


FORM_SECRET = "form-file-content-5b2a9e"


def _in_time(run: Callable[[], Any]) -> Any:
    """``run()`` on a thread given 20 s: a fetch from a listener that never answers would hang
    the REPL's event loop (there is no timeout on jsonschema's retrieval)."""
    answer: list[Any] = []
    thread = threading.Thread(target=lambda: answer.append(run()), daemon=True)
    thread.start()
    thread.join(20)
    assert not thread.is_alive(), "the check is still running: it fetched or recursed"
    return answer[0]


def test_a_servers_form_schema_never_makes_keen_fetch_or_read(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # The requested schema is the server's: a $ref to a local file put its content into
    # the message shown ("a: 'form-file-content-...' was expected"), and a $ref to a URL was
    # fetched from the REPL's event loop, with no timeout. Now neither is followed; the
    # server checks what it gets.
    local = tmp_path / "defs.json"
    local.write_text(json.dumps({"$defs": {"x": {"const": FORM_SECRET}}}))
    caplog.set_level(logging.WARNING)
    with counting_listener() as listener:
        by_file = {
            "type": "object",
            "properties": {"a": {"type": "string", "$ref": f"{local.as_uri()}#/$defs/x"}},
        }
        by_url = {
            "type": "object",
            "properties": {"a": {"type": "string"}},
            "allOf": [{"$ref": listener.url("/form.json")}],
        }
        (field,) = form_fields(by_file)
        assert _in_time(lambda: field.parse("hello")) == "hello"
        assert _in_time(lambda: check_content(by_file, {"a": "hello"})) is None
        assert _in_time(lambda: check_content(by_url, {"a": "hello"})) is None
    assert listener.connections == 0
    assert FORM_SECRET not in caplog.text
    assert "the server will check it" in caplog.text


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "object", "properties": {"a": {"type": "string"}}, "allOf": [{"$ref": "#"}]},
        {"type": "object", "properties": {"a": {"type": "string"}}, "anyOf": [{"$ref": "#"}]},
    ],
    ids=["allOf", "anyOf"],
)
def test_a_form_schema_that_loops_is_left_to_the_server(schema: dict[str, Any]) -> None:
    # A RecursionError got out of check_content (and out of the REPL's question).
    (field,) = form_fields(schema)
    assert field.parse("x") == "x"
    assert _in_time(lambda: check_content(schema, {"a": "x"})) is None


def test_a_form_pattern_that_backtracks_is_bounded() -> None:
    # re holds the GIL for as long as "^(a|a)+$" backtracks on "aaaa…!"; the check has the
    # tool schemas' time budget instead, and the answer goes to the server unchecked.
    schema = {"type": "object", "properties": {"a": {"type": "string", "pattern": "^(a|a)+$"}}}
    (field,) = form_fields(schema)
    text = "a" * 40 + "!"
    assert _in_time(lambda: field.parse(text)) == text
    assert _in_time(lambda: check_content(schema, {"a": text})) is None
    assert check_content(schema, {"a": "aaa"}) is None
    assert check_content(schema, {"a": "b"}) == "a: 'b' does not match '^(a|a)+$'"
