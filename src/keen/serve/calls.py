"""Every tool call ``keen serve`` runs goes through here: the gateway, then one audit record.

This is the one place a remote host's call reaches an upstream server, so the tool
pipeline (approval, truncation, audit: DESIGN.md "The harness") can take it over whole.
Until then it calls :class:`keen.gateway.Gateway` (configured, connected, known tool,
schema-valid arguments) and appends one JSON line per call to the audit log, with the
caller (``session:<id>``, ``principal:<id>`` or ``stdio:<id>``) added; arguments are
redacted by the gateway before they get here.
"""

from __future__ import annotations

import json
import logging
import threading
from contextvars import ContextVar
from pathlib import Path
from typing import Any, TextIO

import mcp_types as mt

from keen.errors import KeenError
from keen.gateway import Gateway, allow_all
from keen.mcp.manager import Manager

__all__ = ["AuditLog", "CallRouter"]

logger = logging.getLogger("keen.serve")

_caller: ContextVar[str] = ContextVar("keen_serve_caller", default="")


class AuditLog:
    """Append-only JSON lines (``path``), or the ``keen.serve.audit`` logger when ``path`` is None."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self._file: TextIO | None = None
        self._lock = threading.Lock()
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._file = open(path, "a", encoding="utf-8", buffering=1)  # noqa: SIM115
            path.chmod(0o600)

    def write(self, event: dict[str, Any]) -> None:
        line = json.dumps(event, ensure_ascii=False, default=str)
        if self._file is None:
            logging.getLogger("keen.serve.audit").info(line)
            return
        with self._lock:
            self._file.write(line + "\n")

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


class CallRouter:
    """Run one tool call for a remote caller and audit it.

    Args:
        manager: the started Manager whose servers are served.
        audit: where the per-call records go.
    """

    def __init__(self, manager: Manager, audit: AuditLog) -> None:
        self.audit = audit
        # The MCP host calling keen serve approves each call with its own user (as it does for
        # any server's tool), so the gateway's read-only default would refuse what they allowed.
        self.gateway = Gateway(manager, approval=allow_all, audit=self._record)

    async def call(self, server: str, tool: str, arguments: Any, *, caller: str) -> mt.CallToolResult:
        """The upstream result as MCP's ``CallToolResult``; Keen's refusals become ``isError``
        results whose text says what to do (never an exception)."""
        token = _caller.set(caller)
        try:
            result = await self.gateway.call(server, tool, arguments)
        except KeenError as exc:
            return error_result(
                {"error": {"code": getattr(exc, "code", "error"), "message": exc.message}},
            )
        finally:
            _caller.reset(token)
        return mt.CallToolResult.model_validate(
            {
                "content": result.content,
                "structuredContent": result.structured_content,
                "isError": result.is_error,
            }
        )

    def _record(self, event: dict[str, Any]) -> None:
        event["caller"] = _caller.get()
        event["via"] = "keen-serve"
        self.audit.write(event)


def error_result(body: dict[str, Any]) -> mt.CallToolResult:
    """An ``isError`` result carrying ``body`` as JSON text and as structured content."""
    return mt.CallToolResult(
        content=[mt.TextContent(type="text", text=json.dumps(body, ensure_ascii=False))],
        structured_content=body,
        is_error=True,
    )
