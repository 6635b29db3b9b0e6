"""``KeenServer``: Keen as an MCP server in front of the configured servers.

Two tool surfaces (``mode``):

- ``"search"``: three fixed tools, ``search_tools``, ``describe_tools`` and ``call_mcp_tool``
  (:mod:`keen.serve.search`), with instructions that teach the workflow. Works with every
  MCP host.
- ``"extension"``: the ``tool_descriptions`` extension (``docs/serve.md``): every upstream
  tool in ``tools/list`` under its exposed name with a minimal description; the full ones
  come from ``resources/read`` of ``resource:///tool_descriptions?tools=a,b``, which
  authorizes those tools for the caller. ``tools/list`` is the same for every caller and
  never changes as a side effect of a read (MCP 2026-07-28 forbids per-caller lists).

Whose authorization a request uses (its *scope*):

- HTTP, handshake era (2025-11-25): the ``Mcp-Session-Id`` session, ``session:<id>``.
- HTTP, stateless era (2026-07-28): the bearer-token principal, ``principal:<id>``; with no
  token configured (loopback only) every caller shares ``principal:anonymous``.
- stdio, either era: the one connection, ``stdio:<id>``.

Both eras are served by the SDK's server (``mcp.server.lowlevel.Server``); this module gives
it handlers. Every call goes through :class:`keen.serve.calls.CallRouter`: the harness
pipeline (visibility per caller, the host as approver, truncation, the audit log).

Tool names are the capability catalog's model names (``mcp__<server>__<tool>``), the same
names an agent's harness offers and ToolSearch returns (:mod:`keen.serve.catalog`); what is
served is kept up to date with the upstream servers by :class:`keen.serve.served.ServedTools`.

When an upstream server's tools change, extension mode's ``tools/list`` changes with them:
:class:`keen.serve.notify.ChangeNotifier` tells every connected host (``listChanged: true``),
and the list's ``ttlMs`` is never longer than what its upstream lists are still fresh for.
A change of the pins made outside keen serve (``keen mcp trust`` in another process) changes
the list too: a watch looks at the pin files every ``pins_poll`` seconds and starts a round.
Search mode's three tools never change, so it sends no notices; ``search_tools`` and
``describe_tools`` read the live catalog on every call (docs/serve.md "When tools change").

An upstream server that went away is reconnected when a request needs it, at most once per
back-off window (:mod:`keen.mcp.connection.reconnect`; docs/serve.md "When an upstream server goes away").

What an upstream asks (elicitation, sampling, roots) or logs during a call goes to the host
that made it, through the call's :class:`keen.serve.relay.HostPeer`; a 2026-07-28 host is
asked in ``InputRequiredResult`` rounds (:mod:`keen.serve.rounds`; docs/serve.md "During a
call").
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import secrets
import warnings
from collections.abc import AsyncIterator, Awaitable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, Literal

import anyio
import mcp_types as mt
from mcp.server.caching import CacheHint
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import NotificationOptions, Server
from mcp.server.models import InitializationOptions
from mcp.shared.dispatcher import ProgressFnT
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from keen import __version__, paths
from keen._terminal import name_in_message
from keen._text import shorten
from keen.capabilities import Capability
from keen.errors import InvalidArguments, KeenError
from keen.gateway import DEFAULT_MAX_RESULT_CHARS
from keen.mcp.connection.reconnect import Reconnector
from keen.mcp.connection.relay import Relay
from keen.mcp.manager import Manager
from keen.runtime import Runtime, open_runtime
from keen.serve import extension as ext
from keen.serve.calls import APPROVER, CallRouter, Withheld, call_result, error_result, host_remedy_words
from keen.serve.catalog import ToolCatalog
from keen.serve.notify import DEFAULT_NOTIFY_INTERVAL, ChangeNotifier, ListKind, list_digest
from keen.serve.passthrough import checked_contents, checked_messages, exposed_uri, upstream_uri
from keen.serve.relay import (
    CHANNEL_KEY,
    HOST_KEY,
    LEVEL_KEY,
    STREAM_KEY,
    HostChannel,
    HostPeer,
    LogBound,
    Replies,
    SessionChannel,
    host_capabilities,
    log_levels,
)
from keen.serve.rounds import Rounds, RoundsChannel
from keen.serve.search import SEARCH_INSTRUCTIONS, SEARCH_TOOLS, CapabilitySearch, SearchFn, SearchMode
from keen.serve.served import ServedTools
from keen.serve.store import (
    DEFAULT_AUTH_TTL,
    DEFAULT_FETCH_LIMIT,
    DEFAULT_MAX_SESSIONS,
    DEFAULT_SESSION_TTL,
    MemoryStore,
    RedisStore,
    Store,
)

__all__ = ["DEFAULT_PINS_POLL", "DEFAULT_READY_WAIT", "PRINCIPAL_KEY", "SCOPE_KEY", "KeenServer", "Mode"]

logger = logging.getLogger("keen.serve")

Mode = Literal["search", "extension"]

SCOPE_KEY = "keen.scope"
"""ASGI scope key where the HTTP front sets the caller's authorization scope."""

