"""The one boundary where SDK, anyio, OS and httpx2 exceptions become Keen's.

SDK failures arrive wrapped in (nested) ``ExceptionGroup``s from the transports'
task groups; :func:`root_cause` digs out the exception that says what happened.
Connection failures map to a ``(ServerState, message)`` pair for the server's
status; call failures map to a :class:`~keen.errors.MCPServerError` subclass.
Every message is redacted and says what to do next (docs/architecture.md "Errors").
"""

from __future__ import annotations

import contextlib
import errno
import os
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

import httpx2
from mcp.shared.exceptions import MCPError
from mcp_types import (
    CONNECTION_CLOSED,
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    PARSE_ERROR,
    REQUEST_TIMEOUT,
    URL_ELICITATION_REQUIRED,
)
from pydantic import ValidationError
from pydantic_core import PydanticSerializationError, to_json

from keen._redact import redactor
from keen._terminal import name_in_message
from keen._text import one_line, shorten
from keen.errors import (
    AuthFailed,
    AuthRequired,
    CallTimeout,
    InvalidArguments,
    KeenError,
    MCPServerError,
    Remedy,
    RemoteProtocolError,
    ServerDisconnected,
    UserActionRequired,
    exception_leaves,
)
from keen.mcp.config.defaults import more_time_advice, split_advice
from keen.mcp.connection import message_size
from keen.mcp.connection._http_bounds import JSON_BODY_BROKEN, JSON_BODY_STALLED, JSON_BODY_UNDECODABLE
from keen.mcp.connection.elicitation import check_url
from keen.mcp.types import ServerState

__all__ = [
    "AUTH_STATUSES",
    "SESSION_GONE_STATUS",
    "CallFacts",
    "ConnectFacts",
    "auth_status_error",
    "call_facts",
    "classify_connect_failure",
    "current_call_facts",
    "http_answer_fault",
    "no_call_facts",
    "over_message_bound",
    "root_cause",
    "sign_in_message",
    "translate_call_error",
    "unreachable_message",
    "unsendable_arguments",
    "went_away",
]


_SDK_CLOSED = "Connection closed"
"""How the SDK words the ``-32000`` it raises itself when a session's transport ends under a
request (``mcp.shared.jsonrpc_dispatcher``). Its other ``-32000`` words, a Streamable HTTP
request's own answer stream that ended or failed (``mcp.client.streamable_http``), fail only
that request: :func:`http_answer_fault`."""


def went_away(cause: MCPError) -> bool:
    """Whether ``cause`` says the connection ended, not that the server refused one request.

    ``-32000`` is the SDK's ``CONNECTION_CLOSED``, and also the first code of JSON-RPC 2.0's
    "Server error" range, which servers use for their own failures: a reply from a live
    server with that code ends its call only. A server that words its reply exactly as the
    SDK does ends only its own session, which it could do anyway by exiting.
    """
    if cause.code != CONNECTION_CLOSED or cause.error.data is not None:
        return False
    return cause.message.startswith(_SDK_CLOSED)


