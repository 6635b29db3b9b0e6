"""Tool-argument validation against a tool's cached ``inputSchema`` (JSON Schema Draft 2020-12 unless ``$schema`` says otherwise).

jsonschema picks the draft from ``$schema`` and defaults to Draft 2020-12 (the MCP
2025-11-25 default dialect). Compiling a validator costs far more than running it,
so one is built per tool definition and reused until the tool list changes or the
definition checked changes (a changed tool is checked against its pinned inputSchema until
it is trusted, then against the new one).

Most inputSchemas are plain: an object whose properties are typed and whose ``required``
names must be there, nothing else (what FastMCP and pydantic write for plain parameters).
For those, :func:`plain_check` answers "valid" in a few dictionary lookups; anything it
cannot vouch for, and every invalid call, goes through jsonschema, whose errors are the ones
reported. A call is never let through that jsonschema would refuse.

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

A schema's work is untrusted too: one validation runs with a time budget
(:mod:`keen.mcp.listing._keywords`) that every keyword and regex search draws on, and
arguments that exhaust it are refused, so neither a pattern with exponential backtracking
nor a ``$ref`` graph that multiplies its paths can freeze the event loop; ``uniqueItems``
is checked in linear time.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from typing import Any
from urllib.parse import unquote

import regex
from jsonschema import (
    Draft3Validator,
    Draft4Validator,
    Draft6Validator,
    Draft7Validator,
    Draft201909Validator,
    Draft202012Validator,
    validators,
)
from jsonschema.exceptions import SchemaError, ValidationError
from jsonschema.protocols import Validator
from referencing import Registry
from referencing.exceptions import Unresolvable

from keen._terminal import name_in_message
from keen._text import shorten
from keen.errors import InvalidArguments
from keen.mcp.listing._keywords import (
    VALIDATION_BUDGET,
    PatternTooSlow,
    ValidationTooSlow,
    bounded,
    safe_validator_class,
    uses_unbounded_search,
)
from keen.mcp.types import Tool

__all__ = [
    "ArgumentValidator",
    "SchemaNotChecked",
    "StructuredContentValidator",
    "checked_errors",
    "plain_check",
    "recursion_panic",
    "ref_cycle",
]

logger = logging.getLogger(__name__)

_MAX_ERRORS = 5
_SHALLOW = 100
"""Arguments nested less deeply than this cannot exhaust the recursion limit by themselves."""
_NO_RETRIEVAL: Registry[Any] = Registry()
"""Holds nothing and retrieves nothing: only a schema's own resources (and the drafts'
metaschemas, which jsonschema adds itself) can be referenced."""


_ANNOTATIONS = frozenset(
    {"title", "description", "default", "examples", "$comment", "deprecated", "readOnly", "writeOnly"}
)
"""Keywords that never make an instance invalid (JSON Schema 2020-12 Validation, section 9)."""
_PLAIN_TOP = _ANNOTATIONS | {"type", "properties", "required", "additionalProperties", "$schema"}
_PLAIN_DRAFTS = (
    Draft4Validator,
    Draft6Validator,
    Draft7Validator,
    Draft201909Validator,
    Draft202012Validator,
)
"""Drafts in which ``type``, ``properties``, ``required`` and ``additionalProperties`` mean the
same (Draft 3's ``required`` is a property's boolean: not plain)."""
_JSON_TYPES: dict[str, frozenset[type]] = {
    # Exact Python types: ``bool`` is no integer, and 1.0 (an integer to Draft 6 and later,
    # not to Draft 4) is left to jsonschema.
    "string": frozenset({str}),
    "integer": frozenset({int}),
    "number": frozenset({int, float}),
    "boolean": frozenset({bool}),
    "null": frozenset({type(None)}),
    "object": frozenset({dict}),
    "array": frozenset({list}),
}
_ANY = frozenset({object})
"""A property any value satisfies (no ``type``, or ``true``)."""


def _plain_types(subschema: Any, nested: bool = False) -> frozenset[type] | None:
    """The Python types a property's subschema accepts, when it says no more than a type
    (``type``, or ``anyOf`` of such, beside annotations); ``None`` when it says more."""
    if subschema is True:
        return _ANY
    if not isinstance(subschema, dict):
        return None
    keys = subschema.keys() - _ANNOTATIONS  # pyright: ignore[reportUnknownMemberType]
    if not keys:
        return _ANY
    if keys == {"type"}:
        named: Any = subschema["type"]
        names: list[Any] = named if isinstance(named, list) else [named]  # pyright: ignore[reportUnknownVariableType]
        if not names or not all(isinstance(n, str) and n in _JSON_TYPES for n in names):
            return None
        return frozenset().union(*(_JSON_TYPES[n] for n in names))
    if keys == {"anyOf"} and not nested and isinstance(subschema["anyOf"], list) and subschema["anyOf"]:
        branches = [_plain_types(b, nested=True) for b in subschema["anyOf"]]  # pyright: ignore[reportUnknownVariableType]
        if any(b is None for b in branches):
            return None
        if any(b is _ANY for b in branches):
            return _ANY
        return frozenset().union(*branches)  # pyright: ignore[reportArgumentType]
    return None


def plain_check(
    schema: Any, cls: type[Any] = Draft202012Validator
) -> Callable[[dict[str, Any]], bool] | None:
    """A quick check for a plain object schema, or ``None`` when ``schema`` is not plain.

    Plain: ``type`` object (or none), ``properties`` whose subschemas give only a ``type``
    (or an ``anyOf`` of types), ``required``, ``additionalProperties`` true or false, and
    annotations, under Draft 4 to 2020-12 (``cls``, as :func:`jsonschema.validators.validator_for`
    picks it). The check returns True only for arguments jsonschema finds no error in; False
    means "not sure": run the full validator, which says what is wrong.
    """
    if cls not in _PLAIN_DRAFTS or not isinstance(schema, dict) or schema.keys() - _PLAIN_TOP:  # pyright: ignore[reportUnknownMemberType]
        return None
    given: dict[str, Any] = schema  # pyright: ignore[reportUnknownVariableType]
    if given.get("type", "object") != "object":
        return None
    extra = given.get("additionalProperties", True)
    required: Any = given.get("required", [])
    properties: Any = given.get("properties", {})
    if not isinstance(extra, bool) or not isinstance(required, list) or not isinstance(properties, dict):
        return None
    wanted: tuple[str, ...] = tuple(required)  # pyright: ignore[reportUnknownArgumentType]
    if not all(isinstance(name, str) for name in wanted):
        return None
    types: dict[str, frozenset[type]] = {}
    for name, subschema in properties.items():  # pyright: ignore[reportUnknownVariableType]
        accepted = _plain_types(subschema)
        if accepted is None:
            return None
        types[str(name)] = accepted  # pyright: ignore[reportUnknownArgumentType]
    closed = not extra

    def check(arguments: dict[str, Any]) -> bool:
        for name in wanted:
            if name not in arguments:
                return False
        for name, value in arguments.items():
            accepted = types.get(name)
            if accepted is None:
                if closed:
                    return False
            elif accepted is not _ANY and type(value) not in accepted:
                return False
        return True

    return check


def _anything(arguments: dict[str, Any]) -> bool:
    """The quick check of a schema Keen does not check (the server validates)."""
    return True


class ArgumentValidator:
    """Per-server cache of compiled validators keyed by tool name and its inputSchema.

    ``validate(tool, arguments)`` raises :class:`InvalidArguments` listing up to five
    ``(json_path, message)`` problems; ``reset(tools)`` drops validators for a new
    tool list.
    """

    def __init__(self, server: str) -> None:
        self.server = server
        self._cache: dict[str, Validator | None] = {}
        # The inputSchema each cached validator was built from, and its plain check.
        self._schemas: dict[str, Any] = {}
        self._plain: dict[str, Callable[[dict[str, Any]], bool] | None] = {}

    def reset(self) -> None:
        self._cache.clear()
        self._schemas.clear()
        self._plain.clear()

    def _validator(self, tool: Tool) -> Validator | None:
        schema = tool.input_schema or {}
        if tool.name in self._cache:
            built = self._schemas[tool.name]
            # The same tool name may be checked against another definition (its pinned one,
            # then the live one once trusted): a validator is only good for its own schema.
            if built is schema or built == schema:
                return self._cache[tool.name]
        self._schemas[tool.name] = schema
        self._plain[tool.name] = None
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
            elif ref_cycle(schema):
                logger.warning(
                    "server %s tool %s: a $ref cycle in inputSchema never reaches a type; "
                    "the server will validate",
                    self.server,
                    tool.name,
                )
                compiled = None
            else:
                compiled = safe_validator_class(cls)(schema, registry=_NO_RETRIEVAL)
                self._plain[tool.name] = plain_check(schema, cls)
        except SchemaError as exc:
            logger.warning(
                "server %s tool %s: invalid inputSchema (%s); the server will validate",
                self.server,
                tool.name,
                exc.message,
            )
            compiled = None
        except BaseException as exc:
            if not _recursion_limit(exc):
                raise
            # The metaschema check itself recursed: an inputSchema nested past the limit.
            logger.warning(
                "server %s tool %s: inputSchema nests too deeply to check; the server will validate",
                self.server,
                tool.name,
            )
            compiled = None
        self._cache[tool.name] = compiled
        return compiled

    def quick_check(self, tool: Tool) -> Callable[[dict[str, Any]], bool] | None:
        """A check of an object's fields that says True only where :meth:`validate` would
        pass ``tool``'s arguments (an object), so a caller may skip it then: the plain check
        of its inputSchema (:func:`plain_check`), a check that passes everything when the
        schema is not checked by Keen at all (invalid, or beyond bounded time), or ``None``
        when there is no quick check (every call validated in full)."""
        if self._validator(tool) is None:
            return _anything
        return self._plain.get(tool.name)

    def validate(self, tool: Tool, arguments: Any) -> None:
        if not isinstance(arguments, dict):
            raise InvalidArguments(
                f'arguments for "{self.server}/{name_in_message(tool.name)}" must be a JSON object, got {type(arguments).__name__}',
                server=self.server,
                tool=tool.name,
                errors=[("$", "not an object")],
            )
        validator = self._validator(tool)
        if validator is None:
            return
        plain = self._plain.get(tool.name)
        if plain is not None and plain(arguments):  # pyright: ignore[reportUnknownArgumentType]
            return
        try:
            with bounded():
                errors = sorted(validator.iter_errors(arguments), key=lambda e: list(e.absolute_path))
        except PatternTooSlow as exc:
            value = shorten(exc.value, 41)
            raise InvalidArguments(
                f'invalid arguments for "{self.server}/{name_in_message(tool.name)}": matching {value!r} against the '
                f"inputSchema pattern {exc.pattern!r} took over {VALIDATION_BUDGET:g} s, so the call was not "
                "sent; send a shorter or simpler value (the pattern backtracks without end on this one).",
                server=self.server,
                tool=tool.name,
                errors=[("$", f"pattern {exc.pattern!r} too slow for the value")],
            ) from None
        except ValidationTooSlow:
            raise InvalidArguments(
                f'invalid arguments for "{self.server}/{name_in_message(tool.name)}": checking them against the inputSchema '
                f"took over {VALIDATION_BUDGET:g} s, so the call was not sent; send smaller arguments, or ask "
                "the server's maintainer to simplify its inputSchema (its $ref, allOf, anyOf or oneOf "
                "branches multiply the work).",
                server=self.server,
                tool=tool.name,
                errors=[("$", "too slow to check against the inputSchema")],
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
        except BaseException as exc:
            if not _recursion_limit(exc):
                raise
            self._recursed(tool, arguments)
            return
        if not errors:
            return
        problems = [(_json_path(e.absolute_path), e.message) for e in errors[:_MAX_ERRORS]]
        listing = "; ".join(f"{path}: {msg}" for path, msg in problems)
        more = f" (and {len(errors) - _MAX_ERRORS} more)" if len(errors) > _MAX_ERRORS else ""
        raise InvalidArguments(
            f'invalid arguments for "{self.server}/{name_in_message(tool.name)}": {listing}{more}.',
            server=self.server,
            tool=tool.name,
            errors=problems,
        )

    def _recursed(self, tool: Tool, arguments: dict[str, Any]) -> None:
        """Leave a check that reached Python's recursion limit to the server."""
        # Arguments nested deeper than the limit against a recursive schema recurse without
        # end; so does a loop ref_cycle cannot follow (a reference below a nested $id).
        # Either way there is no answer to give here.
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


