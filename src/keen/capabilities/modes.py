"""The permission modes a session runs in, in a module of their own: ``keen chat`` reads
its settings (:mod:`keen.agent.settings`) before its first model request, and importing
:mod:`keen.capabilities.descriptor` for one type would build its descriptor classes then
(docs/chat.md "Startup")."""

from __future__ import annotations

from typing import Literal, get_args

__all__ = ["PermissionMode", "check_mode"]

PermissionMode = Literal["read-only", "ask", "auto"]
"""What a session lets the model do without asking (docs/architecture.md "The harness")."""


def check_mode(mode: str) -> PermissionMode:
    """``mode`` when it is a permission mode.

    Raises:
        ValueError: it is none of the three, naming them: a misspelt mode ("readonly") must
            not pass as one that admits every tool.
    """
    modes: tuple[PermissionMode, ...] = get_args(PermissionMode)
    for known in modes:
        if mode == known:
            return known
    raise ValueError(f"unknown permission mode {mode!r}; use one of: {', '.join(modes)}")