def http_answer_fault(
    cause: MCPError, target: str, http_status: int | None, config_name: str = "configs.json"
) -> tuple[str, str] | None:
    """What was wrong with a Streamable HTTP answer the SDK could not read as one, and what to
    do: ``("answered TARGET with content type 'text/html', not JSON or an event stream",
    advice)``; ``None`` when ``cause`` is not one of the SDK's own words for such an answer
    (``mcp.client.streamable_http``: an unexpected content type, an error status without a
    JSON-RPC error, a body or event that is no JSON-RPC message, a redirect not followed, a
    202 to a request, an answer's event stream that ended or failed first) or for a JSON
    body that broke off or did not decode (``keen.mcp.connection._http_bounds``). Each fails
    its request only: the session goes on.

    ``target`` names the request (``"TOOL"`` in quotes, ``initialize``); the phrase fits after
    ``MCP server "NAME"``. ``http_status``: the status of the request's own answer.
    ``config_name``: where the server's entry is, as a redirect's advice names it.
    """
    if cause.error.data is not None:
        return None
    # Server-sent text (a content type, a location) is redacted before it is cut: a cut secret
    # no longer matches, and its head would survive.
    message = redactor.redact(cause.message)
    if cause.code == INVALID_REQUEST and message.startswith(_SDK_CONTENT_TYPE):
        kind = message.removeprefix(_SDK_CONTENT_TYPE).strip()
        shown = f"content type {_cut(kind, 80)!r}" if kind else "no content type"
        return (
            f"answered {target} with {shown}, not JSON or an event stream",
            "check that the url is its MCP endpoint (often ending in /mcp) and the server's logs",
        )
    if cause.code == INVALID_REQUEST and message.startswith(_SDK_REDIRECT):
        location = message.removeprefix(_SDK_REDIRECT).split(" not followed", 1)[0]
        advice = (
            "use its https url: a proxy in front of it likely does not tell it the request came over https"
            if "downgrade" in message.split(" not followed", 1)[-1]
            else f"if that is the same server, put that url in {config_name}"
        )
        return f"redirected {target} to {_cut(location, 300)}, which Keen does not follow", advice
    if cause.code == INTERNAL_ERROR and message == _SDK_ERROR_STATUS:
        status = f"HTTP {http_status}" if http_status is not None and http_status >= 400 else "an HTTP error"
        return f"answered {target} with {status} and no JSON-RPC error", "check the server's logs"
    if cause.code == INVALID_REQUEST and message == _SDK_ACCEPTED:
        return (
            f"answered {target} with 202 Accepted, which carries no answer",
            "check the server's version and logs",
        )
    # A request's own answer that broke off: a proxy's or the network's hiccup, or a server
    # that went down (then the next request says so); the session is not ended for it.
    # The answer of a JSON body comes after the tool finished: the call may have taken effect.
    if cause.code == CONNECTION_CLOSED and message.startswith(_SDK_STREAM_ENDED):
        return f"broke off its answer to {target}: the event stream ended before the answer came", _BROKE_OFF
    if cause.code == CONNECTION_CLOSED and message.startswith(_SDK_STREAM_FAILED):
        detail = _cut(message.removeprefix(_SDK_STREAM_FAILED), 200)
        return f"broke off its answer to {target}: its event stream could not be read ({detail})", _BROKE_OFF
    for words in (JSON_BODY_BROKEN, JSON_BODY_STALLED):
        prefix = message_size.SDK_JSON_BODY_FAILED + words
        if cause.code == PARSE_ERROR and message.startswith(prefix):
            detail = _cut(message.removeprefix(prefix), 200)
            return f"broke off its answer to {target}: {words}{detail}", _BROKE_OFF
    if cause.code == PARSE_ERROR and message.startswith(_SDK_JSON_UNDECODABLE):
        detail = message.removeprefix(_SDK_JSON_UNDECODABLE)
        return f"answered {target} with {JSON_BODY_UNDECODABLE}{_cut(detail, 200)}", (
            "check the server's logs and any proxy in front of it"
        )
    if cause.code == PARSE_ERROR and message.startswith(_SDK_UNPARSED):
        return f"answered {target} with something that is not a JSON-RPC 2.0 message", (
            "check the server's version and logs"
        )
    return None


_SDK_CONTENT_TYPE = "Unexpected content type:"
_SDK_REDIRECT = "Redirect to "
_SDK_ERROR_STATUS = "Server returned an error response"
_SDK_UNPARSED = ("Failed to parse JSON response: ", "Failed to parse SSE message: ")
_SDK_ACCEPTED = "server answered a request with 202 Accepted"
# "SSE stream ended without a response", "... and reconnection attempts were exhausted"
_SDK_STREAM_ENDED = "SSE stream ended"
_SDK_STREAM_FAILED = "SSE stream failed: "
_SDK_JSON_UNDECODABLE = message_size.SDK_JSON_BODY_FAILED + JSON_BODY_UNDECODABLE
# The server may have finished the call before its answer broke off: never "retry" as such.
_BROKE_OFF = (
    "it may have taken effect, so check before repeating a call that changes something; if it recurs, "
    "check the server's logs and any proxy in front of it"
)

SESSION_GONE_STATUS = 404
"""A Streamable HTTP server answers a request of a session it no longer has with 404, and the
client must start a new session (MCP 2025-11-25 "Transports > Session Management")."""


