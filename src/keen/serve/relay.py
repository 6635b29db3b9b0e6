"""What an upstream server asks or logs during a host's call, passed to that host.

``keen serve`` gives its Manager a :class:`keen.mcp.connection.relay.Relay`, so its upstream sessions
advertise elicitation (form and URL), sampling and roots; around each call it sets the
call's :class:`HostPeer` (:data:`keen.mcp.connection.relay.CALL_PEER`). A request an upstream sends
during the call comes here and goes to the host on the call's own channel (MCP 2025-11-25,
"Client Features"; over Streamable HTTP on the POST's event stream, "Sending Messages to
the Server"); the host's answer goes back to the upstream. A log message
(``notifications/message``) goes to the host when its level is one the host asked for:
``logging/setLevel`` (2025-11-25; every level until it is sent), or the call's own
``io.modelcontextprotocol/logLevel`` (2026-07-28). Log messages are bounded
(:class:`LogBound`): each one's data is cut to :data:`MAX_LOG_CHARS` characters with a note,
and each upstream server gets a burst, then a steady rate, for each host; the host is told
once how many were dropped, at the call's end and every :data:`DROPPED_EVERY` seconds while
they are.

A 2026-07-28 host cannot be sent a request: its calls' channel is a
:class:`keen.serve.rounds.RoundsChannel`, whose questions become the call's
``InputRequiredResult``. Keen declines on the host's behalf, with a message that says why,
when the host did not declare the capability a request needs, or when Keen has no way to ask
it (an HTTP call whose POST does not accept ``text/event-stream``). A question the upstream
gives up on, or still open when the call ends, is withdrawn from the host
(``notifications/cancelled``). See docs/serve.md "During a call".
"""

from __future__ import annotations

import collections
import contextlib
import json
import re
import secrets
import time
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple, Protocol

import anyio
import mcp_types as mt
from anyio.streams.memory import MemoryObjectSendStream
from mcp.server.connection import allowed_log_levels
from mcp.shared.exceptions import MCPError
from mcp.shared.message import ServerMessageMetadata
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import BaseModel
from starlette.types import Message, Send

from keen._redact import redactor
from keen._terminal import terminal_text

__all__ = [
    "CHANNEL_KEY",
    "DROPPED_EVERY",
    "HOST_KEY",
    "LEVEL_KEY",
    "LOG_BURST",
    "LOG_HOSTS",
    "LOG_PER_SECOND",
    "LOG_QUEUE",
    "MAX_LOG_CHARS",
    "SSE_HEADERS",
    "STREAM_KEY",
    "HostChannel",
    "HostPeer",
    "LogBound",
    "Replies",
    "SessionChannel",
    "SseChannel",
    "host_capabilities",
    "log_levels",
    "shown_log_data",
]

CHANNEL_KEY = "keen.channel"
"""ASGI scope key: the :class:`SseChannel` of a handshake-era HTTP ``tools/call``."""
STREAM_KEY = "keen.stream"
"""ASGI scope key: this POST is answered on the SDK's own event stream (the host's
notifications may ride it)."""
HOST_KEY = "keen.host"
"""ASGI scope key: what the host of a handshake-era HTTP session declared at ``initialize``
(:func:`host_capabilities`; kept with the session in the store)."""
LEVEL_KEY = "keen.log_level"
"""ASGI scope key: the level the host of a handshake-era HTTP session set with
``logging/setLevel`` (kept with the session in the store), or None."""

