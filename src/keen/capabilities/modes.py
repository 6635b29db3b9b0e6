"""The permission modes a session runs in, in a module of their own: ``keen chat`` reads
its settings (:mod:`keen.agent.settings`) before its first model request, and importing
:mod:`keen.capabilities.descriptor` for one type would build its descriptor classes then
(docs/chat.md "Startup")."""

from __future__ import annotations

from typing import Literal

__all__ = ["PermissionMode"]

PermissionMode = Literal["read-only", "ask", "auto"]
"""What a session lets the model do without asking (docs/architecture.md "The harness")."""