PRINCIPAL_KEY = "keen.principal"
"""ASGI scope key where the HTTP front sets who the caller is, whatever its session: its bearer
token's principal (``token:<id>``), or its address when no token is configured
(``address:<ip>``). Limits are kept per principal, so a new session does not reset them."""

DEFAULT_READY_WAIT = 15.0
DEFAULT_PINS_POLL = 1.0
"""Seconds between two looks at the pin files for a change made outside keen serve."""
_FOR_THE_CONNECTION = 10 * 365 * 24 * 3600.0
"""An authorization in a stdio connection's scope: it ends with the connection (the process)."""

_EXTENSION_INSTRUCTIONS = (
    "This server uses progressive disclosure for tool descriptions. Pick a tool from tools/list; "
    "before calling it, read resource:///tool_descriptions?tools=TOOL_NAME (comma-separate several) "
    "for its parameters. A call without that read fails with TOOL_DESCRIPTION_REQUIRED."
)


class KeenServer:
    """The served state: upstream Manager, store, call router, and the SDK ``Server``.

    Args:
        manager: connections to the upstream servers; started and closed by this object.
        mode: ``"search"`` or ``"extension"``.
        store: session/authorization state; default :class:`MemoryStore`.
        search: search mode's finder (``(catalog, query, limit) -> tools``); default ToolSearch.
        audit_path: the harness's event log for served calls (JSON lines); default
            ``$KEEN_HOME/logs/serve-audit.jsonl``.
        session_ttl / auth_ttl: seconds (see :mod:`keen.serve.store`).
        fetch_limit: description fetches allowed per caller per ``fetch_window`` seconds
            (per principal: every session of one bearer token, or of one address, counts).
        max_sessions: open handshake-era HTTP sessions one principal may hold (``initialize``
            beyond them gets HTTP 429 until one ends or expires).
        max_result_chars: longer result text is cut by the harness, with a note.
        notify_interval: seconds that coalesce upstream changes into one notice to hosts
            (at most one ``list_changed`` per list per interval; :mod:`keen.serve.notify`).
        ready_wait: seconds the first request that needs the upstream tools waits for every
            server's first connection attempt; a server still connecting after that is named
            in ``search_tools`` answers until it is done.
        pins_poll: seconds between two looks at the connected servers' pin files (extension
            mode), so a change of them made elsewhere (``keen mcp trust`` in another process,
            a pins folder broken or mended) reaches the hosts as a change notice.
        log_bound: how many log messages of each upstream server reach each host during
            its calls, and how much of each (:class:`keen.serve.relay.LogBound`; its defaults
            when None).

    Raises:
        ConfigError: the manager's config file cannot be used (raised before the audit log
            is opened, so a failed start writes nothing to it).
        ValueError: an unknown ``mode``.
    """

    def __init__(
        self,
        manager: Manager,
        *,
        mode: Mode = "search",
        store: Store | None = None,
        search: SearchFn | None = None,
        audit_path: Path | None = None,
        session_ttl: float = DEFAULT_SESSION_TTL,
        auth_ttl: float = DEFAULT_AUTH_TTL,
        fetch_limit: int = DEFAULT_FETCH_LIMIT,
        fetch_window: float = 60.0,
        max_sessions: int = DEFAULT_MAX_SESSIONS,
        max_result_chars: int = DEFAULT_MAX_RESULT_CHARS,
        notify_interval: float = DEFAULT_NOTIFY_INTERVAL,
        ready_wait: float = DEFAULT_READY_WAIT,
        pins_poll: float = DEFAULT_PINS_POLL,
        log_bound: LogBound | None = None,
    ) -> None:
        if mode not in ("search", "extension"):
            raise ValueError(f"unknown mode {mode!r}; use search or extension")
        # Load the config now, before the audit log below gets its session.start: a file that
        # cannot be used must fail here with nothing written (ConfigError).
        manager.config  # noqa: B018
        self.manager = manager
        # Upstreams' requests and log messages during a call go to the host that made it.
        if manager.relay is None:
            manager.relay = Relay()
        self.replies = Replies()
        self.rounds = Rounds()
        """2026-07-28 hosts' calls whose upstream asks (keen.serve.rounds)."""
        """Handshake-era HTTP hosts' answers to what Keen asked them (keen.serve.relay)."""
        self._stdio_level: str | None = None
        """The level the stdio host set with ``logging/setLevel`` (an HTTP session's is kept
        with the session in the store, so every replica knows it)."""
        self.log_bound = log_bound if log_bound is not None else LogBound()
        """Upstreams' log messages passed to hosts: a burst, then a rate, per server."""
        self.mode: Mode = mode
        self.store: Store = store if store is not None else MemoryStore()
        self.withheld = Withheld()
        """keen serve's log of what hosts are not shown (local paths, the config), each text once."""
        self.search: SearchFn = search or CapabilitySearch(self.withheld)
        self.session_ttl = session_ttl
        self.auth_ttl = auth_ttl
        self.fetch_limit = fetch_limit
        self.fetch_window = fetch_window
        self.max_sessions = max_sessions
        self.ready_wait = ready_wait
        if not pins_poll > 0 or math.isinf(pins_poll):
            raise ValueError(f"pins poll must be a positive number of seconds, got {pins_poll!r}")
        self.pins_poll = pins_poll
        self.reconnector = Reconnector(manager)
        self.max_result_chars = max_result_chars
        self.served = ServedTools(manager, self.reconnector, self.withheld)
        """The served tools and lists, kept up to date with the upstream servers."""
        self.router = CallRouter(
            self.served.capabilities,
            self._visible,
            audit_path if audit_path is not None else paths.logs_dir() / "serve-audit.jsonl",
            look=self.served.look,
            max_result_chars=max_result_chars,
            mode=mode,
            retry_in=self.reconnector.retry_in,
            withheld=self.withheld,
        )
        self.remedy_words = host_remedy_words(mode, self.reconnector.retry_in, self.withheld)
        self.search_mode = SearchMode(self.served, self.router, self.search)
        self.stdio_scope = f"stdio:{secrets.token_hex(8)}"
        self._ready = False
        self._inflight: dict[tuple[str, str], anyio.CancelScope] = {}
        """(caller scope, request id) -> the cancel scope of that call while it runs."""
        self.notifier = ChangeNotifier(
            self._served_lists, interval=notify_interval, store=self.store, record_ttl=session_ttl
        )
        self._stack: contextlib.AsyncExitStack | None = None
        self.runtime: Runtime | None = None
        """The session runtime, while the server is entered."""
        self.server = self._build()

    # -- lifecycle ----------------------------------------------------------------------------

    async def __aenter__(self) -> KeenServer:
        async with contextlib.AsyncExitStack() as stack:
            # The same runtime every front end opens (keen.runtime): it starts the Manager and
            # gives the gateway and the harness the calls go through; no skills are synced.
            self.runtime = await stack.enter_async_context(
                open_runtime(manager=self.manager, max_result_chars=self.max_result_chars)
            )
            if isinstance(self.store, RedisStore):
                await self.store.ping()
            self.router.open(self.runtime)
            # Any change of a tool list or of a server's state may change what we list.
            stack.callback(self.manager.subscribe_changes(self.notifier.poke))
            stack.callback(self.manager.subscribe(self.notifier.poke))
            tg = await stack.enter_async_context(anyio.create_task_group())
            stack.callback(tg.cancel_scope.cancel)
            tg.start_soon(self.notifier.run, name="keen-serve-notify")
            if self.mode == "extension":
                logger.debug("keen serve: looks at the pin files every %g s (--pins-poll)", self.pins_poll)
                tg.start_soon(self._watch_pins, name="keen-serve-pins")
            self.reconnector.task_group = self.rounds.task_group = tg
            stack.callback(setattr, self.reconnector, "task_group", None)
            stack.callback(setattr, self.rounds, "task_group", None)
            self._stack = stack.pop_all()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        try:
            self.notifier.close()
            if self._stack is not None:
                stack, self._stack = self._stack, None
                await stack.aclose()  # the runtime last: it closes the Manager
        finally:
            await self.store.aclose()
            self.router.close()

    async def wait_ready(self) -> None:
        """Let the first connection attempts finish (at most :attr:`ready_wait` seconds, once)
        so the first list is not empty."""
        if not self._ready:
            await self.manager.wait_ready(self.ready_wait)
            # One grace period only: a server still hanging after it is reported per call.
            self._ready = True

    @contextlib.asynccontextmanager
    async def lifespan(self, _server: Server[Any]) -> AsyncIterator[dict[str, Any]]:
        yield {"keen": self}

    async def _watch_pins(self) -> None:
        """Poke a round whenever the catalog a listing would build now is not the one this
        watch last saw: a pin file written by ``keen mcp trust`` in another process, or a
        pins folder broken or mended, changes what is served (held tools appear or go) with
        no upstream change to start a round. One ``stat`` per connected server each
        :attr:`pins_poll` seconds (:meth:`ServedTools.catalog`); the Python standard
        library has no portable watch on a folder."""
        last: ToolCatalog | None = None
        failing = False
        while True:
            try:
                now = self.served.catalog()
            except Exception:  # a broken look must not end the watch (nor keen serve)
                if not failing:  # once until it works again, not every pins_poll
                    logger.exception("keen serve: could not look at the pin files")
                failing = True
            else:
                if last is not None and now is not last:
                    self.notifier.poke()
                last, failing = now, False
            await anyio.sleep(self.pins_poll)

    # -- the catalog --------------------------------------------------------------------------

    def catalog(self, servers: Sequence[str] | None = None) -> ToolCatalog:
        """The exposed tools of every connected server (:meth:`ServedTools.catalog`)."""
        return self.served.catalog(servers)

    def _served_lists(self) -> Mapping[str, str]:
        # What a host would see. Search mode sends no notices (it has no event stream): its
        # tools are constant and its hosts re-list prompts and resources when they need them.
        if self.mode == "search":
            return {}
        listing = self.served.listing()
        return {
            "tools": self.served.listed()[1],
            "resources": list_digest(listing.resources),
            "resource_templates": list_digest(listing.templates),
            "prompts": list_digest(listing.prompts),
        }

    def _host(self, ctx: ServerRequestContext[Any, Any]) -> str | None:
        """Who is told of list changes for this request (:mod:`keen.serve.notify`): its
        handshake-era HTTP session or the stdio connection; None for a 2026-07-28 HTTP
        caller, whose requests no listen stream can be matched to."""
        scope = self.caller_scope(ctx)
        return scope if scope.startswith("session:") or scope == self.stdio_scope else None

    async def _shown(self, ctx: ServerRequestContext[Any, Any], kind: ListKind, items: Sequence[Any]) -> None:
        """The host of ``ctx`` was given list ``kind`` (``items``): tell it of a change only
        once that list differs (extension mode's notices; search mode sends none)."""
        if self.mode == "extension":
            await self.notifier.shown(self._host(ctx), kind, list_digest(items))

    async def _listen(
        self, ctx: ServerRequestContext[Any, Any], params: mt.SubscriptionsListenRequestParams
    ) -> mt.SubscriptionsListenResult:
        """``subscriptions/listen`` (2026-07-28): notices of this caller's lists as it sees them."""
        return await self.notifier.listen(ctx, params, self._host(ctx))

    def _visible(self, cap: Capability, caller: str | None) -> str | Awaitable[str | None] | None:
        """The harness's visibility gate for served calls (see :mod:`keen.serve.calls`): the
        answer itself where it is known at once (search mode: every upstream tool), else what
        to await for it (extension mode asks the authorization store)."""
        if cap.server is None or cap.kind != "tool":
            return "keen serve runs only the upstream servers' tools"
        if self.mode == "search":
            return None
        exposed = self.served.catalog(()).find(cap.server, cap.name)  # the router looked at its pins
        if exposed is None:
            return f"{name_in_message(f'{cap.server}/{cap.name}')} is not served"
        return self._authorized(exposed.name, caller)

    async def _authorized(self, name: str, caller: str | None) -> str | None:
        """Extension mode's visibility: ``caller`` fetched the description of the exposed tool
        ``name`` (and the authorization has not lapsed)."""
        if caller and await self.store.is_authorized(caller, name, self.auth_ttl_of(caller)):
            return None
        return f"fetch {ext.RESOURCE_URI}?tools={name} before calling {name}"

    # -- scopes -------------------------------------------------------------------------------

    def auth_ttl_of(self, scope: str) -> float:
        """Seconds an authorization in ``scope`` lasts unused (the extension's section 5.1.3:
        for the session). A handshake-era HTTP session's last as long as the session: at
        least its idle timeout, renewed by each of its requests (``keen.serve.http``); a
        stdio connection's as long as the connection. The stateless era has no session:
        it is ``auth_ttl`` there."""
        if scope.startswith("session:"):
            return max(self.auth_ttl, self.session_ttl)
        if scope == self.stdio_scope:
            return _FOR_THE_CONNECTION
        return self.auth_ttl

    def caller_scope(self, ctx: ServerRequestContext[Any, Any]) -> str:
        """The authorization scope of this request (see the module docstring)."""
        request = ctx.request
        if request is None:
            return self.stdio_scope
        scope = getattr(request, "scope", None) or {}
        found = scope.get(SCOPE_KEY)
        if not found:
            # Only reachable if the app is mounted without keen.serve.http's gate.
            raise MCPError(
                code=mt.INVALID_REQUEST, message="request reached keen serve without a caller scope"
            )
        return str(found)

    def caller_principal(self, ctx: ServerRequestContext[Any, Any]) -> str:
        """Who this request comes from, across its sessions (:data:`PRINCIPAL_KEY`); over
        stdio the one connection."""
        request = ctx.request
        if request is None:
            return self.stdio_scope
        scope = getattr(request, "scope", None) or {}
        return str(scope.get(PRINCIPAL_KEY) or self.caller_scope(ctx))

    # -- the SDK server -----------------------------------------------------------------------

    def _build(self) -> Server[Any]:
        extension = self.mode == "extension"
        with warnings.catch_warnings():
            # logging/setLevel is deprecated as of 2026-07-28; 2025-11-25 hosts still send it.
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            return self._server(extension)

    def _server(self, extension: bool) -> Server[Any]:
        server = _NotifyingServer(
            "keen",
            list_changed=extension,
            version=__version__,
            title="Keen",
            description="Progressive disclosure for many MCP servers",
            instructions=_EXTENSION_INSTRUCTIONS if extension else SEARCH_INSTRUCTIONS,
            # The list is the same for every caller: shareable. A read authorizes: never cached.
            cache_hints={
                "tools/list": CacheHint(ttl_ms=10_000, scope="public"),
                "resources/list": CacheHint(ttl_ms=60_000, scope="public"),
                "resources/read": CacheHint(ttl_ms=0, scope="private"),
            },
            lifespan=self.lifespan,
            get_tool_input_schema=self._input_schema,
            on_list_tools=self._list_tools,
            on_call_tool=self._call_tool,
            # Upstream prompts and resources pass through in both modes; extension mode adds
            # its tool_descriptions resource.
            on_list_resources=self._list_resources,
            on_list_resource_templates=self._list_resource_templates,
            on_read_resource=self._read_resource,
            on_list_prompts=self._list_prompts,
            on_get_prompt=self._get_prompt,
            # 2026-07-28 hosts get change notices on subscriptions/listen streams only.
            on_subscriptions_listen=self._listen if extension else None,
            # Upstreams' log messages during a host's call reach it at this level.
            on_set_logging_level=self._set_logging_level,
        )
        if extension:
            server.middleware.append(self._attach_stdio_host)
        return server

    async def _attach_stdio_host(self, ctx: ServerRequestContext[Any, Any], call_next: Any) -> Any:
        # A handshake-era stdio host gets notices on its connection once it is initialized
        # (HTTP hosts of that era get them on their GET stream: keen.serve.http).
        result = await call_next(ctx)
        if (
            ctx.method == "notifications/initialized"
            and ctx.request is None
            and ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS
        ):
            self.notifier.attach_session(ctx.session, self.stdio_scope)
        return result

    def _input_schema(self, name: str) -> dict[str, Any] | None:
        # Used by the SDK for Mcp-Param header checks; our advertised schemas carry none.
        return None

    async def _list_tools(
        self, ctx: ServerRequestContext[Any, Any], params: mt.PaginatedRequestParams | None
    ) -> mt.ListToolsResult:
        if self.mode == "search":
            return mt.ListToolsResult(tools=SEARCH_TOOLS)
        await self.wait_ready()
        # A server that went away comes back in the background; its return is a change notice.
        self.reconnector.kick(self.reconnector.reconnectable_servers())
        tools, listed = self.served.listed()
        await self.notifier.shown(self._host(ctx), "tools", listed)
        return mt.ListToolsResult(tools=tools, ttl_ms=self.served.tools_ttl_ms())

    async def _list_resources(
        self, ctx: ServerRequestContext[Any, Any], params: mt.PaginatedRequestParams | None
    ) -> mt.ListResourcesResult:
        await self.wait_ready()
        own = [
            mt.Resource(
                uri=ext.RESOURCE_URI,
                name=ext.RESOURCE_NAME,
                description=ext.RESOURCE_DESCRIPTION,
                mime_type="application/json",
            )
        ]
        upstream = self.served.listing().resources
        await self._shown(ctx, "resources", upstream)
        return mt.ListResourcesResult(resources=[*(own if self.mode == "extension" else []), *upstream])

    async def _list_resource_templates(
        self, ctx: ServerRequestContext[Any, Any], params: mt.PaginatedRequestParams | None
    ) -> mt.ListResourceTemplatesResult:
        await self.wait_ready()
        templates = self.served.listing().templates
        await self._shown(ctx, "resource_templates", templates)
        return mt.ListResourceTemplatesResult(resource_templates=templates)

    async def _list_prompts(
        self, ctx: ServerRequestContext[Any, Any], params: mt.PaginatedRequestParams | None
    ) -> mt.ListPromptsResult:
        await self.wait_ready()
        prompts = self.served.listing().prompts
        await self._shown(ctx, "prompts", prompts)
        return mt.ListPromptsResult(prompts=prompts)

    async def _get_prompt(
        self, ctx: ServerRequestContext[Any, Any], params: mt.GetPromptRequestParams
    ) -> mt.GetPromptResult:
        scope = self.caller_scope(ctx)
        await self.wait_ready()
        found = self.served.listing().prompt(params.name)
        if found is None:
            self._audit("prompt.get", scope, None, params.name, "denied", "unknown_prompt")
            shown = shorten(params.name, 201)
            raise MCPError(
                code=mt.INVALID_PARAMS,
                message=f"Unknown prompt: {shown!r}; prompts/list names the prompts this server has",
            )
        server, prompt = found
        await self.served.revive(servers=[server])
        try:
            raw = await self.manager.get_prompt(server, prompt, dict(params.arguments or {}))
        except KeenError as exc:
            self._audit("prompt.get", scope, server, prompt, "error", exc.code)
            raise self._upstream_refused(exc, server) from exc
        self._audit("prompt.get", scope, server, prompt, "ok", None)
        return mt.GetPromptResult.model_validate(checked_messages(raw))

    async def _read_upstream(self, scope: str, uri: str) -> mt.ReadResourceResult:
        """``resources/read`` of an upstream resource (``keen://<server>/<uri>``), forwarded
        only when its server listed it or a template of that server's matches it."""
        found = upstream_uri(uri)
        await self.wait_ready()
        if found is None or not self.served.listing().readable(*found):
            self._audit(
                "resource.read", scope, found[0] if found else None, uri, "denied", "unknown_resource"
            )
            raise _unknown_resource(uri)
        server, inner = found
        await self.served.revive(servers=[server])
        try:
            contents = await self.manager.read_resource(server, inner)
        except KeenError as exc:
            self._audit("resource.read", scope, server, inner, "error", exc.code)
            raise self._upstream_refused(exc, server, data={"uri": uri}) from exc
        self._audit("resource.read", scope, server, inner, "ok", None)
        # Each part names the resource as the host asked for it (its server's namespace).
        shown = [{**c, "uri": exposed_uri(server, str(c.get("uri") or inner))} for c in contents]
        return mt.ReadResourceResult.model_validate({"contents": checked_contents(shown)})

    def _upstream_refused(self, exc: KeenError, server: str, data: Any = None) -> MCPError:
        """The host's JSON-RPC error for a prompt or resource request ``server`` did not
        answer: ``-32602`` for params it refused as invalid (``InvalidArguments``: a prompt's
        arguments, a resource URI it does not serve or a template's bad values; the message
        says which list gives the valid ones), as a name Keen itself does not list is (MCP
        2025-11-25, Prompts and Resources, "Error Handling"), with ``data`` (a read's
        ``{"uri": ...}``); ``-32603`` with the remedy in keen serve's words for anything else."""
        if isinstance(exc, InvalidArguments):
            return MCPError(code=mt.INVALID_PARAMS, message=exc.message, data=data)
        return MCPError(code=mt.INTERNAL_ERROR, message=self.remedy_words(exc, server))

    def _audit(
        self, kind: str, caller: str, server: str | None, name: str, outcome: str, code: str | None
    ) -> None:
        """One event in the audit log (the harness's event log) for a prompt or resource a host got."""
        self.router.harness.log.emit(
            kind, caller=caller, server=server, name=name, outcome=outcome, code=code, by=APPROVER
        )

    async def _read_resource(
        self, ctx: ServerRequestContext[Any, Any], params: mt.ReadResourceRequestParams
    ) -> mt.ReadResourceResult:
        uri = str(params.uri)
        scope = self.caller_scope(ctx)
        if self.mode != "extension" or not ext.is_tool_descriptions_uri(uri):
            return await self._read_upstream(scope, uri)
        names = ext.selected_tools(uri)
        if names is None:
            return _json_contents(uri, ext.missing_tool_selection())
        if len(names) > ext.MAX_TOOLS_PER_READ:
            return _json_contents(uri, ext.too_many_tools(len(names)))
        # Counted per principal: a new session (a new initialize) must not start a new count.
        principal = self.caller_principal(ctx)
        if await self.store.hit(f"fetch:{principal}", self.fetch_window) > self.fetch_limit:
            logger.info("description fetch rate limit hit by %s", principal)
            return _json_contents(uri, ext.rate_limited(self.fetch_limit, self.fetch_window))
        await self.wait_ready()
        await self.served.revive(names)
        body, found = ext.describe(self.served.catalog(), names)
        await self.store.authorize(scope, found, self.auth_ttl_of(scope))
        return _json_contents(uri, body)

    def _peer(
        self, ctx: ServerRequestContext[Any, Any], scope: str, rounds: HostChannel | None = None
    ) -> HostPeer:
        """The call's host as its upstream's requests and log messages see it
        (:mod:`keen.serve.relay`): what it declared, its log levels, how to reach it
        (``rounds``: a 2026-07-28 host's, :mod:`keen.serve.rounds`)."""
        modern = ctx.protocol_version in MODERN_PROTOCOL_VERSIONS
        request = ctx.request
        asgi: dict[str, Any] = getattr(request, "scope", None) or {}
        channel: Any
        if rounds is not None:
            channel = rounds
        elif request is None:
            channel = SessionChannel(ctx)  # stdio: the SDK's session reaches the host
        elif asgi.get(CHANNEL_KEY) is not None:
            channel = asgi[CHANNEL_KEY]
        else:
            channel = SessionChannel(ctx) if asgi.get(STREAM_KEY) else None
        if modern or request is None:
            declared = host_capabilities(ctx.session.client_capabilities)
        else:
            declared = list(asgi.get(HOST_KEY) or [])
        set_level = self._stdio_level if request is None else asgi.get(LEVEL_KEY)
        if modern and rounds is None:
            cannot = "this host speaks MCP 2026-07-28, where a server asks only in the call's result"
        elif channel is None:
            cannot = (
                "this call is answered with one JSON body (the host's POST does not accept "
                "text/event-stream), so Keen has no way to ask the host"
            )
        else:
            cannot = None

        def audit(server: str, method: str, outcome: str, code: str | None) -> None:
            self._audit("upstream.request", scope, server, method, outcome, code)

        # Who the host is, for the log bound and for whose call an upstream's message is: a
        # 2026-07-28 caller over HTTP has no session, and its scope is one for every caller
        # when no token is configured ("principal:anonymous"); its principal is its address
        # then, its token's id else (PRINCIPAL_KEY), which separates callers best.
        host = self.caller_principal(ctx) if modern and request is not None else scope
        return HostPeer(
            host,
            channel,
            capabilities=declared,
            levels=log_levels(ctx.protocol_version, ctx.meta, set_level),
            cannot_ask=cannot,
            audit=audit,
            log_bound=self.log_bound,
        )

    async def _set_logging_level(
        self, ctx: ServerRequestContext[Any, Any], params: mt.SetLevelRequestParams
    ) -> mt.EmptyResult:
        """``logging/setLevel`` (MCP 2025-11-25, Logging): upstreams' log messages during this
        host's calls reach it from this level up."""
        scope = self.caller_scope(ctx)
        if ctx.request is None:
            self._stdio_level = params.level
            return mt.EmptyResult()
        # Kept with the session (its data in the store), so a call that reaches another
        # replica gets the same levels, and the level ends when the session does.
        session_id = scope.removeprefix("session:")
        data = await self.store.get_session(session_id, self.session_ttl)
        if not scope.startswith("session:") or data is None:
            raise MCPError(
                code=mt.INVALID_REQUEST,
                message="logging/setLevel needs a session; send initialize first",
            )
        # Written only while the session lives: a DELETE that ended it since the read above
        # must not be undone by writing its data back.
        if not await self.store.update_session(
            session_id, {**data, "log_level": params.level}, self.session_ttl
        ):
            raise MCPError(
                code=mt.INVALID_REQUEST,
                message="this session ended (deleted or expired) before logging/setLevel took effect; "
                "send initialize for a new one",
            )
        return mt.EmptyResult()

    def cancel_call(self, scope: str, request_id: object) -> bool:
        """Cancel the call ``request_id`` of caller ``scope`` that runs here, if one does (a
        host's ``notifications/cancelled`` over HTTP, which comes in a request of its own);
        its upstream call is cancelled with it. True when one was found."""
        found = self._inflight.get((scope, str(request_id)))
        if found is not None:
            found.cancel()
        return found is not None

    async def _call_tool(
        self, ctx: ServerRequestContext[Any, Any], params: mt.CallToolRequestParams
    ) -> mt.CallToolResult | mt.InputRequiredResult:
        scope = self.caller_scope(ctx)
        key = (scope, str(ctx.request_id))
        with anyio.CancelScope() as cancel:
            self._inflight[key] = cancel
            try:
                if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
                    # What the upstream asks comes back as InputRequiredResult rounds.
                    def start(channel: RoundsChannel) -> Any:
                        return self._peer_call(ctx, params, scope, channel)

                    return await self.rounds.serve(ctx, scope, ctx.params, start)
                return await self._peer_call(ctx, params, scope)
            finally:
                if self._inflight.get(key) is cancel:
                    del self._inflight[key]
        logger.info("a call of %s was cancelled by its host", scope)
        return error_result({"error": {"code": "CANCELLED", "message": "The host cancelled this call."}})

    async def _peer_call(
        self,
        ctx: ServerRequestContext[Any, Any],
        params: mt.CallToolRequestParams,
        scope: str,
        channel: HostChannel | None = None,
    ) -> mt.CallToolResult:
        """The call with its host's peer, which is finished when the call ends."""
        peer = self._peer(ctx, scope, channel)
        try:
            return await self._run_call(ctx, params, scope, peer)
        finally:
            await peer.end()

    async def _run_call(
        self,
        ctx: ServerRequestContext[Any, Any],
        params: mt.CallToolRequestParams,
        scope: str,
        peer: HostPeer,
    ) -> mt.CallToolResult:
        arguments = dict(params.arguments or {})
        # A host may call before the first connections settled (stdio hosts start us on demand).
        await self.wait_ready()
        progress = _progress_to(ctx, peer)
        if self.mode == "search":
            return await self.search_mode.call(params.name, arguments, scope, progress, peer)
        await self.served.revive([params.name])
        known = self.served.server_of(params.name)
        exposed = self.served.catalog(None if known is None else (known,)).get(params.name)
        if exposed is None and known is not None:
            return error_result(self._unavailable(known))
        if exposed is None:
            return error_result(
                {
                    "error": {
                        "code": "TOOL_NOT_FOUND",
                        "message": f"Tool '{params.name}' not found; pick one from tools/list.",
                    }
                }
            )
        obs = await self.router.call(
            exposed.server, exposed.tool.name, arguments, caller=scope, progress=progress, peer=peer
        )
        if obs.denied == "visibility":
            return error_result(ext.description_required(exposed.name))
        return call_result(obs)

    def _unavailable(self, server: str) -> dict[str, Any]:
        """Why a served tool of a server that is not connected (still) cannot be called."""
        if (trouble := self.manager.unavailable(server)) is not None:
            return {"error": {"code": trouble.code, "message": self.remedy_words(trouble, server)}}
        return {"error": {"code": "server_disconnected", "message": f"{server} is not connected."}}


