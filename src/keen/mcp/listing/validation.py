"""Tool-argument validation against a tool's cached ``inputSchema`` (JSON Schema Draft 2020-12 unless ``$schema`` says otherwise).

jsonschema picks the draft from ``$schema`` and defaults to Draft 2020-12 (the MCP
2025-11-25 default dialect). Compiling a validator costs far more than running it,
so one is built per tool and reused until the tool list changes.

Decision: a schema that is itself invalid, or uses a ``$ref``
that cannot be resolved, or a ``$ref`` cycle that never reaches a type (jsonschema would
recurse without end), does not block the call: Keen logs a warning and lets the server
validate. Invalid *arguments* against a valid schema fail closed.

A schema is untrusted input, so it never makes Keen fetch or read anything: every
validator gets an empty ``referencing.Registry`` with no retrieval. References inside
the schema (``#/$defs/x``) and the bundled draft metaschemas resolve; anything else
(``http://...``, ``file:///...``, a relative URI against ``$id``) is unresolvable and
takes the "server will validate" path. jsonschema's deprecated automatic retrieval,
which the default (no ``registry``) still runs, would otherwise GET a URL from the event
loop without a timeout or read a local file into the error message.

A schema's regular expressions are untrusted too: they run with a time budget
(:mod:`keen.mcp.listing._keywords`), and arguments that exhaust it are refused, so a pattern
with exponential backtracking cannot freeze the event loop; ``uniqueItems`` is checked
in linear time.
"""

from __future__ import annotations

import logging
from typing import Any

import regex
from jsonschema import Draft202012Validator, validators
from jsonschema.exceptions import SchemaError
from jsonschema.protocols import Validator
from referencing import Registry
from referencing.exceptions import Unresolvable

from keen._text import shorten
from keen.errors import InvalidArguments
from keen.mcp.listing._keywords import (
    PATTERN_BUDGET,
    PatternTooSlow,
    bounded,
    safe_validator_class,
    uses_unbounded_search,
)
from keen.mcp.types import Tool

__all__ = ["ArgumentValidator"]

logger = logging.getLogger(__name__)

_MAX_ERRORS = 5
_SHALLOW = 100
"""Arguments nested less deeply than this cannot exhaust the recursion limit by themselves."""
_NO_RETRIEVAL: Registry[Any] = Registry()
"""Holds nothing and retrieves nothing: only a schema's own resources (and the drafts'
metaschemas, which jsonschema adds itself) can be referenced."""


class ArgumentValidator:
    """Per-server cache of compiled validators keyed by tool name.

    ``validate(tool, arguments)`` raises :class:`InvalidArguments` listing up to five
    ``(json_path, message)`` problems; ``reset(tools)`` drops validators for a new
    tool list.
    """

    def __init__(self, server: str) -> None:
        self.server = server
        self._cache: dict[str, Validator | None] = {}

    def reset(self) -> None:
        self._cache.clear()

    def _validator(self, tool: Tool) -> Validator | None:
        if tool.name in self._cache:
            return self._cache[tool.name]
        schema = tool.input_schema or {}
        compiled: Validator | None
        try:
            cls = validators.validator_for(schema, default=Draft202012Validator)
            cls.check_schema(schema)
            if uses_unbounded_search(schema):
                logger.warning(
                    "server %s tool %s: inputSchema combines unevaluatedProperties and "
                    "patternProperties, which Keen cannot check in bounded time; the server will validate",
                    self.server,
                    tool.name,
                )
                compiled = None
            else:
                compiled = safe_validator_class(cls)(schema, registry=_NO_RETRIEVAL)
        except SchemaError as exc:
            logger.warning(
                "server %s tool %s: invalid inputSchema (%s); the server will validate",
                self.server,
                tool.name,
                exc.message,
            )
            compiled = None
        self._cache[tool.name] = compiled
        return compiled

    def validate(self, tool: Tool, arguments: Any) -> None:
        if not isinstance(arguments, dict):
            raise InvalidArguments(
                f'arguments for "{self.server}/{tool.name}" must be a JSON object, got {type(arguments).__name__}',
                server=self.server,
                tool=tool.name,
                errors=[("$", "not an object")],
            )
        validator = self._validator(tool)
        if validator is None:
            return
        try:
            with bounded():
                errors = sorted(validator.iter_errors(arguments), key=lambda e: list(e.absolute_path))
        except PatternTooSlow as exc:
            value = shorten(exc.value, 41)
            raise InvalidArguments(
                f'invalid arguments for "{self.server}/{tool.name}": matching {value!r} against the '
                f"inputSchema pattern {exc.pattern!r} took over {PATTERN_BUDGET:g} s, so the call was not "
                "sent; send a shorter or simpler value (the pattern backtracks without end on this one).",
                server=self.server,
                tool=tool.name,
                errors=[("$", f"pattern {exc.pattern!r} too slow for the value")],
            ) from None
        except regex.error as exc:
            logger.warning(
                "server %s tool %s: an inputSchema regex cannot be used (%s); the server will validate",
                self.server,
                tool.name,
                exc,
            )
            self._cache[tool.name] = None
            return
        except Unresolvable as exc:
            logger.warning(
                "server %s tool %s: unresolvable $ref in inputSchema (%s); the server will validate",
                self.server,
                tool.name,
                exc,
            )
            self._cache[tool.name] = None
            return
        except ValueError as exc:
            # urljoin refuses a $ref or $id whose host is bracketed but no IP address
            # ("http://[x]/s.json"); no reference can be resolved against it, here or later.
            logger.warning(
                "server %s tool %s: a $ref or $id in inputSchema is not a usable URI (%s); "
                "the server will validate",
                self.server,
                tool.name,
                exc,
            )
            self._cache[tool.name] = None
            return
        except RecursionError:
            # A $ref cycle that never reaches a type ("#/$defs/a" -> "#/$defs/b" -> "#/$defs/a")
            # recurses without end; so may arguments nested deeper than Python's recursion
            # limit against a recursive schema. Either way there is no answer to give here.
            shallow = _depth(arguments) < _SHALLOW
            logger.warning(
                "server %s tool %s: %s; the server will validate",
                self.server,
                tool.name,
                "a $ref cycle in inputSchema never reaches a type"
                if shallow
                else "the arguments nest too deeply to check against inputSchema (or it has a $ref cycle)",
            )
            if shallow:
                self._cache[tool.name] = None  # the schema itself: the next call would recurse too
            return
        if not errors:
            return
        problems = [(_json_path(e.absolute_path), e.message) for e in errors[:_MAX_ERRORS]]
        listing = "; ".join(f"{path}: {msg}" for path, msg in problems)
        more = f" (and {len(errors) - _MAX_ERRORS} more)" if len(errors) > _MAX_ERRORS else ""
        raise InvalidArguments(
            f'invalid arguments for "{self.server}/{tool.name}": {listing}{more}.',
            server=self.server,
            tool=tool.name,
            errors=problems,
        )


def _depth(value: Any, limit: int = 1000) -> int:
    """How deeply ``value`` nests (objects and arrays), counted up to ``limit``, without recursion."""
    deepest, stack = 0, [(value, 1)]
    while stack and deepest < limit:
        item, depth = stack.pop()
        deepest = max(deepest, depth)
        if isinstance(item, dict):
            stack.extend((child, depth + 1) for child in item.values())
        elif isinstance(item, list):
            stack.extend((child, depth + 1) for child in item)
    return deepest


def _json_path(parts: Any) -> str:
    path = "$"
    for part in parts:
        path += f"[{part}]" if isinstance(part, int) else f".{part}"
    return path
