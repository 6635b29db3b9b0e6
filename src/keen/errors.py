"""Keen's exception tree: one root, every message says what to do next.

Errors from the MCP SDK, anyio and httpx2 are translated into this tree at one
boundary (``keen.mcp.connection.translate``) with ``raise ... from``, so callers catch
Keen's names only. The categories under ``MCPServerError`` are the ones of
docs/architecture.md "Errors".

    KeenError
    ├── ConfigError                  configs.json cannot be read or is invalid
    ├── MCPServerError               anything about one configured MCP server
    │   ├── ServerNotConfigured      no server by that name in configs.json
    │   ├── ServerMisconfigured      its configs.json entry is invalid (the others still work)
    │   ├── ServerDisabled           configured with "enabled": false
    │   ├── ServerDisconnected       not connected (never did, or went away)
    │   ├── AuthRequired             the server wants credentials Keen lacks
    │   ├── AuthFailed               the credentials were rejected
    │   ├── ToolNotFound             the tool is not in the latest tools/list
    │   ├── ToolQuarantined          the tool is new, renamed or changed since its definition was pinned
    │   ├── ToolChanged              the server changed the tool since Keen listed it (call not run)
    │   ├── InvalidArguments         arguments fail the tool's inputSchema
    │   ├── CallTimeout              connect, tools/list or tools/call ran past its timeout
    │   ├── RemoteProtocolError      the server broke the protocol or answered a JSON-RPC error
    │   ├── UserActionRequired       the server needs the user to open a page first (URL elicitation)
    │   └── RemoteToolError          the tool ran and reported failure (isError)
    ├── ApprovalDenied               the approval callback refused a call_mcp_tool call
    ├── SkillError                   a skill could not be read, written or activated
    ├── CapabilityNotFound           no capability by that id or name in a search catalog (also a KeyError)
    ├── SettingsError                config.toml is unreadable or bad (defined in keen.agent.settings)
    ├── SessionNotResumable          a chat session cannot be resumed (defined in keen.agent.resume)
    └── ModelError                   the model provider failed a call (keen.agent.models, and its subclasses)

Every error has a ``code`` (a stable string for programs, e.g. ``"auth_required"``) and
may carry a :class:`Remedy`: what to do next, as data. Lower layers never name a
command; each front end words the remedy its own way (the CLI says
``keen mcp connect NAME``, a REPL ``/mcp connect NAME``, ``keen serve`` returns it as
MCP error data). See docs/architecture.md "Errors".
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from enum import StrEnum

__all__ = [
    "ApprovalDenied",
    "AuthFailed",
    "AuthRequired",
    "BudgetTooSmall",
    "CallTimeout",
    "CapabilityNotFound",
    "ConfigError",
    "InvalidArguments",
    "KeenError",
    "MCPServerError",
    "Remedy",
    "RemedyWords",
    "RemoteProtocolError",
    "RemoteToolError",
    "ServerDisabled",
    "ServerDisconnected",
    "ServerMisconfigured",
    "ServerNotConfigured",
    "SkillError",
    "ToolChanged",
    "ToolNotFound",
    "ToolQuarantined",
    "UserActionRequired",
    "exception_chain",
    "exception_leaves",
    "find_keen_error",
    "with_hint",
    "worded",
]


class Remedy(StrEnum):
    """What a person (or a model) can do about an error or a server's state.

    The error's ``server`` and ``tool`` say what it applies to.
    """

    SIGN_IN = "sign_in"
    """Sign in to the server again (OAuth), which also reconnects it."""
    RECONNECT = "reconnect"
    """Fix what the message says (the server, its command or url), then reconnect the server."""
    ENABLE_SERVER = "enable_server"
    """Enable the server in configs.json (``keen mcp enable NAME`` sets ``"enabled": true``)."""
    ENABLE_SKILL = "enable_skill"
    """Enable the skill in the skills config (it is hidden from the catalog)."""
    READ_SKILL = "read_skill"
    """Read the server's ``mcp:<server>`` SKILL.md for its tool names."""
    READ_SCHEMA = "read_schema"
    """Read the tool's schema file and pass arguments that match its inputSchema."""
    LIST_SKILLS = "list_skills"
    """List the skills to find the right name."""
    FIX_CONFIG = "fix_config"
    """Fix the server's entry in configs.json as the message says, then reconnect the server."""