class SchemaNotChecked(Exception):
    """A schema :func:`checked_errors` cannot check an instance against: invalid, with a
    reference outside itself or a ``$ref`` loop, or past the time budget. ``reason`` says
    which, in words for a log line."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def checked_errors(schema: Any, instance: Any, *, format_checker: Any = None) -> list[ValidationError]:
    """The errors of ``instance`` against a schema a server sent, checked as tool schemas are.

    For a server's schema outside tools/list, such as an ``elicitation/create`` request's
    ``requestedSchema`` (MCP 2025-11-25 "Elicitation"): no reference outside the schema is
    fetched or read (see this module's docstring), a ``$ref`` loop is found before it is run
    (:func:`ref_cycle`), and the check has :data:`VALIDATION_BUDGET` seconds.

    Args:
        schema: the schema as sent (Draft 2020-12 unless its ``$schema`` names another).
        instance: the value to check.
        format_checker: a :class:`jsonschema.FormatChecker` to assert ``format`` with.

    Returns:
        The errors, sorted by where they are in the instance; empty when it matches.

    Raises:
        SchemaNotChecked: the schema cannot be checked here; the reason says why.
    """
    cls = validators.validator_for(schema, default=Draft202012Validator)
    try:
        cls.check_schema(schema)
    except SchemaError as exc:
        raise SchemaNotChecked(f"the schema is invalid ({shorten(exc.message, 200)})") from None
    except BaseException as exc:
        if not _recursion_limit(exc):
            raise
        raise SchemaNotChecked("the schema nests too deeply to check") from None
    if ref_cycle(schema):
        raise SchemaNotChecked("a $ref cycle in the schema never reaches a type")
    if uses_unbounded_search(schema):
        raise SchemaNotChecked("the schema combines unevaluatedProperties and patternProperties")
    validator = safe_validator_class(cls)(schema, registry=_NO_RETRIEVAL, format_checker=format_checker)
    try:
        with bounded():
            return sorted(validator.iter_errors(instance), key=lambda e: list(e.absolute_path))
    except ValidationTooSlow:
        raise SchemaNotChecked(f"checking against the schema took over {VALIDATION_BUDGET:g} s") from None
    except (Unresolvable, ValueError, regex.error) as exc:
        raise SchemaNotChecked(f"the schema cannot be used ({shorten(str(exc), 200)})") from None
    except BaseException as exc:
        if not _recursion_limit(exc):
            raise
        raise SchemaNotChecked("the value nests too deeply to check against the schema") from None


class StructuredContentValidator:
    """A tool result's ``structuredContent`` checked against the tool's ``outputSchema`` (MCP
    2025-11-25 "Tools > Output Schema": clients SHOULD validate structured results against
    it), with the bounded keywords an inputSchema gets (:mod:`keen.mcp.listing._keywords`).

    The MCP SDK's own check searches ``pattern`` with :mod:`re` on the event loop: a server
    that declares ``"pattern": "^(a|a)+$"`` and returns ``"aaaa…!"`` froze every call of
    every server. Here the whole check gets :data:`VALIDATION_BUDGET` seconds and a result that
    needs more is refused. One validator is compiled per tool and outputSchema.

    Args:
        server: the server's name (for log lines).
    """

    def __init__(self, server: str) -> None:
        self.server = server
        self._cache: dict[str, tuple[Any, Validator | None]] = {}

    def _validator(self, tool: str, schema: dict[str, Any]) -> Validator | None:
        cached = self._cache.get(tool)
        if cached is not None and (cached[0] is schema or cached[0] == schema):
            return cached[1]
        cls = validators.validator_for(schema, default=Draft202012Validator)
        try:
            cls.check_schema(schema)
        except SchemaError as exc:
            raise RuntimeError(f"Invalid schema for tool {tool}: {exc.message}") from None
        except BaseException as exc:
            if not _recursion_limit(exc):
                raise
            raise RuntimeError(
                f"the structuredContent of tool {tool} could not be checked against its outputSchema: "
                "the outputSchema nests too deeply to check"
            ) from None
        if ref_cycle(schema):
            # Found before any content is checked: running into it would end in a
            # RecursionError or, on a loaded machine, first in the time budget, and the
            # refusal would name whichever came first.
            raise RuntimeError(
                f"the structuredContent of tool {tool} could not be checked against its outputSchema: "
                "a $ref cycle in it never reaches a type"
            )
        compiled: Validator | None = None
        if uses_unbounded_search(schema):
            logger.warning(
                "server %s tool %s: outputSchema combines unevaluatedProperties and patternProperties, "
                "which Keen cannot check in bounded time; its structuredContent is passed on unchecked",
                self.server,
                tool,
            )
        else:
            compiled = safe_validator_class(cls)(schema, registry=_NO_RETRIEVAL)
        self._cache[tool] = (schema, compiled)
        return compiled

    def validate(self, tool: str, schema: dict[str, Any], content: Any) -> None:
        """Check ``content`` (the result's ``structuredContent``) against ``schema``.

        Raises:
            RuntimeError: the content does not match, or cannot be checked in bounded time
                (a pattern that backtracks without end, a ``$ref`` cycle, content nested too
                deeply), or the schema is invalid or has a ``$ref`` that does not resolve
                within it. The SDK raises ``RuntimeError`` for the same faults, and the call
                fails saying the server sent an invalid answer.
        """
        validator = self._validator(tool, schema)
        if validator is None:
            return
        try:
            with bounded():
                errors = sorted(validator.iter_errors(content), key=lambda e: list(e.absolute_path))
        except PatternTooSlow as exc:
            raise RuntimeError(
                f"the structuredContent of tool {tool} could not be checked against its outputSchema: "
                f"matching {shorten(exc.value, 41)!r} against the pattern {exc.pattern!r} took over "
                f"{VALIDATION_BUDGET:g} s, so the result was not used; the server's outputSchema needs fixing"
            ) from None
        except ValidationTooSlow:
            raise RuntimeError(
                f"the structuredContent of tool {tool} could not be checked against its outputSchema: "
                f"checking it took over {VALIDATION_BUDGET:g} s (its $ref, allOf, anyOf or oneOf branches "
                "multiply the work), so the result was not used; the server's outputSchema needs fixing"
            ) from None
        except (Unresolvable, ValueError, regex.error) as exc:
            raise RuntimeError(f"Invalid schema for tool {tool}: {exc}") from None
        except BaseException as exc:
            if not _recursion_limit(exc):
                raise
            raise RuntimeError(
                f"the structuredContent of tool {tool} could not be checked against its outputSchema: "
                "a $ref cycle in it never reaches a type, or the content nests too deeply"
            ) from None
        if errors:
            first = errors[0]
            raise RuntimeError(
                f"Invalid structured content returned by tool {tool}: "
                f"{_json_path(first.absolute_path)}: {shorten(first.message, 300)}"
            )


def recursion_panic(exc: BaseException) -> bool:
    """Whether ``exc`` is Python's recursion limit met inside a Rust extension.

    ``referencing`` keeps its registry in ``rpds`` (Rust, through PyO3); when the limit is
    reached inside the ``__eq__`` it calls back, PyO3 raises ``pyo3_runtime.PanicException``,
    which derives from ``BaseException`` (not ``RecursionError``) and would pass every
    ``except Exception`` up to the event loop. Its class cannot be imported, so it is known
    by its module and name.

    Args:
        exc: an exception caught as ``BaseException`` around a validation.

    Returns:
        True for PyO3's panic (treat it as the recursion limit); False for anything else,
        which the caller raises again (cancellation included).
    """
    kind = type(exc)
    return kind.__name__ == "PanicException" and kind.__module__ == "pyo3_runtime"


def _recursion_limit(exc: BaseException) -> bool:
    """Whether ``exc`` says a validation reached Python's recursion limit, in Python
    (``RecursionError``) or inside referencing's Rust registry (:func:`recursion_panic`)."""
    return isinstance(exc, RecursionError) or recursion_panic(exc)


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


_LEGACY_REF = (Draft3Validator, Draft4Validator, Draft6Validator, Draft7Validator)
"""Drafts in which ``$ref`` replaces its siblings (JSON Schema Draft 7 section 8.3: "All
other properties in a "$ref" object MUST be ignored"), and ``id`` may name a resource."""
_ONE = ("additionalProperties", "additionalItems", "contains", "propertyNames", "not", "if")
_ONE = (*_ONE, "unevaluatedProperties", "unevaluatedItems")
_MANY = ("allOf", "anyOf", "oneOf", "prefixItems")
_NAMED = ("properties", "patternProperties", "dependentSchemas", "dependencies")
"""The applicators whose value is a subschema, a list of them, or a name -> subschema map
(with ``items``, either; and ``then``/``else``, which apply with ``if``)."""
_MAX_NODES = 100_000
"""Subschemas a loop search visits at most (a listing's size bounds a schema already)."""


def ref_cycle(schema: Any) -> bool:
    """Whether ``schema`` holds a loop of ``$ref`` and ``allOf`` steps that comes back to where
    it started without going into the instance, such as ``"#/$defs/a" -> "#/$defs/b" ->
    "#/$defs/a"``: a validator that reaches it evaluates both keywords whatever the instance,
    never reaches a type, and recurses until Python's limit.

    Loops through the other applicators at one place (``anyOf``, ``oneOf``, ``not``,
    ``if``) are not counted: whether a validator takes them depends on the instance (a
    branch that matched first, a subschema's first error), so such a schema is checked and,
    when an instance does recurse, left to the server at run time.

    Only the subschemas the schema's draft applies (:func:`jsonschema.validators.validator_for`)
    are searched, from the root, through ``$ref``s the schema resolves by itself: a JSON
    Pointer fragment (``#/...``, RFC 6901, percent-decoded as RFC 3986 fragments are) when no
    subschema reached declares its own ``$id`` (which would change what ``#`` means below it).
    Anything else is no step, so ``False`` means "none found", not "none".

    Args:
        schema: an inputSchema or outputSchema as the server sent it (any JSON value).

    Returns:
        True when such a loop is reached from the root.
    """
    if not isinstance(schema, dict):
        return False
    cls = validators.validator_for(schema, default=Draft202012Validator)
    legacy = cls in _LEGACY_REF
    known = frozenset(cls.VALIDATORS)
    reached = _reached(schema, known, legacy)
    if reached is None:
        return False
    # Depth-first search over the always-taken steps; a node on the path met again is a loop.
    grey: set[int] = set()
    done: set[int] = set()
    for start in reached:
        if id(start) in done:
            continue
        stack: list[tuple[dict[str, Any], list[Any]]] = [(start, _always(start, schema, legacy))]
        grey.add(id(start))
        while stack:
            node, pending = stack[-1]
            if not pending:
                stack.pop()
                grey.discard(id(node))
                done.add(id(node))
                continue
            child = pending.pop()
            if not isinstance(child, dict) or id(child) in done:
                continue
            if id(child) in grey:
                return True
            grey.add(id(child))
            stack.append((child, _always(child, schema, legacy)))  # pyright: ignore[reportUnknownArgumentType]
    return False


def _always(node: dict[str, Any], root: dict[str, Any], legacy: bool) -> list[Any]:
    """The subschemas a validator evaluates where ``node`` applies, whatever the instance:
    the target of its ``$ref`` and its ``allOf`` branches (only the ``$ref`` in a draft where
    it replaces its siblings)."""
    found: list[Any] = []
    if "$ref" in node and (target := _pointer(root, node["$ref"])) is not None:
        found.append(target)
    if legacy and "$ref" in node:
        return found
    branches: Any = node.get("allOf")
    if isinstance(branches, list):
        found.extend(branches)  # pyright: ignore[reportUnknownArgumentType]
    return found


def _reached(root: dict[str, Any], known: frozenset[str], legacy: bool) -> list[dict[str, Any]] | None:
    """The subschemas a validator of ``root``'s draft may apply, the root first; ``None`` when
    one below the root declares its own ``$id`` (``id`` in Draft 4) or there are more than
    :data:`_MAX_NODES` of them."""
    found: list[dict[str, Any]] = []
    seen: set[int] = set()
    stack: list[Any] = [root]
    while stack:
        node = stack.pop()
        if not isinstance(node, dict) or id(node) in seen:
            continue
        seen.add(id(node))
        if len(found) >= _MAX_NODES:
            return None
        if found and (isinstance(node.get("$id"), str) or (legacy and isinstance(node.get("id"), str))):
            return None
        found.append(node)  # pyright: ignore[reportUnknownArgumentType]
        if "$ref" in node:
            stack.append(_pointer(root, node["$ref"]))
            if legacy:
                continue
        for keyword in _ONE:
            if keyword in known and keyword in node:
                stack.append(node[keyword])
        if "if" in known and "if" in node:
            stack.extend(node[k] for k in ("then", "else") if k in node)
        for keyword in _MANY:
            if keyword in known and isinstance(node.get(keyword), list):
                stack.extend(node[keyword])
        if "items" in known and "items" in node:
            items: Any = node["items"]
            stack.extend(items if isinstance(items, list) else [items])  # pyright: ignore[reportUnknownArgumentType]
        for keyword in _NAMED:
            if keyword in known and isinstance(node.get(keyword), dict):
                stack.extend(node[keyword].values())
    return found


def _pointer(root: dict[str, Any], ref: Any) -> Any:
    """The subschema ``ref`` names in ``root`` when it is a JSON Pointer fragment; else None."""
    if not isinstance(ref, str) or not ref.startswith("#") or (len(ref) > 1 and ref[1] != "/"):
        return None
    node: Any = root
    for token in unquote(ref[1:]).split("/")[1:]:
        token = token.replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict):
            if token not in node:
                return None
            node = node[token]
        elif isinstance(node, list) and _INDEX.fullmatch(token) and int(token) < len(node):  # pyright: ignore[reportUnknownArgumentType]
            node = node[int(token)]
        else:
            return None
    return node


_INDEX = re.compile(r"0|[1-9][0-9]{0,8}")
"""An array index in a JSON Pointer (RFC 6901 section 4: ASCII digits, no leading zero),
bounded: ``str.isdigit`` also takes ``²``, which ``int`` refuses."""


def _json_path(parts: Any) -> str:
    path = "$"
    for part in parts:
        path += f"[{part}]" if isinstance(part, int) else f".{part}"
    return path
