"""Reconnect a server that went away, at most once per back-off window.

A long session outlives its servers' processes: a stdio server crashes, an HTTP server
restarts. The Manager never retries by itself (docs/architecture.md "Servers and their
states"). The front ends that run long each keep one :class:`Reconnector` over their
Manager: ``keen serve`` (no user at a prompt to type ``/mcp connect``) and ``keen chat``
(the REPL and one-shot turns) ask it, before a request or a tool call that needs a server,
to reconnect that server (:meth:`keen.mcp.manager.Manager.refresh`, what ``/mcp connect``
does without the sign-in); ``keen mcp watch``, whose job is to follow every server, asks it
on a timer, each time the window allows, until the server is back. The rules
(docs/serve.md "When an upstream server goes away", docs/chat.md "When a server goes away"):

- Only a server in state ``disconnected`` (it went away, or never came up) that is enabled
  is reconnected. ``auth_required`` / ``auth_failed`` / ``config_error`` need the user.
- At most one attempt per back-off window per server: the window starts at ``first``
  seconds and doubles after each failed attempt (counted from its end) up to ``cap``. With
  ``stable_after=0`` (keen serve, keen chat: attempts come only on demand) a success resets
  it to ``first`` (counted from that attempt's start), so even a server that crashes right
  after each reconnect is retried at most once a ``first`` seconds. With ``stable_after=S``
  (keen mcp watch, which asks again as soon as the window allows) a success doubles it too
  (counted from the attempt's start), and it goes back to ``first`` only once a session
  lasted ``S`` seconds (measured to when the Reconnector first sees the server gone:
  :meth:`Reconnector.retry_in` or the next attempt), so a server that crashes right after
  each connect is started at most once per window, the windows growing to ``cap``.
- Concurrent requests for the same server share one attempt. With a :attr:`Reconnector.task_group`
  (keen serve's, the REPL's) the attempt runs there, so a caller that stops waiting (its
  time limit, a cancelled turn) does not cancel it.
- The caller waits at most its own time limit, then runs its request once either way; if
  the server is still down the request fails with the usual error, and
  :meth:`Reconnector.retry_in` says when the next attempt may happen.
- The Reconnector itself keeps no timer: it attempts when asked, :meth:`Reconnector.ensure`
  for a request that needs the server (or keen mcp watch's loop, once per window),
  :meth:`Reconnector.kick` for one that would merely like every server back (keen serve's
  ``tools/list`` and ``search_tools``). In keen serve and keen chat a server that never
  comes back is therefore never retried while nothing asks for it, and a kick gives up on
  it after :data:`KICK_LIMIT` failed attempts in a row: from then on only a request that
  needs that server tries again, so a host polling ``tools/list`` does not restart a broken
  server every ``cap`` seconds for ever. Any successful reconnect clears the count.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import anyio
import anyio.abc

from keen.mcp.types import ServerState

if TYPE_CHECKING:  # the SDK loads with the Manager, not with its reconnection policy
    from keen.mcp.manager import Manager

__all__ = ["DEFAULT_BACKOFF_CAP", "DEFAULT_BACKOFF_FIRST", "KICK_LIMIT", "Reconnector"]

logger = logging.getLogger(__name__)

DEFAULT_BACKOFF_FIRST = 1.0
DEFAULT_BACKOFF_CAP = 30.0
KICK_LIMIT = 5
"""Failed attempts in a row after which :meth:`Reconnector.kick` leaves a server alone (with
the default back-off: about 30 s of tries); a request that needs it still tries."""


@dataclass
class _Window:
    delay: float
    next_at: float = 0.0
    attempt: anyio.Event | None = None
    started: float = 0.0
    attempts: int = 0
    failures: int = 0
    """Failed attempts since the last success."""
    ended: int = 0
    """Attempts that have ended (a count that moves when one ends, for :meth:`Reconnector.ended`)."""
    up_at: float | None = None
    """When the last attempt connected, while it is not yet known how long that session
    lasted (``stable_after`` only)."""


class Reconnector:
    """Reconnects servers that went away, once per back-off window (module docstring).

    Args:
        manager: the started Manager.
        first / cap: the back-off window's first and largest length, in seconds.
        kick_limit: failed attempts in a row after which :meth:`kick` stops trying a server.
        stable_after: seconds a reconnected session must last before the window goes back
            to ``first``; 0 (the default) resets it at each success (module docstring).
        clock: monotonic seconds (tests may pass their own).

    Raises:
        ValueError: not ``0 < first <= cap``, ``kick_limit < 1``, or ``stable_after < 0``.
    """

    def __init__(
        self,
        manager: Manager,
        *,
        first: float = DEFAULT_BACKOFF_FIRST,
        cap: float = DEFAULT_BACKOFF_CAP,
        kick_limit: int = KICK_LIMIT,
        stable_after: float = 0.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if first <= 0 or cap < first:
            raise ValueError("back-off needs 0 < first <= cap")
        if kick_limit < 1:
            raise ValueError("kick_limit needs at least 1 attempt")
        if stable_after < 0:
            raise ValueError("stable_after needs 0 or more seconds")
        self.manager = manager
        self.first = first
        self.cap = cap
        self.kick_limit = kick_limit
        self.stable_after = stable_after
        self.clock = clock
        self.task_group: anyio.abc.TaskGroup | None = None
        """Where attempts run (keen serve's, the REPL's); without one an attempt runs in its
        caller and ends when :meth:`ensure` stops waiting."""
        self._windows: dict[str, _Window] = {}

    def reconnectable(self, server: str) -> bool:
        """Whether ``server`` went away and reconnecting may bring it back (no user needed)."""
        try:
            status = self.manager.status(server)
        except Exception:
            return False  # not configured, or misconfigured: nothing to reconnect
        return status.enabled and status.state is ServerState.DISCONNECTED

    def retry_in(self, server: str) -> float:
        """Seconds until the next reconnect attempt of ``server`` may start (0: now)."""
        window = self._windows.get(server)
        if window is None or window.attempt is not None:
            return 0.0
        if window.up_at is not None and self.reconnectable(server):
            self._session_ended(window)
        return max(0.0, window.next_at - self.clock())

    def failures(self, server: str) -> int:
        """Failed attempts in a row for ``server`` (0 after a success or before any attempt).

        An attempt is counted once it returns, after the state it ended in was announced to
        the Manager's subscribers: one of them sees the count before it (:meth:`attempting`
        tells it that an attempt is running)."""
        window = self._windows.get(server)
        return window.failures if window is not None else 0

    def attempting(self, server: str) -> bool:
        """Whether a reconnect attempt of ``server`` is running now (not yet in :meth:`failures`)."""
        window = self._windows.get(server)
        return window is not None and window.attempt is not None

    def ended(self, server: str) -> int:
        """How many reconnect attempts of ``server`` have ended: a watcher that compares it
        between two looks learns that an attempt ended in between, whose caller (waiting in
        :meth:`ensure`) may not have run yet to report it."""
        window = self._windows.get(server)
        return window.ended if window is not None else 0

    async def ensure(self, servers: Iterable[str], timeout: float | None = None) -> list[str]:
        """Reconnect those of ``servers`` that went away (if their window allows) and wait for
        the attempts, at most ``timeout`` seconds (default: each server's ``timeouts.connect``
        plus ``timeouts.list_tools``). Never raises: the caller's request reports the state.

        Returns:
            The servers whose attempt this call started or joined (in the order given); the
            others needed none, or are inside a back-off window (:meth:`retry_in`).
        """
        if self.task_group is None:
            # No long-lived task group (a one-shot turn, a test): the attempts run in this one.
            tried: list[str] = []
            async with anyio.create_task_group() as tg:
                tried = await self._ensure(tg, servers, timeout)
                tg.cancel_scope.cancel()
            return tried
        return await self._ensure(self.task_group, servers, timeout)

    async def _ensure(
        self, tg: anyio.abc.TaskGroup, servers: Iterable[str], timeout: float | None
    ) -> list[str]:
        events: dict[str, anyio.Event] = {}
        for server in dict.fromkeys(servers):
            event = self._start(tg, server)
            if event is not None:
                events[server] = event
        if events:
            limit = max(self._limit(server) for server in events)
            with anyio.move_on_after(timeout if timeout is not None else limit):
                for event in events.values():
                    await event.wait()
        return list(events)

    def kick(self, servers: Iterable[str]) -> list[str]:
        """Start the attempts :meth:`ensure` would, without waiting (needs a task group), except
        for servers whose last ``kick_limit`` attempts all failed (module docstring).

        Returns:
            The servers with an attempt running now (started here or before).
        """
        if self.task_group is None:
            return []
        return [
            server
            for server in dict.fromkeys(servers)
            if self.failures(server) < self.kick_limit and self._start(self.task_group, server) is not None
        ]

    def reconnectable_servers(self) -> list[str]:
        """Every server :meth:`reconnectable` says may come back."""
        return [s.name for s in self.manager.servers() if self.reconnectable(s.name)]

    # -- attempts ----------------------------------------------------------------------------

    def _limit(self, server: str) -> float:
        try:
            timeouts = self.manager.config.servers[server].timeouts
        except (KeyError, AttributeError):
            return 45.0
        return timeouts.connect + timeouts.list_tools

    def _start(self, tg: anyio.abc.TaskGroup, server: str) -> anyio.Event | None:
        """The event of ``server``'s running or newly started attempt; ``None`` when it needs
        none or its window has not passed."""
        window = self._windows.get(server)
        if window is not None and window.attempt is not None:
            return window.attempt  # shared with the request that started it
        if not self.reconnectable(server):
            return None
        now = self.clock()
        if window is None:
            window = self._windows[server] = _Window(delay=self.first)
        elif window.up_at is not None:
            self._session_ended(window)
        if now < window.next_at:
            return None  # the last attempt failed less than a window ago
        window.attempt = event = anyio.Event()
        window.attempts += 1
        window.started = now
        tg.start_soon(self._attempt, server, window, name=f"keen-reconnect-{server}")
        return event

    async def _attempt(self, server: str, window: _Window) -> None:
        event = window.attempt
        ok = False
        try:
            logger.info("reconnecting %s (attempt %d)", server, window.attempts)
            status = await self.manager.refresh(server)
            ok = status.state is ServerState.CONNECTED
            if not ok:
                logger.info("reconnect of %s failed: %s", server, status.last_error or status.state.value)
        except Exception as exc:  # a refresh that raised: counted as a failed attempt
            logger.info("reconnect of %s failed: %s", server, exc)
        finally:
            if ok and not self.stable_after:
                # Reset, yet still one attempt per window: a server that crashes again at
                # once is reconnected at most once a ``first`` seconds.
                window.delay = self.first
                window.next_at = window.started + self.first
                window.failures = 0
            elif ok:
                # Not reset until the session proves to last (_session_ended): a server
                # that crashes right after each connect gets ever longer windows.
                window.up_at = self.clock()
                window.next_at = window.started + window.delay
                window.delay = min(window.delay * 2, self.cap)
                window.failures = 0
            else:
                window.failures += 1
                window.next_at = self.clock() + window.delay
                window.delay = min(window.delay * 2, self.cap)
            window.attempt = None
            window.ended += 1
            if event is not None:
                event.set()

    def _session_ended(self, window: _Window) -> None:
        """The session the last attempt opened is over (its server is reconnectable again):
        if it lasted ``stable_after`` seconds, the window goes back to ``first``."""
        if window.up_at is not None and self.clock() - window.up_at >= self.stable_after:
            window.delay = self.first
            window.next_at = min(window.next_at, window.started + self.first)
        window.up_at = None
