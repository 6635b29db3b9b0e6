"""The chat's view of its MCP servers while the session runs (docs/chat.md "Startup").

:class:`ServerWatch` does, in the background of the REPL:

1. discovery: wait for every server's first connection attempt, run the skills sync
   (states -> skills), and report one line per server that did not connect, with its fix,
   then one summary line;
2. later changes: a server that disconnects, fails to sign in or connects again (after a
   crash, a late start) gets its skill synced again and one line (for one that went away,
   when the on-demand reconnect brings it back); a burst of state changes is reported once;
3. tool-list changes (live refresh, when the Manager reports them): one line each.

Each of these marks the catalog stale; the REPL reloads it before the next turn. Slash
commands that change servers themselves (``/mcp connect``) hold :attr:`ServerWatch.lock`
and call :meth:`ServerWatch.settle`, so what they already printed is not repeated; an
on-demand reconnect during a turn (its own line) calls :meth:`ServerWatch.told`, and the
watch still syncs that server's skill without a second line.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import anyio

from keen import paths
from keen._text import some_of
from keen.agent.reconnect import when_words
from keen.errors import KeenError
from keen.mcp.types import ServerState, ServerStatus
from keen.skills.config import SkillsConfig
from keen.tokens import token_counter

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from keen.agent.models import Message, Model, ModelEvent
    from keen.mcp.connection.reconnect import Reconnector
    from keen.mcpskills.sync import SyncEntry, SyncReport
    from keen.runtime import Runtime

__all__ = [
    "FIRST_ANSWER_WAIT",
    "SETTLE_SECONDS",
    "START_BEHIND_WAIT",
    "JoinAsReady",
    "ServerWatch",
    "StartBehind",
    "connecting_line",
    "on_disk",
    "settle_first",
]

logger = logging.getLogger(__name__)

FIRST_ANSWER_WAIT = 1.0
"""Seconds a session waits for its servers before its first model request: servers that
take longer join while it answers (docs/chat.md "Startup")."""

START_BEHIND_WAIT = 2.0
"""Seconds after the first model call began when the servers start, if its answer has not
begun by then (:class:`StartBehind`). Long enough for the request to go out on a loaded
machine (the provider's SDK is imported first), short beside a model's time to answer."""

SETTLE_SECONDS = 0.3
"""How long a burst of state changes may run before it is reported (seconds)."""

_PASSING = (ServerState.CONNECTING, ServerState.CONFIGURED)

Notice = Callable[[str, str], None]
"""``(line, style)``: how the watch prints a line."""


class ServerWatch:
    """Discovery and later server changes for one chat session.

    Args:
        runtime: the session's runtime, opened without waiting for discovery.
        notice: prints one line in a rich style (``red`` failures, ``dim`` news, ``cyan``
            tool changes).
        reconnector: the session's on-demand reconnects; a server that goes away and that
            it will bring back is reported with when it does, not only the user's command.
        connect_command: the front end's reconnect command, ``{server}`` filled in.

    Attributes:
        catalog_stale: set when the skills or tools changed; the REPL clears it when it
            reloads the catalog.
        lock: held by commands that change servers themselves.
    """

    def __init__(
        self,
        runtime: Runtime,
        notice: Notice,
        *,
        reconnector: Reconnector | None = None,
        connect_command: str = "/mcp connect {server}",
    ) -> None:
        self.runtime = runtime
        self.notice = notice
        self.reconnector = reconnector
        self.connect_command = connect_command
        self.catalog_stale = False
        self.lock = anyio.Lock()
        self._reported: dict[str, ServerState] = {}
        self._changed: set[str] = set()
        self._ended: dict[str, int] = {}
        """Per server, the reconnector's count of ended attempts at the last look (``_news``)."""
        self._resync = False
        """Sync the skills at the next wake-up even with no state to report (a tool list
        changed, or a state someone else reported)."""
        self._wake = anyio.Event()
        self._unsubscribe: list[Callable[[], None]] = []

    async def run(self, timeout: float) -> None:
        """Discovery, then follow changes until cancelled."""
        await self.discover(timeout)
        await self.follow()

    async def discover(self, timeout: float) -> None:
        """Wait for the servers (at most ``timeout`` seconds), sync the skills, report."""
        manager = self.runtime.manager
        if manager.servers():
            await self._report_discovery(timeout)
        else:
            self.notice(
                f"No MCP servers configured: add them to {manager.config_path} (or run `keen mcp import "
                "FILE`), then /mcp connect NAME.",
                "dim",
            )
        # Followed even with none: /mcp connect takes a server added to configs.json since.
        self._unsubscribe.append(manager.subscribe(self._on_status))
        subscribe: Any = getattr(manager, "subscribe_changes", None)
        if subscribe is not None:  # live refresh (keen.mcp.listing.changes), where the Manager has it
            self._unsubscribe.append(subscribe(self.on_tools_changed))

    async def _report_discovery(self, timeout: float) -> None:
        """Wait for the first attempts, sync the skills, one line per server that did not connect."""
        manager = self.runtime.manager
        first = min(FIRST_ANSWER_WAIT, timeout)
        if not await manager.wait_ready(first):
            # Named once, at once: the session answers meanwhile (docs/chat.md "Startup").
            pending = [s.name for s in manager.servers() if s.state is ServerState.CONNECTING]
            if pending:
                self.notice(connecting_line(pending), "dim")
        settled = await self.runtime.wait_for_discovery(timeout - first)
        async with self.lock:
            await self._sync()
            statuses = manager.servers()
            for status in statuses:
                if status.state is ServerState.CONNECTED or not status.enabled:
                    continue
                if status.state in _PASSING and not settled:
                    self.notice(
                        f"{status.name}: still connecting after {timeout:g} s; it goes on in the background, "
                        "and a line here says when it is ready or why not (/mcp shows its state)",
                        "yellow",
                    )
                else:
                    self.notice(_status_line(status), "red")
            connected = [s for s in statuses if s.state is ServerState.CONNECTED]
            tools = sum(s.tool_count for s in connected)
            self.notice(
                f"MCP ready: {len(connected)} of {len(statuses)} servers connected, {tools} tools.", "dim"
            )
            self.settle()

    def settle(self) -> None:
        """Take every server's current state as already reported (call it holding :attr:`lock`)."""
        self._reported = {s.name: s.state for s in self.runtime.manager.servers()}
        self._changed.clear()

    def told(self, status: ServerStatus) -> None:
        """Someone else printed ``status``'s state (an on-demand reconnect): the watch syncs
        the skills for it as usual but prints no line of its own for that state.

        The state counts as reported at once, not when the watch next wakes: a server that
        reconnects and goes away again within :data:`SETTLE_SECONDS` is back in the state the
        watch printed before, and its going away is still news."""
        self._reported[status.name] = status.state
        self._resync = True
        self._wake.set()

    def _on_status(self, status: ServerStatus) -> None:
        self.catalog_stale = True
        if status.state not in _PASSING:
            self._changed.add(status.name)
            self._wake.set()

    async def follow(self) -> None:
        """Report state changes after discovery, one line per server and burst, until cancelled."""
        while True:
            await self._wake.wait()
            self._wake = anyio.Event()
            await anyio.sleep(SETTLE_SECONDS)
            async with self.lock:
                news = self._news()
                resync, self._resync = self._resync, False
                if self._changed:  # held back while a reconnect is under way: looked at again
                    self._wake.set()
                if not news and not resync:
                    continue
                await self._sync()  # regenerates the skill of a server whose tools changed
                for status in news:
                    if status.state is ServerState.CONNECTED:
                        self.notice(f"{status.name}: connected, {status.tool_count} tools", "dim")
                    else:
                        self.notice(self._gone_line(status), "red")

    def _gone_line(self, status: ServerStatus) -> str:
        """A server that went away: with a reconnector that will bring it back, when that
        happens and the command that does it now (``then /mcp connect NAME`` after "exited
        unexpectedly" read as if the user had to); otherwise its error and fix."""
        if self.reconnector is None or not self.reconnector.reconnectable(status.name):
            return _status_line(status)
        why = f" ({status.last_error})" if status.last_error else ""
        when = when_words(self.reconnector.retry_in(status.name))
        command = self.connect_command.format(server=status.name)
        return f"{status.name}: {status.state.value}{why}; Keen reconnects it {when}; `{command}` does it now"

    def _news(self) -> list[ServerStatus]:
        """The changed servers whose state differs from what was last reported.

        A server back to ``connected`` while the reconnector's attempt for it still runs is
        held back (kept in ``_changed``): the attempt's caller, keen chat's on-demand
        reconnect, prints its own line and calls :meth:`told` when the attempt returns,
        which on a loaded machine can come after this wake-up. So is one whose attempt
        ended since the last look: the caller waiting for it is woken by the attempt's end
        but may not have run yet (a look between the two said "connected" a second time).
        Once no attempt runs and none has ended since, it is reported here unless someone
        told it."""
        names, self._changed = sorted(self._changed), set()
        news: list[ServerStatus] = []
        for name in names:
            try:
                status = self.runtime.manager.status(name)
            except KeenError:
                continue
            if status.state in _PASSING or self._reported.get(name) is status.state:
                continue
            if status.state is ServerState.CONNECTED and self.reconnector is not None:
                ended, self._ended[name] = self._ended.get(name), self.reconnector.ended(name)
                if self.reconnector.attempting(name) or ended != self._ended[name]:
                    self._changed.add(name)
                    continue
            self._reported[name] = status.state
            news.append(status)
        return news

    async def _sync(self) -> None:
        try:
            await self.runtime.sync()
        except KeenError as exc:
            self.notice(f"skills sync failed: {exc.message}", "red")
        self.catalog_stale = True

    def on_tools_changed(self, change: Any) -> None:
        """One line for a server's tool-list change (``keen.mcp.listing.changes.ToolsChanged``):
        ``+added``, ``-removed``, ``~changed (fields)``, and the tools flagged for review;
        the skills are synced again in the background. A reconnect that found every tool
        new (a server down at start, at its first connect) gets no line: its
        ``connected, N tools`` line says it, and a line naming each of its tools would not."""
        self.catalog_stale = True
        self._resync = True
        self._wake.set()
        added = getattr(change, "added", ())
        if (
            getattr(change, "reason", None) == "reconnect"
            and added
            and len(added) == getattr(change, "tool_count", None)
            and not getattr(change, "removed", ())
            and not getattr(change, "changed", ())
            and not getattr(change, "flags", None)
        ):
            return
        parts = [f"+{name}" for name in getattr(change, "added", ())]
        parts += [f"-{name}" for name in getattr(change, "removed", ())]
        for item in getattr(change, "changed", ()):
            fields = ", ".join(getattr(item, "fields", ()))
            parts.append(f"~{getattr(item, 'name', item)}" + (f" ({fields})" if fields else ""))
        if not parts:
            return
        flagged = sorted(getattr(change, "flags", None) or {})
        line = f"{getattr(change, 'server', '?')}: tools changed: {' '.join(parts)}"
        if flagged:
            line += f"; flagged for review: {', '.join(flagged)}"
        self.notice(line, "cyan")

    def close(self) -> None:
        """Stop listening to the Manager."""
        for unsubscribe in self._unsubscribe:
            unsubscribe()
        self._unsubscribe.clear()


async def settle_first(
    runtime: Runtime, wait: float = FIRST_ANSWER_WAIT, new_wait: float = 60.0
) -> tuple[list[str], SyncReport]:
    """Wait up to ``wait`` seconds for the servers' first attempts; a server no earlier sync
    has seen (no skill on disk: new to this Keen home) is waited for up to ``new_wait``
    seconds in all, as the model would not know of it. Then sync the skills of the servers that settled,
    leaving the skills of those still connecting as they are on disk (the sync would
    disable them): the catalog starts from that.

    Returns:
        The names of the servers still connecting, and the sync's report (the whole
        configuration's when none is).

    Raises:
        SkillError: a skill could not be written.
    """
    manager = runtime.manager
    began = time.monotonic()
    async with anyio.create_task_group() as tg:
        # The first model request counts its prompt's tokens: the tokenizer's vocabulary
        # (a second of CPU on a small machine) loads meanwhile, off the event loop.
        tg.start_soon(anyio.to_thread.run_sync, token_counter)
        await manager.wait_ready(wait)
    known = _known(runtime)
    unknown = [name for name in _connecting(runtime) if name not in known]
    with anyio.move_on_after(max(0.0, new_wait - (time.monotonic() - began))):
        for name in unknown:
            while manager.status(name).state is ServerState.CONNECTING:
                await manager.wait_attempt(name)
    pending = _connecting(runtime)
    if not pending:
        return [], await runtime.sync()
    settled = [s.name for s in manager.servers() if s.name not in pending]
    from keen.mcpskills import sync_from_manager  # the sync's models: not before the prompt

    report = await sync_from_manager(manager, skills_root=runtime.skills_root, servers=settled)
    return pending, report


def on_disk(runtime: Runtime) -> list[str] | None:
    """The enabled servers of the configuration, when the skills on disk cover it: each has
    its ``mcp:<server>`` skill (or an entry in the skills config, one that never connected),
    and every generated skill on disk is a configured server's. Then a session can ask the
    model first and start the servers behind (docs/chat.md "Startup"); ``None`` when not
    (a server new to this Keen home, one removed since): the servers start first and the
    sync runs before the model is asked, as on a first run.

    Reads configs.json and the skills directory only; starts nothing.

    Raises:
        ConfigError: configs.json cannot be used.
    """
    from keen.agent.first import covered_servers

    manager = runtime.manager
    servers: list[tuple[str, bool]] = []
    if not manager.no_config_file():  # else nothing to read (and no config models before the prompt)
        config = manager.config
        if config.invalid:
            return None  # the sync says what is wrong with them before the model is asked
        servers = [(name, entry.enabled) for name, entry in config.servers.items()]
    return covered_servers(runtime.skills_root, servers, manager.only)


class StartBehind:
    """The session's model, starting the servers behind its first call: when its answer
    begins, or :data:`START_BEHIND_WAIT` seconds after the call began (:meth:`deadline`, run
    in the session's task group), whichever comes first. The first request is then not
    slowed by the servers' launches (each an interpreter, ``npx``, ``uvx``) nor by loading
    the MCP SDK, which starting a server needs.

    Args:
        model: the model (:class:`~keen.agent.models.Model`).
        start: starts the servers (idempotent; :meth:`Runtime.start_servers` and what
            follows it).
    """

    def __init__(self, model: Model, start: Callable[[], Awaitable[None]]) -> None:
        self.model = model
        self.name: str = model.name
        self._start = start
        self._asked = anyio.Event()
        self._started = False
        self._done = anyio.Event()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.model, name)

    async def start(self) -> None:
        """Start the servers now, unless that is done; when it is under way, wait for it."""
        if self._done.is_set():
            return
        if self._started:
            await self._done.wait()
            return
        self._started = True
        try:
            await self._start()
        finally:
            self._done.set()

    async def deadline(self, wait: float = START_BEHIND_WAIT) -> None:
        """Start the servers ``wait`` seconds after the first model call began, if its
        answer has not started them by then."""
        await self._asked.wait()
        await anyio.sleep(wait)
        await self.start()

    async def stream(self, messages: list[Message], tools: list[dict[str, Any]]) -> AsyncIterator[ModelEvent]:
        """The model's stream; its first event starts the servers first."""
        self._asked.set()
        async for event in self.model.stream(messages, tools):
            await self.start()
            yield event
        await self.start()