LEVELS: tuple[mt.LoggingLevel, ...] = (
    "debug",
    "info",
    "notice",
    "warning",
    "error",
    "critical",
    "alert",
    "emergency",
)
MAX_LOG_CHARS = 8_000
"""Characters of one upstream log message's data keen serve passes to a host, escapes included
(a string's own characters; other data's as JSON text); a longer one is cut, with a note
giving its length and how much of it is shown."""
LOG_BURST = 100
"""Log messages of one upstream server keen serve passes to one host at once, before
:data:`LOG_PER_SECOND`."""
LOG_PER_SECOND = 20.0
"""Log messages a second of one upstream server keen serve passes to one host after a burst."""
LOG_HOSTS = 4_096
"""Hosts whose log buckets :class:`LogBound` keeps (the least recently logged to go first)."""
DROPPED_EVERY = 10.0
"""Seconds between two notices to a host of log messages dropped while a flood goes on."""
LOG_QUEUE = 16
"""Log messages (already cut) of one call waiting for its host; past that they are dropped
(and counted), so a host that stops reading holds only these, not the upstream's messages."""
_LOGGER_CHARS = 200
"""Characters of an upstream's ``logger`` name keen serve passes (a name, not a message)."""
_REDACT_MARGIN = 1_024
"""Characters past the cut that are redacted with the kept text, so a secret that starts
before the cut is matched whole (and blanked) rather than shown in part."""

SSE_HEADERS = [
    (b"content-type", b"text/event-stream"),
    (b"cache-control", b"no-cache, no-transform"),
    (b"x-accel-buffering", b"no"),
]
"""The response headers of every event stream keen serve writes itself."""


def host_capabilities(declared: mt.ClientCapabilities | Mapping[str, Any] | None) -> list[str]:
    """What a host declared that Keen relays: ``elicitation.form``, ``elicitation.url``,
    ``sampling``, ``sampling.tools``, ``roots``. An ``elicitation`` with neither ``form`` nor
    ``url`` is form mode (MCP 2025-11-25, Elicitation, "Capabilities")."""
    if isinstance(declared, BaseModel):
        declared = declared.model_dump(by_alias=True, exclude_none=True)
    if not isinstance(declared, Mapping):
        return []
    found: list[str] = []
    elicitation = declared.get("elicitation")
    if isinstance(elicitation, Mapping):
        modes = [m for m in ("form", "url") if isinstance(elicitation.get(m), Mapping)]
        found += [f"elicitation.{m}" for m in modes or ["form"]]
    sampling = declared.get("sampling")
    if isinstance(sampling, Mapping):
        found.append("sampling")
        if isinstance(sampling.get("tools"), Mapping):
            found.append("sampling.tools")
    if isinstance(declared.get("roots"), Mapping):
        found.append("roots")
    return found


def log_levels(
    protocol_version: str, meta: Mapping[str, Any] | None, set_level: str | None
) -> frozenset[str]:
    """The log levels a call's host gets: from ``set_level`` up (``logging/setLevel``; every
    level when it never sent one) in the handshake era; what the call's ``_meta`` asked for
    (nothing when it asked for none) in the 2026-07-28 era."""
    if protocol_version in MODERN_PROTOCOL_VERSIONS:
        return frozenset(allowed_log_levels(protocol_version, meta))
    start = LEVELS.index(set_level) if set_level in LEVELS else 0  # type: ignore[arg-type]
    return frozenset(LEVELS[start:])