_SESSION_GONE_CODES = frozenset({INVALID_REQUEST, -32001})
"""The JSON-RPC codes a 404 to a session's request comes with when the session is gone."""


def over_message_bound(cause: MCPError) -> bool:
    """Whether ``cause`` answers a request whose response passed Keen's bound on one message
    (:mod:`keen.mcp.connection.message_size`): a server-sent event, as the SDK words it, or a
    JSON body, as Keen does. Only that request failed; the session goes on.
    """
    if cause.error.data is not None:
        return False
    if cause.code == CONNECTION_CLOSED:
        return cause.message.startswith(message_size.SSE_EVENT_TOO_LARGE)
    return cause.code == PARSE_ERROR and cause.message.startswith(
        message_size.SDK_JSON_BODY_FAILED + message_size.JSON_BODY_TOO_LARGE
    )


def _too_large_words(server: str, during: str) -> str:
    limit = message_size.MAX_MESSAGE_SIZE
    return f'MCP server "{server}" sent more {during} than Keen reads of one message ({limit:,} bytes)'


def root_cause(exc: BaseException) -> BaseException:
    """The most telling leaf of an exception group: a Keen error first, then HTTP/OS/MCP errors."""
    leaves = list(exception_leaves(exc))
    for kinds in ((KeenError,), (MCPError,), (httpx2.HTTPError, OSError), (TimeoutError,), (Exception,)):
        for leaf in leaves:
            if isinstance(leaf, kinds):
                return leaf
    return leaves[0] if leaves else exc


@dataclass
class CallFacts:
    """What the MCP endpoint answered to the HTTP requests of one call (:func:`call_facts`):
    the status of the last answer to a POST carrying one of its JSON-RPC requests, ``None``
    while none came."""

    http_status: int | None = None

    def status_or(self, connection_status: int | None) -> int | None:
        """The call's own answer's status, else (no answer came) ``connection_status``: the
        connection's, which hears only answers to no call's requests."""
        return connection_status if self.http_status is None else self.http_status


_CALL_FACTS: ContextVar[CallFacts | None] = ContextVar("keen_call_facts", default=None)
"""The current call's facts: the SDK sends each request's POST in a task started in its
sender's context (``mcp.client.streamable_http``, ``mcp.client.sse``), where the response
hook reads this."""


@contextlib.contextmanager
def call_facts() -> Iterator[CallFacts]:
    """Collect what the MCP endpoint answers to the HTTP requests this task sends meanwhile.

    A call's error is worded from its own answer's status, never another call's (when calls
    overlap, a 200 come between a 502 and its error made that "an HTTP error"). Filled in by
    the response hook of :mod:`keen.mcp.connection._http` (:func:`current_call_facts`), which
    gives the connection (``ServerConnection.http_status``) only the answers to no call's
    requests: connect, the session's own stream.

    Yields:
        The facts, filled in as answers come.
    """
    facts = CallFacts()
    token = _CALL_FACTS.set(facts)
    try:
        yield facts
    finally:
        _CALL_FACTS.reset(token)


def current_call_facts() -> CallFacts | None:
    """The facts :func:`call_facts` collects in this context, ``None`` outside a call."""
    return _CALL_FACTS.get()


def no_call_facts() -> None:
    """This task (and the tasks it starts) sends no call's requests: a connection's owner
    task, which a reconnect may start from a call's task (anyio copies its context)."""
    _CALL_FACTS.set(None)


@dataclass
class ConnectFacts:
    """What the owner task saw during one connection attempt, beyond the exception."""

    server: str
    transport: str
    auth: str
    phase: str = "connect"  # connect | initialize | list_tools
    timeout: float = 0.0
    http_status: int | None = None
    www_authenticate: str | None = None
    has_token: bool = False
    stderr_tail: str = ""
    stdout_garbage: str = ""
    pages: int = 0
    """tools/list pages that named a next one, while the listing goes on (``0`` otherwise)."""
    command: str = ""
    cwd: str = ""
    """A stdio server's ``cwd`` as configured (``""``: none)."""
    url: str = ""
    config_name: str = "configs.json"
    """Where the server's entry is, as the remedies name it (a config given in code is no
    configs.json: the Manager's words for it)."""
    key_from: tuple[str, ...] = ()
    """The variables an ``api_key`` auth's key was expanded from (``ApiKeyAuth.key_from``:
    names, never values), which a refused key's hint names."""

    def listed_pages(self, count: int) -> None:
        """``count`` tools/list pages came, the last naming a next one."""
        self.pages = count


