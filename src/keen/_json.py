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


def encoder(default: Callable[[Any], Any] | None = None) -> Callable[[Any], str]:
    """A function giving the JSON text of a value (``ensure_ascii=False``, the standard
    separators, no check for cycles: a cyclic value raises ``RecursionError``).

    Args:
        default: called for a value JSON has no type for (``None``: ``TypeError``).
    """
    fallback = json.JSONEncoder(ensure_ascii=False, default=default, check_circular=False)
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:
        return fallback.encode
    try:
        chunks = make(
            None,  # markers: no check for cycles
            fallback.default,
            json.encoder.encode_basestring,  # ensure_ascii=False
            None,  # indent
            ": ",
            ", ",
            False,  # sort_keys
            False,  # skipkeys
            True,  # allow_nan
        )
        join = "".join

        def encode(value: Any) -> str:
            return join(chunks(value, 0))

        if encode(_SAMPLE) != fallback.encode(_SAMPLE):
            return fallback.encode
    except TypeError:
        return fallback.encode
    return encode
