"""One configured server's connection: the owner task, its session, its tools.

Each server has exactly one owner task (docs/architecture.md "Servers and their states"). It enters the
transport and ``ClientSession`` in its own ``AsyncExitStack``, negotiates the protocol
era (``server/discover``, else the initialize handshake), lists every tools/list page,
publishes the session, then waits to be stopped, asked to reconnect, or told the
connection ended; meanwhile its ``ListWatch`` re-lists the tools when they change
(docs/architecture.md "Tools that change"). Only the owner ever closes the session: the
SDK's cancel scopes forbid closing it from another task.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import httpx2
import mcp_types as mt
from mcp.client.session import ClientSession
from mcp.client.subscriptions import Subscription
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from keen._redact import redact_url, redactor
from keen._text import closed, one_line
from keen._version import __version__
from keen.errors import AuthRequired, Remedy
from keen.mcp.config.secrets import register_server_secrets
from keen.mcp.config.servers import ApiKeyAuth, AuthFactory, HttpServerConfig, OAuthAuth, StdioServerConfig
from keen.mcp.connection._stderr import StderrCopy
from keen.mcp.connection.elicitation import (
    ElicitationCallback,
    SessionElicitation,
    UrlElicitationCallback,
    sdk_callback,
)
from keen.mcp.connection.message_size import StreamClosing
from keen.mcp.connection.relay import CALL_PEER, Relay
from keen.mcp.connection.sdk_private import negotiate_auto
from keen.mcp.connection.session import CheckedSession
from keen.mcp.connection.spawn import stdio_transport
from keen.mcp.connection.start_times import StartTimes
from keen.mcp.connection.starts import StartSlots, StartTurn
from keen.mcp.connection.translate import (
    ConnectFacts,
    classify_connect_failure,
    no_call_facts,
    sign_in_message,
)
from keen.mcp.listing.changes import ChangeObserver, RefreshReason, ToolsChanged, diff_tools
from keen.mcp.listing.resources import list_prompts, list_resource_templates, list_resources
from keen.mcp.listing.streams import EOFWatch
from keen.mcp.listing.tool_descriptions import with_full_descriptions
from keen.mcp.listing.tool_filter import InvalidTool, ToolListFilter, WriteWatch
from keen.mcp.listing.tool_pages import list_all_tools
from keen.mcp.listing.watch import DEFAULT_REFRESH_INTERVAL, ListWatch, listen_for_changes, open_subscription
from keen.mcp.types import ServerInfo, ServerState, ServerStatus, Tool, TransportFactory

if TYPE_CHECKING:
    from keen.mcp.listing.validation import ArgumentValidator

__all__ = ["ServerConnection"]

logger = logging.getLogger(__name__)

_STDERR_TAIL_LINES = 5
_DEBUG_LOG_CHARS = 200
"""Characters of a server's log message shown in keen's own debug log."""
_REDACT_MARGIN = 1_024
"""Characters past a cut redacted with what is kept, so a secret the cut runs through is
matched whole."""
_CLIENT_INFO = mt.Implementation(name="keen", version=__version__)


def _ignore(_status: ServerStatus) -> None:
    """The status callback of a retired connection."""


def _nothing() -> None:
    """The ``on_moved`` callback of a connection nobody counts."""


class ServerConnection:
    """State and owner task of one configured server. Not public: the Manager wraps it."""

    def __init__(
        self,
        name: str,
        config: HttpServerConfig | StdioServerConfig,
        *,
        logs_dir: Path,
        on_change: Callable[[ServerStatus], None],
        auth_factory: AuthFactory | None = None,
        transport: TransportFactory | None = None,
        elicitation: Callable[[], ElicitationCallback | None] = lambda: None,
        elicitation_url: Callable[[], UrlElicitationCallback | None] = lambda: None,
        relay: Callable[[], Relay | None] = lambda: None,
        on_tools: ChangeObserver | None = None,
        refresh_interval: float = DEFAULT_REFRESH_INTERVAL,
        launches: StartSlots | None = None,
        start_times: StartTimes | None = None,
        on_moved: Callable[[], None] | None = None,
        config_name: str = "configs.json",
        failed_before: bool = False,
    ) -> None:
        self.name = name
        self.config_name = config_name
        """Where this server's entry is, as remedies name it: configs.json, or the Manager's
        words for a config given in code."""
        self._moved = on_moved or _nothing
        """Told whenever :attr:`state` or :attr:`tools` is set: a cache of what every server
        lists (``keen serve``'s catalog) keys on the Manager's count of these instead of
        looking at every server per call."""
        self._launches = launches
        self._start_times = start_times
        """How long this server's last start took, for its place in the queue; told of this one."""
        self._turn_began: float | None = None
        """``time.monotonic()`` when this start's turn was granted; ``None`` without a turn."""
        self._elicitation = elicitation
        self._elicitation_url = elicitation_url
        self._relay = relay
        self._session_relay: Relay | None = None
        self.elicitations: SessionElicitation | None = None
        """The open session's elicitation state: its answers and the completions it awaits."""
        self._transport = transport
        self.config = config
        self.state = ServerState.CONFIGURED
        self.session: ClientSession | None = None
        self.tools: list[Tool] = []
        self.tools_by_name: dict[str, Tool] = {}
        self.resources: list[dict[str, Any]] = []
        self.resource_templates: list[dict[str, Any]] = []
        self.prompts: list[dict[str, Any]] = []
        self.info: ServerInfo | None = None
        self.last_error = "" if config.enabled else self.disabled_note
        self.last_connected_at: datetime | None = None
        self.last_refresh_at: datetime | None = None
        self._validator: ArgumentValidator | None = None
        self.http_status: int | None = None
        self.descriptions_uri: str | None = None
        self.auth: httpx2.Auth | None = None
        self.interactive_auth = False
        self._logs_dir = logs_dir
        self._on_change = on_change
        self._auth_factory = auth_factory
        self._stopping = False
        self._stop_why = ""
        self._refresh_requested = False
        self._wake = anyio.Event()
        self._settled = anyio.Event()
        self.finished = anyio.Event()
        self.running = False
        self._pending_waiters: list[anyio.Event] = []
        self._attempt_waiters: list[anyio.Event] = []
        self._eof = False
        self.closed_why = ""
        """Why the current session ended, or is about to, on a message over a bound
        (:mod:`keen.mcp.connection.message_size`: Keen's on stdio, the SDK's fixed one on
        HTTP+SSE), else ``""``."""
        self._stderr: StderrCopy | None = None
        self._tool_filter = ToolListFilter()
        self.invalid_tools: list[InvalidTool] = []
        """Tools of the latest listing that the MCP schema rejects: skipped, the rest usable."""
        self._connect_scope: anyio.CancelScope | None = None
        self._turn: StartTurn | None = None
        """This attempt's turn to start, when the Manager bounds starts."""
        self._superseded = False  # reconfigure() ended the attempt in progress
        self._facts = ConnectFacts(name, config.transport, config.auth_type, config_name=config_name)
        self._on_tools = on_tools
        self._tried = failed_before
        """An earlier attempt has ended (it connected and closed, or it failed; or, given
        ``failed_before``, the server's entry was invalid at start): a session published now
        is a reconnect, whose tools are told as a change even when there were none before (a
        server down at start)."""
        self._refresh_interval = refresh_interval
        self._early_notice = False
        self.watch: ListWatch | None = None
        """The connected session's re-list driver (``None`` while not connected)."""
        self.list_ttl_ms: int | None = None
        self.cache_scope: str | None = None
        register_server_secrets(config)

    @property
    def disabled_note(self) -> str:
        """Why a disabled server does not start, naming where its entry is."""
        return f'disabled in {self.config_name} ("enabled": false)'

    @property
    def validator(self) -> ArgumentValidator:
        """The server's argument validator, made at the first call that needs it: jsonschema
        (with ``regex`` and ``referencing``, 0.1-0.3 s of CPU to import) is loaded by the
        first call, not by connecting."""
        if self._validator is None:
            from keen.mcp.listing.validation import ArgumentValidator

            self._validator = ArgumentValidator(self.name)
        return self._validator

    def _reset_validator(self) -> None:
        # A new tool list: validators built from the old definitions go.
        if self._validator is not None:
            self._validator.reset()

    # -- status ---------------------------------------------------------------------------------------

    def status(self) -> ServerStatus:
        cfg = self.config
        return ServerStatus(
            name=self.name,
            transport=cfg.transport,
            auth=cfg.auth_type,
            state=self.state,
            enabled=cfg.enabled,
            url=redact_url(cfg.url) if isinstance(cfg, HttpServerConfig) else None,
            last_connected_at=self.last_connected_at,
            last_refresh_at=self.last_refresh_at,
            last_error=self.last_error,
            tool_count=len(self.tools),
            info=self.info,
            remedy=self._remedy(),
            list_ttl_ms=self.list_ttl_ms,
            cache_scope=self.cache_scope,
        )

    def _remedy(self) -> Remedy | None:
        cfg, state = self.config, self.state
        if not cfg.enabled:
            return Remedy.ENABLE_SERVER
        if state in (ServerState.AUTH_REQUIRED, ServerState.AUTH_FAILED):
            # OAuth: sign in again; other auth: fix configs.json, then reconnect.
            return Remedy.SIGN_IN if cfg.auth_type == "oauth" else Remedy.RECONNECT
        if state is ServerState.DISCONNECTED and self.last_error:
            return Remedy.RECONNECT
        return None

    def _set(self, state: ServerState, error: str | None = None) -> None:
        changed = state != self.state or (error is not None and error != self.last_error)
        self.state = state
        self._moved()
        if error is not None:
            self.last_error = redactor.redact(error)
        if changed:
            logger.debug("server %s: %s%s", self.name, state.value, f" ({self.last_error})" if error else "")
            self._on_change(self.status())

    @property
    def completion_notices(self) -> bool:
        """True when the connected session's era has ``notifications/elicitation/complete``
        (2025-11-25; the 2026-07-28 era has none)."""
        version = self.info.protocol_version if self.info else None
        return self.session is not None and version not in MODERN_PROTOCOL_VERSIONS

    @property
    def settled(self) -> anyio.Event:
        """Set once the first connection attempt has ended (connected or failed)."""
        return self._settled

    # -- control from other tasks ---------------------------------------------------------------------

    def stop(self, why: str = "") -> None:
        """Stop for good: the owner closes the session and returns. ``why`` completes
        'Keen stopped MCP server "x" as ...' in the error of a call the stop cuts short."""
        if not self._stopping:
            self._stop_why = why
        self._stopping = True
        if self._connect_scope is not None:
            self._connect_scope.cancel()
        self._wake.set()

    def reconfigure(self, config: HttpServerConfig | StdioServerConfig) -> None:
        """Take ``config`` (the server's entry, read again) for the next connection attempt.

        An open session stays until then: only its owner task may close it, and a refresh
        asks it to. Its secrets are known to the redactor before anything can log them.
        """
        register_server_secrets(config)
        self.config = config
        self._moved()  # what its tools look like through the pins follows the entry
        if self.state is ServerState.CONNECTING and self._connect_scope is not None:
            # An attempt with the old entry (a hung command the user just fixed) would hold
            # the reconnect until its own timeout: end it now, the next one takes the new entry.
            self._superseded = True
            self._connect_scope.cancel()
        if not config.enabled and self.state is ServerState.CONFIGURED:
            self.last_error = self.disabled_note
        elif config.enabled and self.last_error == self.disabled_note:
            self.last_error = ""

    def retire(self, why: str = "") -> None:
        """Stop for good, silently: the Manager dropped this server (its entry is invalid now,
        or gone), so its owner's last states are nobody's news; ``why`` as :meth:`stop`'s."""
        self._on_change = _ignore
        self._on_tools = None
        self.stop(why)

    async def refresh(self, *, interactive: bool = False) -> ServerStatus:
        """Ask the owner to reconnect and relist; wait for that new attempt to end."""
        self.interactive_auth = interactive
        done = anyio.Event()
        self._pending_waiters.append(done)
        self._refresh_requested = True
        self._wake.set()
        await done.wait()
        return self.status()

    def connection_lost(self, message: str) -> None:
        """A call saw the transport fail: mark disconnected and let the owner unwind the session."""
        if self.state is ServerState.CONNECTED:
            tail = self._stderr_tail()
            self._set(
                ServerState.DISCONNECTED, closed(message) + f" Last stderr: {tail}" if tail else message
            )
        self._eof = True
        self._wake.set()

    # -- the owner task -------------------------------------------------------------------------------

    async def run(self) -> None:
        """Owner loop: connect, serve, and reconnect only when asked (no automatic retry)."""
        self.running = True
        # A new event only for a new run: aclose() may already wait on this one (a Manager
        # closed before the owner task began), and replacing it would leave that wait to its
        # whole grace period.
        if self.finished.is_set():
            self.finished = anyio.Event()
        # A reconnect started during someone's call must not lend that call's peer to the
        # session's own tasks (they inherit this context): requests are routed by the relay.
        CALL_PEER.set(None)
        no_call_facts()  # nor that call's HTTP statuses
        try:
            while not self._stopping:
                self._refresh_requested = False
                self._eof = False
                self.closed_why = ""
                # Waiters registered before this attempt began are answered when it ends.
                self._attempt_waiters, self._pending_waiters = self._pending_waiters, []
                try:
                    await self._connect_and_serve()
                finally:
                    self._tried = True
                    self._settle()
                # Wakes during the attempt (EOF, a failed call) are spent; a refresh or stop
                # request has set its flag, checked below.
                self._wake = anyio.Event()
                if self._stopping:
                    break
                if not self._refresh_requested:
                    await self._wake.wait()
        finally:
            self.session = None
            self._attempt_waiters += self._pending_waiters
            self._pending_waiters = []
            self._settle()
            self.running = False
            self.finished.set()

    def _settle(self) -> None:
        # An attempt has ended (connected or failed): release refresh() and wait_ready() waiters.
        for waiter in self._attempt_waiters:
            waiter.set()
        self._attempt_waiters = []
        self._settled.set()

    async def _connect_and_serve(self) -> None:
        cfg = self.config
        facts = self._facts = ConnectFacts(
            self.name,
            cfg.transport,
            cfg.auth_type,
            command=cfg.command if isinstance(cfg, StdioServerConfig) else "",
            cwd=(cfg.cwd or "") if isinstance(cfg, StdioServerConfig) else "",
            url=redact_url(cfg.url) if isinstance(cfg, HttpServerConfig) else "",
            config_name=self.config_name,
            key_from=cfg.auth.key_from
            if isinstance(cfg, HttpServerConfig) and isinstance(cfg.auth, ApiKeyAuth)
            else (),
        )
        self.http_status = None
        self._early_notice = False
        self._superseded = False
        self._set(ServerState.CONNECTING)
        self._stderr = None
        served = False
        slot = await self._launch_slot(cfg)
        if slot is None:
            why = "stopped" if self._stopping else "its configs.json entry changed"
            self._set(ServerState.DISCONNECTED, f"{why} while waiting for its turn to start")
            return
        try:
            async with contextlib.AsyncExitStack() as stack:
                # The slot is given back once the connect phase ended (below, or on an error
                # by the finally), not when the session closes: a connected server is idle.
                stack.callback(slot)
                if self._transport is not None:
                    streams = await stack.enter_async_context(self._transport())
                elif isinstance(cfg, StdioServerConfig):
                    # Entered first, left last: the server is stopped before its stderr copy ends.
                    stderr = await stack.enter_async_context(
                        StderrCopy(self._logs_dir / f"{self.name}.stderr.log", self.name)
                    )
                    self._stderr = stderr
                    assert stderr.errlog is not None
                    streams = await stack.enter_async_context(
                        stdio_transport(cfg, stderr.errlog, self._launched)
                    )
                else:
                    # Here, not with this module: a session of stdio servers loads none of
                    # the SDK's HTTP and SSE clients.
                    from keen.mcp.connection._http import http_transport

                    self.auth = self._oauth(cfg, facts)
                    streams = await stack.enter_async_context(
                        http_transport(cfg, facts, self.auth, self._saw_status, self._closing_because)
                    )
                read, write = streams
                tool_filter = self._tool_filter = ToolListFilter()
                # Advertised only with a callback (the SDK keys the capability on it); one per
                # session, since a completion notice names an id of this session's requests
                # (kept without a callback too: a -32042's pages complete by notice as well).
                asks = self.elicitations = sdk_callback(self.name, self._elicitation, self._elicitation_url)
                # With a relay (keen serve), what the server asks during a call goes to the
                # host that made it (keen.mcp.connection.relay); a 2026-07-28 server sends log messages
                # only to a request that opted in, so every request does.
                relay = self._session_relay = self._relay()
                asking: dict[str, Any] = (
                    relay.callbacks(self.name)
                    if relay is not None
                    else {"elicitation_callback": asks if self._elicitation() else None}
                )
                session = await stack.enter_async_context(
                    CheckedSession(
                        EOFWatch(read, self._mark_eof, tool_filter.incoming),
                        WriteWatch(write, tool_filter),
                        message_handler=self._on_message,
                        logging_callback=self._on_log,
                        client_info=_CLIENT_INFO,
                        log_level="debug" if relay is not None else None,
                        server=self.name,
                        **asking,
                    )
                )
                negotiated = False
                subscription: Subscription | None = None
                tools: list[Tool] = []
                # stop() cancels this scope, so shutdown never waits out a hung initialize.
                with anyio.CancelScope() as self._connect_scope:
                    try:
                        facts.phase, facts.timeout = "initialize", cfg.timeouts.connect
                        with anyio.fail_after(cfg.timeouts.connect):
                            # Both eras, as the SDK's Client(mode="auto") does it: probe
                            # server/discover (2026-07-28), fall back to the initialize handshake.
                            await negotiate_auto(session)
                            negotiated = True
                        tool_filter.version = session.protocol_version
                        facts.phase, facts.timeout = "list_tools", cfg.timeouts.list_tools
                        with anyio.fail_after(cfg.timeouts.list_tools):
                            subscription = await open_subscription(stack, session, self.name)
                            tools = await self._list_full(session, facts)
                            # Only for servers that advertise them; a failure leaves them empty.
                            caps = session.server_capabilities
                            self.resources = await list_resources(self.name, session, caps)
                            self.resource_templates = await list_resource_templates(self.name, session, caps)
                            self.prompts = await list_prompts(self.name, session, caps)
                        self._start_took(cfg)  # all listed: this start is over
                    except Exception as exc:
                        # Report before unwinding: stopping a hung stdio server takes seconds,
                        # which the next server in line need not wait for.
                        self._fail(exc, facts)
                        if isinstance(exc, TimeoutError):
                            self._start_took(cfg, timed_out=True)  # reached a limit: unfinished
                        slot()
                        raise
                self._connect_scope = None
                slot()
                if self._superseded and not self._stopping:
                    self._set(
                        ServerState.DISCONNECTED,
                        f"its configs.json entry changed while connecting ({facts.phase}); "
                        "the next attempt takes the new one",
                    )
                    return
                if self._stopping or not negotiated:
                    self._set(ServerState.DISCONNECTED, f"stopped while connecting ({facts.phase})")
                    return
                self._publish(session, tools)
                served = True
                await self._serve(session, subscription)
        except Exception as exc:
            if not served:
                if self.state is ServerState.CONNECTING:
                    self._fail(exc, facts)
                return
            logger.debug("server %s: error while closing the session: %r", self.name, exc)
            # The session ended on an error of its own (the SDK ends a Streamable HTTP session
            # when a request cannot connect: the server stopped), with no EOF seen: it went
            # away as surely, and must read disconnected, or nothing reconnects it.
            self._eof = True
        self.session = None
        self._session_ended()

    async def _launch_slot(self, cfg: HttpServerConfig | StdioServerConfig) -> Callable[[], None] | None:
        """Wait for a turn to start (stdio servers, when the Manager bounds them); returns the
        function that gives it back (idempotent), or ``None`` when stopped while waiting.

        Starting a stdio server costs CPU (an interpreter, ``npx``, ``uvx``): started all at
        once on a small machine, every one of them finishes late, past its time limit
        (:mod:`keen.mcp.connection.starts`). Its ``timeouts.connect`` runs from its own
        launch, so waiting here does not count. HTTP servers and in-process transports cost
        Keen little: they start at once.
        """
        slots = self._launches
        self._turn_began = None
        if self._stopping:
            return None
        if slots is None or self._transport is not None or not isinstance(cfg, StdioServerConfig):
            return lambda: None
        turn: StartTurn | None = None
        self._turn = None
        times = self._start_times
        last = times.last(self.name, cfg) if times is not None else None
        with anyio.CancelScope() as self._connect_scope:  # stop() and reconfigure() cancel the wait
            turn = await slots.turn(cfg.timeouts.connect, last)
        self._connect_scope = None
        if turn is None:
            return None
        if self._stopping or self._superseded:
            turn.cancel()
            return None
        self._turn = turn
        self._turn_began = time.monotonic()

        def give_back() -> None:
            # A start stopped or superseded midway says nothing of what a start costs: it
            # neither grows nor shrinks the bound.
            if self._stopping or self._superseded:
                turn.cancel()
                if self._stopping and turn.pid is not None:
                    self._start_took(cfg, finished=False)  # launched, stopped before its tools
            else:
                turn.end()
            self._turn_began = None

        return give_back

    def _start_took(
        self, cfg: HttpServerConfig | StdioServerConfig, *, finished: bool = True, timed_out: bool = False
    ) -> None:
        # From the turn's grant to now: what the next start of this launch is expected to take.
        began, times = self._turn_began, self._start_times
        self._turn_began = None  # told once per start
        if began is not None and times is not None and isinstance(cfg, StdioServerConfig):
            took = time.monotonic() - began if finished else None
            times.remember(self.name, cfg, took, timed_out=timed_out)

    def _launched(self, pid: int) -> None:
        # The start bound reads what this server's processes do (keen.mcp.connection.starts).
        if self._turn is not None:
            self._turn.launched(pid)

    def _session_ended(self) -> None:
        if self._stopping:
            self._set(ServerState.DISCONNECTED, "")
        elif self._eof and not self._refresh_requested:
            if self.closed_why:
                self._set(ServerState.DISCONNECTED, self._closed_over_bound())
                return
            tail = self._stderr_tail()
            how = (
                "exited unexpectedly"
                if isinstance(self.config, StdioServerConfig)
                else "closed the connection"
            )
            msg = f'MCP server "{self.name}" {how}'
            self._set(ServerState.DISCONNECTED, msg + (f"; last stderr: {tail}" if tail else ""))

    def _closing_because(self, why: str) -> None:
        """Record why the session is about to end (a message over a bound, an HTTP answer that
        broke the protocol), before its end
        reaches a waiting call (:attr:`closed_why`), and log it."""
        self.closed_why = why
        logger.warning("server %s: %s", self.name, why)

    def _closed_over_bound(self) -> str:
        """The status message of a session ended on a message over a bound (:attr:`closed_why`)."""
        return f'MCP server "{self.name}": {self.closed_why}'

    def _fail(self, exc: BaseException, facts: ConnectFacts) -> None:
        self.session = None
        facts.stderr_tail = self._stderr_tail()
        state, message = classify_connect_failure(exc, facts)
        if self.closed_why:  # it ended on a message over a bound: that, not how it looked from here
            state, message = ServerState.DISCONNECTED, self._closed_over_bound()
        logger.debug("server %s: connection failed: %r", self.name, exc)
        self._set(state, message)
        self._settle()

    async def _serve(self, session: CheckedSession, subscription: Subscription | None) -> None:
        # Published; park until stop, refresh or EOF. The session stays open meanwhile, and
        # its ListWatch re-lists the tools in this task group when they change.
        watch = ListWatch(
            self.name, lambda reason: self._relist(session, reason), interval=self._refresh_interval
        )
        watch.set_ttl(self.list_ttl_ms)
        if self._early_notice:
            watch.request("notification")
        async with anyio.create_task_group() as tg:
            tg.start_soon(watch.run, name=f"keen-mcp-watch-{self.name}")
            if subscription is not None:  # else nothing to follow: no task only to return
                tg.start_soon(
                    listen_for_changes, session, watch, subscription, name=f"keen-mcp-listen-{self.name}"
                )
            self.watch = watch
            try:
                while not (self._stopping or self._refresh_requested or self._eof):
                    await self._wake.wait()
                    self._wake = anyio.Event()
            finally:
                self.watch = None
                tg.cancel_scope.cancel()
                if (self._stopping or self._refresh_requested) and not self._eof:
                    # Keen ends this session, not the server: a call it cuts short must not
                    # read as the server's crash (set before the session closes).
                    session.ended_by = self._ended_by()

    def _ended_by(self) -> str:
        """What Keen is doing to the session it ends: the words of :attr:`CheckedSession.ended_by`."""
        if self._stopping:
            why = f" as {self._stop_why}" if self._stop_why else ""
            return f'Keen stopped MCP server "{self.name}"{why}'
        return f'Keen reconnected MCP server "{self.name}" as asked; retry the call'

    async def _list_full(self, session: ClientSession, facts: ConnectFacts | None = None) -> list[Tool]:
        on_page = None if facts is None else facts.listed_pages
        pages = await list_all_tools(session, self.name, self._tool_filter, on_page)
        self.list_ttl_ms, self.cache_scope, self.invalid_tools = (
            pages.ttl_ms,
            pages.cache_scope,
            pages.invalid,
        )
        tools = pages.tools
        # Servers with the tool_descriptions extension list minimal tools.
        tools, self.descriptions_uri = await with_full_descriptions(
            session, session.server_capabilities, tools, self.name
        )
        return tools

    async def _relist(self, session: ClientSession, reason: RefreshReason) -> ToolsChanged | None:
        """List the tools of the published session again and publish what changed."""
        if self.session is not session:
            return None
        try:
            with anyio.fail_after(self.config.timeouts.list_tools):
                tools = await self._list_full(session)
        except Exception as exc:
            # The old list stays in use; a dead connection is noticed by the EOF watch.
            logger.warning(
                "server %s: re-listing tools (%s) failed, keeping the previous list: %s",
                self.name,
                reason,
                one_line(redactor.redact(str(exc) or type(exc).__name__), 200),
            )
            return None
        if self.session is not session:
            return None
        if self.watch is not None:
            self.watch.set_ttl(self.list_ttl_ms)
        return self._replace_tools(tools, reason)

    def _replace_tools(self, tools: list[Tool], reason: RefreshReason) -> ToolsChanged:
        version = self.info.protocol_version if self.info else None
        change = diff_tools(self.name, self.tools, tools, reason, protocol_version=version)
        count_changed = len(tools) != len(self.tools)
        self.tools = tools
        self.tools_by_name = {t.name: t for t in tools}
        self._reset_validator()
        self.last_refresh_at = datetime.now(UTC)
        self._moved()
        if change:
            logger.debug("server %s: tools changed: %s", self.name, change.summary())
            if count_changed:
                self._on_change(self.status())
            self._emit(change)
        return change

    def _emit(self, change: ToolsChanged) -> None:
        if self._on_tools is not None:
            self._on_tools(change)

    def _publish(self, session: ClientSession, tools: list[Tool]) -> None:
        now = datetime.now(UTC)
        info = session.server_info
        title = getattr(info, "title", None) if info else None
        # A server may quote a secret Keen gave it anywhere it speaks; these reach SKILL.md,
        # keen mcp list and a host, so they are redacted here as its tools' descriptions are.
        self.info = ServerInfo(
            name=redactor.redact(info.name) if info else "",
            version=redactor.redact(info.version) if info else "",
            title=redactor.redact(title) if isinstance(title, str) else None,
            instructions=redactor.redact(session.instructions) if session.instructions is not None else None,
            protocol_version=session.protocol_version,
        )
        previous = self.tools
        reconnect = diff_tools(
            self.name, previous, tools, "reconnect", protocol_version=session.protocol_version
        )
        self.tools = tools
        self.tools_by_name = {t.name: t for t in tools}
        self._reset_validator()
        self.session = session
        self._moved()
        self.last_connected_at = self.last_refresh_at = now
        if logger.isEnabledFor(logging.DEBUG):  # each line's text is made before logging looks
            for tool in tools:
                logger.debug("server %s: tool %s: %s", self.name, tool.name, one_line(tool.description, 80))
        note = ""
        if not tools and not self.invalid_tools:
            # Servers without credentials often start fine and list nothing (and say why on stderr).
            tail = self._stderr_tail()
            note = "connected, but it lists no tools" + (
                f"; last stderr: {tail}"
                if tail
                else "; it may need credentials or setup (see its documentation)"
            )
        self._set(ServerState.CONNECTED, note)
        self._settle()
        # Any session after the first attempt: a server down at start (no tools before) comes
        # up with its tools as added, once, or a Catalog, keen chat or a library user would not
        # learn of them; the first attempt's tools are the starting point, told to nobody.
        if self._tried and reconnect:
            self._emit(reconnect)

    # -- transports -----------------------------------------------------------------------------------

    def _oauth(self, cfg: HttpServerConfig, facts: ConnectFacts) -> httpx2.Auth | None:
        """An ``oauth`` server's ``httpx2.Auth`` (``None`` for other auth types)."""
        if not isinstance(cfg.auth, OAuthAuth):
            return None
        if self._auth_factory is None:
            raise AuthRequired(sign_in_message(self.name), server=self.name, remedy=Remedy.SIGN_IN)
        auth, facts.has_token = self._auth_factory(self.name, cfg, cfg.auth, self.interactive_auth)
        return auth

    def _saw_status(self, status: int) -> None:
        self.http_status = status

    def _stderr_tail(self) -> str:
        """The last lines the server wrote to stderr in this run, joined with ' | ', redacted."""
        if self._stderr is None:
            return ""
        joined = " ".join(" | ".join(self._stderr.tail(_STDERR_TAIL_LINES)).split())
        if len(joined) > 500:
            # The newest lines say why it failed (a traceback's last line): cut the oldest.
            joined = "…" + joined[-499:]
        return redactor.redact(joined)

    # -- callbacks from the session ---------------------------------------------------------------

    def _mark_eof(self) -> None:
        self._eof = True
        self._wake.set()

    async def _on_message(self, message: Any) -> None:
        if isinstance(message, Exception):
            if isinstance(message, StreamClosing):  # Keen's own words (stdio): the session ends next
                self._closing_because(str(message))
                return
            # Redacted before the cut: a cut secret no longer matches, and its head would survive.
            text = one_line(redactor.redact(str(message)), 120)
            self._facts.stdout_garbage = text
            logger.debug("server %s: transport error: %s", self.name, text)
            return
        root = getattr(message, "root", message)
        method = getattr(root, "method", type(root).__name__)
        if method == "notifications/tools/list_changed":
            # 2025-11-25 and earlier. On 2026-07-28 the same notice arrives on the
            # subscriptions/listen stream, which listen_for_changes follows.
            if self._tool_filter.version in MODERN_PROTOCOL_VERSIONS:
                return
            if self.watch is not None:
                self.watch.request("notification")
            else:
                self._early_notice = True  # during the first listing: re-list once published
        elif method == "notifications/elicitation/complete":
            elicitation_id = str(getattr(root.params, "elicitation_id", ""))
            if self.elicitations is not None:
                self.elicitations.completed(elicitation_id)
            if self._session_relay is not None:
                await self._session_relay.completed(self.name, elicitation_id)
        else:
            logger.debug("server %s: notification %s", self.name, method)

    async def _on_log(self, params: mt.LoggingMessageNotificationParams) -> None:
        if self._session_relay is not None:
            await self._session_relay.log(self.name, params)
        if logger.isEnabledFor(logging.DEBUG):  # the line's text is made only to be logged
            # Cut before it is redacted (a flood of 1 MB messages must not cost a redaction of
            # each whole), with a margin so a secret the line's end runs through is matched
            # whole; what could begin a known secret at the cut is dropped.
            head = redactor.redact(str(params.data)[: _DEBUG_LOG_CHARS + _REDACT_MARGIN])
            head = head[: len(head) - redactor.unsafe_tail(head)]
            logger.debug("server %s: log %s: %s", self.name, params.level, one_line(head, _DEBUG_LOG_CHARS))