def classify_connect_failure(exc: BaseException, facts: ConnectFacts) -> tuple[ServerState, str]:
    """Map a failed connection attempt to the server's next state and a redacted, actionable message."""
    state, message = _classify(root_cause(exc), facts)
    message, advice = split_advice(message)
    if facts.stderr_tail and facts.transport == "stdio":
        message += f"; last stderr: {facts.stderr_tail}"
    # The advice last: a listing that cuts a long error keeps it whole (split_advice).
    return state, redactor.redact(f"{message}; {advice}" if advice else message)


def _classify(cause: BaseException, f: ConnectFacts) -> tuple[ServerState, str]:
    name = f.server
    if isinstance(cause, AuthRequired):
        return ServerState.AUTH_REQUIRED, str(cause)
    if isinstance(cause, AuthFailed):
        return ServerState.AUTH_FAILED, str(cause)
    if f.http_status in AUTH_STATUSES or (
        isinstance(cause, httpx2.HTTPStatusError) and _status(cause) in AUTH_STATUSES
    ):
        return _classify_auth(f)
    if isinstance(cause, TimeoutError) and f.phase == "list_tools" and f.pages:
        return ServerState.DISCONNECTED, (
            f'MCP server "{name}" sent {f.pages:,} tools/list pages in {f.timeout:g} s, each naming a next one, '
            "and no last; its pagination may be broken: check its version and logs; if it does list that many "
            f"tools, {more_time_advice('list_tools', f.config_name)}"
        )
    if isinstance(cause, TimeoutError):
        hint = ""
        if f.stdout_garbage:
            hint = f" (it printed non-JSON on stdout: {f.stdout_garbage!r}; stdio servers must log to stderr)"
        what = _request_of(f.phase)
        return ServerState.DISCONNECTED, (
            f'MCP server "{name}" did not answer {what} within {f.timeout:g} s{hint}; check that it starts and '
            f"speaks MCP; {more_time_advice('list_tools' if f.phase == 'list_tools' else 'connect', f.config_name)}"
        )
    if isinstance(cause, OSError) and f.cwd and cause.filename == f.cwd and f.transport == "stdio":
        # The spawn's chdir failed, not the command: "command 'x' was not found" sent the
        # user to fix what was right.
        why = "is not a directory" if isinstance(cause, NotADirectoryError) else "does not exist"
        if isinstance(cause, PermissionError):
            why = "cannot be entered (permission denied)"
        relative = (
            "" if os.path.isabs(f.cwd) else " (a relative cwd is taken from the directory keen runs in)"
        )
        if f.cwd.startswith("~"):
            relative = " (~ is not expanded there: write the whole path)"
        return ServerState.DISCONNECTED, (
            f'MCP server "{name}": its working directory {f.cwd!r} {why}{relative}; fix "cwd" in {f.config_name}'
        )
    if isinstance(cause, FileNotFoundError | PermissionError) and f.transport == "stdio":
        why = "was not found" if isinstance(cause, FileNotFoundError) else "is not executable"
        return ServerState.DISCONNECTED, (
            f'MCP server "{name}": command {f.command!r} {why}; install it or fix "command" in {f.config_name}'
        )
    if isinstance(cause, httpx2.ConnectError | httpx2.ConnectTimeout) or (
        isinstance(cause, OSError) and cause.errno in (errno.ECONNREFUSED, errno.EHOSTUNREACH)
    ):
        return ServerState.DISCONNECTED, unreachable_message(name, f.url, cause)
    if f.http_status is not None and f.http_status >= 400:
        return ServerState.DISCONNECTED, (
            f'MCP server "{name}" answered HTTP {f.http_status} at {f.url}; check the url (it must be the MCP '
            "endpoint, often ending in /mcp) and the server's logs"
        )
    if isinstance(cause, MCPError) and over_message_bound(cause):
        return ServerState.DISCONNECTED, (
            f"{_too_large_words(name, f'during {f.phase}')}; check the server's version and logs"
        )
    if isinstance(cause, MCPError) and (
        fault := http_answer_fault(cause, _request_of(f.phase), f.http_status, f.config_name)
    ):
        what, advice = fault
        return ServerState.DISCONNECTED, f'MCP server "{name}" {what}; {advice}'
    if isinstance(cause, MCPError) and went_away(cause):
        how = "exited" if f.transport == "stdio" else "closed the connection"
        return ServerState.DISCONNECTED, (
            f'MCP server "{name}" {how} during {f.phase}; run it by hand to see why'
        )
    if isinstance(cause, MCPError):
        return ServerState.DISCONNECTED, (
            f'MCP server "{name}" refused {f.phase} with error {cause.code}: {cause.message}; check its version '
            "and logs"
        )
    if isinstance(cause, ValidationError | ValueError | RuntimeError):
        return ServerState.DISCONNECTED, (
            f'MCP server "{name}" broke the MCP protocol during {f.phase}: {_short(cause)}; check its version'
        )
    if isinstance(cause, MCPServerError):  # Keen's own words about this server (a broken listing)
        return ServerState.DISCONNECTED, cause.message
    return ServerState.DISCONNECTED, f'MCP server "{name}" failed during {f.phase}: {_short(cause)}'


