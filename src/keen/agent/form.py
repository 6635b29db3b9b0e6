"""An elicitation form built from a server's requested schema (MCP ``elicitation/create``, form mode).

The MCP specification (2025-11-25, "Elicitation", "Requested Schema") restricts a form to a
flat object whose properties are primitives:

* ``string`` (``minLength``, ``maxLength``, ``format``: email, uri, date, date-time);
* ``number`` / ``integer`` (``minimum``, ``maximum``);
* ``boolean``;
* single-select enums: ``{"type": "string", "enum": [...]}`` (with the legacy
  ``enumNames`` for labels) or ``{"type": "string", "oneOf": [{"const", "title"}, ...]}``;
* multi-select enums: ``{"type": "array", "items": {"enum": [...]}}`` or
  ``{"items": {"anyOf": [{"const", "title"}, ...]}}`` (``minItems``, ``maxItems``).

Each property may carry ``title``, ``description`` and ``default``. :func:`form_fields`
turns the schema into :class:`Field` objects a front end asks one by one: each gives the
text to pre-fill (the default) and parses what the person typed back into a JSON value,
with a message saying what to type when it does not fit. The REPL (``keen.agent.repl``)
draws the questions; this module only knows schemas and text, so it is tested alone.

The schema is the server's, so it is checked as a tool's inputSchema is
(:func:`keen.mcp.listing.validation.checked_errors`): a ``$ref`` outside it is never fetched
or read, a ``$ref`` loop is not run into, and a check has a time budget. What cannot be checked
here is left to the server, which validates the answer it gets.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field
from typing import Any, Literal

from jsonschema import FormatChecker

__all__ = ["MISSING", "Field", "FormError", "Option", "check_content", "form_fields"]

logger = logging.getLogger(__name__)

FieldKind = Literal["string", "number", "integer", "boolean", "choice", "choices"]
_TRUE = frozenset({"y", "yes", "true", "1", "on"})
_FALSE = frozenset({"n", "no", "false", "0", "off"})


class _Missing:
    """The value of an optional field left empty: it is left out of the answer."""

    def __repr__(self) -> str:
        return "MISSING"


MISSING: Any = _Missing()


class FormError(ValueError):
    """The requested schema is not a form Keen can ask (not a flat object of primitives)."""


@dataclass(frozen=True)
class Option:
    """One choice of an enum field: the JSON ``value`` sent back and the ``label`` shown."""

    value: str
    label: str


@dataclass(frozen=True)
class Field:
    """One question of the form.

    Attributes:
        name: the property name (the key in the answer's ``content``).
        kind: how the text is read (string, number, integer, boolean, choice, choices).
        title: what to call it (the schema's ``title``, else the name).
        description: the schema's ``description`` ("" if none).
        required: listed in the schema's ``required``.
        default: the schema's ``default``, or :data:`MISSING`.
        options: the choices of an enum field, in schema order.
        schema: the property's own schema, checked against each parsed value.
    """

    name: str
    kind: FieldKind
    title: str
    description: str = ""
    required: bool = False
    default: Any = MISSING
    options: tuple[Option, ...] = ()
    schema: dict[str, Any] = field(default_factory=lambda: dict[str, Any]())

    def hint(self) -> str:
        """A short note on what to type: ``yes/no``, a range, the numbered choices."""
        s = self.schema
        if self.kind == "boolean":
            return "yes/no"
        if self.kind in ("choice", "choices"):
            listed = ", ".join(f"{i}) {o.label}" for i, o in enumerate(self.options, 1))
            many = "; several: comma-separated" if self.kind == "choices" else ""
            return f"{listed}{many}"
        bounds: list[str] = []
        if self.kind in ("number", "integer"):
            bounds.append(self.kind)
            if "minimum" in s:
                bounds.append(f">= {s['minimum']}")
            if "maximum" in s:
                bounds.append(f"<= {s['maximum']}")
        else:
            if "format" in s:
                bounds.append(str(s["format"]))
            if "minLength" in s:
                bounds.append(f"at least {s['minLength']} characters")
            if "maxLength" in s:
                bounds.append(f"at most {s['maxLength']} characters")
        return ", ".join(bounds)

    def initial_text(self) -> str:
        """The text to pre-fill: the default written the way :meth:`parse` reads it ("" if none)."""
        value = self.default
        if value is MISSING or value is None:
            return ""
        if self.kind == "boolean":
            return "yes" if value else "no"
        if self.kind == "choices" and isinstance(value, list):
            return ", ".join(str(v) for v in value)  # type: ignore[misc]
        return str(value)

    def parse(self, text: str) -> Any:
        """The JSON value for ``text``, or :data:`MISSING` for an optional field left empty.

        Raises:
            ValueError: the text does not fit; the message says what to type.
        """
        text = text.strip()
        if not text:
            if self.required:
                raise ValueError(f"{self.title} is required")
            return MISSING
        value = self._convert(text)
        # Imported at the first answer: the REPL's start need not load the validators (and
        # the regex module) for a form it may never show.
        from keen.mcp.listing.validation import SchemaNotChecked, checked_errors

        try:
            errors = checked_errors(self.schema, value, format_checker=FormatChecker())
        except SchemaNotChecked as exc:
            logger.warning(
                "the form's field %r is not checked here (%s); the server will check it", self.name, exc
            )
            return value
        if errors:
            raise ValueError(f"{self.title}: {min(errors, key=str).message}")
        return value

    def _convert(self, text: str) -> Any:
        if self.kind == "string":
            return text
        if self.kind == "boolean":
            if text.lower() in _TRUE:
                return True
            if text.lower() in _FALSE:
                return False
            raise ValueError(f"{self.title}: type yes or no")
        if self.kind == "integer":
            try:
                return int(text)
            except ValueError:
                raise ValueError(f"{self.title}: type a whole number, e.g. 3") from None
        if self.kind == "number":
            try:
                number = float(text)
            except ValueError:
                raise ValueError(f"{self.title}: type a number, e.g. 2.5") from None
            if not math.isfinite(number):
                raise ValueError(f"{self.title}: type a finite number")
            return (
                int(number) if number.is_integer() and "." not in text and "e" not in text.lower() else number
            )
        if self.kind == "choice":
            return self._option(text).value
        picked = [self._option(part).value for part in text.split(",") if part.strip()]
        return list(dict.fromkeys(picked))

    def _option(self, text: str) -> Option:
        """The option ``text`` names: its number, its value or its label (case-insensitive)."""
        text = text.strip()
        if text.isdigit() and 1 <= int(text) <= len(self.options):
            return self.options[int(text) - 1]
        folded = text.casefold()
        for option in self.options:
            if folded in (option.value.casefold(), option.label.casefold()):
                return option
        raise ValueError(
            f"{self.title}: pick one of {', '.join(o.value for o in self.options)} (or its number)"
        )


def _options(schema: dict[str, Any]) -> tuple[Option, ...]:
    """The options of a single-select schema (``enum`` [+ ``enumNames``] or ``oneOf``/``anyOf`` consts)."""
    if isinstance(schema.get("enum"), list):
        values = [str(v) for v in schema["enum"]]
        names = schema.get("enumNames")
        labels = [str(n) for n in names] if isinstance(names, list) and len(names) == len(values) else values  # type: ignore[arg-type]
        return tuple(Option(v, lab) for v, lab in zip(values, labels, strict=True))
    for key in ("oneOf", "anyOf"):
        branches = schema.get(key)
        if isinstance(branches, list):
            found = [
                Option(str(b["const"]), str(b.get("title") or b["const"]))
                for b in branches  # type: ignore[union-attr]
                if isinstance(b, dict) and "const" in b
            ]
            if found:
                return tuple(found)
    return ()


def _field(name: str, prop: Any, required: bool) -> Field:
    if not isinstance(prop, dict):
        raise FormError(f"property {name!r} is not a schema object")
    kind_of: Any = prop.get("type")
    options = _options(prop)
    kind: FieldKind
    if kind_of == "array":
        items: Any = prop.get("items")
        options = _options(items) if isinstance(items, dict) else ()
        if not options:
            raise FormError(f"property {name!r}: an array must list its choices (items.enum or items.anyOf)")
        kind = "choices"
    elif options and kind_of in (None, "string"):
        kind = "choice"
    elif kind_of in ("string", "number", "integer", "boolean"):
        kind = kind_of
    else:
        raise FormError(
            f"property {name!r} has type {kind_of!r}; a form takes string, number, integer, boolean or enum"
        )
    return Field(
        name=name,
        kind=kind,
        title=str(prop.get("title") or name),
        description=" ".join(str(prop.get("description") or "").split()),
        required=required,
        default=prop.get("default", MISSING),
        options=options,
        schema=prop,
    )


def form_fields(requested_schema: dict[str, Any]) -> list[Field]:
    """The questions of a form, in the schema's property order.

    Args:
        requested_schema: the ``requestedSchema`` of an ``elicitation/create`` request.

    Returns:
        One :class:`Field` per property (an empty list for an object without properties).

    Raises:
        FormError: the schema is not a flat object of the primitive types listed in this
            module's docstring.
    """
    if not isinstance(requested_schema, dict) or requested_schema.get("type", "object") != "object":  # type: ignore[redundant-expr]
        raise FormError("the requested schema must be an object")
    properties: Any = requested_schema.get("properties") or {}
    if not isinstance(properties, dict):
        raise FormError("the requested schema's properties must be an object")
    required_list: Any = requested_schema.get("required") or []
    required = {str(r) for r in required_list} if isinstance(required_list, list) else set[str]()
    return [_field(str(name), prop, str(name) in required) for name, prop in properties.items()]  # type: ignore[union-attr]


def check_content(requested_schema: dict[str, Any], content: dict[str, Any]) -> str | None:
    """Why ``content`` does not match ``requested_schema``, or None when it does or when the
    schema cannot be checked here (the server validates what it gets; the reason is logged).

    The schema's own ``$schema`` names its draft (2020-12 when it names none), and it is
    checked as a tool's inputSchema is (:func:`keen.mcp.listing.validation.checked_errors`).
    """
    from keen.mcp.listing.validation import SchemaNotChecked, checked_errors

    try:
        errors = checked_errors(requested_schema, content, format_checker=FormatChecker())
    except SchemaNotChecked as exc:
        logger.warning("the form's answer is not checked here (%s); the server will check it", exc)
        return None
    if not errors:
        return None
    first = min(errors, key=lambda e: list(e.path))
    where = "/".join(str(p) for p in first.path)
    return f"{where}: {first.message}" if where else first.message