class LogBound:
    """How many log messages of each upstream server keen serve passes to its hosts, and how
    much of each: a token bucket per host and server (``burst`` at once, then
    ``per_second``), shared by the host's calls, so a server that floods cannot flood a host,
    nor keen serve's memory (each message the SDK hands over is a task of its own until it
    is passed or dropped), and one host's flooding call does not spend another host's share.
    A host is a handshake-era HTTP session, the stdio connection, or a 2026-07-28 HTTP
    caller's principal (its bearer token, or its address when no token is configured:
    :data:`keen.serve.server.PRINCIPAL_KEY`); its buckets go when its session ends
    (:meth:`forget`), and at most ``max_hosts`` hosts' are
    kept (the least recently logged to go first: one that logs again starts with a full
    burst). See docs/serve.md "During a call" ("Log messages").

    Args:
        burst: messages of one server passed to one host at once.
        per_second: messages of one server passed to one host a second after a burst (> 0).
        max_chars: characters of one message's data passed (the rest cut, with a note).
        report_every: seconds between two notices to a host of messages dropped while a
            flood goes on (the rest are told when the call ends).
        clock: seconds, monotonic (a test's own clock).
        max_hosts: hosts whose buckets are kept (>= 1).
    """

    def __init__(
        self,
        *,
        burst: int = LOG_BURST,
        per_second: float = LOG_PER_SECOND,
        max_chars: int = MAX_LOG_CHARS,
        report_every: float = DROPPED_EVERY,
        clock: Callable[[], float] = time.monotonic,
        max_hosts: int = LOG_HOSTS,
    ) -> None:
        if burst < 1 or not per_second > 0 or max_chars < 1 or max_hosts < 1:
            raise ValueError(
                "a log bound needs burst >= 1, per_second > 0, max_chars >= 1 and max_hosts >= 1"
            )
        self.burst, self.per_second, self.max_chars = burst, per_second, max_chars
        self.report_every = report_every
        self.clock = clock
        self.max_hosts = max_hosts
        self._buckets: collections.OrderedDict[str, dict[str, tuple[float, float]]] = (
            collections.OrderedDict()
        )
        """Host -> server -> (tokens, when they were counted); the least recently logged host
        first. A host's servers are the configured ones, so each host holds a bounded few."""

    def buckets_kept(self) -> int:
        """Buckets kept (one per host and server logged to), for tests and stats. A method, not
        ``__len__``: an empty bound must not be falsy (``bound or LogBound()`` would replace it)."""
        return sum(len(servers) for servers in self._buckets.values())

    def take(self, host: str, server: str) -> bool:
        """Whether one more log message of ``server`` may pass to ``host`` now (it then counts)."""
        now = self.clock()
        servers = self._buckets.get(host)
        if servers is None:
            servers = self._buckets[host] = {}
            while len(self._buckets) > self.max_hosts:
                self._buckets.popitem(last=False)
        else:
            self._buckets.move_to_end(host)
        tokens, then = servers.get(server, (float(self.burst), now))
        tokens = min(float(self.burst), tokens + (now - then) * self.per_second)
        if tokens < 1:
            servers[server] = (tokens, now)
            return False
        servers[server] = (tokens - 1, now)
        return True

    def forget(self, host: str) -> None:
        """``host``'s session ended: its buckets go (a host that comes back starts full).

        A call of that session still running (a ``DELETE`` does not end it) makes a bucket
        again, full, with its next log message: it is kept as any other host's, until it is
        the least recently logged of ``max_hosts``. Not refused: the call's host still reads
        its stream, and a host that wants a full burst again can as well open a new session.
        """
        self._buckets.pop(host, None)

    def words(self) -> str:
        """The bound in words, for the notice of what was dropped."""
        return (
            f"at most {self.burst:,} at once, then {self.per_second:g} a second, of each server to each host"
        )


