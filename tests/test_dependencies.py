"""Every runtime dependency in pyproject.toml is used by Keen's own code (an install carries
nothing for nothing), and every third-party module Keen's code imports is declared."""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import keen

ROOT = Path(__file__).resolve().parents[1]
SRC = Path(keen.__file__).parent
IMPORT_NAME = {"PyYAML": "yaml", "PyStemmer": "Stemmer", "bpe-openai": "bpe_openai"}
# Imported by Keen, installed as a requirement of a declared dependency.
PROVIDED_BY = {
    "mcp_types": "mcp",
    "starlette": "mcp",
    "sse_starlette": "mcp",
    "numpy": "bm25s, wordllama",
    "safetensors": "wordllama",
    "referencing": "jsonschema",
    "pydantic_core": "pydantic",  # pydantic pins its exact version
}
# Standard-library modules of other CPython versions, imported under a version check
# (sys.stdlib_module_names lists the running interpreter's only).
STDLIB_OF_OTHER_VERSIONS = {"_sha2"}  # 3.12+: the built-in SHA-2 (keen._digest); 3.11 has _sha256


def _names(specs: list[str]) -> dict[str, str]:
    names = [re.split(r"[<>=!~\[; ]", spec, maxsplit=1)[0] for spec in specs]
    return {name: IMPORT_NAME.get(name, name.replace("-", "_")) for name in names}


def _project() -> dict[str, Any]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]


def _declared() -> dict[str, str]:
    return _names(_project()["dependencies"])


def _extras() -> dict[str, str]:
    """The user-facing extras (``openai``, ``anthropic``...), not ``dev``."""
    extras = _project().get("optional-dependencies", {})
    return _names([spec for name, specs in extras.items() if name != "dev" for spec in specs])


def _statements(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """Every statement in ``body`` and in the blocks nested in it (functions, classes, if,
    try, with, loops, match cases). An import is a statement, so none is missed; the
    expressions, most of a tree's nodes, are not walked (``ast.walk`` over all of Keen's
    sources was half this test's CPU)."""
    for node in body:
        yield node
        for name in ("body", "orelse", "finalbody"):
            block = getattr(node, name, None)
            if isinstance(block, list):
                yield from _statements(cast("list[ast.stmt]", block))
        for handler in getattr(node, "handlers", ()):
            yield from _statements(handler.body)
        for case in getattr(node, "cases", ()):
            yield from _statements(case.body)


def _imported() -> set[str]:
    found: set[str] = set()
    for path in SRC.rglob("*.py"):
        for node in _statements(ast.parse(path.read_text(encoding="utf-8")).body):
            if isinstance(node, ast.Import):
                found.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                found.add(node.module.split(".")[0])
    return found


def test_every_dependency_is_used() -> None:
    text = "\n".join(path.read_text(encoding="utf-8") for path in SRC.rglob("*.py"))
    unused = [
        dist for dist, module in _declared().items() if not re.search(rf"\b{re.escape(module)}\b", text)
    ]
    assert unused == []


def test_every_third_party_import_is_declared() -> None:
    declared = set(_declared().values()) | set(_extras().values())
    third_party = {
        name
        for name in _imported()
        if name not in sys.stdlib_module_names | STDLIB_OF_OTHER_VERSIONS
        and name != "keen"
        and name not in PROVIDED_BY
    }
    assert sorted(third_party - declared) == []
