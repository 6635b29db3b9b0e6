"""JSON text of a value with one reusable encoder: what every call's event lines and result
shaping encode, several times per call.

``json.JSONEncoder.encode`` builds a new C encoder (and a closure) for every value it
encodes; :func:`encoder` builds it once and reuses it, for the same text:
``json.dumps(value, ensure_ascii=False, default=default, check_circular=False)``. Without
the C accelerator (another Python implementation), or if its signature ever differs from
the one read here (CPython 3.11 to 3.13, ``Lib/json/encoder.py``), it falls back to the
standard encoder, so the text is the same either way.
"""

from __future__ import annotations

import json
import json.encoder
from collections.abc import Callable
from typing import Any

__all__ = ["encoder"]

_SAMPLE: Any = {"a": [1, -2.5, None, True, False, 'é\n"q"'], "b": {"c": ""}}


def encoder(
    default: Callable[[Any], Any] | None = None, *, quote: Callable[[str], str] | None = None
) -> Callable[[Any], str]:
    """A function giving the JSON text of a value (``ensure_ascii=False``, the standard
    separators, no check for cycles: a cyclic value raises ``RecursionError``).

    Args:
        default: called for a value JSON has no type for (``None``: ``TypeError``); a
            string it returns passes ``quote`` too.
        quote: the JSON text of each string, dict keys included (its quotes too: e.g.
            ``json.encoder.encode_basestring`` of the string changed); ``None``: the string
            as it is.
    """
    fallback = json.JSONEncoder(ensure_ascii=False, default=default, check_circular=False)
    make = getattr(json.encoder, "c_make_encoder", None)
    plain = _python(fallback, default, quote)
    if make is None:
        return plain
    try:
        join = "".join

        def made(strings: Callable[[str], str]) -> Callable[[Any], str]:
            chunks = make(
                None,  # markers: no check for cycles
                fallback.default,
                strings,
                None,  # indent
                ": ",
                ", ",
                False,  # sort_keys
                False,  # skipkeys
                True,  # allow_nan
            )

            def encode(value: Any) -> str:
                return join(chunks(value, 0))

            return encode

        if made(json.encoder.encode_basestring)(_SAMPLE) != fallback.encode(_SAMPLE):  # ensure_ascii=False
            return plain
    except TypeError:
        return plain
    return made(quote or json.encoder.encode_basestring)


def _python(
    fallback: json.JSONEncoder, default: Callable[[Any], Any] | None, quote: Callable[[str], str] | None
) -> Callable[[Any], str]:
    """:func:`encoder` without the C encoder: the standard one, on a copy whose strings are
    what ``quote`` makes of them."""
    if quote is None:
        return fallback.encode

    def text(value: str) -> str:
        return json.loads(quote(value))

    def quoted(value: Any) -> Any:
        if isinstance(value, str):
            return text(value)
        if isinstance(value, dict):
            return {text(k if isinstance(k, str) else json.dumps(k)): quoted(v) for k, v in value.items()}  # pyright: ignore[reportUnknownVariableType, reportUnknownArgumentType]
        if isinstance(value, list | tuple):
            return [quoted(v) for v in value]  # pyright: ignore[reportUnknownVariableType]
        return value

    def defaulted(value: Any) -> Any:
        if default is None:
            raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")
        return quoted(default(value))

    standard = json.JSONEncoder(ensure_ascii=False, default=defaulted, check_circular=False)

    def encode(value: Any) -> str:
        return standard.encode(quoted(value))

    return encode