def shown_log_data(data: Any, limit: int = MAX_LOG_CHARS) -> Any:
    """An upstream log message's ``data`` as keen serve passes it on: what Keen knows of
    secrets blanked, invisible and control characters written as escapes
    (:func:`keen._terminal.terminal_text`), and, when it is longer than ``limit`` characters
    so escaped (a string's own characters; other data's as JSON text), cut to ``limit``, with
    a note (a string, then) giving how many characters of its start are shown and the length
    of the server's data in the same unit: a string's characters (a quote or a newline is
    one, as the host gets it), or other data's JSON text."""
    text = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False, default=str)
    if len(text) <= limit:  # escapes only lengthen it: a longer one is cut below
        try:
            redacted = json.loads(redactor.redact(json.dumps(data, ensure_ascii=False, default=str)))
        except ValueError:
            redacted = redactor.redact(str(data))
        shown = _escaped(redacted)
        if len(shown if isinstance(shown, str) else json.dumps(shown, ensure_ascii=False)) <= limit:
            return shown
    # Redacted past the cut, escaped, then cut (an escape is 10 characters at most, so the
    # limit holds for what the host sees): a secret the cut runs through is blanked whole,
    # and what could begin a known secret at the end is dropped too; a 1 MB message costs
    # only the kept part's redaction.
    head = terminal_text(redactor.redact(text[: limit + _REDACT_MARGIN]))[:limit]
    head = _PART_ESCAPE.sub("", head)
    head = head[: len(head) - redactor.unsafe_tail(head)]
    # Both counts are exact in the unit they name. "N characters cut" is not given: the
    # server's text and what the host sees differ in length (blanked secrets, escapes), and
    # how long the rest would be as the host sees it is known only by redacting all of it,
    # which is the cost the cut saves (a quarter of a second a megabyte, per message passed).
    longer = "" if len(text) > limit else " (more once escaped)"
    whole = (
        f"string of {len(text):,} characters{longer}"
        if isinstance(data, str)
        else f"data, {len(text):,} characters as JSON text{longer}"
    )
    note = (
        f"\n[truncated: {len(head):,} characters shown (secrets blanked, invisible ones escaped) of "
        f"the server's {whole}; keen serve passes at most {limit:,}]"
    )
    return head + note


def _shown_logger(logger: str) -> str:
    """An upstream's ``logger`` name as keen serve passes it: redacted across its cut (as
    :func:`shown_log_data` is), cut to :data:`_LOGGER_CHARS`, escaped on one line."""
    head = redactor.redact(logger[: _LOGGER_CHARS + _REDACT_MARGIN])
    if len(head) > _LOGGER_CHARS:
        head = head[:_LOGGER_CHARS]
        head = head[: len(head) - redactor.unsafe_tail(head)]
    return terminal_text(head, one_line=True)


_PART_ESCAPE = re.compile(r"\\(?:x[0-9a-f]?|u[0-9a-f]{0,3}|U[0-9a-f]{0,7})?\Z")
"""The start of an escape of :func:`keen._terminal.terminal_text` a cut ran through."""


def _escaped(value: Any) -> Any:
    """``value`` with every string (and key) through :func:`keen._terminal.terminal_text`."""
    if isinstance(value, str):
        return terminal_text(value)
    if isinstance(value, dict):
        return {terminal_text(str(k)): _escaped(v) for k, v in value.items()}  # pyright: ignore[reportUnknownVariableType]
    if isinstance(value, list):
        return [_escaped(v) for v in value]  # pyright: ignore[reportUnknownVariableType]
    return value


class HostChannel(Protocol):
    """How Keen reaches the host during one call."""

    async def request(self, request: mt.InputRequest, result_type: type[BaseModel]) -> BaseModel:
        """Send ``request`` to the host; its answer as ``result_type``. Raises ``MCPError``
        for the host's error."""
        ...

    async def notify(self, notification: mt.ServerNotification) -> None:
        """Send ``notification`` to the host, on the call's stream."""
        ...

    async def progress(self, progress: float, total: float | None, message: str | None) -> None:
        """Progress of the call, on the host's own progress token (none: nothing is sent)."""
        ...


class SessionChannel:
    """The SDK's own channel of the call: stdio hosts, and HTTP calls the SDK streams."""

    def __init__(self, ctx: Any) -> None:
        self._ctx = ctx

    async def request(self, request: mt.InputRequest, result_type: type[BaseModel]) -> BaseModel:
        related = ServerMessageMetadata(related_request_id=self._ctx.request_id)
        return await self._ctx.session.send_request(request, result_type, metadata=related)

    async def notify(self, notification: mt.ServerNotification) -> None:
        await self._ctx.session.send_notification(notification, related_request_id=self._ctx.request_id)

    async def progress(self, progress: float, total: float | None, message: str | None) -> None:
        await self._ctx.session.report_progress(progress, total, message)


