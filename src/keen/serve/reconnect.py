"""Reconnect on demand: ``keen serve`` brings back an upstream server that went away.

A long-running gateway outlives its upstream processes: a stdio server crashes, an HTTP
server restarts. The Manager never retries by itself (docs/architecture.md "Servers and
their states"); ``keen serve`` has no user at a prompt to type ``/mcp connect``, so it asks
the Manager to reconnect (:meth:`keen.mcp.manager.Manager.refresh`, what ``/mcp connect``
does without the sign-in) when a request needs the server:

- Only a server in state ``disconnected`` (it went away, or never came up) that is enabled
  is reconnected. ``auth_required`` / ``auth_failed`` / ``config_error`` need the user.
- At most one attempt per back-off window per server: the window starts at ``first``
  seconds and doubles after each failed attempt (counted from its end) up to ``cap``; a
  success resets it to ``first`` (counted from that attempt's start), so even a server that
  crashes right after each reconnect is retried at most once a ``first`` seconds.
- Concurrent requests for the same server share one attempt. The attempt runs in keen
  serve's task group, so a caller that stops waiting (its time limit) does not cancel it.
- The caller waits at most its own time limit, then runs its request once either way; if
  the server is still down the request fails with the usual error, and
  :meth:`Reconnector.retry_in` says when the next attempt may happen.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import anyio
import anyio.abc

from keen.mcp.manager import Manager
from keen.mcp.types import ServerState

__all__ = ["DEFAULT_BACKOFF_CAP", "DEFAULT_BACKOFF_FIRST", "Reconnector"]

logger = logging.getLogger("keen.serve")

DEFAULT_BACKOFF_FIRST = 1.0
DEFAULT_BACKOFF_CAP = 30.0


@dataclass
class _Window:
    delay: float
    next_at: float = 0.0
    attempt: anyio.Event | None = None
    started: float = 0.0
    attempts: int = field(default=0)


class Reconnector:
    """Reconnects servers that went away, once per back-off window (module docstring).

    Args:
        manager: the started Manager.
        first / cap: the back-off window's first and largest length, in seconds.
        clock: monotonic seconds (tests may pass their own).
    """

    def __init__(
        self,
        manager: Manager,
        *,
        first: float = DEFAULT_BACKOFF_FIRST,
        cap: float = DEFAULT_BACKOFF_CAP,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if first <= 0 or cap < first:
            raise ValueError("back-off needs 0 < first <= cap")
        self.manager = manager
        self.first = first
        self.cap = cap
        self.clock = clock
        self.task_group: anyio.abc.TaskGroup | None = None
        """Where attempts run (keen serve's); without one an attempt runs in its caller."""
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
        return max(0.0, window.next_at - self.clock())

    async def ensure(self, servers: Iterable[str], timeout: float | None = None) -> None:
        """Reconnect those of ``servers`` that went away (if their window allows) and wait for
        the attempts, at most ``timeout`` seconds (default: each server's ``timeouts.connect``
        plus ``timeouts.list_tools``). Never raises: the caller's request reports the state."""
        if self.task_group is None:
            # Used outside keen serve's ``async with``: the attempts run in this task group.
            async with anyio.create_task_group() as tg:
                await self._ensure(tg, servers, timeout)
                tg.cancel_scope.cancel()
            return
        await self._ensure(self.task_group, servers, timeout)

    async def _ensure(self, tg: anyio.abc.TaskGroup, servers: Iterable[str], timeout: float | None) -> None:
        events: list[anyio.Event] = []
        limit = 0.0
        for server in dict.fromkeys(servers):
            event = self._start(tg, server)
            if event is not None:
                events.append(event)
                limit = max(limit, self._limit(server))
        if not events:
            return
        with anyio.move_on_after(timeout if timeout is not None else limit):
            for event in events:
                await event.wait()

    def kick(self, servers: Iterable[str]) -> None:
        """Start the attempts :meth:`ensure` would, without waiting (needs a task group)."""
        if self.task_group is None:
            return
        for server in dict.fromkeys(servers):
            self._start(self.task_group, server)

    def reconnectable_servers(self) -> list[str]:
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
        elif now < window.next_at:
            return None  # the last attempt failed less than a window ago
        window.attempt = event = anyio.Event()
        window.attempts += 1
        window.started = now
        tg.start_soon(self._attempt, server, window, name=f"keen-serve-reconnect-{server}")
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
            if ok:
                # Reset, yet still one attempt per window: a server that crashes again at
                # once is reconnected at most once a ``first`` seconds.
                window.delay = self.first
                window.next_at = window.started + self.first
            else:
                window.next_at = self.clock() + window.delay
                window.delay = min(window.delay * 2, self.cap)
            window.attempt = None
            if event is not None:
                event.set()