def _status_line(status: ServerStatus) -> str:
    """:func:`keen.agent.slash.status_line`, imported when a server failed: the slash commands
    import rich, which a chat need not load before its first model request."""
    from keen.agent.slash import status_line

    return status_line(status)


def _connecting(runtime: Runtime) -> list[str]:
    return [s.name for s in runtime.manager.servers() if s.state is ServerState.CONNECTING]


def _known(runtime: Runtime) -> set[str]:
    """The servers an earlier sync has seen: their skill ``mcp:<server>`` is in the skills
    directory, or (one that never connected) in its config's ``is_enabled``."""
    root = runtime.skills_root
    try:
        listed = set(SkillsConfig.load(root / "config.json").names())
    except KeenError:
        listed = set()
    known: set[str] = set()
    for status in runtime.manager.servers():
        skill = f"mcp:{status.name}"
        if skill in listed or any((root / name).exists() for name in paths.skill_dir_spellings(skill)):
            known.add(status.name)
    return known


def connecting_line(names: list[str], limit: int = 8) -> str:
    """The one line naming the servers still connecting when a session starts answering."""
    shown = some_of(names, limit)
    count = f"{len(names)} server{'s' if len(names) != 1 else ''}"
    return (
        f"still connecting ({count}): {shown}; answering with the skills on disk meanwhile, and each "
        "server joins when it is ready"
    )