class Replies:
    """Handshake-era HTTP hosts' answers to Keen's requests: each comes in a POST of its own
    (MCP 2025-11-25, Transports), matched here to the call's :class:`SseChannel` that asked."""

    def __init__(self) -> None:
        self._waiting: dict[tuple[str, str], MemoryObjectSendStream[dict[str, Any]]] = {}

    def expect(
        self, caller: str, request_id: str, to: MemoryObjectSendStream[dict[str, Any]]
    ) -> Callable[[], None]:
        """Send the answer of ``caller`` to ``request_id`` to ``to``; returns the undo."""
        key = (caller, request_id)
        self._waiting[key] = to

        def undo() -> None:
            self._waiting.pop(key, None)

        return undo

    def deliver(self, caller: str, message: Mapping[str, Any]) -> bool:
        """A host's JSON-RPC response; False when no request of this caller waits for it."""
        request_id = message.get("id")
        to = self._waiting.pop((caller, str(request_id)), None) if isinstance(request_id, str) else None
        if to is None:
            return False
        try:
            to.send_nowait(dict(message))
        except (anyio.WouldBlock, anyio.BrokenResourceError, anyio.ClosedResourceError):
            return False
        return True


class SseChannel:
    """A handshake-era HTTP call answered on an event stream Keen writes itself.

    The SDK's handler serves each POST statelessly, so it cannot send the host a request
    (its answer comes in another POST). Keen writes the call's requests and notifications
    as SSE events on the POST's response, matches the host's answers (:class:`Replies`),
    and ends the stream with the call's result. The stream starts only with its first
    event: a call that sends nothing is still one JSON body.

    Args:
        send: the POST's ASGI ``send``.
        caller: the session scope the answers must come from.
        replies: where answers are matched.
        progress_token: the host's token for this call (``_meta.progressToken``), if any.
    """

    def __init__(self, send: Send, caller: str, replies: Replies, progress_token: Any = None) -> None:
        self._send, self._caller, self._replies = send, caller, replies
        self._token = progress_token
        self._lock = anyio.Lock()
        self._started = self._finished = False
        self._body = bytearray()
        self._pending: list[MemoryObjectSendStream[dict[str, Any]]] = []

    async def _event(self, message: dict[str, Any]) -> None:
        async with self._lock:
            if self._finished:
                raise MCPError(code=mt.INTERNAL_ERROR, message="the host's call has already ended")
            if not self._started:
                self._started = True
                await self._send({"type": "http.response.start", "status": 200, "headers": SSE_HEADERS})
            await self._send({"type": "http.response.body", "body": _frame(message), "more_body": True})

    async def request(self, request: mt.InputRequest, result_type: type[BaseModel]) -> BaseModel:
        request_id = f"keen-{secrets.token_hex(8)}"
        to, answers = anyio.create_memory_object_stream[dict[str, Any]](1)
        self._pending.append(to)
        undo = self._replies.expect(self._caller, request_id, to)
        try:
            dumped = request.model_dump(by_alias=True, mode="json", exclude_none=True)
            await self._event({"jsonrpc": "2.0", "id": request_id, **dumped})
            try:
                reply = await answers.receive()
            except anyio.EndOfStream:
                raise MCPError(
                    code=mt.INTERNAL_ERROR, message="the host's call ended before it answered"
                ) from None
            except anyio.get_cancelled_exc_class():
                # The upstream gave up on its request (or the call ended): the host may stop
                # asking its user (MCP 2025-11-25, Utilities, "Cancellation").
                with anyio.CancelScope(shield=True), contextlib.suppress(Exception):
                    cancelled = {
                        "requestId": request_id,
                        "reason": "the MCP server no longer needs the answer",
                    }
                    await self._event(
                        {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": cancelled}
                    )
                raise
        finally:
            undo()
            self._pending.remove(to)
            to.close()
            answers.close()
        error = reply.get("error")
        if isinstance(error, Mapping):
            raise MCPError(
                code=int(error.get("code", mt.INTERNAL_ERROR)),
                message=str(error.get("message", "")),
                data=error.get("data"),
            )
        return result_type.model_validate(reply.get("result"), by_name=False)

    async def notify(self, notification: mt.ServerNotification) -> None:
        dumped = notification.model_dump(by_alias=True, mode="json", exclude_none=True)
        await self._event({"jsonrpc": "2.0", **dumped})

    async def progress(self, progress: float, total: float | None, message: str | None) -> None:
        if self._token is None:
            return
        params = mt.ProgressNotificationParams(
            progress_token=self._token, progress=progress, total=total, message=message
        )
        await self.notify(mt.ProgressNotification(params=params))

    def app_send(self) -> Send:
        """The ``send`` for the SDK handler's own response: passed on as it is while nothing
        was streamed, else its body becomes the stream's last event."""

        async def send(message: Message) -> None:
            async with self._lock:
                if not self._started:
                    self._finished = True
                    await self._send(message)
                    return
                if message["type"] != "http.response.body":
                    return  # the stream's own start was sent
                self._body += message.get("body", b"")
                if message.get("more_body", False) or self._finished:
                    return
                self._finished = True
                try:
                    final: Any = json.loads(bytes(self._body)) if self._body else None
                except ValueError:
                    final = None
                body = _frame(final) if isinstance(final, dict) else b""
                await self._send({"type": "http.response.body", "body": body, "more_body": False})

        return send

    def close(self) -> None:
        """The call ended: requests still waiting for the host get an error."""
        for to in list(self._pending):
            to.close()


def _frame(message: dict[str, Any]) -> bytes:
    data = json.dumps(message, separators=(",", ":"), ensure_ascii=False)
    return f"event: message\r\ndata: {data}\r\n\r\n".encode()


class HostPeer:
    """One call's host, as the upstream's requests and log messages see it
    (:class:`keen.mcp.connection.relay.CallPeer`).

    Args:
        host: who the host is (calls of one host share it): its caller scope, or, for a
            2026-07-28 caller over HTTP (no session), its principal
            (:data:`keen.serve.server.PRINCIPAL_KEY`: its token, or its address when no
            token is configured).
        channel: how to reach the host during the call; None when there is none.
        capabilities: what the host declared (:func:`host_capabilities`).
        levels: the log levels the host gets (:func:`log_levels`).
        cannot_ask: why Keen cannot send the host a request in this call, or None when it can.
        audit: ``(server, method, outcome, code)``, one event per request relayed or declined.
        log_bound: how many log messages of each server pass to each host, and how much of
            each (keen serve's one :class:`LogBound`, shared by every call; a bound of its own
            when None).
    """

    def __init__(
        self,
        host: str,
        channel: HostChannel | None,
        *,
        capabilities: list[str],
        levels: frozenset[str],
        cannot_ask: str | None = None,
        audit: Callable[[str, str, str, str | None], None] | None = None,
        log_bound: LogBound | None = None,
    ) -> None:
        self._host = host
        self.channel = channel
        self.capabilities = capabilities
        self.levels = levels
        self.cannot_ask = cannot_ask if channel is not None else cannot_ask or "Keen cannot reach the host"
        self._audit = audit or (lambda *_: None)
        self._done = anyio.Event()
        self._asking = 0
        self._idle = anyio.Event()
        self._bound = log_bound if log_bound is not None else LogBound()
        self._dropped: dict[str, tuple[int, int, float]] = {}
        """Server -> (log messages dropped since the host was last told, the most severe one's
        index in LEVELS, when the first of them was dropped)."""
        self._queue: collections.deque[_Queued] = collections.deque()
        """Log messages (cut, escaped) and drop notices waiting for the host, at most
        :data:`LOG_QUEUE`; one task at a time writes them (:meth:`_write`)."""
        self._writing = False
        self._written = anyio.Event()
        self._written.set()

    @property
    def host(self) -> str:
        return self._host

    async def end(self) -> None:
        """The call ended: a request still waiting for the host is withdrawn (the host is
        told, while its call's channel is open) and answered with an error; returns once it
        was, so the withdrawal reaches the host before the call's result (at most 2 s)."""
        self._done.set()
        with anyio.CancelScope(shield=True), anyio.move_on_after(2.0):
            if self._asking:
                await self._idle.wait()
            # The log messages still queued, then what a flood left untold, before the call's
            # result (its stream ends with it).
            await self._written.wait()
            with contextlib.suppress(Exception):  # a host gone mid-call loses them, nothing else
                await self._write()
            for server in list(self._dropped):
                notice = self._dropped_notice(server)
                if notice is not None and self.channel is not None:
                    try:
                        await self.channel.notify(notice.notification)
                    except Exception:  # a host gone mid-call loses the notice, nothing else
                        self._count_dropped(notice)

    async def ask(self, server: str, request: mt.InputRequest) -> mt.InputResponse | mt.ErrorData:
        needed, result_type = _needs(request)
        method = request.method
        if needed not in self.capabilities:
            self._audit(server, method, "declined", "capability_not_declared")
            return mt.ErrorData(
                code=mt.INVALID_REQUEST,
                message=f"The MCP host that made this call through Keen did not declare the {needed} "
                f"capability; Keen declined {method} on its behalf",
            )
        if self.channel is None or self.cannot_ask is not None:
            self._audit(server, method, "declined", "no_channel")
            return mt.ErrorData(code=mt.INVALID_REQUEST, message=f"Keen declined {method}: {self.cannot_ask}")
        answer: BaseModel | None = None
        self._asking += 1
        try:
            answer = await self._send(request, result_type)
        except MCPError as exc:
            self._audit(server, method, "error", str(exc.code))
            return exc.error
        except ValueError:  # the host's answer is not the request's result type
            self._audit(server, method, "error", "invalid_answer")
            return mt.ErrorData(
                code=mt.INVALID_PARAMS, message=f"the MCP host's answer to {method} does not validate"
            )
        finally:
            self._asking -= 1
            if not self._asking:
                self._idle.set()
        if answer is None:
            self._audit(server, method, "cancelled", None)
            return mt.ErrorData(code=mt.INTERNAL_ERROR, message="the host's call ended before it answered")
        self._audit(server, method, "relayed", None)
        return answer  # type: ignore[return-value]

    async def _send(self, request: mt.InputRequest, result_type: type[BaseModel]) -> BaseModel | None:
        """The host's answer, or None when the call ended first."""
        assert self.channel is not None
        answer: BaseModel | None = None
        failed: Exception | None = None
        async with anyio.create_task_group() as tg:

            async def call_ended() -> None:
                await self._done.wait()
                tg.cancel_scope.cancel()

            tg.start_soon(call_ended)
            try:
                answer = await self.channel.request(request, result_type)
            except Exception as exc:  # raised below, not wrapped in the task group's group
                failed = exc
            finally:
                tg.cancel_scope.cancel()
        if failed is not None:
            raise failed
        return answer

    async def log(self, server: str, params: mt.LoggingMessageNotificationParams) -> None:
        # The SDK runs each upstream notification as a task of its own holding the whole
        # message until this returns: so this never waits on the host for it. The message is
        # cut and queued (a full queue drops it, counted as the bound's drops are), and the
        # one task already writing to the host writes it; only that task waits on the host.
        if self.channel is None or params.level not in self.levels or self._done.is_set():
            return
        # Counted before any work: a dropped message ends its task at once.
        passes = self._bound.take(self._host, server) and len(self._queue) < LOG_QUEUE
        if not passes:
            self._count_dropped(_Queued(server, 1, LEVELS.index(params.level), None))
        if (
            server in self._dropped
            and self._bound.clock() - self._dropped[server][2] >= self._bound.report_every
        ):
            # Queued even when the queue is full: at most one a server every report_every.
            notice = self._dropped_notice(server)
            if notice is not None:
                self._queue.append(notice)
        if passes:
            # Named after its server, and with what Keen knows of secrets blanked, as every
            # text Keen passes on; invisible characters shown, and the data cut to its bound.
            logger = _shown_logger(params.logger) if params.logger else None
            name = f"{server}/{logger}" if logger else server
            data = shown_log_data(params.data, self._bound.max_chars)
            shown = mt.LoggingMessageNotificationParams(level=params.level, logger=name, data=data)
            notification = mt.LoggingMessageNotification(params=shown)
            self._queue.append(_Queued(server, 1, LEVELS.index(params.level), notification))
        del params  # the writer below may wait on the host: it need not hold the message
        if not self._writing:
            await self._write()

    async def _write(self) -> None:
        """Write the queued log messages to the host, until none is left (one writer at a
        time); on a failure (the host's channel is gone, or a 2026-07-28 host is between two
        rounds) the one that failed and the rest count as dropped, so the host is told."""
        if self._writing or self.channel is None:
            return
        self._writing, self._written = True, anyio.Event()
        try:
            while self._queue:
                queued = self._queue.popleft()
                try:
                    await self.channel.notify(queued.notification)
                except BaseException:
                    for lost in (queued, *self._queue):
                        self._count_dropped(lost)
                    self._queue.clear()
                    raise
        finally:
            self._writing = False
            self._written.set()

    def _count_dropped(self, lost: _Queued) -> None:
        """Count ``lost`` (a log message, or a notice not written) as dropped, to be told."""
        count, worst, since = self._dropped.get(lost.server, (0, 0, self._bound.clock()))
        self._dropped[lost.server] = (count + lost.messages, max(worst, lost.worst), since)

    def _dropped_notice(self, server: str) -> _Queued | None:
        """The notice to the host of the log messages of ``server`` dropped since the last
        one, at the level of the most severe of them (one the host asked for); the count
        starts again (it is counted again if the notice cannot be written)."""
        count, worst, _ = self._dropped.pop(server, (0, 0, 0.0))
        if not count:
            return None
        words = (
            f"keen serve dropped {count:,} log message{'' if count == 1 else 's'} of MCP server "
            f"{server!r} during this call: it passes {self._bound.words()}"
        )
        shown = mt.LoggingMessageNotificationParams(level=LEVELS[worst], logger="keen serve", data=words)
        return _Queued(server, count, worst, mt.LoggingMessageNotification(params=shown))

    async def completed(self, server: str, elicitation_id: str) -> None:
        # On the call's channel: over HTTP only while the call runs (its stream ends with it).
        if self.channel is not None:
            params = mt.ElicitCompleteNotificationParams(elicitation_id=elicitation_id)
            await self.channel.notify(mt.ElicitCompleteNotification(params=params))


class _Queued(NamedTuple):
    """A log message or a drop notice waiting for the host: what it counts as if lost."""

    server: str
    messages: int
    """Log messages it stands for: 1, or a notice's count."""
    worst: int
    """The most severe one's index in LEVELS."""
    notification: Any
    """What is written (a ``LoggingMessageNotification``; None for a message never queued)."""


def _needs(request: mt.InputRequest) -> tuple[str, type[BaseModel]]:
    """The host capability ``request`` needs, and its result's type."""
    if isinstance(request, mt.ElicitRequest):
        url = isinstance(request.params, mt.ElicitRequestURLParams)
        return ("elicitation.url" if url else "elicitation.form"), mt.ElicitResult
    if isinstance(request, mt.CreateMessageRequest):
        if request.params.tools or request.params.tool_choice:
            return "sampling.tools", mt.CreateMessageResultWithTools
        return "sampling", mt.CreateMessageResult
    return "roots", mt.ListRootsResult
