"""What ``keen serve`` serves, kept up to date with the upstream servers.

:class:`ServedTools` holds the exposed tools (:class:`~keen.serve.catalog.ToolCatalog`),
rebuilt only when a tool list or a server's view changed; extension mode's ``tools/list``
and its ``ttlMs``; the upstream prompts, resources and templates passed through
(:mod:`keen.serve.passthrough`); and the reconnection of a server that went away when a
request names one of its tools (:mod:`keen.mcp.connection.reconnect`). The request
handlers live in :mod:`keen.serve.server`; search mode's three tools in
:mod:`keen.serve.search`.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import mcp_types as mt

from keen._redact import redactor
from keen.errors import ConfigError, KeenError
from keen.mcp.types import ServerState, Tool
from keen.serve.calls import Withheld
from keen.serve.catalog import ToolCatalog
from keen.serve.notify import list_digest
from keen.serve.passthrough import Listing

if TYPE_CHECKING:
    from keen.capabilities import Catalog
    from keen.mcp import ToolsView
    from keen.mcp.connection.reconnect import Reconnector
    from keen.mcp.manager import Manager

__all__ = ["TOOLS_TTL_MS", "ServedTools"]

TOOLS_TTL_MS = 10_000
"""``ttlMs`` of extension mode's ``tools/list`` when no upstream list goes stale sooner."""

_LOOSE_SCHEMA: dict[str, Any] = {"type": "object", "additionalProperties": True}

# Hints that would let a host run a tool without asking; the spec's defaults are the safe side.
_GRANTS = {"readOnlyHint": False, "destructiveHint": True, "idempotentHint": False, "openWorldHint": True}