def _request_of(phase: str) -> str:
    """The request a connect phase sends, as an error names it."""
    return {"list_tools": "tools/list", "initialize": "initialize"}.get(phase, phase)


def _classify_auth(f: ConnectFacts) -> tuple[ServerState, str]:
    error = auth_status_error(
        f.server,
        f.http_status or 401,
        auth=f.auth,
        has_token=f.has_token,
        www_authenticate=f.www_authenticate,
        config_name=f.config_name,
        key_from=f.key_from,
    )
    state = ServerState.AUTH_REQUIRED if isinstance(error, AuthRequired) else ServerState.AUTH_FAILED
    return state, error.message


def unreachable_message(server: str, url: str, cause: BaseException) -> str:
    """What a connection refused or timed out at ``url`` says (not yet redacted)."""
    return f'cannot reach MCP server "{server}" at {url}: {_short(cause)}; check that it is running and the url is right'


AUTH_STATUSES = frozenset({401, 403})
"""The HTTP statuses that mean the server refused the caller's credentials (RFC 9110 15.5.2, 15.5.4)."""


def sign_in_message(server: str) -> str:
    """What an OAuth server with no usable sign-in says (state ``auth_required``)."""
    return f'MCP server "{server}" needs you to sign in'


def auth_status_error(
    server: str,
    status: int,
    *,
    auth: str,
    has_token: bool = False,
    www_authenticate: str | None = None,
    config_name: str = "configs.json",
    key_from: tuple[str, ...] = (),
) -> AuthRequired | AuthFailed:
    """The one mapping of an HTTP 401/403 answer to ``auth_required`` or ``auth_failed``.

    By the server's ``auth`` type in configs.json: ``api_key`` -> AuthFailed (the key was
    refused); ``oauth`` -> AuthFailed when a saved sign-in (``has_token``) was rejected,
    else AuthRequired; ``none`` -> AuthFailed for 403, else AuthRequired naming the
    challenge's scheme (``www_authenticate``) and how to add ``auth`` (to ``config_name``,
    where the server's entry is). A refused API key's hint names the variables ``key_from``
    its ``auth.key`` reads (their names: the value is the secret). Messages end with the next
    step (docs/architecture.md "Servers and their states").
    """
    if auth == "api_key":
        key = '"auth.key",'
        if key_from:
            variables = " and ".join(key_from)
            key = f'{variables}, which "auth.key" reads,'
        return AuthFailed(
            f'MCP server "{server}" rejected the API key (HTTP {status}); check {key} "auth.header" and '
            f'"auth.scheme" in {config_name}',
            server=server,
        )
    if auth == "oauth":
        if has_token:
            return AuthFailed(
                f'MCP server "{server}" rejected the saved sign-in (HTTP {status})',
                server=server,
                remedy=Remedy.SIGN_IN,
            )
        return AuthRequired(sign_in_message(server), server=server, remedy=Remedy.SIGN_IN)
    if status == 403:
        return AuthFailed(
            f'MCP server "{server}" refused access (HTTP 403); check its access settings', server=server
        )
    scheme = (www_authenticate or "").split(" ", 1)[0] or "credentials"
    return AuthRequired(
        f'MCP server "{server}" requires authentication (HTTP 401, {scheme}); add "auth" to it in {config_name}: '
        '{"type": "api_key", "key": "${ENV_VAR}"} or {"type": "oauth"}',
        server=server,
    )


