"""PEP 562 lazy re-exports, so a package's ``__init__`` can name its public API without
importing it: ``import keen.mcp.types`` must not load the MCP SDK that ``keen.mcp.manager`` needs.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Iterable, Mapping
from typing import Any

__all__ = ["exports_from", "lazy_module_attrs"]


def exports_from(module: str, names: Iterable[str]) -> dict[str, str]:
    """``{name: module}`` for each name, to build a package's export table."""
    return dict.fromkeys(names, module)


def lazy_module_attrs(
    package: str, exports: Mapping[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """Module-level ``__getattr__`` and ``__dir__`` for ``package``.

    Args:
        package: the importing package's ``__name__``.
        exports: public name -> absolute module that defines it.

    Returns:
        ``(__getattr__, __dir__)``; the first imports the defining module on first access
        and caches the value in the package namespace. Raises ``AttributeError`` for other names.
    """

    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        setattr(sys.modules[package], name, value)  # later lookups skip __getattr__
        return value

    def __dir__() -> list[str]:
        return sorted({*vars(sys.modules[package]), *exports})

    return __getattr__, __dir__
