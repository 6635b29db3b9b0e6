"""A 2026-07-28 host's call whose upstream asks: answered with ``InputRequiredResult`` rounds.

A 2026-07-28 host cannot be sent a request: a server asks by answering the call with an
``InputRequiredResult`` (the requests, and a ``requestState``), and the host calls again
with its answers (MCP 2026-07-28, "Multi round-trip requests"). The upstream call cannot
wait for that inside one request, so :class:`Rounds` runs it in Keen's own task group: when
the upstream asks (through the call's :class:`keen.serve.relay.HostPeer`, whose channel is
a :class:`RoundsChannel`), the host's request is answered with the question; its retry
(same caller, the ``requestState`` Keen gave) delivers the answers and waits for the next
question or the result.

``requestState`` is a random token bound to the caller: another caller's retry, or a guessed
token, finds nothing. A call whose host does not come back within ``answer_wait`` seconds
gets an error for its question (the upstream decides what its tool does then); a host that
cancels its request while waiting (or closes the connection) cancels the call. Rounds live in
one process: behind a load balancer a host's retries must reach the same replica.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.abc
import mcp_types as mt
from anyio.streams.memory import MemoryObjectSendStream
from mcp.shared.exceptions import MCPError
from pydantic import BaseModel

from keen.serve.relay import SessionChannel

__all__ = ["DEFAULT_ANSWER_WAIT", "Rounds", "RoundsChannel"]

logger = logging.getLogger("keen.serve")

DEFAULT_ANSWER_WAIT = 300.0
"""Seconds a question waits for the host's retry before the upstream gets an error."""


@dataclass
class _Call:
    token: str
    caller: str
    asked: dict[str, tuple[mt.InputRequest, MemoryObjectSendStream[Any]]] = field(default_factory=dict)
    changed: anyio.Event = field(default_factory=anyio.Event)
    done: anyio.Event = field(default_factory=anyio.Event)
    result: mt.CallToolResult | None = None
    ctx: Any = None
    """The request the host is waiting on now (progress and log messages ride it), or None."""
    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)


class RoundsChannel:
    """A :class:`keen.serve.relay.HostChannel` whose requests become the next round's questions."""

    def __init__(self, call: _Call, answer_wait: float) -> None:
        self._call, self._wait = call, answer_wait

    async def request(self, request: mt.InputRequest, result_type: type[BaseModel]) -> BaseModel:
        key = f"keen-{secrets.token_hex(4)}"
        send, receive = anyio.create_memory_object_stream[Any](1)
        self._call.asked[key] = (request, send)
        self._call.changed.set()
        try:
            with anyio.fail_after(self._wait):
                raw = await receive.receive()
        except TimeoutError:
            raise MCPError(
                code=mt.INTERNAL_ERROR, message=f"the MCP host did not answer within {self._wait:g} s"
            ) from None
        finally:
            self._call.asked.pop(key, None)
            send.close()
            receive.close()
        try:
            return result_type.model_validate(raw, by_name=False)
        except ValueError:
            raise MCPError(
                code=mt.INVALID_PARAMS, message="the MCP host's answer does not validate"
            ) from None

    async def notify(self, notification: mt.ServerNotification) -> None:
        if self._call.ctx is None:
            # Said, not skipped: a log message's writer counts it as dropped, and tells the host.
            raise MCPError(
                code=mt.INTERNAL_ERROR,
                message="the host is between two rounds of this call; nothing reaches it",
            )
        await SessionChannel(self._call.ctx).notify(notification)

    async def progress(self, progress: float, total: float | None, message: str | None) -> None:
        if self._call.ctx is not None:
            await SessionChannel(self._call.ctx).progress(progress, total, message)


class Rounds:
    """The calls of 2026-07-28 hosts, each until it ends (see the module docstring).

    Args:
        answer_wait: seconds a question waits for the host's retry.
    """

    def __init__(self, answer_wait: float = DEFAULT_ANSWER_WAIT) -> None:
        self.answer_wait = answer_wait
        self.task_group: anyio.abc.TaskGroup | None = None
        """Where calls run (set while keen serve runs)."""
        self._calls: dict[str, _Call] = {}

    async def serve(
        self,
        ctx: Any,
        caller: str,
        params: Mapping[str, Any] | None,
        start: Callable[[RoundsChannel], Awaitable[mt.CallToolResult]],
    ) -> mt.CallToolResult | mt.InputRequiredResult:
        """One request of a call: the first (``start`` runs the call with the channel its
        peer asks through) or a retry (``params`` carries ``requestState`` and
        ``inputResponses``). Returns the result, or the questions still unanswered."""
        state = params.get("requestState") if params else None
        if state is not None:
            call = self._calls.get(state) if isinstance(state, str) else None
            if call is None or call.caller != caller:
                raise MCPError(
                    code=mt.INVALID_PARAMS,
                    message="Unknown or expired requestState; call the tool again without it",
                )
            answers = params.get("inputResponses") if params else None
            for key, raw in (answers if isinstance(answers, Mapping) else {}).items():
                asked = call.asked.pop(str(key), None)
                if asked is not None:
                    asked[1].send_nowait(raw)
        else:
            call = self._start(caller, start)
        return await self._next(call, ctx)

    def _start(self, caller: str, start: Callable[[RoundsChannel], Awaitable[mt.CallToolResult]]) -> _Call:
        if self.task_group is None:
            raise MCPError(code=mt.INTERNAL_ERROR, message="keen serve is not running")
        call = _Call(token=secrets.token_urlsafe(24), caller=caller)
        self._calls[call.token] = call
        channel = RoundsChannel(call, self.answer_wait)

        async def run() -> None:
            try:
                with call.scope:
                    call.result = await start(channel)
            except Exception as exc:  # one call's failure must not end keen serve's task group
                logger.warning("a call of %s failed (%s)", caller, type(exc).__name__)
                call.result = mt.CallToolResult(
                    content=[mt.TextContent(type="text", text="Keen failed to run this call")], is_error=True
                )
            finally:
                call.done.set()
                call.changed.set()
                if call.ctx is None and self.task_group is not None:
                    # It ended between rounds (a question it was given turned out not to be
                    # its own, and the upstream answered without it): the host's retry
                    # still gets the result, for a while.
                    self.task_group.start_soon(self._forget, call.token, name="keen-serve-forget")

        self.task_group.start_soon(run, name="keen-serve-call")
        return call

    async def _forget(self, token: str) -> None:
        await anyio.sleep(self.answer_wait)  # an expiry, not a synchronisation
        self._calls.pop(token, None)

    async def _next(self, call: _Call, ctx: Any) -> mt.CallToolResult | mt.InputRequiredResult:
        call.ctx = ctx
        try:
            while True:
                if call.done.is_set():
                    self._calls.pop(call.token, None)
                    if call.result is None:
                        raise MCPError(code=mt.INTERNAL_ERROR, message="the call ended without a result")
                    return call.result
                if call.asked:
                    questions = {key: request for key, (request, _) in call.asked.items()}
                    return mt.InputRequiredResult(input_requests=questions, request_state=call.token)
                call.changed = anyio.Event()
                await call.changed.wait()
        except anyio.get_cancelled_exc_class():
            # The host gave up on its call: so does the upstream.
            call.scope.cancel()
            self._calls.pop(call.token, None)
            raise
        finally:
            call.ctx = None
