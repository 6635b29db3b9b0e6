"""Capability ids and their projection to model tool names.

Ids (the identity permissions and audit use, never the bare tool name):

- ``mcp__<server>__<tool>``: an MCP tool (``mcp__github__get_pull_request``);
- ``mcp__<server>__resource__<uri>`` and ``mcp__<server>__prompt__<name>``: an MCP
  resource or prompt;
- ``skill__<name>``: a skill (``skill__code-review``, ``skill__mcp:github``);
- ``local__<name>``: a tool the host implements itself (``local__read``).

LLM APIs accept tool names matching ``^[A-Za-z0-9_-]{1,64}$`` (OpenAI function names;
Anthropic allows the same set), so an id is not always usable as one. :func:`model_names`
projects ids to names: an id that already matches is kept as is; any other gets a readable
ASCII prefix and ``_`` plus an 8-hex SHA-256 suffix of the whole id. Collisions (two ids,
one name) are resolved the same way every run whatever the input order: ids are taken in
sorted order, an id that is its own valid name keeps it, the others get (longer) hash
suffixes until every name is unique.
"""

from __future__ import annotations

import functools
import hashlib
import operator
import re
import unicodedata
from collections.abc import Iterable

__all__ = ["MODEL_NAME_RE", "capability_id", "model_name", "model_names", "resolve_names"]

MODEL_NAME_RE = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
"""Tool names every LLM API accepts (OpenAI function-name rule)."""
_MAX = 64
_HASH_CHARS = 8


def capability_id(kind: str, name: str, server: str | None = None) -> str:
    """The id of a capability. ``kind``: ``tool``, ``resource``, ``prompt``, ``skill`` or
    ``local``; ``server`` is required for MCP kinds. Raises ValueError otherwise."""
    if kind in ("tool", "resource", "prompt"):
        if not server:
            raise ValueError(f"a {kind} id needs its MCP server")
        return f"mcp__{server}__{name}" if kind == "tool" else f"mcp__{server}__{kind}__{name}"
    if kind in ("skill", "local"):
        return f"{kind}__{name}"
    raise ValueError(f"unknown capability kind {kind!r}: use tool, resource, prompt, skill or local")


def _digest(text: str, chars: int) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:chars]


def _readable(text: str) -> str:
    ascii_text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    return re.sub(r"_{3,}", "__", re.sub(r"[^A-Za-z0-9_-]", "_", ascii_text)).strip("_") or "x"


def _hashed(cap_id: str, chars: int) -> str:
    suffix = "_" + _digest(cap_id, chars)
    return _readable(cap_id)[: _MAX - len(suffix)].rstrip("_") + suffix


@functools.lru_cache(maxsize=65536)  # a catalog rebuilt per server change names the same ids again
def model_name(cap_id: str) -> str:
    """The model tool name of one id, ignoring collisions (see :func:`model_names`)."""
    return cap_id if MODEL_NAME_RE.fullmatch(cap_id) else _hashed(cap_id, _HASH_CHARS)


def model_names(ids: Iterable[str]) -> dict[str, str]:
    """Unique model tool names for ``ids`` (id -> name), each matching :data:`MODEL_NAME_RE`.

    Deterministic: the result for a set of ids does not depend on their order. Names are
    compared exactly (APIs treat names as case-sensitive).
    """
    return resolve_names(ids)[0]


def resolve_names(ids: Iterable[str]) -> tuple[dict[str, str], bool]:
    """:func:`model_names` of ``ids``, and whether every name is its id's own
    :func:`model_name` (no two ids met on one name): then the names of a set that differs
    by a few ids are these with theirs added, as long as none meets another
    (:meth:`keen.capabilities.Catalog.with_servers` patches them instead of naming every id
    again).

    Args:
        ids: capability ids, sorted or not.

    Returns:
        ``(id -> model name, whether every name is its id's own)``.
    """
    ordered = list(ids)
    if not all(map(operator.lt, ordered, ordered[1:])):  # a catalog's ids come sorted: checked, not sorted
        ordered = sorted(set(ordered))
    names = dict(zip(ordered, map(model_name, ordered), strict=True))  # C-level: 50,000 ids in a catalog
    if len(set(names.values())) == len(names):  # no clash (the rule): no grouping needed
        return names, True
    chars = _HASH_CHARS
    while True:
        owners: dict[str, list[str]] = {}
        for i in ordered:
            owners.setdefault(names[i], []).append(i)
        clashes = {n: group for n, group in owners.items() if len(group) > 1}
        if not clashes:
            return names, False
        chars += 4
        for name, group in clashes.items():
            for i in group:
                if i != name:  # an id that is its own name keeps it
                    names[i] = _hashed(i, min(chars, 40))
        if chars > 40:  # full SHA-1-length prefixes collide only for equal ids
            raise RuntimeError("model name collision could not be resolved")  # pragma: no cover