def unsendable_arguments(
    exc: BaseException, arguments: Any, *, server: str, tool: str
) -> InvalidArguments | None:
    """``InvalidArguments`` when a ``tools/call`` failed because the caller's own arguments
    cannot be written as JSON (a lone surrogate such as ``"\\ud800"`` parses from JSON text
    but is no Unicode; a library caller's object has no JSON form): the server never saw the
    request and the connection stays up. ``None`` for every other failure, a request the
    server's own data made unsendable included (that is :func:`translate_call_error`'s)."""
    cause = root_cause(exc)
    if not isinstance(cause, PydanticSerializationError | UnicodeEncodeError):
        return None
    try:
        to_json(arguments)
    except ValueError as unsendable:  # PydanticSerializationError is one
        return InvalidArguments(
            redactor.redact(
                f'the arguments for "{name_in_message(tool)}" on MCP server "{server}" cannot be sent as JSON '
                f"({_short(unsendable)}); send Unicode text and JSON values only"
            ),
            server=server,
            tool=tool,
            errors=[("$", "not JSON text")],
        )
    return None


def translate_call_error(
    exc: BaseException,
    *,
    server: str,
    tool: str,
    timeout: float,
    http_status: int | None = None,
    config_name: str = "configs.json",
    method: str = "tools/call",
) -> MCPServerError:
    """Map a failed ``tools/call`` to a Keen error (redacted, actionable); ``config_name``:
    where the server's entry is, as a timeout's or a redirect's remedy names it; ``method``:
    the request that failed when it was another (``resources/read``, ``prompts/get``), as a
    server's JSON-RPC ``-32601`` (method not found) names it."""
    cause = root_cause(exc)
    if isinstance(cause, MCPServerError):
        return cause
    if isinstance(cause, TimeoutError) or (isinstance(cause, MCPError) and cause.code == REQUEST_TIMEOUT):
        return CallTimeout(
            f'"{server}/{name_in_message(tool)}" did not finish within {timeout:g} s and was cancelled; retry, or raise '
            f'"timeouts.call_tool" for "{server}" in {config_name}',
            server=server,
            tool=tool,
            seconds=timeout,
        )
    if http_status in AUTH_STATUSES:
        msg = redactor.redact(
            f'MCP server "{server}" rejected the credentials during the call (HTTP {http_status}); fix them'
        )
        return AuthFailed(msg, server=server, tool=tool, remedy=Remedy.RECONNECT)
    if isinstance(cause, MCPError):
        # A server writes this message: bounded before it reaches an error, a log or a model.
        # Redacted before it is cut, so no secret survives in halves.
        detail = _cut(redactor.redact(cause.message), _DETAIL_CHARS)
        if over_message_bound(cause):
            words = _too_large_words(server, f'for "{name_in_message(tool)}"')
            return RemoteProtocolError(
                f"{words}; ask the tool for less (a smaller page, range or file)", server=server, tool=tool
            )
        if went_away(cause):
            return ServerDisconnected(
                f'MCP server "{server}" went away during "{name_in_message(tool)}"',
                server=server,
                tool=tool,
                remedy=Remedy.RECONNECT,
            )
        if http_status == SESSION_GONE_STATUS and cause.code in _SESSION_GONE_CODES:
            # The server restarted or ended the session (MCP 2025-11-25 "Session Management":
            # it answers that session's requests with HTTP 404): every later request would fail
            # the same way until a new one begins. Only with -32600 (the SDK's own "Session
            # terminated", or the server's "Session not found") or -32001 (the TypeScript
            # SDK's): a server's own error sent with a 404 (a -32002 "Resource not found", a
            # -32601) is the request's own.
            return ServerDisconnected(
                f'MCP server "{server}" no longer knows Keen\'s session (HTTP 404 to "{name_in_message(tool)}"): it '
                "restarted or ended it; reconnect to start a new one",
                server=server,
                tool=tool,
                remedy=Remedy.RECONNECT,
            )
        if fault := http_answer_fault(cause, f'"{name_in_message(tool)}"', http_status, config_name):
            what, advice = fault
            return RemoteProtocolError(
                redactor.redact(f'MCP server "{server}" {what}; {advice}'),
                server=server,
                tool=tool,
            )
        if cause.code == INVALID_PARAMS:
            return InvalidArguments(
                f'MCP server "{server}" rejected the arguments for "{name_in_message(tool)}": {detail}',
                server=server,
                tool=tool,
                errors=[("$", detail)],
            )
        if cause.code == METHOD_NOT_FOUND:
            return RemoteProtocolError(
                f'MCP server "{server}" does not support {method}: {detail}', server=server, tool=tool
            )
        if cause.code == URL_ELICITATION_REQUIRED:
            return _user_action(cause, server, tool)
        return RemoteProtocolError(
            f'MCP server "{server}" answered "{name_in_message(tool)}" with JSON-RPC error {cause.code}: {detail}',
            server=server,
            tool=tool,
        )
    if isinstance(cause, httpx2.HTTPError | OSError):
        # What to do is the remedy's, worded by each front end: keen serve reconnects by
        # itself, keen chat has /mcp connect, the CLI keen mcp connect.
        return ServerDisconnected(
            redactor.redact(
                f'MCP server "{server}" is unreachable ({_short(cause)}) during "{name_in_message(tool)}"; check that it is running'
            ),
            server=server,
            tool=tool,
            remedy=Remedy.RECONNECT,
        )
    return RemoteProtocolError(
        redactor.redact(
            f'MCP server "{server}" sent an invalid answer to "{name_in_message(tool)}": {_short(cause)}'
        ),
        server=server,
        tool=tool,
    )