class _NotifyingServer(Server[Any]):
    """The SDK server, advertising exactly what keen serve does, identically in both eras:
    ``listChanged`` for tools, resources and prompts when it sends those notices (the SDK
    derives it from the ``subscriptions/listen`` handler for 2026-07-28 hosts only), and
    never ``resources.subscribe`` (keen serve sends no ``notifications/resources/updated``;
    the SDK claims it for 2026-07-28 hosts whenever ``subscriptions/listen`` is served)."""

    def get_capabilities(
        self,
        notification_options: NotificationOptions | None = None,
        experimental_capabilities: dict[str, dict[str, Any]] | None = None,
        extensions: dict[str, dict[str, Any]] | None = None,
        *,
        protocol_version: str | None = None,
    ) -> mt.ServerCapabilities:
        found = super().get_capabilities(
            notification_options, experimental_capabilities, extensions, protocol_version=protocol_version
        )
        if found.resources is not None:
            found.resources = found.resources.model_copy(update={"subscribe": False})
        return found

    def __init__(self, *args: Any, list_changed: bool, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._list_changed = list_changed

    def create_initialization_options(
        self,
        notification_options: NotificationOptions | None = None,
        experimental_capabilities: dict[str, dict[str, Any]] | None = None,
        extensions: dict[str, dict[str, Any]] | None = None,
    ) -> InitializationOptions:
        changed = self._list_changed
        options = notification_options or NotificationOptions(
            tools_changed=changed, prompts_changed=changed, resources_changed=changed
        )
        return super().create_initialization_options(options, experimental_capabilities, extensions)


def _progress_to(ctx: ServerRequestContext[Any, Any], peer: HostPeer) -> ProgressFnT:
    """Relays an upstream call's progress to the host, on the host's own progress token (a
    no-op when the host's request carried none), on the call's channel when it has one."""
    channel = peer.channel

    async def relay(progress: float, total: float | None, message: str | None) -> None:
        if not math.isfinite(progress) or (total is not None and not math.isfinite(total)):
            # JSON has no NaN or infinity (an upstream's NaN parses all the same): sent, they
            # became null, a notification no host can read as MCP's progress, a number.
            logger.debug(
                "dropped an upstream's progress that is not a finite number: %r of %r", progress, total
            )
            return
        if channel is not None:
            await channel.progress(progress, total, message)
        else:
            await ctx.session.report_progress(progress, total, message)

    return relay


def _unknown_resource(uri: str) -> MCPError:
    """JSON-RPC ``-32602`` naming the URI in ``data.uri`` (MCP 2026-07-28, Resources, "Error
    Handling": a resource that does not exist)."""
    shown = shorten(uri, 201)
    return MCPError(
        code=mt.INVALID_PARAMS,
        message=f"Resource not found: {shown!r}; resources/list names the resources this server has",
        data={"uri": uri},
    )


def _json_contents(uri: str, body: dict[str, Any]) -> mt.ReadResourceResult:
    return mt.ReadResourceResult(
        contents=[mt.TextResourceContents(uri=uri, mime_type="application/json", text=json.dumps(body))]
    )
