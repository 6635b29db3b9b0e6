"""One Keen session's engine: config -> Manager -> discovery -> skills sync -> Gateway.

Every front end (each ``keen`` command, ``keen demo``, ``keen chat``'s agent and ``keen
serve``) opens the same context instead of wiring those parts itself::

    async with open_runtime(wait=60, sync=True, approval=ask) as rt:
        result = await rt.gateway.call("github", "search_issues", {"q": "bug"})

Its parts are entered on one ``AsyncExitStack`` and unwound in reverse, so an error in
any step (a broken ``configs.json``, a failed sync) closes every server it started. The
package map and the data flow of a call are drawn in ``docs/architecture.md``.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import anyio.abc

from keen import paths
from keen._tasks import leave_task_group
from keen.errors import KeenError
from keen.gateway import DEFAULT_MAX_RESULT_CHARS, Approval, Gateway
from keen.mcp.connection.elicitation import ElicitationCallback, UrlElicitationCallback
from keen.mcp.manager import Manager, StatusObserver
from keen.mcp.types import ServerState, ServerStatus
from keen.mcpskills import LiveSkills
from keen.mcpskills import snapshot as live_snapshot
from keen.skills.cache import DiscoveryCache
from keen.trust import PinGuard, PinStore

if TYPE_CHECKING:
    from keen.capabilities import Catalog, PermissionMode
    from keen.harness import Harness
    from keen.mcp.config import MCPConfig
    from keen.mcpskills.sync import SyncEntry, SyncReport

__all__ = ["ConnectOutcome", "DiscoveryView", "Runtime", "connect_server", "open_runtime"]

DiscoveryView = Callable[[Manager], contextlib.AbstractAsyncContextManager[Any]]
"""Entered around the discovery wait with the started Manager (the CLI draws a live table)."""


@dataclass(frozen=True)
class ConnectOutcome:
    """What :meth:`Runtime.connect` did.

    Attributes:
        status: the server's status after the reconnect.
        entry: what happened to its ``mcp:<server>`` skill (generated and enabled, or
            disabled with a hint).
    """

    status: ServerStatus
    entry: SyncEntry

    @property
    def enabled(self) -> bool:
        """True when the server's skill is enabled after the reconnect."""
        return self.entry.enabled


