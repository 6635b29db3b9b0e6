"""A server's requests and log messages during a call, passed to whoever made the call.

A front end that calls tools on someone else's behalf (``keen serve`` for its MCP hosts)
gives the Manager a :class:`Relay` and sets :data:`CALL_PEER` around each call. Sessions
opened with a relay advertise ``elicitation`` (form and URL), ``sampling`` and ``roots`` to
their servers, and what a server asks or logs during a call goes to that call's
:class:`CallPeer` (MCP 2025-11-25, "Client Features": elicitation, sampling, roots;
"Server Utilities > Logging").

Which call a request belongs to:

- 2026-07-28: a server asks inside the call's own result (``InputRequiredResult``), answered
  in the task that made the call (:mod:`keen.mcp.calls._input`), where :data:`CALL_PEER` is that
  call's peer: always the right one.
- 2025-11-25: a server-to-client request (or ``notifications/message``) carries nothing that
  names the call it belongs to (on stdio it is one more line on the pipe). It goes to the
  calls running on that server: when they are all one host's, to that host; when calls of
  several hosts run on it at once, Keen cannot tell whose it is and declines a request with
  a message that says so (a log message is dropped), so nothing ever reaches another host.

A request that comes when no call runs on the server (server-everything asks for roots
right after connecting) is declined with a message: one connection serves many hosts, and
Keen has no roots or model of its own to answer with.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, Protocol

from keen.mcp.connection.elicitation import check_url

if TYPE_CHECKING:
    import mcp_types as mt

__all__ = ["CALL_PEER", "CallPeer", "Relay"]

logger = logging.getLogger(__name__)

_MAX_ACCEPTED = 64


class CallPeer(Protocol):
    """Whoever a call is made for: answers what the server asks during it, and gets its logs."""

    @property
    def host(self) -> str:
        """Who the call is for; calls of one host share it (their requests may go to either)."""
        ...

    async def ask(self, server: str, request: mt.InputRequest) -> mt.InputResponse | mt.ErrorData:
        """Answer ``request`` of ``server`` (elicitation, sampling or roots), or refuse it with
        an error whose message says why (sent back to the server as the JSON-RPC error)."""
        ...

    async def log(self, server: str, params: mt.LoggingMessageNotificationParams) -> None:
        """A log message ``server`` sent during the call."""
        ...

    async def completed(self, server: str, elicitation_id: str) -> None:
        """``server`` reported the URL-mode elicitation ``elicitation_id`` (that this peer
        accepted) finished out of band (``notifications/elicitation/complete``)."""
        ...


CALL_PEER: ContextVar[CallPeer | None] = ContextVar("keen_call_peer", default=None)
"""The peer of the calls made in this context: set by a front end around a call it makes for
someone (read by :meth:`keen.mcp.manager.Manager.call_tool`, like ``CALL_PROGRESS``)."""


class Relay:
    """The calls running on each server and their peers; builds a session's callbacks."""

    def __init__(self) -> None:
        self._calls: dict[str, list[CallPeer]] = {}
        self._accepted: dict[tuple[str, str], CallPeer] = {}
        """(server, elicitationId) -> the peer that accepted that URL-mode request, until the
        server reports it finished (at most 64 are kept; the oldest is forgotten first)."""

    @contextlib.contextmanager
    def calling(self, server: str, peer: CallPeer | None) -> Iterator[None]:
        """While the block runs, a call for ``peer`` runs on ``server``."""
        if peer is None:
            yield
            return
        calls = self._calls.setdefault(server, [])
        calls.append(peer)
        try:
            yield
        finally:
            calls.remove(peer)
            if not calls:
                del self._calls[server]

    def peer(self, server: str) -> CallPeer | str:
        """The peer a request or log message of ``server`` goes to, or why there is none."""
        calls = self._calls.get(server, [])
        current = CALL_PEER.get()
        if current is not None and any(p is current for p in calls):
            return current  # answered in the calling task (2026-07-28 rounds): exact
        hosts = {p.host for p in calls}
        if len(hosts) == 1:
            return calls[0]
        if not calls:
            return (
                f'MCP server "{server}" asked outside any call; Keen serves many MCP hosts over this '
                "one connection and passes a server's requests only to the host whose call is running"
            )
        return (
            f'MCP server "{server}" asked while calls of {len(hosts)} MCP hosts were running on it; the '
            "request does not say which call it belongs to (MCP 2025-11-25), so Keen declined it rather "
            "than ask the wrong host; call again when no other host's call is running on this server"
        )

    async def ask(self, server: str, request: mt.InputRequest) -> mt.InputResponse | mt.ErrorData:
        """Pass ``request`` to the peer whose call caused it; an error when there is none."""
        import mcp_types as mt  # loaded by then: a server asks over the SDK's session

        if isinstance(request, mt.ElicitRequest) and isinstance(request.params, mt.ElicitRequestURLParams):
            problem = check_url(str(request.params.url))
            if problem is not None:
                logger.warning(
                    "%s: declined a URL-mode elicitation: its URL is refused (%s)", server, problem
                )
                return mt.ElicitResult(action="decline")
        found = self.peer(server)
        if isinstance(found, str):
            logger.info("%s: declined %s: %s", server, request.method, found)
            return mt.ErrorData(code=mt.INVALID_REQUEST, message=found)
        try:
            answer = await found.ask(server, request)
        except Exception as exc:  # a broken peer must not break the server's call
            logger.warning("%s: relaying %s failed (%s)", server, request.method, type(exc).__name__)
            return mt.ErrorData(
                code=mt.INTERNAL_ERROR, message=f"Keen could not pass {request.method} to the MCP host"
            )
        params = request.params
        accepted = getattr(answer, "action", None) == "accept"
        if isinstance(params, mt.ElicitRequestURLParams) and params.elicitation_id and accepted:
            key = (server, params.elicitation_id)
            self._accepted.pop(key, None)  # a reused id: the newest request wins
            self._accepted[key] = found
            while len(self._accepted) > _MAX_ACCEPTED:
                del self._accepted[next(iter(self._accepted))]
        return answer

    async def completed(self, server: str, elicitation_id: str) -> None:
        """``server`` sent ``notifications/elicitation/complete``: passed once to the peer that
        accepted that request; a notice for an id no peer accepted, or sent again, is ignored
        (MCP 2025-11-25, Elicitation, "Completion Notifications for URL Mode Elicitation")."""
        found = self._accepted.pop((server, elicitation_id), None)
        if found is None:
            return
        try:
            await found.completed(server, elicitation_id)
        except Exception as exc:  # a host gone since: nothing else is lost
            logger.debug("%s: relaying a completion notice failed (%s)", server, type(exc).__name__)

    async def log(self, server: str, params: mt.LoggingMessageNotificationParams) -> None:
        """Pass a log message to the peer whose call is running, if there is exactly one host."""
        found = self.peer(server)
        if isinstance(found, str):
            return
        try:
            await found.log(server, params)
        except Exception as exc:  # a host gone mid-call loses a log line, nothing else
            logger.debug("%s: relaying a log message failed (%s)", server, type(exc).__name__)

    def callbacks(self, server: str) -> dict[str, Any]:
        """``ClientSession`` keyword arguments: the sampling, elicitation and roots callbacks of
        ``server``'s session (the SDK advertises each capability because its callback is set)."""
        import mcp_types as mt  # imported here, as the SDK is: a Manager connecting nothing loads neither

        async def sampling(_context: Any, params: mt.CreateMessageRequestParams) -> Any:
            return await self.ask(server, mt.CreateMessageRequest(params=params))

        async def elicitation(_context: Any, params: mt.ElicitRequestParams) -> Any:
            return await self.ask(server, mt.ElicitRequest(params=params))

        async def roots(_context: Any) -> Any:
            return await self.ask(server, mt.ListRootsRequest())

        return {
            "sampling_callback": sampling,
            "elicitation_callback": elicitation,
            "list_roots_callback": roots,
        }
