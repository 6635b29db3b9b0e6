"""JSON Schema validation that cannot hang Keen: every keyword runs under one time budget.

An ``inputSchema`` comes from the server, the arguments from a model or a remote MCP client.
jsonschema checks them on the calling thread (``keen serve``'s and ``keen chat``'s event
loop), so a validation gets :data:`VALIDATION_BUDGET` seconds in all (:func:`bounded`):

- Every keyword of the validator class checks the deadline before it runs, and past it
  :class:`ValidationTooSlow` ends the validation (the call, or the result, is refused). A
  schema's work is not bounded by its size: ``$defs`` where each ``dN`` is ``{"allOf":
  [{"$ref": "#/$defs/dN+1"}, {"$ref": "#/$defs/dN+1"}]}`` visits ``2^N`` subschemas, so
  thirty such lines would keep the event loop for hours.

Two keywords also run single steps that no keyword boundary interrupts:

- ``pattern``, ``patternProperties`` and ``additionalProperties`` (which skips the names
  ``patternProperties`` matches) search with :func:`re.search`, whose backtracking is
  exponential for patterns such as ``(a|a)+$`` on ``"aaaa…!"``; :mod:`re` holds the GIL and
  cannot be interrupted. Here they run on the ``regex`` module, whose ``timeout`` bounds a
  match: a search gets what is left of the validation's budget, and when it runs out
  :class:`PatternTooSlow` ends the validation and the call is refused (nothing is sent).
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
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from typing import Any

import regex
from jsonschema import validators
from jsonschema.exceptions import ValidationError

__all__ = [
    "VALIDATION_BUDGET",
    "PatternTooSlow",
    "ValidationTooSlow",
    "bounded",
    "safe_validator_class",
    "uses_unbounded_search",
]

VALIDATION_BUDGET = 0.5
"""Seconds one validation (every keyword, regex searches included) may take."""

_deadline: ContextVar[float | None] = ContextVar("keen_validation_deadline", default=None)
_classes: dict[type[Any], type[Any]] = {}


class ValidationTooSlow(Exception):
    """A validation did not finish within its budget (:data:`VALIDATION_BUDGET`)."""


class PatternTooSlow(ValidationTooSlow):
    """A schema regex did not finish on a value within the validation's budget."""

    def __init__(self, pattern: str, value: str) -> None:
        super().__init__(pattern)
        self.pattern = pattern
        self.value = value


@contextlib.contextmanager
def bounded(seconds: float = VALIDATION_BUDGET) -> Iterator[None]:
    """Give the validation inside this block ``seconds`` in total."""
    token = _deadline.set(time.monotonic() + seconds)
    try:
        yield
    finally:
        _deadline.reset(token)


def _timed(keyword: Callable[..., Any]) -> Callable[..., Any]:
    """``keyword`` (a jsonschema keyword function) refusing to start past the deadline.

    jsonschema calls a keyword each time it meets it in a subschema it descends into, so
    the checks follow the work done, not the schema's size (a ``$ref`` graph can reach one
    subschema along exponentially many paths).
    """

    def checked(validator: Any, value: Any, instance: Any, schema: Any) -> Any:
        deadline = _deadline.get()
        if deadline is not None and time.monotonic() > deadline:
            raise ValidationTooSlow
        return keyword(validator, value, instance, schema)

    return checked


def _search(pattern: str, text: str) -> bool:
    deadline = _deadline.get()
    left = VALIDATION_BUDGET if deadline is None else deadline - time.monotonic()
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
    """``cls`` (a jsonschema validator class) with the bounded keywords, each of its keywords
    checking the validation's deadline (:func:`bounded`); made once per class."""
    if cls not in _classes:
        keywords: dict[str, Callable[..., Any]] = dict(cls.VALIDATORS)
        keywords.update(
            pattern=_pattern,
            patternProperties=_pattern_properties,
            additionalProperties=_additional_properties,
            uniqueItems=_unique_items,
        )
        _classes[cls] = validators.extend(cls, {name: _timed(fn) for name, fn in keywords.items()})
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