_DETAIL_CHARS = 2000


def _user_action(cause: MCPError, server: str, tool: str) -> UserActionRequired:
    """``-32042``: the pages the server wants the user to open (URL mode elicitation)."""
    pages: list[tuple[str, str]] = []
    ids: list[str] = []
    refused = 0
    data = cause.data if isinstance(cause.data, dict) else {}
    for item in data.get("elicitations") or []:  # pyright: ignore[reportUnknownVariableType]
        if not isinstance(item, dict):
            continue
        url, note = str(item.get("url") or ""), str(item.get("message") or "")  # pyright: ignore[reportUnknownArgumentType]
        # The URL reaches the model and the event log: one holding a secret Keen knows is refused.
        if check_url(url) is None and redactor.redact(url) == url:
            pages.append((_cut(redactor.redact(one_line(note, _DETAIL_CHARS)), _DETAIL_CHARS), url))
            elicitation_id = item.get("elicitationId")  # pyright: ignore[reportUnknownVariableType]
            if isinstance(elicitation_id, str) and elicitation_id and len(elicitation_id) <= _DETAIL_CHARS:
                ids.append(elicitation_id)
        else:
            refused += 1
    if refused or len(ids) != len(pages):
        ids = []  # a page the user cannot be shown, or one without an id, never completes here
    if not pages:
        why = f" ({refused} link{'s' * (refused != 1)} refused as unsafe)" if refused else ""
        return UserActionRequired(
            f'MCP server "{server}" needs the user to open a page before "{name_in_message(tool)}" can run, but '
            f"named none Keen will show{why}; ask the server's owner",
            server=server,
            tool=tool,
        )
    listed = "; ".join(f"{note} {url}".strip() for note, url in pages)
    return UserActionRequired(
        f'MCP server "{server}" needs the user to open a page before "{name_in_message(tool)}" can run: {listed}. '
        "The user should open it in a browser and finish there; then call the tool again",
        server=server,
        tool=tool,
        pages=pages,
        elicitation_ids=ids,
    )


def _cut(text: str, limit: int) -> str:
    return shorten(text, limit)


def _status(exc: httpx2.HTTPStatusError) -> int:
    return exc.response.status_code


def _short(exc: BaseException, limit: int = 300) -> str:
    # Redacted before the cut: a cut secret no longer matches, and its head would survive.
    return one_line(redactor.redact(str(exc) or type(exc).__name__), limit)
