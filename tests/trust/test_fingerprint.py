"""Tool fingerprints: RFC 8785 canonical JSON checked against the RFC's own examples, and
what a fingerprint does and does not depend on."""

from __future__ import annotations

import hashlib
import struct

import pytest

from keen.mcp.types import Tool
from keen.trust.fingerprint import (
    body_fingerprint,
    canonical_json,
    definition,
    fingerprint,
    pretty_json,
)

# RFC 8785 Appendix B: IEEE 754 bit patterns and their canonical number text.
APPENDIX_B = [
    ("0000000000000000", "0"),
    ("8000000000000000", "0"),
    ("0000000000000001", "5e-324"),
    ("8000000000000001", "-5e-324"),
    ("7fefffffffffffff", "1.7976931348623157e+308"),
    ("ffefffffffffffff", "-1.7976931348623157e+308"),
    ("4340000000000000", "9007199254740992"),
    ("c340000000000000", "-9007199254740992"),
    ("4430000000000000", "295147905179352830000"),
    ("44b52d02c7e14af5", "9.999999999999997e+22"),
    ("44b52d02c7e14af6", "1e+23"),
    ("44b52d02c7e14af7", "1.0000000000000001e+23"),
    ("444b1ae4d6e2ef4e", "999999999999999700000"),
    ("444b1ae4d6e2ef4f", "999999999999999900000"),
    ("444b1ae4d6e2ef50", "1e+21"),
    ("3eb0c6f7a0b5ed8c", "9.999999999999997e-7"),
    ("3eb0c6f7a0b5ed8d", "0.000001"),
    ("41b3de4355555553", "333333333.3333332"),
    ("41b3de4355555554", "333333333.33333325"),
    ("41b3de4355555555", "333333333.3333333"),
    ("41b3de4355555556", "333333333.3333334"),
    ("41b3de4355555557", "333333333.33333343"),
    ("becbf647612f3696", "-0.0000033333333333333333"),
    ("43143ff3c1cb0959", "1424953923781206.2"),
]


@pytest.mark.parametrize(("bits", "expected"), APPENDIX_B)
def test_numbers_match_rfc8785_appendix_b(bits: str, expected: str) -> None:
    value = struct.unpack(">d", bytes.fromhex(bits))[0]
    assert canonical_json(value).decode() == expected


def test_rfc8785_section_3_2_2_example() -> None:
    data = {
        "numbers": [333333333.33333329, 1e30, 4.50, 2e-3, 0.000000000000000000000000001],
        "string": "\u20ac$\u000f\u000aA'\u0042\u0022\u005c\\\"/",
        "literals": [None, True, False],
    }
    expected = (
        '{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],'
        '"string":"\u20ac$\\u000f\\nA\'B\\"\\\\\\\\\\"/"}'
    )
    assert canonical_json(data).decode("utf-8") == expected


def test_rfc8785_section_3_2_3_sorts_keys_by_utf16_code_units() -> None:
    data = {
        "\u20ac": "Euro Sign",
        "\r": "Carriage Return",
        "\ufb33": "Hebrew Letter Dalet With Dagesh",
        "1": "One",
        "\U0001f600": "Emoji: Grinning Face",
        "\u0080": "Control",
        "\u00f6": "Latin Small Letter O With Diaeresis",
    }
    keys = list(__import__("json").loads(canonical_json(data)))
    assert keys == ["\r", "1", "\u0080", "\u00f6", "\u20ac", "\U0001f600", "\ufb33"]


def test_numbers_outside_the_double_domain_still_fingerprint() -> None:
    # Exact, not the double a parser would read: neighbours past 2**53 stay apart.
    assert canonical_json(2**63 - 1) == b'"int:9223372036854775807"'
    assert canonical_json(2**53 + 1) != canonical_json(2**53)
    assert canonical_json(1e20) == b"100000000000000000000"  # a double: RFC 8785 as written
    assert canonical_json("int:5") == b'"str:int:5"'  # no string stands for a number
    assert canonical_json(10**400).startswith(b'"int:1000')
    assert canonical_json(float("nan")) == b'"float:nan"'


def _tool(**changes: object) -> Tool:
    base: dict[str, object] = {
        "server": "s",
        "name": "search",
        "description": "Search the docs.",
        "input_schema": {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]},
        "annotations": {"readOnlyHint": True},
    }
    base.update(changes)
    return Tool(**base)  # type: ignore[arg-type]


def test_fingerprint_is_sha256_of_the_canonical_definition() -> None:
    tool = _tool()
    expected = hashlib.sha256(canonical_json(definition(tool))).hexdigest()
    assert fingerprint(tool) == f"sha256:{expected}"
    # Key order and the server the tool came from do not matter; content does.
    reordered = _tool(
        input_schema={"required": ["q"], "properties": {"q": {"type": "string"}}, "type": "object"}
    )
    assert fingerprint(reordered) == fingerprint(tool) == fingerprint(_tool(server="other"))
    for change in (
        {"description": "Search the docs!"},
        {"title": "Search"},
        {"annotations": {"readOnlyHint": False}},
        {"output_schema": {"type": "object"}},
        {"input_schema": {"type": "object"}},
        {"name": "find"},
    ):
        assert fingerprint(_tool(**change)) != fingerprint(tool), change


def test_body_fingerprint_ignores_only_the_name() -> None:
    assert body_fingerprint(_tool(name="find")) == body_fingerprint(_tool())
    assert body_fingerprint(_tool(description="x")) != body_fingerprint(_tool())


def test_pretty_json_uses_canonical_order() -> None:
    text = pretty_json({"b": 1, "a": {"d": 2, "c": 3}})
    assert text.splitlines() == ["{", '  "a": {', '    "c": 3,', '    "d": 2', "  },", '  "b": 1', "}"]
