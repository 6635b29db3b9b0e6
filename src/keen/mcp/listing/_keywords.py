"""JSON Schema keywords whose jsonschema implementation can hang Keen, bounded.

An ``inputSchema`` comes from the server, the arguments from a model or a remote MCP client.
jsonschema checks them on the calling thread (``keen serve``'s and ``keen chat``'s event
loop), and two of its keywords have no bound a client cannot push past:

- ``pattern``, ``patternProperties`` and ``additionalProperties`` (which skips the names
  ``patternProperties`` matches) search with :func:`re.search`, whose backtracking is
  exponential for patterns such as ``(a|a)+$`` on ``"aaaa…!"``; :mod:`re` holds the GIL and
  cannot be interrupted. Here they run on the ``regex`` module, whose ``timeout`` bounds a
  match: one validation shares :data:`PATTERN_BUDGET` seconds, and when a search runs out of
  it :class:`PatternTooSlow` ends the validation and the call is refused (nothing is sent).
  ``unevaluatedProperties`` also searches ``patternProperties`` (deep inside jsonschema); a
  schema that uses both is not checked locally (:func:`uses_unbounded_search`), the server
  validates, as for any schema Keen cannot check.
- ``uniqueItems`` compares every pair of items when they cannot be sorted (objects, or
  numbers mixed with strings): 10,000 small objects took 88 s. Here each item becomes a
  hashable key with JSON's equality (``1 == 1.0``, ``true != 1``, object key order does not
  count), one set, linear time.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from contextvars import ContextVar
from typing import Any

import regex
from jsonschema import validators
from jsonschema.exceptions import ValidationError

__all__ = ["PATTERN_BUDGET", "PatternTooSlow", "bounded", "safe_validator_class", "uses_unbounded_search"]

PATTERN_BUDGET = 0.5
"""Seconds all regex searches of one validation may take together."""

_deadline: ContextVar[float | None] = ContextVar("keen_pattern_deadline", default=None)
_classes: dict[type[Any], type[Any]] = {}


class PatternTooSlow(Exception):
    """A schema regex did not finish on a value within the validation's budget."""

    def __init__(self, pattern: str, value: str) -> None:
        super().__init__(pattern)
        self.pattern = pattern
        self.value = value


@contextlib.contextmanager
def bounded(seconds: float = PATTERN_BUDGET) -> Iterator[None]:
    """Give the regex searches inside this block ``seconds`` in total."""
    token = _deadline.set(time.monotonic() + seconds)
    try:
        yield
    finally:
        _deadline.reset(token)


def _search(pattern: str, text: str) -> bool:
    deadline = _deadline.get()
    left = PATTERN_BUDGET if deadline is None else deadline - time.monotonic()
    try:
        # The regex module's default (VERSION0) is re-compatible, which jsonschema uses.
        return regex.search(pattern, text, timeout=max(left, 0.001)) is not None
    except TimeoutError:
        raise PatternTooSlow(pattern, text) from None


def _pattern(validator: Any, patrn: str, instance: Any, schema: Any) -> Iterator[ValidationError]:
    if validator.is_type(instance, "string") and not _search(patrn, instance):
        yield ValidationError(f"{instance!r} does not match {patrn!r}")


def _pattern_properties(
    validator: Any, pattern_properties: dict[str, Any], instance: Any, schema: Any
) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in pattern_properties.items():
        for key, value in instance.items():
            if _search(pattern, key):
                yield from validator.descend(value, subschema, path=key, schema_path=pattern)


def _additional_properties(validator: Any, ap: Any, instance: Any, schema: Any) -> Iterator[ValidationError]:
    # jsonschema's own additionalProperties, with its name search through _search.
    if not validator.is_type(instance, "object"):
        return
    properties = schema.get("properties", {})
    patterns = "|".join(schema.get("patternProperties", {}))
    extras = {k for k in instance if k not in properties and not (patterns and _search(patterns, k))}
    if validator.is_type(ap, "object"):
        for extra in extras:
            yield from validator.descend(instance[extra], ap, path=extra)
    elif not ap and extras:
        names = ", ".join(repr(e) for e in sorted(extras))
        if "patternProperties" in schema:
            verb = "does" if len(extras) == 1 else "do"
            regexes = ", ".join(repr(p) for p in sorted(schema["patternProperties"]))
            yield ValidationError(f"{names} {verb} not match any of the regexes: {regexes}")
        else:
            verb = "was" if len(extras) == 1 else "were"
            yield ValidationError(f"Additional properties are not allowed ({names} {verb} unexpected)")


def _json_key(value: Any) -> Any:
    """A hashable stand-in for a JSON value, equal exactly when the values are JSON-equal."""
    if isinstance(value, bool):
        return ("bool", value)  # before numbers: True == 1 in Python, not in JSON
    if isinstance(value, int | float):
        return ("number", value)  # 1 and 1.0 hash and compare equal, as JSON numbers
    if isinstance(value, list | tuple):
        return ("array", tuple(_json_key(v) for v in value))  # type: ignore[misc]
    if isinstance(value, dict):
        return ("object", frozenset((k, _json_key(v)) for k, v in value.items()))  # type: ignore[misc]
    return (type(value).__name__, value)


def _unique_items(validator: Any, unique: Any, instance: Any, schema: Any) -> Iterator[ValidationError]:
    if not unique or not validator.is_type(instance, "array"):
        return
    seen: set[Any] = set()
    for item in instance:
        key = _json_key(item)
        if key in seen:
            yield ValidationError(f"{instance!r} has non-unique elements")
            return
        seen.add(key)


def safe_validator_class(cls: type[Any]) -> type[Any]:
    """``cls`` (a jsonschema validator class) with the bounded keywords; made once per class."""
    if cls not in _classes:
        _classes[cls] = validators.extend(
            cls,
            {
                "pattern": _pattern,
                "patternProperties": _pattern_properties,
                "additionalProperties": _additional_properties,
                "uniqueItems": _unique_items,
            },
        )
    return _classes[cls]


def uses_unbounded_search(schema: Any) -> bool:
    """True when ``schema`` has both ``unevaluatedProperties`` and ``patternProperties``
    somewhere: jsonschema would then search property names with :mod:`re`, unbounded."""
    seen: set[str] = set()
    stack = [schema]
    while stack and len(seen) < 2:
        node = stack.pop()
        if isinstance(node, dict):
            seen.update(k for k in ("unevaluatedProperties", "patternProperties") if k in node)
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return len(seen) == 2
