"""Tool fingerprints: SHA-256 over the RFC 8785 canonical JSON of a tool's definition.

A definition is the part of a ``tools/list`` entry that tells a model what a tool is
and does: ``name``, ``title``, ``description``, ``inputSchema``, ``outputSchema`` and
``annotations`` (MCP specification 2025-11-25, "Tools" > "Tool"). Absent fields (``None``)
are left out, so a server that starts sending ``"title": null`` does not look changed.

Canonical JSON is the JSON Canonicalization Scheme (RFC 8785): object members sorted by
their UTF-16 code units, no whitespace, ECMAScript number formatting. It is computed by
the ``rfc8785`` package. RFC 8785 models every number as an IEEE 754 double (section
3.2.2.3), which cannot hold an integer outside ±2**53 exactly: as a double,
9007199254740993 would fingerprint as 9007199254740992, and a server could change one into
the other unseen. Such an integer is canonicalized as the exact tagged string
``"int:<digits>"`` instead, a NaN/infinity (which JSON cannot carry) as ``"float:..."``, and
a string the server sent that starts like a tag gets one more (``"str:int:5"``), so no
string stands for a number. A hostile schema never stops fingerprinting, and two
definitions share a fingerprint only when they are equal.

Two fingerprints per tool:

- :func:`fingerprint`: over the whole definition, name included (what a pin records);
- :func:`body_fingerprint`: over the definition without its name, so an unchanged tool
  under a new name is recognised as a rename.
"""

from __future__ import annotations

import hashlib
import json
import math
from typing import Any

import rfc8785

from keen.mcp.types import ServerInfo, Tool

__all__ = [
    "DEFINITION_FIELDS",
    "SHOWN_INFO_FIELDS",
    "body_fingerprint",
    "canonical_json",
    "definition",
    "definition_fingerprint",
    "fingerprint",
    "info_fingerprint",
    "pretty_json",
    "shown_info",
]

DEFINITION_FIELDS = ("name", "title", "description", "inputSchema", "outputSchema", "annotations")
"""The wire fields a fingerprint covers, in MCP's spelling."""

_SAFE_INT = 2**53
_TAGS = ("int:", "float:", "str:")


def definition(tool: Tool) -> dict[str, Any]:
    """The fingerprinted fields of ``tool`` in MCP wire spelling, ``None`` values left out."""
    values = {
        "name": tool.name,
        "title": tool.title,
        "description": tool.description,
        "inputSchema": tool.input_schema,
        "outputSchema": tool.output_schema,
        "annotations": tool.annotations,
    }
    return {key: value for key, value in values.items() if value is not None}


def canonical_json(value: Any) -> bytes:
    """RFC 8785 canonical JSON of ``value`` (UTF-8 bytes).

    ``value`` is JSON data (dict, list, str, int, float, bool, None). Integers beyond ±2**53
    and non-finite floats are mapped to tagged strings as the module docstring says, instead
    of raising; a string that looks like such a tag is tagged too (``"str:int:5"``), so no
    string of the server's can stand for a number.

    Raises:
        TypeError: ``value`` holds something that is not JSON data.
    """
    return rfc8785.dumps(_jcs_domain(value))


def definition_fingerprint(data: dict[str, Any]) -> str:
    """``sha256:<hex>`` of the canonical JSON of a definition dict (see :func:`definition`)."""
    return "sha256:" + hashlib.sha256(canonical_json(data)).hexdigest()


def fingerprint(tool: Tool) -> str:
    """``sha256:<hex>`` over the canonical JSON of the tool's whole definition, name included."""
    return definition_fingerprint(definition(tool))


def body_fingerprint(data: Tool | dict[str, Any]) -> str:
    """Like :func:`fingerprint` but without ``name``: equal for a tool and its plain rename."""
    body = definition(data) if isinstance(data, Tool) else data
    return definition_fingerprint({k: v for k, v in body.items() if k != "name"})


def pretty_json(data: Any) -> str:
    """Canonical JSON re-indented for people: RFC 8785 member order, two-space indent, so
    two definitions diff line by line (``difflib``) with no noise from key order."""
    ordered = json.loads(canonical_json(data))
    return json.dumps(ordered, indent=2, ensure_ascii=False)


def _jcs_domain(value: Any) -> Any:
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, str):
        return "str:" + value if value.startswith(_TAGS) else value
    if isinstance(value, int):
        # Exact: a double would merge neighbours past 2**53 (RFC 8785 section 3.2.2.3).
        return value if -_SAFE_INT < value < _SAFE_INT else f"int:{value}"
    if isinstance(value, float):
        # A double is what RFC 8785 canonicalizes; only JSON's missing NaN/infinity is tagged.
        return value if math.isfinite(value) else f"float:{value!r}"
    if isinstance(value, dict):
        return {str(k): _jcs_domain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jcs_domain(v) for v in value]
    raise TypeError(f"{type(value).__name__} is not JSON data")


SHOWN_INFO_FIELDS = ("name", "title", "version", "instructions")
"""What a server says of itself at initialize that a model or host reads (MCP 2025-11-25
"Lifecycle": ``serverInfo``'s ``name``, ``title``, ``version``, and ``instructions``): pinned
as one (:mod:`keen.trust.pins`)."""


def shown_info(info: ServerInfo | None) -> dict[str, Any]:
    """The :data:`SHOWN_INFO_FIELDS` of ``info`` (``instructions`` ``""`` when the server sent
    none; no ``info``: all empty)."""
    if info is None:
        return {"name": "", "title": None, "version": "", "instructions": ""}
    return {
        "name": info.name,
        "title": info.title,
        "version": info.version,
        "instructions": info.instructions or "",
    }


def info_fingerprint(shown: dict[str, Any]) -> str:
    """``sha256:<hex>`` of a :func:`shown_info` dict: sorted-key JSON, every non-ASCII
    character (a lone surrogate too) escaped, so any text the server sends fingerprints."""
    text = json.dumps(shown, sort_keys=True, ensure_ascii=True, separators=(",", ":"))
    return "sha256:" + hashlib.sha256(text.encode("ascii")).hexdigest()
