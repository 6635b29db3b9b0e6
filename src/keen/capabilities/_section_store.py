"""Budgeted sections computed before, kept on disk (docs/architecture.md "The prompt catalog").

:func:`keen.capabilities.budgeted_section` is a function of its inputs: every field of each
enabled skill, the budget, the overhead texts, the skills root named in the compact header
and the token counter. Its searches (the description cap, how many servers to fold) cost
about 6 ms of CPU at 292 skills, at every start of ``keen chat`` and ``keen prompt``, while
the skills seldom change between two starts. The store keeps each section under a digest
(BLAKE2b) of those inputs, the counter's name and source, Keen's version and the size and
modification time of the modules whose code makes a section (:data:`_CODE`): a start that
finds the same inputs takes the section's fields from there. A stored section that cannot be
read or is not of the expected shape is ignored, so the store can cost time but never change
a section.

One file per section, ``$KEEN_HOME/cache/prompt-sections/<digest>.json`` (:func:`store_dir`),
so a start reads only the one it needs; new sections are written when the process exits (as
the token counts are, ``keen.tokens``), and the newest :data:`MAX_SECTIONS` are kept. A
section whose overhead alone is over its budget is not kept: a host trying budgets too small
for any prompt would push real sections out.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import marshal
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from keen import _digest, paths
from keen._version import __version__

__all__ = ["MAX_SECTIONS", "keep_section", "save_sections", "section_key", "store_dir", "stored_section"]

MAX_SECTIONS = 16
"""Sections kept: a few budgets (``keen chat``'s, ``keen prompt``'s) over a few skills roots."""

_FORMAT = "keen-prompt-section/1"

_CODE = (
    "keen.capabilities.budget",
    "keen.skills.catalog",
    "keen._text",
    "keen.entry_tools",
    "keen.paths",
    "keen.tokens",
)
"""The modules whose code decides a section (the searches, the lines, ``shorten``, the search
tool's name and the folder spelling the lines use, how tokens are counted): a change to one
is a new key."""

# The fields of a BudgetedSection and the types a stored one must have.
_FIELDS: dict[str, tuple[type, ...]] = {
    "text": (str,),
    "tokens": (int,),
    "budget": (int,),
    "overhead_tokens": (int,),
    "step": (str,),
    "tokenizer": (str,),
    "listed": (list,),
    "folded": (list,),
    "description_cap": (int, type(None)),
}

_pending: dict[Path, bytes] = {}
_made: dict[str, dict[str, Any]] = {}
"""Sections this process computed, by key: a second build (the session's first step after
``keen chat``'s early request) takes them from here before they are written."""


def store_dir() -> Path:
    """``$KEEN_HOME/cache/prompt-sections``: one JSON file per section (module doc)."""
    return paths.keen_home() / "cache" / "prompt-sections"


def _code_stamp() -> list[list[int]]:
    """Size and modification time (ns) of each module of :data:`_CODE`, as loaded."""
    stamp: list[list[int]] = []
    for name in _CODE:
        module = sys.modules.get(name)
        file = getattr(module, "__file__", None)
        try:
            st = os.stat(file) if file else None
        except OSError:
            st = None
        stamp.append([st.st_size, st.st_mtime_ns] if st is not None else [-1, -1])
    return stamp


def section_key(inputs: Sequence[Any]) -> str:
    """The digest that names the section made from ``inputs`` (str, int, bool and None in
    lists: the caller's inputs, module doc), under Keen's version and the code that makes a
    section.

    The inputs are serialized with :mod:`marshal` version 2, which writes no back-references
    (later versions refer to an object seen before depending on its reference count): the
    same values give the same bytes, at a third of the CPU of ``json.dumps`` for 292 skills.
    """
    seed = marshal.dumps([_FORMAT, __version__, _code_stamp(), list(inputs)], 2)
    return _digest.blake2b(seed, digest_size=16).hexdigest()


def stored_section(key: str) -> dict[str, Any] | None:
    """The fields of the section stored under ``key`` (keyword arguments of
    ``BudgetedSection``), or None when there is none or it is not of the expected shape."""
    made = _made.get(key)
    if made is not None:  # lists copied: a caller's change to its section is not kept
        return {name: list(value) if isinstance(value, list) else value for name, value in made.items()}  # pyright: ignore[reportUnknownArgumentType]
    file = store_dir() / f"{key}.json"
    try:
        data: Any = json.loads(file.read_bytes())
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("format") != _FORMAT or data.get("key") != key:  # pyright: ignore[reportUnknownMemberType]
        return None
    fields: Any = data.get("section")  # pyright: ignore[reportUnknownMemberType]
    if not isinstance(fields, dict) or set(fields) != set(_FIELDS):  # pyright: ignore[reportUnknownArgumentType]
        return None
    for name, types in _FIELDS.items():
        value: Any = fields[name]
        # bool is an int to isinstance: a stored true is not a token count.
        if type(value) not in types:
            return None
        if isinstance(value, list) and not all(type(item) is str for item in value):  # pyright: ignore[reportUnknownVariableType]
            return None
    return fields  # pyright: ignore[reportUnknownVariableType]


def keep_section(key: str, fields: dict[str, Any]) -> None:
    """Store ``fields`` (a section's, as :func:`stored_section` returns them) under ``key``
    when the process exits (:func:`save_sections`)."""
    _made[key] = {name: list(value) if isinstance(value, list) else value for name, value in fields.items()}  # pyright: ignore[reportUnknownArgumentType]
    data = {"format": _FORMAT, "key": key, "section": fields}
    _pending[store_dir() / f"{key}.json"] = json.dumps(data, ensure_ascii=False).encode("utf-8")


def save_sections() -> None:
    """Write the sections kept since the last call, then drop the oldest files past
    :data:`MAX_SECTIONS`. Never raises: a store that cannot be written only means the next
    start computes its section again."""
    if not _pending:
        return
    written = dict(_pending)
    _pending.clear()
    for file, payload in written.items():
        # Not into a KEEN_HOME removed since (a temporary one): that would create it again.
        if not file.parent.parent.parent.is_dir():
            continue
        with contextlib.suppress(OSError):
            from keen._fs import atomic_write_bytes

            atomic_write_bytes(file, payload, fsync=False)
    for folder in {file.parent for file in written}:
        with contextlib.suppress(OSError):
            files = sorted(folder.glob("*.json"), key=lambda f: f.stat().st_mtime_ns)
            for old in files[:-MAX_SECTIONS]:
                old.unlink(missing_ok=True)


atexit.register(save_sections)
