"""keen._json: one reusable encoder gives json.dumps's text, with or without the C accelerator."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from keen._json import encoder

VALUES: list[Any] = [
    {"seq": 1, "text": 'é "quoted"\n\ttab \u2028', "n": None, "ok": True, "no": False},
    [1, -2, 3.5, 1e300, -0.0, [], {}, [[{"deep": ["x"]}]]],
    "plain text",
    42,
    {"nan": math.nan, "inf": math.inf},
]


@pytest.mark.parametrize("accelerated", [True, False])
def test_the_text_is_json_dumps_text(accelerated: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    if not accelerated:
        monkeypatch.setattr(json.encoder, "c_make_encoder", None)
    encode = encoder(default=str)
    for value in VALUES:
        assert encode(value) == json.dumps(value, ensure_ascii=False, default=str)
    assert encode({"path": Path("/x")}) == '{"path": "/x"}'  # default: what JSON has no type for


def test_without_default_a_value_json_has_no_type_for_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="is not JSON serializable"):
        encoder()({"x": object()})


@pytest.mark.parametrize("accelerated", [True, False])
def test_quote_makes_the_text_of_every_string_keys_and_defaults_included(
    accelerated: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not accelerated:
        monkeypatch.setattr(json.encoder, "c_make_encoder", None)

    def upper(text: str) -> str:
        return json.dumps(text.upper(), ensure_ascii=False)

    encode = encoder(default=str, quote=upper)
    value = {"key": ["é\n", {"deep": "x"}, 1, None, True], 2: Path("/p"), False: 1.5}
    assert encode(value) == '{"KEY": ["É\\n", {"DEEP": "X"}, 1, null, true], "2": "/P", "FALSE": 1.5}'