class Runtime:
    """The parts of one open session; build it with :func:`open_runtime`.

    Attributes:
        manager: the started :class:`~keen.mcp.Manager`.
        gateway: ``call_mcp_tool`` over ``manager``, with the session's approval and audit.
        skills_root: the skills directory the sync writes to.
        skills: its discovery, scanned again only when the directory changed (shared by the
            harness's catalog and the agent's system prompt).
        discovered: True when every server settled within the discovery wait (False if the
            wait ran out or was not asked for).
        sync_report: the startup sync's report, when one ran.
        live: the live refresh keeping generated skills in line with the servers' tools
            (``keen.mcpskills.live``), when the session has one.
        sync_servers: the servers whose skills :meth:`sync` manages (``None``: every
            configured one, and removed servers' skills go); a session opened with its own
            ``config`` manages only its servers' skills, leaving configs.json's alone.
    """

    def __init__(self, manager: Manager, gateway: Gateway, skills_root: Path) -> None:
        self.manager = manager
        self.gateway = gateway
        self.skills_root = skills_root
        self.skills = DiscoveryCache(skills_root)
        self.discovered = False
        self.sync_report: SyncReport | None = None
        self.live: LiveSkills | None = None
        self.sync_servers: frozenset[str] | None = None
        self._start: Callable[[], Awaitable[Any]] | None = None
        self._started = anyio.Event()
        self._started.set()

    @property
    def servers_started(self) -> bool:
        """True once the Manager started its servers (at once, unless the runtime was opened
        with ``start=False``: then at :meth:`start_servers`)."""
        return self._started.is_set()

    async def start_servers(self) -> None:
        """Start the Manager's servers, when :func:`open_runtime` was told ``start=False``;
        returns once they were launched (each connects in the background, with the Manager's
        bounded concurrency), at once when they already were. Safe to call from several
        tasks: the others wait for the first.

        Raises:
            ConfigError: ``configs.json`` cannot be used.
        """
        start, self._start = self._start, None
        if start is None:
            await self._started.wait()
            return
        try:
            await start()
        finally:
            self._started.set()

    async def _servers_needed(self, what: str) -> None:
        """Refuse ``what`` while a deferred start (``open_runtime(start=False)``) has not been
        asked for; wait for one under way in another task.

        Raises:
            KeenError: :meth:`start_servers` was not called yet (it says to call it).
        """
        if self._start is not None:
            # Not the Manager's own "await manager.start()": run in the caller's task, that
            # entered the Manager's task group there, and leaving open_runtime then failed with
            # a bare RuntimeError (cancel scope) and left the server processes running.
            raise KeenError(
                f"{what} needs the servers started: this session was opened with "
                "open_runtime(start=False); start them first with await rt.start_servers()."
            )
        await self._started.wait()

    async def wait_for_discovery(self, timeout: float, view: DiscoveryView | None = None) -> bool:
        """Wait up to ``timeout`` seconds for every server's first connection attempt.

        ``view`` is entered around the wait (a front end's progress display). Returns True
        when all settled in time, also kept as :attr:`discovered`.

        Raises:
            KeenError: the session was opened with ``start=False`` and :meth:`start_servers`
                was not called yet.
        """
        await self._servers_needed("Runtime.wait_for_discovery()")
        async with view(self.manager) if view else contextlib.nullcontext():
            self.discovered = await self.manager.wait_ready(timeout)
        return self.discovered

    async def sync(self, *, force_enable: frozenset[str] = frozenset()) -> SyncReport:
        """Run the startup sync for every configured server (server states -> skills).

        Returns:
            The report, also kept as :attr:`sync_report`.

        Raises:
            SkillError: a skill cannot be written.
            KeenError: the session was opened with ``start=False`` and :meth:`start_servers`
                was not called yet (nothing is written).
        """
        await self._servers_needed("Runtime.sync()")
        # The sync and its models (pydantic) load here, not with the runtime: `keen chat`
        # builds its first prompt before any sync.
        from keen.mcpskills import sync_from_manager

        self.sync_report = await sync_from_manager(
            self.manager, skills_root=self.skills_root, force_enable=force_enable, servers=self.sync_servers
        )
        return self.sync_report

    async def connect(
        self,
        server: str,
        *,
        sign_in: bool = True,
        on_authorization_url: Callable[[str, bool], None] | None = None,
    ) -> ConnectOutcome:
        """Reconnect ``server``, then regenerate and enable its skill (or disable it on failure).

        See :func:`connect_server`, which this calls with the runtime's Manager and skills root.

        Raises:
            KeenError: the session was opened with ``start=False`` and :meth:`start_servers`
                was not called yet; the Manager was closed.
        """
        await self._servers_needed("Runtime.connect()")
        return await connect_server(
            self.manager,
            server,
            skills_root=self.skills_root,
            sign_in=sign_in,
            on_authorization_url=on_authorization_url,
        )

    def harness(
        self,
        *,
        mode: PermissionMode = "ask",
        approve: Approval | None = None,
        workspace: Path | None = None,
        catalog: Callable[[], Catalog] | None = None,
        **options: Any,
    ) -> Harness:
        """An agent session's :class:`~keen.harness.Harness` over this runtime.

        Its catalog is the Manager's connected servers (a server still starting: its
        generated skill on disk) plus the local skills under :attr:`skills_root`, leaving
        out tools the gateway's pin check would refuse as quarantined, taken again at each
        turn and rebuilt from what changed only
        (:class:`~keen.capabilities.catalog_cache.CatalogCache`); its calls are asked about
        by its own permission stage (``approve``), never by the gateway's ``approval``, which
        stays the one for calls made on the gateway directly (docs/architecture.md "The
        harness"). ``workspace``: the local tools' root (default: the current directory).
        ``catalog``: where the harness takes its catalog instead (``keen serve``: the served
        upstream tools only, no skills). Results are cut past the session's
        ``max_result_chars`` (``open_runtime``'s) unless ``options`` set another. Other
        ``options`` go to ``Harness``. Close it with :meth:`Harness.close` when the session ends.
        """
        from keen.capabilities.catalog_cache import CatalogCache
        from keen.harness import Harness

        source = catalog or CatalogCache(self.manager, skills=self.skills, pins=self.gateway.pins)
        options.setdefault("max_result_chars", self.gateway.max_result_chars)
        return Harness(
            source, self.gateway, mode=mode, approve=approve, workspace=workspace or Path.cwd(), **options
        )


