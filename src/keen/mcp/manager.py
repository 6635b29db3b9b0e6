"""The headless MCP client layer's entry point (docs/architecture.md "Servers and their states").

``Manager`` owns one background owner task per configured server. ``start()``
returns at once; discovery runs in the background with per-server timeouts, so one
slow or broken server never delays the others. Calls go to the session the owner
published; failures come back as :mod:`keen.errors` types. Each server's tools as listed
and as shown, and the checks of a call's tool and arguments, are its
:class:`~keen.mcp.listing.views.ToolViews`' (the Manager finds the connected server and
hands it over).

Use it as ``async with Manager(path, trust=PinGuard()) as m:`` (:class:`ToolTrust`) or call ``start()`` and ``aclose()`` from
the same task (anyio task groups must be exited by the task that entered them).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Awaitable, Callable, Hashable, Mapping
from contextvars import ContextVar
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

import anyio
import anyio.abc

from keen import paths
from keen._fs import leads_nowhere
from keen._gcfreeze import freeze_if_asked
from keen._terminal import name_in_message
from keen.errors import (
    ConfigError,
    InvalidArguments,
    KeenError,
    Remedy,
    ServerDisconnected,
    ServerMisconfigured,
    ServerNotConfigured,
    UserActionRequired,
)
from keen.mcp import calls as mcp_calls  # its names load (with the SDK) at their first use
from keen.mcp.config.defaults import DEFAULT_REFRESH_INTERVAL, default_max_starting, load_defaults
from keen.mcp.config.reload import EntryChange, misconfigured_status, no_longer_configured, with_entry_of
from keen.mcp.connection.elicitation import ElicitationCallback, UrlElicitationCallback
from keen.mcp.connection.memory import in_memory_transport
from keen.mcp.connection.relay import CALL_PEER, Relay
from keen.mcp.connection.starts import StartSlots
from keen.mcp.listing.changes import ChangeObserver, ToolsChanged, diff_tools
from keen.mcp.listing.views import (
    HeldTool,
    ListedView,
    ToolsView,
    ToolTrust,
    ToolViews,
    tool_name_given,
)
from keen.mcp.types import (
    ServerInfo,
    ServerState,
    ServerStatus,
    Tool,
    ToolResult,
    TransportFactory,
)

if TYPE_CHECKING:
    import httpx2
    from mcp.client.session import ClientSession
    from mcp.shared.dispatcher import ProgressFnT

    from keen.mcp.config.servers import AuthFactory, HttpServerConfig, MCPConfig, OAuthAuth, StdioServerConfig
    from keen.mcp.connection.server import ServerConnection
    from keen.mcp.connection.start_times import StartTimes
    from keen.mcp.listing.tool_filter import InvalidTool

__all__ = [
    "CALL_PROGRESS",
    "EntryChange",
    "HeldTool",
    "ListedView",
    "Manager",
    "StatusObserver",
    "ToolTrust",
    "ToolsView",
    "in_memory_transport",
]

logger = logging.getLogger(__name__)

StatusObserver = Callable[[ServerStatus], None]
"""Called (in the event loop, synchronously) with the new status on every state change."""

_STOP_GRACE = 10.0

_GIVEN = "the config this Manager was given"
"""How messages name a config given in code (``config=``): no configs.json was read."""
_NAMED = 12
"""Configured servers an error about an unknown one names, at most."""


CALL_PROGRESS: ContextVar[ProgressFnT | None] = ContextVar("keen_call_progress", default=None)
"""The progress callback of the calls made in this context when :meth:`Manager.call_tool`
is given none: a front end that serves calls for someone (``keen serve`` for its host)
sets it around a call that passes through layers that know nothing of progress (the
harness, the gateway)."""


class Manager:
    """Connections to every configured MCP server.

    Args:
        config_path: ``configs.json``; default ``$KEEN_HOME/mcp/configs.json``. Missing = no servers.
        config: an already-loaded config (wins over ``config_path``), or its data as a dict:
            configs.json's shape or ``{"mcpServers": {...}}`` (Claude Desktop's, as
            ``fastmcp.Client`` takes it), read by ``parse_config(config, strict=False)``
            (which drops, with a logged warning, Keen's own ``trust_annotations``,
            ``inherit_env`` and ``pinning`` from the latter shape). Anything else (a list,
            a path: that is ``config_path``'s) is a ``ConfigError`` here.
        logs_dir: where stdio servers' stderr goes; default ``$KEEN_HOME/logs``.
        auth_factory: builds the OAuth ``httpx2.Auth`` for ``oauth`` servers; default: tokens
            from ``$KEEN_HOME/mcp/auth/<server>.json``, never a browser in the background.
            Called ``(server, config, oauth, interactive)``, plus ``config_name=``
            (:attr:`config_name`) when it has a parameter named ``config_name`` a keyword can
            fill, as :func:`keen.mcp.auth.oauth_auth_factory`'s factories do, so a sign-in's
            fixes name the config this Manager reads (a ``**kwargs`` alone gets the four).
        only: connect just these servers (the others stay ``configured``); ``refresh`` starts one.
            A name the config lacks is ``ServerNotConfigured`` at :meth:`start`.
        transports: ``{server: factory}`` connects those configured servers through the
            factory's streams instead of their configured transport (in-process servers for
            tests and embedding; see :func:`in_memory_transport`). Their config entries still
            give the timeouts. A name the config lacks is a ``ConfigError`` (its transport
            would never be used): here for a ``config`` given, at :meth:`start` for configs.json.
        elicitation: answers servers' ``elicitation/create`` requests (form mode; see
            :mod:`keen.mcp.connection.elicitation`). Sessions advertise the ``elicitation`` capability
            only when it is set; it may also be set later on :attr:`elicitation`, which
            applies to sessions that connect after that.
        elicitation_url: asked for URL-mode requests (a page the user opens out of band);
            they are declined without it. Set it later on :attr:`elicitation_url`.
        refresh_interval: seconds; a server's tools are re-listed at most once per interval
            however many change notices it sends (docs/architecture.md "Tools that change").
        url_elicitation_wait: seconds a call refused with ``-32042`` (URL elicitation
            required) waits, once the person accepted its pages through ``elicitation_url``,
            for the server to report them done before it is sent once more; past that it
            raises ``UserActionRequired``.
        max_starting: how many stdio servers start at once; a given bound is fixed (default:
            config.toml's ``[mcp] max_starting``, else one per CPU (at least two), growing up
            to four times that while starts end within a twentieth of their connect limit,
            0.75 s at most, a start whose processes sleep holding no turn:
            :mod:`keen.mcp.connection.starts`);
            the others wait their turn, and each server's ``timeouts.connect`` runs from its
            own launch. Starting a server costs CPU (an interpreter, ``npx``, ``uvx``): thirty
            started together on two CPUs all finish late. ``0``: no bound. HTTP servers are
            not bounded.
        start_slots: the bound itself, in place of ``max_starting``'s (one with its own clock
            and readers of the CPUs and the servers' processes: tests).
        trust: required: what vets each server's tools before :meth:`list_tools` shows them
            and flags the tools of a change (:class:`ToolTrust`). Keen's front ends pass
            ``keen.trust.PinGuard()`` (pins in ``$KEEN_HOME/mcp/pins``: a changed tool is
            shown as it was pinned, a new one held). ``None`` says so explicitly: the tools as
            the servers list them, no pins, no flags (a ``Gateway`` still refuses calls to
            quarantined tools with its own pins).
        relay: a front end that calls for others (``keen serve``): sessions advertise
            elicitation, sampling and roots, and what a server asks or logs during a call goes
            to the context's :data:`keen.mcp.connection.relay.CALL_PEER` of that call (see
            :mod:`keen.mcp.connection.relay`; it replaces ``elicitation`` for those sessions). It may be
            set later on :attr:`relay`, for sessions that connect after that.

    One server's invalid entry (an unset ``${VAR}``, a bad field) never stops the others: that
    server alone is in state ``config_error`` with the message and the fix, and calls to it
    raise ``ServerMisconfigured``. :meth:`start` raises ``ConfigError`` only when the file
    itself cannot be used (not JSON, wrong top level) or ``transports`` names a server it lacks;
    nothing starts then. The file is read
    once; :meth:`reload_server` reads one server's entry again, once it is fixed. A Manager
    runs once: closed (:meth:`aclose`, the end of ``async with``), it refuses to start again.
    """

    def __init__(
        self,
        config_path: Path | None = None,
        *,
        config: MCPConfig | Mapping[str, Any] | None = None,
        logs_dir: Path | None = None,
        auth_factory: AuthFactory | None = None,
        only: set[str] | None = None,
        transports: Mapping[str, TransportFactory] | None = None,
        elicitation: ElicitationCallback | None = None,
        elicitation_url: UrlElicitationCallback | None = None,
        refresh_interval: float = DEFAULT_REFRESH_INTERVAL,
        url_elicitation_wait: float = 600.0,
        max_starting: int | None = None,
        start_slots: StartSlots | None = None,
        trust: ToolTrust | None,
        relay: Relay | None = None,
    ) -> None:
        self._tool_views = ToolViews(trust)
        """Each server's tools as listed and as shown, and its calls' plans."""
        self.relay = relay
        self.elicitation = elicitation
        self.url_elicitation_wait = url_elicitation_wait
        self.elicitation_url = elicitation_url
        self.config_path = config_path or paths.mcp_config_path()
        if isinstance(config, str | os.PathLike):
            # parse_config would read a str as JSON text and call a path "invalid JSON".
            raise ConfigError(
                f"config= takes the config itself (a mapping or an MCPConfig), not {config!r}; "
                "to read a configs.json file, pass its path as config_path",
                field="config",
            )
        if config is not None:
            from keen.mcp.config.servers import MCPConfig

            if not isinstance(config, MCPConfig):
                from keen.mcp.config.load import parse_config

                # Another host's shape or configs.json data, or no mapping at all: its messages
                # name it as what it is, since no configs.json is read here.
                config = parse_config(config, strict=False, source=_GIVEN)
        self._config = config
        # Only a config read from configs.json is read again (reload_server): one given in
        # code (keen serve's, a library's) is not that file's.
        self._from_file = config is None
        self._logs_dir = logs_dir
        # The OAuth one by default, loaded by the first OAuth server; a factory that takes
        # ``config_name`` gets this Manager's, so its fixes name where the entries are.
        self._auth_factory = _with_config_name(auth_factory, self.config_name) if auth_factory else None
        self.only = only
        self._transports = dict(transports or {})
        if config is not None:  # configs.json's servers are known at start()
            _check_transports(self._transports, config, _GIVEN)
        self._connections: dict[str, ServerConnection] = {}
        self._moves = 0  # see tools_version()
        self._misconfigured: dict[str, ServerStatus] = {}
        self._retired: list[ServerConnection] = []
        self._reload_lock = anyio.Lock()
        self._observers: list[StatusObserver] = []
        self._change_observers: list[ChangeObserver] = []
        self._refresh_interval = refresh_interval
        # The default bound grows while starts prove cheap; one the caller or config.toml sets is kept.
        grow = max_starting is None and load_defaults().max_starting is None
        if max_starting is None:
            max_starting = default_max_starting()
        self._launches = start_slots or (StartSlots(max_starting, grow=grow) if max_starting > 0 else None)
        self._start_times: StartTimes | None = None
        """How long each stdio server's last start took (the bound lets the longest in first),
        made with the first connection; written at :meth:`aclose`."""
        self._tg: anyio.abc.TaskGroup | None = None
        self._started = False
        self._closed = False

    # -- lifecycle --------------------------------------------------------------------------------

    async def start(self) -> None:
        """Load the config and start one owner task per enabled server; returns at once.

        A second call is a no-op. Raises ``ConfigError`` for a file that cannot be used or
        that lacks a server ``transports`` names, ``ServerNotConfigured`` when ``only`` names
        a server the config lacks (nothing starts then), ``KeenError`` once the Manager was
        closed (a Manager runs once); an invalid server entry only puts that server in state
        ``config_error``.
        """
        if self._closed:
            # Returning here (it had started) left a program that opens a Manager again in
            # `async with` with every server stopped, and nothing said why.
            raise KeenError(_CLOSED)
        if self._started:
            return
        config = self.config
        if self._from_file:
            _check_transports(self._transports, config, str(self.config_path))
        for name in sorted(self.only or ()):
            # A misspelt name here started nothing and said nothing until its first use.
            if name not in config.servers and name not in config.invalid:
                raise self._not_configured(name, [*config.servers, *config.invalid])
        for name, message in config.invalid.items():
            self._misconfigured[name] = misconfigured_status(name, message, config.invalid_kinds.get(name))
        for name, server in config.servers.items():
            self._connections[name] = self._new_connection(name, server)
            self._moved()
        freeze_if_asked()
        self._tg = anyio.create_task_group()
        await self._tg.__aenter__()
        self._started = True
        starting = self.to_start()  # the config is loaded: its servers, by the one rule
        for connection in self._connections.values():
            if connection.name in starting:
                self._tg.start_soon(connection.run, name=f"keen-mcp-owner-{connection.name}")
            else:
                connection.settled.set()
                connection.finished.set()

    async def wait_ready(self, timeout: float | None = None) -> bool:
        """Wait until every server's first connection attempt has ended.

        Args:
            timeout: seconds to wait at most (``None``: no limit).

        Returns:
            True when all settled, False when ``timeout`` ran out first.

        Raises:
            KeenError: the Manager was never started (no server has begun an attempt, so
                there is nothing to wait for; a True here read as "every server ready"), or
                it was closed (every server stopped: True read the same way).
        """
        if not self._started:
            raise KeenError(_not_started("Manager.wait_ready() has nothing to wait for"))
        self._refuse_closed("Manager.wait_ready() has no server to wait for")
        with anyio.move_on_after(timeout):
            # A snapshot: reload_server may add or drop a server while this waits.
            for connection in list(self._connections.values()):
                await connection.settled.wait()
            return True
        return False

    async def wait_attempt(self, name: str, timeout: float | None = None) -> ServerStatus:
        """Wait until ``name`` is no longer ``connecting`` (its attempt under way ended, or it
        waited its turn to start and then connected or failed), at most ``timeout`` seconds
        (``None``: the server's ``timeouts.connect`` plus ``timeouts.list_tools``).

        Returns:
            The status when the wait ended (still ``connecting`` when the time ran out).

        Raises:
            ServerNotConfigured, ServerMisconfigured: no usable server by that name
                (``ServerNotConfigured`` too when the Manager was never started).
        """
        connection = self._connection(name)
        if timeout is None:
            timeout = connection.config.timeouts.connect + connection.config.timeouts.list_tools
        changed = anyio.Event()

        def observe(status: ServerStatus) -> None:
            if status.name == name and status.state is not ServerState.CONNECTING:
                changed.set()

        unsubscribe = self.subscribe(observe)
        try:
            with anyio.move_on_after(timeout):
                if not connection.settled.is_set():
                    await connection.settled.wait()  # its first attempt (perhaps not begun yet)
                elif connection.state is ServerState.CONNECTING:
                    await changed.wait()
        finally:
            unsubscribe()
        return self.status(name)

    async def aclose(self) -> None:
        """Stop every owner task, close every session and stdio process; idempotent.

        Owners get ``10 s`` to shut down cleanly (stdio servers get the SDK's grace
        period, then their process group is killed); then they are cancelled. Shielded
        from the caller's cancellation, so a cancelled caller leaves no server running.
        """
        if not self._started or self._closed or self._tg is None:
            return
        self._closed = True
        tg = self._tg
        connections = [*self._connections.values(), *self._retired]
        for connection in connections:
            connection.stop("its Manager was closed")
        # Shielded: a cancelled caller (Ctrl-C, SIGTERM) still gives the owners their bounded
        # time to close sessions and stop server processes.
        with anyio.CancelScope(shield=True), anyio.move_on_after(_STOP_GRACE):
            for connection in connections:
                await connection.finished.wait()
        # Exit the task group outside those scopes: cancel scopes must unwind in LIFO order.
        # Its exit waits for every owner even when the caller is cancelled.
        if not all(conn.finished.is_set() for conn in connections):
            tg.cancel_scope.cancel()
        await tg.__aexit__(None, None, None)
        if self._start_times is not None:
            self._start_times.save()

    async def __aenter__(self) -> Manager:
        await self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    # -- observation ------------------------------------------------------------------------------

    def subscribe(self, observer: StatusObserver) -> Callable[[], None]:
        """Call ``observer(status)`` (in the event loop, synchronously) on every state change.

        Args:
            observer: receives the new :class:`ServerStatus`; its exceptions are logged.

        Returns:
            A function that unsubscribes it (safe to call twice).
        """
        self._observers.append(observer)
        return lambda: self._observers.remove(observer) if observer in self._observers else None

    def subscribe_changes(self, observer: ChangeObserver) -> Callable[[], None]:
        """Call ``observer(change)`` (in the event loop, synchronously) whenever a server's tool
        list changed: after a change notice, an expired ``ttlMs``, :meth:`refresh_tools` or a
        reconnect found tools added, removed or changed (``keen.mcp.listing.changes``). A server
        down at start (its entry invalid then too, once :meth:`reload_server` took the fix) is
        told once, at its first connect, with every tool added (reason ``reconnect``); a
        server's first attempt that connects is told to no one.

        The observer must return quickly (hand slow work to a task or thread); its exceptions
        are logged. Returns a function that unsubscribes it (safe to call twice).
        """
        self._change_observers.append(observer)
        return lambda: self._change_observers.remove(observer) if observer in self._change_observers else None

    def _notify_changes(self, change: ToolsChanged) -> None:
        change = self.with_flags(change)
        for observer in list(self._change_observers):
            try:
                observer(change)
            except Exception:
                logger.exception("change observer failed for %s", change.server)

    def with_flags(self, change: ToolsChanged) -> ToolsChanged:
        """``change`` with the flags its added and changed tools raise (:meth:`ToolTrust.flagged`;
        none without trust), other connected servers' tools serving as the shadowing index."""
        connection = self._connections.get(change.server)
        if connection is None or self.trust is None:
            return change
        others = {n: list(conn.tools) for n, conn in self._connections.items() if n != change.server}
        return self.trust.flagged(change, connection.tools_by_name, others)

    def _notify(self, status: ServerStatus) -> None:
        for observer in list(self._observers):
            try:
                observer(status)
            except Exception:
                logger.exception("status observer failed for %s", status.name)

    # -- queries ----------------------------------------------------------------------------------

    @property
    def trust(self) -> ToolTrust | None:
        """What vets each server's tools (the ``trust`` given); ``None``: the tools as listed."""
        return self._tool_views.trust

    @trust.setter
    def trust(self, trust: ToolTrust | None) -> None:
        self._tool_views.trust = trust

    @property
    def started(self) -> bool:
        """Whether :meth:`start` ran: before it, :meth:`servers` lists none (``keen chat``'s
        first step is built while its model request is out, before the servers start)."""
        return self._started

    @property
    def closed(self) -> bool:
        """Whether :meth:`aclose` ran: every server is stopped, and the Manager does not start
        again."""
        return self._closed

    @property
    def config(self) -> MCPConfig:
        """The loaded config (loads it on first use)."""
        if self._config is None:
            from keen.mcp.config.load import load_config

            self._config = load_config(self.config_path, strict=False)
        return self._config

    def to_start(self) -> set[str]:
        """The servers :meth:`start` starts: configured, enabled and within ``only``. Before
        the config is loaded, configs.json is read without its validation models when a full
        validation of the same text found it valid (:func:`keen.mcp.config.known_servers`);
        else it is loaded here (raises ``ConfigError`` for a file that cannot be used, as
        :meth:`start` would)."""
        listed = None
        if self._config is None and self._from_file:
            from keen.mcp.config.validated import known_servers

            listed = known_servers(self.config_path)
        if listed is None:
            listed = [(name, server.enabled) for name, server in self.config.servers.items()]
        return {name for name, on in listed if on and (self.only is None or name in self.only)}

    @property
    def reads_config_file(self) -> bool:
        """Whether this Manager's config is configs.json (:attr:`config_path`), which ``keen
        mcp`` commands edit; False for one given in code (``config=``)."""
        return self._from_file

    @property
    def config_name(self) -> str:
        """Where this Manager's server entries are, as the fixes its messages give name it:
        ``"configs.json"``, or ``"the config this Manager was given"`` (``config=``)."""
        return "configs.json" if self._from_file else _GIVEN

    def no_config_file(self) -> bool:
        """Whether this manager reads configs.json and finds none (or an empty one) without
        having loaded it: no server is configured, known without importing the config's
        validation models (``keen chat`` asks this before its first prompt)."""
        if self._config is not None or not self._from_file:
            return False
        try:
            return self.config_path.stat().st_size == 0
        except FileNotFoundError:
            return not leads_nowhere(self.config_path)  # a link to nothing: loading it says so
        except OSError:
            return False  # loading it says what is wrong

    def servers(self) -> list[ServerStatus]:
        """Status of every configured server: valid entries in config order, then the invalid
        ones (state ``config_error``)."""
        return [conn.status() for conn in self._connections.values()] + list(self._misconfigured.values())

    def tool_versions(self) -> list[tuple[str, datetime | None, int]]:
        """``(name, last tools/list, tool count)`` of each connected server, in config order:
        what a cache of their tools keys on, for a caller that asks on every call (``keen
        serve``), without building every server's :class:`ServerStatus` (:meth:`servers`)."""
        return [
            (name, conn.last_refresh_at, len(conn.tools))
            for name, conn in self._connections.items()
            if conn.state is ServerState.CONNECTED
        ]

    def tools_version(self) -> int:
        """A number that moves whenever any server's tool list, connection state or config
        entry changes, or a server is added or dropped: what a cache of every server's tools
        keys on (with :meth:`view_version`), in constant time, for a caller that asks on every
        call (``keen serve``); :meth:`tool_versions` says which servers are connected."""
        return self._moves

    def status(self, name: str) -> ServerStatus:
        """Status of one server.

        Raises:
            ServerNotConfigured: no server by that name.
        """
        if name in self._misconfigured:
            return self._misconfigured[name]
        return self._connection(name).status()

    def server_info(self, name: str) -> ServerInfo | None:
        """serverInfo and instructions from the last initialize as a model or host may read
        them (the trust's view, :attr:`ToolsView.info`: with Keen's, changed instructions as
        they were pinned under ``quarantine``), or None if never connected.

        Raises:
            ServerNotConfigured: no server by that name.
            KeenError: the Manager was closed.
        """
        # Its connections are gone: what they last said is no one's now.
        self._refuse_closed("Manager.server_info() has no server to read")
        if name in self._misconfigured:
            return None
        conn = self._connection(name)
        info = conn.info
        if info is None or self._tool_views.trust is None:
            return info
        try:
            view = self._tool_views.view(conn)
        except ConfigError:
            return replace(info, instructions=None)  # nothing vetted them: none shown
        # A third-party trust's view written before ToolsView.info: the info as sent.
        return getattr(view, "info", info)

    def live_info(self, name: str) -> ServerInfo | None:
        """serverInfo and instructions from the last initialize as the server sent them, pins
        or not: for ``keen mcp diff``/``trust``, never for a model (:meth:`server_info` is
        what one reads). None if never connected.

        Raises:
            ServerNotConfigured: no server by that name.
            KeenError: the Manager was closed.
        """
        self._refuse_closed("Manager.live_info() has no server to read")
        if name in self._misconfigured:
            return None
        return self._connection(name).info

    def list_tools(self, name: str) -> list[Tool]:
        """The tools a model or host may read: the last successful tools/list (all pages)
        seen through the pins (:meth:`view`), as a new list. Every listing Keen shows (skills,
        catalog, search, ``keen serve``) is built from it.

        Raises:
            ServerNotConfigured, ServerDisabled, ServerDisconnected, AuthRequired,
            AuthFailed: the server is not connected (the error's remedy says what helps).
        """
        return list(self.view(name).tools)

    def live_tools(self, name: str) -> tuple[Tool, ...]:
        """The last successful tools/list as the server sent it, pins or not: for the pin
        check itself and for ``keen mcp diff``/``trust``, never for a model. Raises like
        :meth:`list_tools`.

        The same tuple until a re-list replaces the list, so a cache of what follows from
        the tools (the pin check's comparison) keys on its identity, and a call costs the
        same whatever the server's tool count (:meth:`ToolViews.live`)."""
        return self._tool_views.live(self._connected(name))

    def shown_by_name(self, name: str) -> Mapping[str, Tool]:
        """The tools :meth:`list_tools` shows (a changed tool as it was pinned; none held for
        review) by name: what finds one tool as shown without walking the list. Made again
        only when :meth:`view` is another.

        Args:
            name: the server.

        Returns:
            A read-only mapping of tool name to the tool as shown.

        Raises:
            Like :meth:`list_tools`.
        """
        return self._tool_views.shown_by_name(self._connected(name))

    def view(self, name: str) -> ToolsView:
        """The server's live tools as the trust shows them (:meth:`ToolTrust.shown`; Keen's:
        changed definitions as they were pinned, new ones held, annotations trusted only where
        the user said so), or as listed without trust. Raises like :meth:`list_tools`."""
        return self._tool_views.view(self._connected(name))

    def view_stamp(self, name: str) -> Hashable:
        """A key that changes when :meth:`view` may change though the tool list did not (a pin
        file written by ``keen mcp trust`` in another process); ``None`` without trust, and for
        a server with ``"pinning": "off"`` (its view is the list as sent: no pins are looked at).

        Raises:
            ConfigError: what the trust vets ``name`` against cannot be looked at (a pins
                folder that is a file), for a server that reads it.
        """
        trust = self._tool_views.trust  # read here, not through ToolViews.stamp: asked per served call
        if trust is None:
            return None
        entry = self.config.servers.get(name)
        if entry is not None and entry.pinning == "off":
            return None  # its view is the list as sent: no pin file to look at, nor to follow
        return trust.stamp(name)

    def view_version(self) -> Hashable:
        """A key that moves whenever :meth:`view_stamp` saw a change, for any server: one
        value to key a cache of every server's view on, once the servers that matter were
        stamped; ``None`` without trust."""
        trust = self._tool_views.trust
        return None if trust is None else trust.version

    def list_resources(self, name: str) -> list[dict[str, Any]]:
        """The resources of the last connection's ``resources/list`` (all pages, wire shape:
        ``uri``, ``name``, ``description``, ``mimeType``...); ``[]`` when the server does not
        advertise the resources capability. Raises like :meth:`list_tools`."""
        return [dict(r) for r in self._connected(name).resources]

    def list_resource_templates(self, name: str) -> list[dict[str, Any]]:
        """The resource templates of the last connection's ``resources/templates/list`` (all
        pages, wire shape: ``uriTemplate``, ``name``, ``description``, ``mimeType``); ``[]``
        when the server does not advertise the resources capability. Raises like :meth:`list_tools`."""
        return [dict(t) for t in self._connected(name).resource_templates]

    def list_prompts(self, name: str) -> list[dict[str, Any]]:
        """The prompts of the last connection's ``prompts/list`` (all pages, wire shape:
        ``name``, ``description``, ``arguments``...); ``[]`` when the server does not
        advertise the prompts capability. Raises like :meth:`list_tools`."""
        return [dict(p) for p in self._connected(name).prompts]

    def invalid_tools(self, name: str) -> list[InvalidTool]:
        """Tools the last tools/list sent that the MCP schema rejects (name, reason): skipped,
        while the rest of the list stays usable. ``[]`` when there were none or the server
        never listed. Raises ``ServerNotConfigured``."""
        if name in self._misconfigured:
            return []
        return list(self._connection(name).invalid_tools)

    # -- calls ------------------------------------------------------------------------------------

    def check_call(self, name: str, tool: str, arguments: Any) -> Tool:
        """Every check of a call short of sending it, in the gateway's order: server
        configured and enabled, connected, tool in the latest list, arguments valid against
        its inputSchema (docs/architecture.md "The data flow of one call").

        With a trust (:meth:`view`), the tool is looked up and the arguments checked in what
        a model or host was shown: a tool held for review is not found and a changed tool is
        checked against its pinned inputSchema, so neither the error nor its "Did you mean"
        quotes a definition nobody reviewed (MCP 2025-11-25, "Tools", security
        considerations; README "Security: what Keen trusts").

        Returns:
            The tool, as listed.

        Raises:
            ServerNotConfigured, ServerDisabled, ServerDisconnected, AuthRequired,
            AuthFailed, ToolNotFound, InvalidArguments: the first check that failed.
        """
        tool_name_given(name, tool)
        return self._tool_views.check(self._connected(name), tool, arguments)

    def find_tool(self, name: str, tool: str) -> Tool:
        """The server checks of :meth:`check_call` and its tool lookup, without arguments.

        Returns:
            The tool, as listed.

        Raises:
            ServerNotConfigured, ServerDisabled, ServerDisconnected, AuthRequired,
            AuthFailed, ToolNotFound: the first check that failed.
        """
        return self._tool_views.find(self._connected(name), tool)

    def unavailable(self, name: str) -> KeenError | None:
        """Why server ``name`` cannot take a call now (the server checks of
        :meth:`check_call`, without a tool or arguments), or ``None`` when it can.

        Returns:
            The ServerNotConfigured, ServerMisconfigured, ServerDisabled, ServerDisconnected,
            AuthRequired or AuthFailed error :meth:`check_call` would raise first.
        """
        try:
            self._connected(name)
        except KeenError as exc:
            return exc
        return None

    async def call_tool(
        self,
        name: str,
        tool: str,
        arguments: dict[str, Any] | None = None,
        *,
        timeout: float | None = None,
        progress: ProgressFnT | None = None,
        validate: bool = True,
    ) -> ToolResult:
        """Run ``tools/call`` after :meth:`check_call`; ``isError`` results come back as results.

        ``timeout`` (seconds) defaults to the server's ``timeouts.call_tool``; ``validate=False``
        skips the checks for a caller that just ran :meth:`check_call`. Raises the
        ``check_call`` errors, ``CallTimeout``, ``ServerDisconnected``, ``AuthFailed``,
        ``RemoteProtocolError``, or, for a call refused as stale whose re-list shows the tool
        gone or changed, ``ToolNotFound`` / ``ToolChanged`` (docs/serve.md "Calls with a stale
        tool list"). A call refused with ``-32042`` is sent once more when the person accepted
        its pages through :attr:`elicitation_url` and the server reported them done within
        ``url_elicitation_wait``; otherwise it raises ``UserActionRequired`` (then see
        :meth:`wait_user_action`).

        ``progress`` gets the server's progress notifications for the call; without it, the
        context's :data:`CALL_PROGRESS` does, if set. With a :attr:`relay`, what the server asks
        or logs during the call goes to the context's :data:`keen.mcp.connection.relay.CALL_PEER`.
        """
        arguments = {} if arguments is None else arguments
        if validate:
            tool_name_given(name, tool)
        # One lookup of the server for the checks and the send (nothing waits between them).
        connection = self._connected(name)
        if validate:
            self._tool_views.check(connection, tool, arguments)
        session, limit = self._session_of(connection, timeout)
        progress = progress if progress is not None else CALL_PROGRESS.get()
        sending = mcp_calls.send_tool_call(
            connection,
            session,
            tool,
            arguments,
            limit=limit,
            progress=progress,
            relist=self.refresh_tools,
            pages=(self.elicitation_url, self.url_elicitation_wait),
        )
        peer = CALL_PEER.get()
        if self.relay is None or peer is None:
            return await sending  # nobody to relay to: no block to enter (most calls)
        with self.relay.calling(name, peer):
            return await sending

    async def wait_user_action(self, error: UserActionRequired, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for the server to report every page of ``error``
        done (``notifications/elicitation/complete`` for its ``elicitation_ids``, MCP
        2025-11-25 "Elicitation > URL Mode"); then the call may be sent again.

        For a caller that shows the pages itself (no ``elicitation_url``); a notice that came
        before this is called counts. Returns False when the time ran out, the error has no
        ids, or the server reconnected since (a new session knows nothing of them).
        """
        tracker = self._connection(error.server).elicitations
        return tracker is not None and await tracker.wait(error.elicitation_ids, timeout)

    async def read_resource(
        self, name: str, uri: str, *, timeout: float | None = None
    ) -> list[dict[str, Any]]:
        """``resources/read`` of ``uri`` on server ``name``: its contents in wire shape
        (``uri``, ``mimeType``, and ``text`` or ``blob``).

        Raises the connection errors of :meth:`list_tools`, ``CallTimeout``,
        ``ServerDisconnected`` or ``RemoteProtocolError`` (the server refused the read);
        ``InvalidArguments`` for a URI it refuses as invalid (JSON-RPC ``-32602``), pointing at
        ``resources/list`` and ``resources/templates/list``.
        """
        raw = await self._request(
            name,
            f"resource {uri}",
            timeout,
            lambda s: s.read_resource(uri),
            listed_by="resources/list and resources/templates/list give the URIs it serves.",
        )
        return list(raw.model_dump(by_alias=True, mode="json", exclude_none=True).get("contents", []))

    async def get_prompt(
        self, name: str, prompt: str, arguments: dict[str, str] | None = None, *, timeout: float | None = None
    ) -> dict[str, Any]:
        """``prompts/get`` of ``prompt`` with ``arguments`` on server ``name``: the result in
        wire shape (``description``, ``messages``). Raises like :meth:`read_resource`; arguments
        the server refuses (JSON-RPC ``-32602``) are ``InvalidArguments`` that point at the
        prompt's arguments in ``prompts/list`` (no tool schema remedy); so are arguments that
        are not strings (MCP 2025-11-25 "Prompts": ``prompts/get`` takes string values), which
        are not sent."""
        if arguments is not None and (problem := _prompt_arguments_problem(arguments)) is not None:
            # Sent, the SDK's request model refused them and the error read as the server's
            # "invalid answer", with pydantic's help URL.
            raise InvalidArguments(
                f'arguments for prompt "{name_in_message(prompt)}" of MCP server "{name}" must be strings: {problem}; '
                "prompts/list gives the prompt's arguments.",
                server=name,
                remedy=None,
            )
        raw = await self._request(
            name,
            f"prompt {prompt}",
            timeout,
            lambda s: s.get_prompt(prompt, arguments or None),
            listed_by="prompts/list gives the prompt's arguments.",
        )
        return dict(raw.model_dump(by_alias=True, mode="json", exclude_none=True))

    def _session(self, name: str, timeout: float | None) -> tuple[ServerConnection, ClientSession, float]:
        """The connected server's connection, its session and a request's time limit (seconds:
        ``timeout``, else the server's ``timeouts.call_tool``). Raises like :meth:`list_tools`."""
        connection = self._connected(name)
        return (connection, *self._session_of(connection, timeout))

    @staticmethod
    def _session_of(connection: ServerConnection, timeout: float | None) -> tuple[ClientSession, float]:
        """``connection``'s session and a request's time limit, as :meth:`_session` gives them."""
        if connection.session is None:
            raise mcp_calls.not_connected(connection)
        return connection.session, timeout if timeout is not None else connection.config.timeouts.call_tool

    async def _request(
        self,
        name: str,
        what: str,
        timeout: float | None,
        send: Callable[[ClientSession], Awaitable[Any]],
        *,
        listed_by: str,
    ) -> Any:
        from keen.mcp.calls.send import send_request

        connection, session, limit = self._session(name, timeout)
        return await send_request(connection, session, what, limit, send, listed_by=listed_by)

    async def refresh(self, name: str, *, interactive: bool = False) -> ServerStatus:
        """Reconnect ``name`` and relist its tools (a disabled server too: a refresh is a
        user's explicit request), with the entry the Manager has: a reconnect the user asked
        for calls :meth:`reload_server` first, so an entry edited since is used.

        Args:
            name: the server.
            interactive: let an OAuth server open the browser sign-in.

        Returns:
            The status after the attempt.

        Raises:
            KeenError: the Manager was never started (it says to start it), or was closed.
            ServerNotConfigured: no server by that name.
        """
        # Its task group is gone: starting an owner raised a bare RuntimeError.
        self._refuse_closed("Manager.refresh() has no server to reconnect")
        if self._tg is None:  # before _connection(), whose words are about one server
            raise KeenError(_not_started("Manager.refresh() has no server to reconnect"))
        if name in self._misconfigured:
            return self._misconfigured[name]  # reload_server() takes the entry once it is fixed
        connection = self._connection(name)
        if connection.finished.is_set() or (
            connection.state is ServerState.CONFIGURED and not connection.running
        ):
            self._tg.start_soon(connection.run, name=f"keen-mcp-owner-{name}")
        return await connection.refresh(interactive=interactive)

    async def refresh_tools(self, name: str) -> ToolsChanged | None:
        """List ``name``'s tools again now, over its open session (no reconnect), and tell the
        change observers what changed. A server that is not connected is reconnected
        (:meth:`refresh`) instead, which lists its tools too.

        Returns:
            What changed (false when nothing did), or ``None`` when the listing failed or the
            server did not connect (see :meth:`status`).

        Raises:
            ServerNotConfigured: no server by that name.
            KeenError: the Manager was closed.
        """
        # Not connected: the refresh below raised a bare RuntimeError.
        self._refuse_closed("Manager.refresh_tools() has no server to list")
        if name in self._misconfigured:
            return None
        connection = self._connection(name)
        watch = connection.watch
        if watch is None or connection.state is not ServerState.CONNECTED:
            before = list(connection.tools)
            status = await self.refresh(name)
            if status.state is not ServerState.CONNECTED:
                return None
            return diff_tools(
                name, before, connection.tools, "reconnect", protocol_version=status.protocol_version
            )
        return await watch.request_and_wait()

    async def reload_server(self, name: str) -> EntryChange:
        """Read configs.json again and take ``name``'s current entry, leaving every other
        server as it is: what a reconnect the user asks for does first (``connect_server``).

        A changed entry (an invalid one made valid too) replaces the old one for the next
        connection attempt (:meth:`refresh`; an open session stays until then); a server new
        to the file becomes known (``configured``); an entry invalid now is ``config_error``
        with the message and the fix; a server gone from the file is dropped. A server that
        stops being usable is stopped by its owner task. A Manager given ``config=`` has no
        file to read: ``"unchanged"``.

        Raises:
            ServerNotConfigured: the file does not list ``name`` (any more).
            ConfigError: the file cannot be used (not JSON, wrong top level); nothing changed.
            KeenError: the Manager was never started, or was closed.
        """
        # An entry taken now is never connected: connect_server's refresh failed.
        self._refuse_closed("Manager.reload_server() has no server to reload")
        if self._tg is None:
            raise KeenError(_not_started("Manager.reload_server() has no server to reload"))
        if not self._from_file:
            if name not in self._connections and name not in self._misconfigured:
                self._connection(name)  # raises the usual "not configured"
            return "unchanged"
        async with self._reload_lock:
            from keen.mcp.config.load import load_config

            fresh = load_config(self.config_path, strict=False)
            entry, error = fresh.servers.get(name), fresh.invalid.get(name)
            connection, broken = self._connections.get(name), self._misconfigured.get(name)
            if entry is None and error is None:
                if connection is None and broken is None:
                    self._connection(name)  # raises the usual "not configured"
                await self._drop(name, why=f"it was removed from {self.config_path}")
                raise no_longer_configured(name, self.config_path)
            # The config and the dicts change together, with no await between: a call or a
            # status query sees the old server or the new one, never half of each.
            self._config = with_entry_of(self.config, name, fresh)
            self._moved()
            if error is not None:
                status = misconfigured_status(name, error, fresh.invalid_kinds.get(name))
                self._misconfigured[name] = status
                await self._drop(
                    name, keep_status=True, why=f"its entry in {self.config_path} is invalid now"
                )
                if broken is None or broken.last_error != status.last_error:
                    self._notify(status)
                return "invalid"
            assert entry is not None
            if connection is not None and connection.config == entry:
                return "unchanged"
            logger.debug("server %s: its configs.json entry changed or is new", name)
            if connection is not None:
                connection.reconfigure(entry)
                self._notify(connection.status())
                return "changed"
            self._misconfigured.pop(name, None)
            # An entry invalid (at start, or since), fixed now: its first connect tells its
            # tools as added, as a server down at start does; one new to the file, to no one.
            connection = self._connections[name] = self._new_connection(
                name, entry, failed_before=broken is not None
            )
            connection.settled.set()  # not started: wait_ready() does not wait for it (as in start())
            connection.finished.set()
            self._notify(connection.status())
            return "changed" if broken is not None else "added"

    async def _drop(self, name: str, *, why: str, keep_status: bool = False) -> None:
        """Stop ``name``'s owner for good (it closes its own session) and forget the server;
        ``keep_status`` keeps its config_error status; ``why`` ends a call in flight
        (:meth:`ServerConnection.stop`)."""
        if not keep_status:
            self._misconfigured.pop(name, None)
            from keen.mcp.config.servers import MCPConfig

            self._config = with_entry_of(self.config, name, MCPConfig())
        connection = self._connections.pop(name, None)
        self._moved()
        # Its tools, views and call plans: made again should a server of that name come back.
        self._tool_views.forget(name)
        if connection is None:
            return
        connection.retire(why)
        if connection.running:
            self._retired.append(connection)  # aclose() still waits for it
            with anyio.CancelScope(shield=True), anyio.move_on_after(_STOP_GRACE):
                await connection.finished.wait()

    # -- helpers ----------------------------------------------------------------------------------

    def _new_connection(
        self, name: str, server: HttpServerConfig | StdioServerConfig, *, failed_before: bool = False
    ) -> ServerConnection:
        # Imported here, with the MCP SDK it needs (about a second of CPU on a small machine):
        # a Manager that has not started a server yet (keen chat before its first model
        # request) loads none of it.
        from keen.mcp.connection.server import ServerConnection
        from keen.mcp.connection.start_times import StartTimes

        if self._auth_factory is None:
            self._auth_factory = _oauth_on_first_use(self.config_name)
        if self._start_times is None and self._launches is not None:
            self._start_times = StartTimes()
        return ServerConnection(
            name,
            server,
            logs_dir=self._logs_dir or paths.logs_dir(),
            on_change=self._notify,
            auth_factory=self._auth_factory,
            transport=self._transports.get(name),
            elicitation=lambda: self.elicitation,
            elicitation_url=lambda: self.elicitation_url,
            relay=lambda: self.relay,
            on_tools=self._notify_changes,
            refresh_interval=self._refresh_interval,
            launches=self._launches,
            start_times=self._start_times,
            on_moved=self._moved,
            config_name=self.config_name,
            failed_before=failed_before,
        )

    def _moved(self) -> None:
        self._moves += 1

    def _refuse_closed(self, doing: str) -> None:
        """Raise the closed Manager's ``KeenError``, ``doing`` (``"Manager.refresh() has no
        server to reconnect"``) naming the call, once :meth:`close` ran (a Manager runs once)."""
        if self._closed:
            raise KeenError(f"{doing}: {_CLOSED}")

    def _connection(self, name: str) -> ServerConnection:
        connection = self._connections.get(name)
        broken = self._misconfigured.get(name)
        if broken is not None:
            raise ServerMisconfigured(
                broken.last_error,
                server=name,
                remedy=Remedy.FIX_CONFIG,
            )
        if connection is None and not self._started:
            # Before start() no server has a connection, configured or not: "not configured
            # (configured: none)" sent a caller who forgot to start the Manager to its config.
            raise ServerNotConfigured(_not_started(f'MCP server "{name}" cannot be used yet'), server=name)
        if connection is None:
            raise self._not_configured(name, [*self._connections, *self._misconfigured])
        return connection

    def _not_configured(self, name: str, configured: list[str]) -> ServerNotConfigured:
        """The error for a server name the config lacks, naming the configured ones (the
        first twelve, and the ones ``name`` perhaps meant, of a longer list: seventy names
        made a message of 2,000 characters, for a person or a model to read)."""
        from keen._text import near_names, some_of

        known = some_of(configured, _NAMED) or "none"
        if len(configured) > _NAMED and (near := near_names(name, configured)):
            known = f"perhaps {' or '.join(near)}; configured: {known}"
        else:
            known = f"configured: {known}"
        # A config given in code is not configs.json's: adding the server there does nothing.
        where = self.config_path if self._from_file else _GIVEN
        return ServerNotConfigured(
            f'MCP server "{name}" is not configured ({known}); add it to {where} or check the name.',
            server=name,
        )

    def _connected(self, name: str) -> ServerConnection:
        connection = self._connections.get(name)
        if (
            connection is not None
            and connection.state is ServerState.CONNECTED
            and connection.session is not None
            and connection.config.enabled
            and name not in self._misconfigured
        ):
            return connection  # asked several times per call: the usual answer without a call more
        from keen.mcp.calls.send import connected

        if (
            connection is not None
            and self.only is not None
            and name not in self.only
            and connection.state is ServerState.CONFIGURED
            and not connection.running
            and connection.config.enabled
        ):
            # Left out by `only` and never started: "still connecting; try again in a moment"
            # would have the caller wait for ever.
            raise ServerDisconnected(
                f'MCP server "{name}" is not started in this session: it is configured, but the '
                "session connects only some servers; connect it first.",
                server=name,
                remedy=Remedy.RECONNECT,
            )
        if connection is not None and self._closed:
            # Not "is disconnected" with a remedy to reconnect: nothing reconnects a closed Manager.
            raise ServerDisconnected(
                f'MCP server "{name}" is disconnected: this Manager was closed; make a new one '
                "(Manager(...)) for another session.",
                server=name,
            )
        return connected(self._connection(name))


def _check_transports(transports: Mapping[str, TransportFactory], config: MCPConfig, source: str) -> None:
    """Refuse ``transports`` naming a server ``config`` lacks: such a transport is never used
    (a transport only replaces a configured server's own), so a misspelt name would leave the
    user's in-process server unreached without a word.

    Raises:
        ConfigError: the unknown names, the configured ones and the fix (as ``source``'s
            other mistakes read: ``"<source>: <what>; <fix>"``).
    """
    configured = [*config.servers, *config.invalid]
    unknown = [name for name in transports if name not in configured]
    if not unknown:
        return
    import difflib

    missing = ", ".join(f'"{name}"' for name in unknown)
    hints = "".join(
        f' ("{name}" is perhaps "{close[0]}")'
        for name in unknown
        if (close := difflib.get_close_matches(name, configured, n=1))
    )
    them = "them" if len(unknown) > 1 else "it"
    raise ConfigError(
        f"{source}: no server {missing} for Manager(transports=...) (configured: "
        f"{', '.join(configured) or 'none'}); a transport replaces a configured server's own: "
        f"add {them} to {source}, or check the name{hints}.",
        path=source,
        server=unknown[0],
        field="transports",
    )


def _prompt_arguments_problem(arguments: Any) -> str | None:
    """Why ``arguments`` are not a ``prompts/get`` request's (an object of string values),
    else None."""
    if not isinstance(arguments, dict):
        return f"they are {_a(type(arguments).__name__)}, not an object of names to strings"
    for key, value in arguments.items():  # pyright: ignore[reportUnknownVariableType]
        if not isinstance(value, str):
            return f"{str(key)[:64]!r} is {_a(type(value).__name__)}"  # pyright: ignore[reportUnknownArgumentType]
    return None


def _a(noun: str) -> str:
    """``noun`` with its indefinite article ("an int", "a list")."""
    return f"{'an' if noun[:1].lower() in 'aeiou' else 'a'} {noun}"


_CLOSED = "this Manager was closed and cannot start again; make a new one (Manager(...)) for another session"
"""Why a closed Manager refuses to start, reconnect or reload: one wording for each refusal."""


def _not_started(what: str) -> str:
    """The words for ``what`` a Manager cannot do before :meth:`Manager.start`: one wording
    for every such refusal, with the two ways to start it."""
    return (
        f"{what}: this Manager has not started its servers; "
        "start it first (async with Manager(...) as manager, or await manager.start())."
    )


def _with_config_name(factory: AuthFactory, config_name: str) -> AuthFactory:
    """``factory`` given ``config_name=`` on every call when it has a parameter of that name
    a keyword can fill; any other factory is called with the four arguments alone, as it
    always was. A ``**kwargs`` alone does not count: a user's pass-through wrapper
    (``def logged(*args, **kwargs): return four(*args, **kwargs)``) would hand the keyword on
    to a factory that has no such parameter."""
    import inspect

    try:
        params = inspect.signature(factory).parameters.values()
    except (TypeError, ValueError):  # a callable without a signature Python can read
        return factory
    if not any(
        p.name == "config_name" and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) for p in params
    ):
        return factory
    taking: Callable[..., tuple[httpx2.Auth, bool]] = factory  # AuthFactory names the four alone

    def named(
        server: str, config: HttpServerConfig, oauth: OAuthAuth, interactive: bool
    ) -> tuple[httpx2.Auth, bool]:
        return taking(server, config, oauth, interactive, config_name=config_name)

    return named


def _oauth_on_first_use(config_name: str) -> AuthFactory:
    """The default ``AuthFactory`` (:func:`keen.mcp.auth.oauth_auth_factory`), imported when an
    OAuth server first connects: the sign-in modules and the SDK's OAuth client they load
    (about 0.05 s of CPU) are nothing a session of stdio servers needs. ``config_name``: the
    Manager's (:attr:`Manager.config_name`)."""
    made: list[AuthFactory] = []

    def factory(
        server: str, config: HttpServerConfig, oauth: OAuthAuth, interactive: bool
    ) -> tuple[httpx2.Auth, bool]:
        if not made:
            from keen.mcp.auth import oauth_auth_factory

            made.append(oauth_auth_factory(config_name=config_name))
        return made[0](server, config, oauth, interactive)

    return factory
