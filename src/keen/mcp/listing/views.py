"""Each server's tools as a model or host may read them, and the caches a call's checks use.

The Manager (:class:`keen.mcp.Manager`) owns one :class:`ToolViews` and hands it the
connected server of each request; this module keeps what follows from that server's
latest ``tools/list``: the tools as listed (a tuple), as the trust shows them (a
:class:`ToolsView`), by name, and per tool the plan of a call (the tool as listed, as
shown, and the quick check of its arguments). The trust that vets the tools is handed in
(:class:`ToolTrust`; Keen's is :class:`keen.trust.pins.PinGuard`, in a package above this
one: docs/architecture.md "Package map").
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Protocol

from keen._terminal import name_in_message
from keen.errors import ConfigError, Remedy, ToolNotFound
from keen.mcp.listing.changes import ToolsChanged
from keen.mcp.types import ServerInfo, Tool

if TYPE_CHECKING:
    from keen.mcp.config.servers import HttpServerConfig, StdioServerConfig
    from keen.mcp.listing.validation import ArgumentValidator

__all__ = [
    "HeldTool",
    "ListedServer",
    "ListedView",
    "ToolTrust",
    "ToolViews",
    "ToolsView",
    "listed_tool",
    "tool_name_given",
]


class HeldTool(Protocol):
    """A tool held back from a view (:class:`keen.trust.pins.ToolCheck` is Keen's)."""

    @property
    def name(self) -> str: ...


class ToolsView(Protocol):
    """What a model or host may read of one server's tools (:meth:`ToolViews.view`)."""

    @property
    def tools(self) -> Sequence[Tool]:
        """The listing to show."""
        ...

    @property
    def held(self) -> Sequence[HeldTool]:
        """Tools held back for review: none of them is in :attr:`tools` as it is now."""
        ...

    @property
    def note(self) -> str:
        """One line on what is held and how to review it; ``""`` when nothing is."""
        ...

    @property
    def error(self) -> str:
        """Why no tool can be shown (the trust could not read what it vets them against, such
        as a broken pin file): every tool is held, and :attr:`note` says so; ``""`` otherwise.

        Readers take a view without it (a third-party trust written before it was added)
        as ``""``."""
        ...

    @property
    def info(self) -> ServerInfo | None:
        """What the server said at initialize as it may be shown: its ``instructions`` reach
        a model (SKILL.md, the catalog line), and a trust may hold a change of them as it
        holds a tool (Keen's shows them as pinned).

        Readers take a view without it (a third-party trust written before it was added)
        as the server's info as it was sent."""
        ...


class ToolTrust(Protocol):
    """What vets the tools servers list before anyone reads them: given to a :class:`keen.mcp.Manager`.

    Keen's is :class:`keen.trust.pins.PinGuard` (pinned definitions, flags on changed tool
    text); the trust package sits above this one and uses it, so the Manager is handed it
    instead of importing it (docs/architecture.md "Package map").
    """

    def shown(
        self,
        server: str,
        tools: Sequence[Tool],
        config: HttpServerConfig | StdioServerConfig,
        info: ServerInfo | None = None,
    ) -> ToolsView:
        """What a model or host may read of ``server``'s live ``tools`` and ``info`` (what it
        said at initialize, its instructions among it) under its ``config``. ``info`` is
        given by name, and only to a trust whose ``shown`` has a parameter named ``info``."""
        ...

    def stamp(self, server: str) -> Hashable:
        """A key that changes when :meth:`shown` may change for the same tools.

        Raises:
            ConfigError: what the trust vets against cannot be looked at; :class:`ToolViews`
                then asks :meth:`shown` on every read instead, which holds what needs it.
        """
        ...

    @property
    def version(self) -> Hashable:
        """Moves whenever a :meth:`stamp` asked was seen to change, for any server."""
        ...

    def flagged(
        self,
        change: ToolsChanged,
        tools_by_name: Mapping[str, Tool],
        others: Mapping[str, Iterable[str | Tool]],
    ) -> ToolsChanged:
        """``change`` with the flags its added and changed tools raise; ``others``: the other
        servers' tools (the shadowing index)."""
        ...


class ListedServer(Protocol):
    """What :class:`ToolViews` reads of a connected server
    (:class:`keen.mcp.connection.server.ServerConnection` is the Manager's).

    A re-list or a reconnect replaces :attr:`tools` and :attr:`tools_by_name` wholesale
    (never changes them in place); an entry set from configs.json replaces :attr:`config`.
    The caches below key on those identities.
    """

    @property
    def name(self) -> str: ...

    @property
    def config(self) -> HttpServerConfig | StdioServerConfig: ...

    @property
    def tools(self) -> list[Tool]: ...

    @property
    def tools_by_name(self) -> Mapping[str, Tool]: ...

    @property
    def validator(self) -> ArgumentValidator: ...

    @property
    def info(self) -> ServerInfo | None:
        """What the server said at its last initialize (replaced wholesale at each). A server
        without it (written before it was added) is taken as having said nothing."""
        ...


@dataclass(frozen=True, slots=True)
class ListedView:
    """The tools as the server listed them: the view of a Manager built with ``trust=None``."""

    server: str
    tools: tuple[Tool, ...] = ()
    held: tuple[HeldTool, ...] = ()
    note: str = ""
    error: str = ""
    info: ServerInfo | None = None


_Plan = tuple[Tool, Tool | None, Callable[[dict[str, Any]], bool] | None]
"""What a call of one tool looks up (:meth:`ToolViews.check`): the tool as listed, as shown
(``None``: held, its arguments not checked), and the quick check of its arguments
(:meth:`keen.mcp.listing.validation.ArgumentValidator.quick_check`)."""


def tool_name_given(server: str, tool: str) -> None:
    """Raise ``ToolNotFound`` when ``tool`` is empty: a call names its tool."""
    if not tool:
        raise ToolNotFound(f'no tool name given for MCP server "{server}"', server=server)


def listed_tool(server: ListedServer, tool: str, shown: Mapping[str, Tool] | None = None) -> Tool:
    """``tool`` as the server's latest tools/list defines it, or as ``shown`` (the trusted
    view of that list) has it when given. Raises ``ToolNotFound`` with up to three close
    names from the same place."""
    tools = server.tools_by_name if shown is None else shown
    found = tools.get(tool)
    if found is None:
        import difflib  # only a name not found needs it

        close = difflib.get_close_matches(tool, list(tools), n=3)
        hint = f" Did you mean: {', '.join(map(name_in_message, close))}?" if close else ""
        raise ToolNotFound(
            f'MCP server "{server.name}" has no tool "{name_in_message(tool)}" in its latest tools/list.{hint}',
            server=server.name,
            tool=tool,
            remedy=Remedy.READ_SKILL,
        )
    return found


class ToolViews:
    """Every server's tools as listed and as shown, and the per-tool plans of its calls.

    Every method takes a connected server (:class:`ListedServer`); which server may be asked
    (configured, enabled, connected) is the caller's check. Asked on every call, each answer
    is kept per server and made again only when what it follows moved:

    * ``live`` (:meth:`live`): server -> its tool list and that list as a tuple. Keyed on the
      list's identity (a re-list or reconnect replaces it); the entry holds the list, so its
      id is not reused.
    * ``views`` (:meth:`view`, with a trust): server -> the tool list, config entry, trust
      stamp (:meth:`ToolTrust.stamp`) and initialize info the view was made from, and the
      view. Made again when the list, the entry or the info is another object (a re-list, an
      entry reloaded from configs.json, a reconnect) or the stamp compares unequal (a pin written, here or by another
      process). Without a trust the view is a new :class:`ListedView` of :meth:`live` each
      time (nothing kept).
    * ``shown`` (:meth:`shown_by_name`): server -> the view and its tools by name. Keyed on
      the view's identity: the trust hands out one view until a change.
    * ``plans`` (:meth:`check`): server -> the shown mapping (``None`` without a trust) and
      the server's ``tools_by_name`` the plans were made from, and the plans by tool. Every
      plan of the server is made again when either mapping is another object; a tool not
      found is never kept (its ``ToolNotFound`` is raised each time).

    :meth:`forget` clears all four for one server: the Manager calls it when it drops a
    server (gone from configs.json, or its entry invalid now). A server of that name that
    comes back has a new connection whose lists miss every key anyway: what this saves is
    the memory a dropped server's tools would hold. The trust's ``version`` keys no cache
    here: it is what a caller's cache of every server's view keys on
    (``Manager.view_version``).

    Args:
        trust: what vets each server's tools (:class:`ToolTrust`), or ``None``: the tools as
            listed.
    """

    __slots__ = ("_claims", "_live", "_plans", "_shown", "_takes_info", "_views", "trust")

    def __init__(self, trust: ToolTrust | None) -> None:
        self.trust = trust
        self._takes_info: tuple[ToolTrust, bool] | None = None
        self._live: dict[str, tuple[list[Tool], tuple[Tool, ...]]] = {}
        self._claims: dict[str, tuple[tuple[Tool, ...], tuple[Tool, ...]]] = {}
        self._views: dict[str, tuple[list[Tool], Any, Hashable, ToolsView, ServerInfo | None]] = {}
        self._shown: dict[str, tuple[ToolsView, Mapping[str, Tool]]] = {}
        self._plans: dict[str, tuple[Mapping[str, Tool] | None, Mapping[str, Tool], dict[str, _Plan]]] = {}

    def forget(self, name: str) -> None:
        """Drop every cache of server ``name`` (its tools, views and call plans)."""
        for kept in (self._plans, self._views, self._live, self._shown, self._claims):
            kept.pop(name, None)

    def live(self, server: ListedServer) -> tuple[Tool, ...]:
        """The server's last successful tools/list as it sent it, as a tuple: the same tuple
        until a re-list replaces the list, so a cache of what follows from the tools (the pin
        check's comparison) keys on its identity, and a call costs the same whatever the
        server's tool count."""
        # A re-list or a reconnect replaces the connection's list wholesale (never changes it
        # in place): the tuple is made once per list, not once per call.
        tools = server.tools
        name = server.name
        cached = self._live.get(name)
        if cached is not None and cached[0] is tools:
            return cached[1]
        frozen = tuple(tools)
        self._live[name] = (tools, frozen)  # holds the list: its id is not reused
        return frozen

    def _as_claims(self, server: ListedServer) -> tuple[Tool, ...]:
        """The live tools with their annotations as claims (``annotations_trusted`` False)
        unless the server's entry says ``"trust_annotations": true``: without a trust nothing
        vouches for a ``readOnlyHint`` (MCP 2025-11-25 "Tool annotations": untrusted unless
        from a trusted server), so a Gateway's default approval asks for it as for any call."""
        live = self.live(server)
        if getattr(server.config, "trust_annotations", False):
            return live
        cached = self._claims.get(server.name)
        if cached is not None and cached[0] is live:
            return cached[1]
        claims = tuple(
            replace(tool, annotations_trusted=False) if tool.annotations_trusted else tool for tool in live
        )
        self._claims[server.name] = (live, claims)
        return claims

    def view(self, server: ListedServer) -> ToolsView:
        """The server's live tools as the trust shows them (:meth:`ToolTrust.shown`), or as
        listed without a trust (a :class:`ListedView`).

        A :meth:`ToolTrust.stamp` that raises ``ConfigError`` (what the trust vets against
        cannot be looked at) does not fail the view: the trust's :meth:`~ToolTrust.shown`
        decides, uncached, whether the server's policy needs what it could not look at
        (Keen's holds every tool of a pinned server with the error, and shows a server
        with pinning off as listed).

        Raises:
            ConfigError: the trust's :meth:`~ToolTrust.shown` raised it.
        """
        name = server.name
        trust = self.trust
        # A ListedServer written before it had ``info`` says nothing of itself.
        info: ServerInfo | None = getattr(server, "info", None)
        if trust is None:
            return ListedView(name, self._as_claims(server), info=info)
        tools, config = server.tools, server.config
        try:
            stamp = trust.stamp(name)
        except ConfigError:
            # What the trust vets against cannot even be looked at (a pins folder that is a
            # file): only a server whose policy reads it is held, by the trust's own view
            # (Keen's: every tool held, with the error); one that never reads it (pinning off)
            # is shown as usual. Not cached: no stamp says when the folder is fixed.
            self._views.pop(name, None)
            return self._shown_by(trust, name, self.live(server), config, info)
        # By ToolTrust's contract the view follows the tools, the config, the info and the stamp
        # alone: asked on every call, it is made again only when one of them moved.
        cached = self._views.get(name)
        if (
            cached is not None
            and cached[0] is tools
            and cached[1] is config
            and cached[2] == stamp
            and cached[4] is info
        ):
            return cached[3]
        # The tuple the pin check passes too: the trust's caches key on its identity.
        view = self._shown_by(trust, name, self.live(server), config, info)
        # Holds the list and the info: their ids are not reused.
        self._views[name] = (tools, config, stamp, view, info)
        return view

    def _shown_by(
        self,
        trust: ToolTrust,
        name: str,
        tools: tuple[Tool, ...],
        config: HttpServerConfig | StdioServerConfig,
        info: ServerInfo | None,
    ) -> ToolsView:
        """``trust.shown`` with ``info`` when it takes a parameter named ``info`` (given by
        name); a third-party trust written before :meth:`ToolTrust.shown` had ``info`` is
        asked without (its views show the info as sent), whatever other parameters it has."""
        known = self._takes_info
        if known is None or known[0] is not trust:
            import inspect  # once per trust

            try:
                params = inspect.signature(trust.shown).parameters
            except (TypeError, ValueError):
                params = {}
            known = self._takes_info = (trust, "info" in params)
        if known[1]:
            return trust.shown(name, tools, config, info=info)
        return trust.shown(name, tools, config)  # pyright: ignore[reportCallIssue]

    def shown_by_name(self, server: ListedServer) -> Mapping[str, Tool]:
        """The tools :meth:`view` shows, by name (a read-only mapping): made again only when
        the view is another."""
        view = self.view(server)
        name = server.name
        cached = self._shown.get(name)
        if cached is not None and cached[0] is view:  # the trust hands out one view until a change
            return cached[1]
        shown = MappingProxyType({t.name: t for t in view.tools})
        self._shown[name] = (view, shown)
        return shown

    def check(self, server: ListedServer, tool: str, arguments: Any) -> Tool:
        """Look ``tool`` up and check ``arguments`` against its ``inputSchema``, in what a model
        or host was shown when there is a trust: a held tool is not found, a changed one is
        checked against its pinned schema.

        What a call of ``tool`` looks up (the tool as listed and as shown, the quick check of
        its arguments) depends only on the server's tools as listed and as shown, so it is
        kept per tool (a plan) with the two mappings it was made from (see the class's
        ``plans``).

        Returns:
            The tool, as listed.

        Raises:
            ToolNotFound: no such tool in the list (as shown, with a trust).
            InvalidArguments: the arguments do not match its schema.
        """
        name = server.name
        shown = self.shown_by_name(server) if self.trust is not None else None
        live = server.tools_by_name
        kept = self._plans.get(name)
        if kept is None or kept[0] is not shown or kept[1] is not live:
            kept = self._plans[name] = (shown, live, {})
        plan = kept[2].get(tool)
        if plan is None:
            found, checked = self._find(server, tool, shown)
            quick = server.validator.quick_check(checked) if checked is not None else None
            plan = kept[2][tool] = (found, checked, quick)
        found, checked, quick = plan
        # The quick check says True only where validate would pass; anything else (an
        # invalid call among them) is validated in full, with its errors.
        if checked is not None and (quick is None or arguments.__class__ is not dict or not quick(arguments)):
            server.validator.validate(checked, arguments)
        return found

    def find(self, server: ListedServer, tool: str) -> Tool:
        """:meth:`check`'s tool lookup, without arguments: the tool, as listed. Raises
        ``ToolNotFound`` like it."""
        shown = self.shown_by_name(server) if self.trust is not None else None
        return self._find(server, tool, shown)[0]

    @staticmethod
    def _find(server: ListedServer, tool: str, shown: Mapping[str, Tool] | None) -> tuple[Tool, Tool | None]:
        """``(as listed, as shown)``; shown is ``None`` for a tool listed but not shown (held
        for review, or pins that cannot be read): the pin check refuses it, and its arguments
        are not checked against a schema nobody reviewed. ``shown``: the trust's tools by name
        (:meth:`shown_by_name`), ``None`` without a trust."""
        if shown is None:
            found = listed_tool(server, tool)
            return found, found
        live = server.tools_by_name.get(tool)
        if live is not None and tool not in shown:
            return live, None
        checked = listed_tool(server, tool, shown)
        return live or checked, checked