@contextlib.asynccontextmanager
async def open_runtime(
    *,
    config_path: Path | None = None,
    config: MCPConfig | Mapping[str, Any] | None = None,
    only: set[str] | None = None,
    wait: float | None = None,
    discovery_view: DiscoveryView | None = None,
    sync: bool = False,
    skills_root: Path | None = None,
    approval: Approval | None = None,
    audit: Callable[[dict[str, Any]], None] | None = None,
    observers: Iterable[StatusObserver] = (),
    max_result_chars: int = DEFAULT_MAX_RESULT_CHARS,
    manager: Manager | None = None,
    elicitation: ElicitationCallback | None = None,
    elicitation_url: UrlElicitationCallback | None = None,
    live: bool | None = None,
    start: bool = True,
) -> AsyncIterator[Runtime]:
    """Open a session: start the Manager, wait for discovery, sync skills, build the Gateway.

    Args:
        config_path: ``configs.json``; default ``$KEEN_HOME/mcp/configs.json``.
        config: an already-loaded config, or its data as a dict (see :class:`~keen.mcp.Manager`);
            wins over ``config_path``. ``sync`` then writes these servers' skills only and
            leaves the other skills (configs.json's servers') as they are.
        only: connect just these servers (``set()``: none until :meth:`Runtime.connect`);
            the sync then leaves the other servers' skills as they are.
        wait: seconds to wait for every server's first connection attempt; ``None`` does
            not wait (discovery goes on in the background).
        discovery_view: entered around the wait, e.g. a live status table.
        sync: run the startup sync after the wait (needs ``wait``, or it sees servers still
            connecting and disables their skills until the next sync).
        skills_root: the skills directory; default ``$KEEN_HOME/skills``.
        approval: asked before every gateway call (``None``: only tools annotated
            ``readOnlyHint`` by a server trusted for its annotations run;
            ``keen.gateway.allow_all`` allows every call).
        audit: receives one event dict per gateway call.
        observers: subscribed to the Manager's state changes for the session's lifetime.
        max_result_chars: where a result's text is cut for the model, by the gateway and by
            :meth:`Runtime.harness`.
        manager: a Manager built by the caller (e.g. with in-memory transports); it is
            started and closed here all the same. ``config_path``, ``config`` and ``only``
            are then ignored.
        elicitation: answers servers' ``elicitation/create`` requests (see
            :mod:`keen.mcp.connection.elicitation`); servers see the capability only when it is set.
        elicitation_url: asked for URL-mode requests (a page to open out of band); they
            are declined without it.
        live: keep each server's generated skill in line with its tools while the session
            runs (a change notice, an expired ``ttlMs`` or ``Manager.refresh_tools`` regenerates
            it; :class:`~keen.mcpskills.live.LiveSkills`). Default: on when ``sync`` is.
        start: start the servers now. ``False`` leaves them (and the MCP SDK, about a second
            of CPU to import on a small machine) until :meth:`Runtime.start_servers`: ``keen
            chat`` sends its first model request from the skills on disk first (docs/chat.md
            "Startup"). Until then the Manager lists no server, and :meth:`Runtime.sync`,
            :meth:`Runtime.connect` and :meth:`Runtime.wait_for_discovery` refuse with a
            ``KeenError`` (never ``await rt.manager.start()``: it starts the Manager in the
            caller's task, which ``open_runtime`` cannot close). Needs ``wait=None`` and no ``sync``.

    Yields:
        The :class:`Runtime`.

    Raises:
        ConfigError: ``configs.json`` is invalid (nothing was started).
        SkillError: the sync could not write a skill.
        ValueError: ``start=False`` with ``wait`` or ``sync``.
        KeenError: ``manager`` was closed (a Manager runs one session; make a new one).
    """
    if not start and (wait is not None or sync):
        raise ValueError(
            "open_runtime(start=False) cannot wait for discovery or sync: the servers start later"
        )
    root = skills_root or paths.skills_dir()
    async with contextlib.AsyncExitStack() as stack:
        own_config = manager is None and config is not None
        if manager is None:
            # The pins' folder found once, as the skills' root above: a store without a root
            # reads KEEN_HOME at every call's look at the pins.
            pins = PinGuard(PinStore(paths.pins_dir()))
            manager = Manager(config_path, config=config, only=only, trust=pins)
        if elicitation is not None:
            manager.elicitation = elicitation
        if elicitation_url is not None:
            manager.elicitation_url = elicitation_url
        deferred: Callable[[], Awaitable[Any]] | None = None
        if start:
            await stack.enter_async_context(manager)
        else:
            deferred = await _host_later(stack, manager)
        for observer in observers:
            stack.callback(manager.subscribe(observer))
        gateway = Gateway(manager, approval=approval, audit=audit, max_result_chars=max_result_chars)
        runtime = Runtime(manager, gateway, root)
        if deferred is not None:
            runtime._start = deferred
            runtime._started = anyio.Event()
        if own_config:
            # Not configs.json's servers: their skills are the only ones this session's sync touches.
            runtime.sync_servers = frozenset(manager.config.servers) | frozenset(manager.config.invalid)
        if wait is not None:
            await runtime.wait_for_discovery(wait, discovery_view)
        if sync:
            await runtime.sync()
        if sync if live is None else live:
            runtime.live = await stack.enter_async_context(LiveSkills(manager, skills_root=root))
        yield runtime