class JoinAsReady:
    """Syncs the skill of each server still connecting when the session started answering,
    as its first attempt ends, so it joins the catalog at the model's next step.

    Args:
        runtime: the session's runtime.
        pending: the servers still connecting (:func:`settle_first`).
        on_entry: told each synced server's outcome (a front end prints the ones that failed).

    Attributes:
        done: set once every pending server is synced (or :meth:`run` ended).
    """

    def __init__(self, runtime: Runtime, pending: list[str], on_entry: Callable[[SyncEntry], None]) -> None:
        self.runtime = runtime
        self.pending = set(pending)
        self.on_entry = on_entry
        self.done = anyio.Event()

    async def run(self) -> None:
        """Follow the pending servers until each is synced; cancel it to stop early."""
        manager = self.runtime.manager
        wake = [anyio.Event()]

        def observe(status: ServerStatus) -> None:
            if status.name in self.pending and status.state not in _PASSING:
                wake[0].set()

        unsubscribe = manager.subscribe(observe)
        try:
            while self.pending:
                ready = {name for name in self.pending if self._settled(name)}
                if not ready:
                    await wake[0].wait()
                    wake[0] = anyio.Event()
                    continue
                self.pending -= ready
                from keen.mcpskills import sync_from_manager

                try:
                    report = await sync_from_manager(
                        manager, skills_root=self.runtime.skills_root, servers=ready
                    )
                except KeenError as exc:
                    # Their skills stay as they were on disk; the session goes on.
                    logger.warning("skills sync of %s failed: %s", ", ".join(sorted(ready)), exc.message)
                    continue
                for entry in report.entries:
                    self.on_entry(entry)
        finally:
            unsubscribe()
            self.done.set()

    def _settled(self, name: str) -> bool:
        try:
            return self.runtime.manager.status(name).state not in _PASSING
        except KeenError:
            return True  # dropped from the configuration meanwhile: nothing to wait for
