"""The frontmatter scalars of a generated SKILL.md: the answer known without PyYAML is the
one found by loading each candidate back (``keen.mcpskills._render``)."""

from __future__ import annotations

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from keen.mcpskills._render import _checked_scalar, _known_scalar, _yaml_scalar

# Heavy in what YAML reads specially: indicators, quotes, escapes, spaces, bool words.
_TRICKY = st.text(
    alphabet=st.sampled_from(list("aAyYnNoOfFtTlLeEsSuU0129 :#-?,[]{}&*!|>'\"%@`\\/._;()+=~<\t")),
    max_size=12,
)
_WORDS = ["yes", "No", "ON", "off", "y", "N", "true", "False", "null", "NULL", "~", "<<", "=", "1:20", "0x1f"]


# Twenty distinct values to an example: Hypothesis's own work per example (choosing a new
# draw, mutating the last ones) was nine tenths of this test's CPU with one value each.
# Counted once: 300 such examples drew about 3,300 distinct values, 580 of them decided
# without PyYAML, where 3,000 examples of one drew 2,950 and 530.
@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.one_of(_TRICKY, st.text(max_size=12), st.sampled_from(_WORDS)),
        min_size=20,
        max_size=20,
        unique=True,
    )
)
def test_known_answer_is_the_checked_one(values: list[str]) -> None:
    for value in values:
        known = _known_scalar(value)
        if known is None:
            continue
        assert known == _checked_scalar(value), value
        assert yaml.safe_load(f"k: {known}") == {"k": value}, value


@pytest.mark.parametrize(
    ("value", "written"),
    [
        ("mcp:s001", "mcp:s001"),
        ("Return the text unchanged. Tool: echo.", '"Return the text unchanged. Tool: echo."'),
        ("yes", '"yes"'),
        ("a #b", '"a #b"'),
        ("ends with a colon:", '"ends with a colon:"'),
        ("Café menus", "Café menus"),
    ],
)
def test_scalars_as_written(value: str, written: str) -> None:
    assert _yaml_scalar(value) == written
    assert yaml.safe_load(f"k: {written}") == {"k": value}


def test_a_value_with_a_line_break_is_written_escaped() -> None:
    # Not printable ASCII: decided by loading the candidates back.
    assert _known_scalar("two\nlines") is None
    written = _yaml_scalar("two\nlines")
    assert "\n" not in written and yaml.safe_load(f"k: {written}") == {"k": "two\nlines"}