async def _host_later(stack: contextlib.AsyncExitStack, manager: Manager) -> Callable[[], Awaitable[Any]]:
    """A function that starts ``manager`` in a task of its own, entered on ``stack``: the
    Manager's task group is entered and left in one task (anyio requires it), whichever task
    asks for the start; leaving ``stack`` closes it (or does nothing if it never started)."""
    tg = anyio.create_task_group()
    await tg.__aenter__()

    async def leave(_: type[BaseException] | None, exc: BaseException | None, __: object) -> None:
        # The body's exception propagates as it is (a caller's `except KeenError` matches
        # it); with the host task's error, both, in the group.
        await leave_task_group(tg, exc)

    stack.push_async_exit(leave)
    closing = anyio.Event()
    stack.callback(closing.set)  # unwound before the task group's exit, which waits for the host

    async def host(*, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        async with manager:
            task_status.started()
            await closing.wait()

    return lambda: tg.start(host, name="keen-mcp-manager")


async def connect_server(
    manager: Manager,
    server: str,
    *,
    skills_root: Path | None = None,
    sign_in: bool = True,
    on_authorization_url: Callable[[str, bool], None] | None = None,
) -> ConnectOutcome:
    """Reconnect ``server``, then regenerate and enable its skill, or disable it on failure;
    other servers' skills are left alone (what ``keen mcp connect`` and ``/mcp connect`` do).

    The server's entry is read from configs.json again first
    (:meth:`~keen.mcp.Manager.reload_server`): a long session (``keen chat``) connects the
    entry as the user fixed it, a server added to the file since it started, and reports one
    removed since as no longer configured.

    For an OAuth server with ``sign_in``, first clear its stored token and run the browser
    sign-in (:func:`keen.mcp.auth.authorize_interactively`; ``on_authorization_url(url, opened)``
    lets a front end show the URL).

    Args:
        manager: a started Manager.
        server: the server's name in ``configs.json``.
        skills_root: the skills directory; default ``$KEEN_HOME/skills``.
        sign_in: run the interactive OAuth sign-in first for an OAuth server.
        on_authorization_url: told the sign-in URL and whether a browser was opened.

    Returns:
        The status after the reconnect and what happened to the skill.

    Raises:
        ServerNotConfigured: no server by that name (any more).
        ConfigError: configs.json cannot be used (not JSON, wrong top level).
        AuthRequired: the sign-in did not complete (after the skill was disabled).
        AuthFailed: the sign-in was refused (after the skill was disabled).
        KeenError: ``manager`` was never started, or was closed (it says what to do).
    """
    root = skills_root or paths.skills_dir()
    await manager.reload_server(server)
    config_entry = manager.config.servers.get(server)
    sign_in_error: KeenError | None = None
    from keen.mcp.config import HttpServerConfig, OAuthAuth
    from keen.mcpskills.sync import sync_server

    if sign_in and isinstance(config_entry, HttpServerConfig) and isinstance(config_entry.auth, OAuthAuth):
        from keen.mcp.auth import authorize_interactively  # with the MCP SDK: only when signing in

        try:
            await authorize_interactively(
                server,
                config_entry,
                on_authorization_url=on_authorization_url,
                config_name=manager.config_name,
            )
        except KeenError as exc:
            sign_in_error = exc
    status = await manager.refresh(server)
    snapshot = live_snapshot(manager, server)  # the tools as pinned, held ones noted
    entry = await anyio.to_thread.run_sync(lambda: sync_server(snapshot, skills_root=root, force_enable=True))
    if sign_in_error is not None and status.state is not ServerState.CONNECTED:
        raise sign_in_error
    return ConnectOutcome(status, entry)