class KeenError(Exception):
    """Root of every error Keen raises on purpose.

    Attributes:
        message: what went wrong, redacted, in a sentence a person can act on.
        remedy: what to do next, as data, or ``None`` when the message says it all.
        code: a stable identifier of the kind of error (class attribute).
    """

    code = "keen_error"

    def __init__(self, message: str, *, remedy: Remedy | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.remedy = remedy

    def __str__(self) -> str:
        return self.message


class ConfigError(KeenError):
    """configs.json is unreadable or invalid (the message names the field and the fix).

    Attributes: ``path`` (the file), ``server`` and ``field`` when the problem is
    inside one server entry, ``line`` and ``column`` (1-based) for broken JSON.
    """

    code = "config_error"

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

    def __init__(
        self, message: str, *, server: str, tool: str | None = None, remedy: Remedy | None = None
    ) -> None:
        super().__init__(message, remedy=remedy)
        self.server = server
        self.tool = tool


class ServerNotConfigured(MCPServerError):
    code = "server_not_configured"


class ServerMisconfigured(MCPServerError):
    """The server's configs.json entry is invalid; the message says what to fix."""

    code = "server_misconfigured"


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
    """The tool's definition is not the pinned one (new, renamed, or changed).

    Attributes: ``status`` (``new`` | ``renamed`` | ``changed``), ``previous_name`` (for a rename),
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


class ToolChanged(MCPServerError):
    """The server refused a call as stale, and its tools/list now defines the tool otherwise.

    ``changed_fields`` names the definition fields that differ (MCP spelling, e.g.
    ``inputSchema``). The call was not run again (``keen.mcp.calls._stale``).
    """

    code = "tool_changed"

    def __init__(
        self,
        message: str,
        *,
        server: str,
        tool: str | None = None,
        changed_fields: tuple[str, ...] = (),
        remedy: Remedy | None = Remedy.READ_SCHEMA,
    ) -> None:
        super().__init__(message, server=server, tool=tool, remedy=remedy)
        self.changed_fields = changed_fields


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
        remedy: Remedy | None = Remedy.READ_SCHEMA,
    ) -> None:
        super().__init__(message, server=server, tool=tool, remedy=remedy)
        self.errors = errors or []


class CallTimeout(MCPServerError):
    """An operation ran past its configured timeout (``seconds``)."""

    code = "timeout"

    def __init__(
        self,
        message: str,
        *,
        server: str,
        tool: str | None = None,
        seconds: float = 0.0,
        remedy: Remedy | None = None,
    ) -> None:
        super().__init__(message, server=server, tool=tool, remedy=remedy)
        self.seconds = seconds


class RemoteProtocolError(MCPServerError):
    code = "remote_protocol_error"


class UserActionRequired(MCPServerError):
    """The server cannot go on until the user has been to a page (MCP 2025-11-25
    "Elicitation > URL Mode": error ``-32042``). ``pages`` lists ``(message, url)``; a URL
    that fails :func:`keen.mcp.connection.elicitation.check_url` is left out of it and of the message.
    ``elicitation_ids`` are the pages' ``elicitationId``s, in the same order, when every page
    the server named is shown and has one (else ``[]``): the server's
    ``notifications/elicitation/complete`` for them says the call may be sent again
    (``Manager.wait_user_action``)."""

    code = "user_action_required"

    def __init__(
        self,
        message: str,
        *,
        server: str,
        tool: str | None = None,
        pages: list[tuple[str, str]] | None = None,
        elicitation_ids: list[str] | None = None,
    ) -> None:
        super().__init__(message, server=server, tool=tool)
        self.pages = pages or []
        self.elicitation_ids = elicitation_ids or []


class RemoteToolError(MCPServerError):
    """The tool ran and returned ``isError: true``; ``result`` is the ``ToolResult``.

    Calls return such results rather than raise; :meth:`keen.mcp.ToolResult.raise_for_error`
    raises this for a caller that wants an exception.
    """

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
    """A skill could not be read, generated or activated (``name`` when known).

    Attributes:
        name: the skill, when known.
        folder: the skills root, when what failed is that it cannot be used as a folder (a
            file stands there or on its way, or it cannot be made or locked); ``None`` for an
            error about one file in it (an unreadable ``config.json``, a skill's file).
    """

    code = "skill_error"

    def __init__(
        self,
        message: str,
        *,
        name: str | None = None,
        remedy: Remedy | None = None,
        folder: str | None = None,
    ) -> None:
        super().__init__(message, remedy=remedy)
        self.name = name
        self.folder = folder


class CapabilityNotFound(KeenError, KeyError):
    """A :class:`keen.capabilities.Catalog` has no capability by that id or model name
    (``capability``); search for it first. Also a ``KeyError``, as a mapping's lookup is."""

    code = "capability_not_found"

    def __init__(self, message: str, *, capability: str) -> None:
        super().__init__(message)
        self.capability = capability


class BudgetTooSmall(KeenError, ValueError):
    """A token budget below what any prompt built for it costs: ``budget`` asked, ``minimum``
    the least that can be met (the tool definitions sent with the prompt, alone). Also a
    ``ValueError``, as a bad argument is."""

    code = "budget_too_small"

    def __init__(self, message: str, *, budget: int, minimum: int) -> None:
        super().__init__(message)
        self.budget = budget
        self.minimum = minimum


def exception_leaves(exc: BaseException) -> Iterator[BaseException]:
    """The leaf exceptions of ``exc``, depth first: anyio task groups and the SDK's
    transports wrap failures in nested ``BaseExceptionGroup``s; a plain exception is its own leaf."""
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            yield from exception_leaves(inner)
    else:
        yield exc


def exception_chain(exc: BaseException | None) -> Iterator[BaseException]:
    """Every exception reachable from ``exc``, each once: group members depth first, then
    each one's ``__cause__`` and ``__context__`` (where a transport hides the real reason)."""
    seen: set[int] = set()
    stack = [exc] if exc is not None else []
    while stack:
        current = stack.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        yield current
        if isinstance(current, BaseExceptionGroup):
            stack.extend(reversed(current.exceptions))
        for linked in (current.__cause__, current.__context__):
            if linked is not None:
                stack.append(linked)


def find_keen_error(exc: BaseException) -> KeenError | None:
    """The first :class:`KeenError` among the leaves of ``exc``, or ``None``."""
    return next((leaf for leaf in exception_leaves(exc) if isinstance(leaf, KeenError)), None)


RemedyWords = Callable[..., str]
"""A front end's wording of a remedy: ``(remedy, *, server=None, skill=None) -> str``, ``""``
when it has none (the CLI names ``keen`` commands, the REPL slash commands)."""


def with_hint(text: str, hint: str) -> str:
    """``text`` and ``hint`` joined as one sentence (``text`` alone when there is no hint)."""
    if not hint:
        return text
    return f"{text.rstrip().rstrip('.;')}; {hint}" if text else hint


def worded(exc: KeenError, remedy_words: RemedyWords) -> str:
    """``exc``'s message and its remedy in a front end's words (``remedy_words``), one sentence."""
    server = exc.server if isinstance(exc, MCPServerError) else None
    skill = exc.name if isinstance(exc, SkillError) else None
    return with_hint(exc.message, remedy_words(exc.remedy, server=server, skill=skill))
