"""Keen's exception tree: one root, every message says what to do next.

Errors from the MCP SDK, anyio and httpx2 are translated into this tree at one
boundary (``keen.mcp._translate``) with ``raise ... from``, so callers catch
Keen's names only. The categories under ``MCPServerError`` are the ones of
seeds/003 "Tool Calls".

    KeenError
    ├── ConfigError                  configs.json cannot be read or is invalid
    ├── MCPServerError               anything about one configured MCP server
    │   ├── ServerNotConfigured      no server by that name in configs.json
    │   ├── ServerDisabled           configured with "enabled": false
    │   ├── ServerDisconnected       not connected (never did, or went away)
    │   ├── AuthRequired             the server wants credentials Keen lacks
    │   ├── AuthFailed               the credentials were rejected
    │   ├── ToolNotFound             the tool is not in the latest tools/list
    │   ├── ToolQuarantined          the tool is new or changed since its definition was pinned
    │   ├── InvalidArguments         arguments fail the tool's inputSchema
    │   ├── CallTimeout              connect, tools/list or tools/call ran past its timeout
    │   ├── RemoteProtocolError      the server broke the protocol or answered a JSON-RPC error
    │   └── RemoteToolError          the tool ran and reported failure (isError)
    ├── ApprovalDenied               the approval callback refused a call_mcp_tool call
    └── SkillError                   a skill could not be read, written or activated
"""

from __future__ import annotations

__all__ = [
    "ApprovalDenied",
    "AuthFailed",
    "AuthRequired",
    "CallTimeout",
    "ConfigError",
    "InvalidArguments",
    "KeenError",
    "MCPServerError",
    "RemoteProtocolError",
    "RemoteToolError",
    "ServerDisabled",
    "ServerDisconnected",
    "ServerNotConfigured",
    "SkillError",
    "ToolNotFound",
    "ToolQuarantined",
]


class KeenError(Exception):
    """Root of every error Keen raises on purpose."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message


class ConfigError(KeenError):
    """configs.json is unreadable or invalid.

    Attributes: ``path`` (the file), ``server`` and ``field`` when the problem is
    inside one server entry, ``line`` and ``column`` (1-based) for broken JSON.
    """

    def __init__(
        self,
        message: str,
        *,
        path: str | None = None,
        server: str | None = None,
        field: str | None = None,
        line: int | None = None,
        column: int | None = None,
    ) -> None:
        super().__init__(message)
        self.path = path
        self.server = server
        self.field = field
        self.line = line
        self.column = column


class MCPServerError(KeenError):
    """A failure that concerns one configured MCP server (``server``) and maybe a ``tool``."""

    code = "mcp_error"

    def __init__(self, message: str, *, server: str, tool: str | None = None) -> None:
        super().__init__(message)
        self.server = server
        self.tool = tool


class ServerNotConfigured(MCPServerError):
    code = "server_not_configured"


class ServerDisabled(MCPServerError):
    code = "server_disabled"


class ServerDisconnected(MCPServerError):
    code = "server_disconnected"


class AuthRequired(MCPServerError):
    code = "auth_required"


class AuthFailed(MCPServerError):
    code = "auth_failed"


class ToolNotFound(MCPServerError):
    code = "tool_not_found"


class ToolQuarantined(MCPServerError):
    """The tool's definition is not the pinned one (new, changed, or renamed and changed).

    Attributes: ``status`` (``new`` | ``changed``), ``previous_name`` (for a rename),
    ``changed_fields`` (definition fields that differ) and ``diff`` (unified diff text).
    """

    code = "tool_quarantined"

    def __init__(
        self,
        message: str,
        *,
        server: str,
        tool: str | None = None,
        status: str = "changed",
        previous_name: str | None = None,
        changed_fields: tuple[str, ...] = (),
        diff: str = "",
    ) -> None:
        super().__init__(message, server=server, tool=tool)
        self.status = status
        self.previous_name = previous_name
        self.changed_fields = changed_fields
        self.diff = diff


class InvalidArguments(MCPServerError):
    """Arguments failed validation; ``errors`` lists ``(json_path, message)`` pairs."""

    code = "invalid_arguments"

    def __init__(
        self,
        message: str,
        *,
        server: str,
        tool: str | None = None,
        errors: list[tuple[str, str]] | None = None,
    ) -> None:
        super().__init__(message, server=server, tool=tool)
        self.errors = errors or []


class CallTimeout(MCPServerError):
    """An operation ran past its configured timeout (``seconds``)."""

    code = "timeout"

    def __init__(self, message: str, *, server: str, tool: str | None = None, seconds: float = 0.0) -> None:
        super().__init__(message, server=server, tool=tool)
        self.seconds = seconds


class RemoteProtocolError(MCPServerError):
    code = "remote_protocol_error"


class RemoteToolError(MCPServerError):
    """The tool ran and returned ``isError: true``; ``result`` is the ``ToolResult``."""

    code = "remote_tool_error"

    def __init__(self, message: str, *, server: str, tool: str | None = None, result: object = None) -> None:
        super().__init__(message, server=server, tool=tool)
        self.result = result


class ApprovalDenied(KeenError):
    """The approval callback refused the call; nothing was sent to the server."""

    code = "approval_denied"

    def __init__(self, message: str, *, server: str, tool: str) -> None:
        super().__init__(message)
        self.server = server
        self.tool = tool


class SkillError(KeenError):
    """A skill could not be read, generated or activated (``name`` when known)."""

    def __init__(self, message: str, *, name: str | None = None) -> None:
        super().__init__(message)
        self.name = name