class ServedTools:
    """The served tools and lists of one ``keen serve``, built from the Manager's last lists.

    Args:
        manager: the upstream servers' connections.
        reconnector: brings back a server that went away (bounded, at most once per
            back-off window).
        withheld: keen serve's log of what no host is shown (a new one when None).
    """

    def __init__(self, manager: Manager, reconnector: Reconnector, withheld: Withheld | None = None) -> None:
        self.manager = manager
        self.reconnector = reconnector
        self.withheld = withheld if withheld is not None else Withheld()
        self._catalog: ToolCatalog | None = None
        self._catalog_key: tuple[Any, ...] = ()
        self._listed: tuple[ToolCatalog, list[mt.Tool], str] | None = None
        self._unreadable: set[str] = set()
        """Servers whose pins could not be looked at when last tried: held whole."""
        self._server_of: dict[str, str] = {}
        """Exposed name -> server of every tool ever served: a gone server's tools still
        name the server to reconnect."""

    def catalog(self, servers: Sequence[str] | None = None) -> ToolCatalog:
        """The exposed tools of every connected server; rebuilt only when a tool list or a
        server's view changed.

        Args:
            servers: whose pin files to look at for a change made elsewhere (``keen mcp trust``
                in another process): every connected server's by default (a listing); a call
                looks at its own server's only, so its cost does not grow with the servers.
        """
        manager = self.manager
        if servers is None:
            servers = [name for name, _, _ in manager.tool_versions()]
        for name in servers:
            self._stamp(name)  # a pin file changed since moves the view version
        # Two counters, not a look at every server: a call costs the same at 1 server or 300.
        # The servers whose pins cannot be looked at count too: one fixed is listed again.
        key = (manager.tools_version(), manager.view_version(), frozenset(self._unreadable))
        if self._catalog is None or key != self._catalog_key:
            tools = [t for name, _, _ in manager.tool_versions() for t in self._tools_of(name)]
            self._catalog = ToolCatalog(tools)
            # After the build: listing a server may see its pin file for the first time.
            self._catalog_key = (manager.tools_version(), manager.view_version(), frozenset(self._unreadable))
            self._server_of.update((t.name, t.server) for t in self._catalog.tools())
        return self._catalog

    def _stamp(self, server: str) -> None:
        """Look at ``server``'s pin file. One that cannot be looked at (its folder is a file,
        or unreadable) holds the server whole if its policy reads pins, as an unreadable pin
        file does (its view says so: a server with pinning off is served as usual); the
        error names a local path, so it goes to keen serve's log, never to a host."""
        try:
            self.manager.view_stamp(server)
        except ConfigError as exc:
            error = self._view_error(server, exc)
            if error:
                self._hold(server, error)
                return
        self._unreadable.discard(server)

    def view_of(self, server: str) -> tuple[ToolsView | None, str]:
        """``server``'s view and why it holds every tool (``""`` when it does not): the
        view's ``error`` (a third-party trust's view may lack it), or, with no view, the
        ``ConfigError`` its trust raised. Raises the Manager's other errors (a server not
        connected)."""
        try:
            view = self.manager.view(server)
        except ConfigError as exc:
            return None, exc.message
        return view, getattr(view, "error", "")

    def _view_error(self, server: str, exc: ConfigError) -> str:
        """Why ``server``'s view holds every tool now that its pins could not be looked at
        (``exc``); ``""`` when its view does not need them. A server not connected has no
        view: held on ``exc`` until it has one."""
        try:
            return self.view_of(server)[1]
        except KeenError:
            return exc.message

    def _tools_of(self, server: str) -> list[Tool]:
        """``server``'s tools as the catalog serves them: none while its pins cannot be read."""
        view, error = self.view_of(server)
        if view is None:
            self._hold(server, error)
            return []
        if not error:  # a view held for its pins is as _stamp left it
            self._unreadable.discard(server)
        return list(view.tools)

    def _hold(self, server: str, error: str) -> None:
        self._unreadable.add(server)
        self.withheld(error)

    def capabilities(self) -> Catalog:
        """The capability catalog of the served tools, for the harness's lookup of a call
        (the router looked at the called server's pins already)."""
        return self.catalog(()).capabilities

    def server_of(self, name: str) -> str | None:
        """The server of the exposed tool ``name`` if it was ever served, even while that
        server is gone; None for a name never served."""
        return self._server_of.get(name)

    def look(self, server: str) -> None:
        """Look at ``server``'s pin file; a name a host sent that is no configured server's
        has none (and is never made into a path). One that cannot be looked at is logged and
        the call goes on: the pin check refuses it with words for the host."""
        if server in self.manager.config.servers:
            self._stamp(server)

    async def revive(self, names: Sequence[str] = (), *, servers: Sequence[str] = ()) -> None:
        """Reconnect the servers these exposed tool ``names`` (and ``servers``) are on, if
        they went away (:mod:`keen.mcp.connection.reconnect`); bounded, never raises."""
        wanted = [*servers, *(s for n in names if (s := self._server_of.get(n)) is not None)]
        if wanted:
            await self.reconnector.ensure(wanted)

    def listed_tools(self) -> list[mt.Tool]:
        """Extension mode's ``tools/list``: every exposed tool, minimal description, loose schema."""
        return self.listed()[0]

    def listed(self) -> tuple[list[mt.Tool], str]:
        """:meth:`listed_tools` and its :func:`keen.serve.notify.digest` (what a host that
        lists is recorded to have seen); built once per catalog."""
        catalog = self.catalog()
        if self._listed is None or self._listed[0] is not catalog:
            tools = [
                mt.Tool(
                    name=t.name,
                    title=redactor.redact(t.tool.title) if t.tool.title else None,
                    description=t.minimal(),
                    input_schema=dict(_LOOSE_SCHEMA),
                    annotations=host_annotations(t.tool.annotations, trusted=t.tool.annotations_trusted),
                )
                for t in catalog.tools()
            ]
            self._listed = (catalog, tools, list_digest(tools))
        return list(self._listed[1]), self._listed[2]

    def listing(self) -> Listing:
        """The connected upstream servers' prompts, resources and templates, namespaced
        (:mod:`keen.serve.passthrough`); built from the Manager's last lists."""
        lists: dict[str, tuple[list[dict[str, Any]], ...]] = {}
        for status in self.manager.servers():
            if status.state is ServerState.CONNECTED:
                name = status.name
                lists[name] = (
                    self.manager.list_resources(name),
                    self.manager.list_resource_templates(name),
                    self.manager.list_prompts(name),
                )
        return Listing.build(lists)

    def tools_ttl_ms(self) -> int:
        """``ttlMs`` for ``tools/list``: :data:`TOOLS_TTL_MS`, or less when an upstream list
        goes stale sooner.

        A host caching our list longer than an upstream allows would miss the change that
        Keen's own re-list at that upstream's expiry finds (MCP 2026-07-28, "Caching").
        """
        ttl = TOOLS_TTL_MS
        now = datetime.now(UTC)
        for status in self.manager.servers():
            # ttlMs 0 ("immediately stale") schedules no re-list: that server's notices do.
            if status.state is not ServerState.CONNECTED or not status.list_ttl_ms:
                continue
            refreshed = status.last_refresh_at or now
            left = status.list_ttl_ms - (now - refreshed).total_seconds() * 1000
            ttl = min(ttl, max(0, int(left)))
        return ttl


def host_annotations(raw: dict[str, Any] | None, *, trusted: bool) -> mt.ToolAnnotations | None:
    """The annotations passed on to a host. Annotations are claims (MCP 2025-11-25, "Tool
    annotations": untrusted unless the server is trusted): for a server the user does not
    trust them for (README "Security: what Keen trusts"), a hint that would grant is
    reported as the spec's default instead, while a warning (``destructiveHint: true``) stays."""
    if not raw:
        return None
    if not trusted:
        raw = {k: (v if k not in _GRANTS or v == _GRANTS[k] else _GRANTS[k]) for k, v in raw.items()}
    try:
        return mt.ToolAnnotations.model_validate(raw)
    except ValueError:
        return None
