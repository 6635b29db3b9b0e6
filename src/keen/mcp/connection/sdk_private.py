"""The MCP SDK's private names Keen uses, imported here and nowhere else.

The SDK (``mcp`` 2.3) keeps four pieces Keen needs outside its public API:

* ``mcp.client._probe.negotiate_auto``: the ``server/discover`` probe with fallback to the
  ``initialize`` handshake that ``Client(mode="auto")`` runs, used on a session Keen opens
  itself (it needs the session for its own message handlers and headers);
* ``mcp.client._input_required.run_input_required_driver`` and its default round limit: the
  2026-07-28 ``InputRequiredResult`` rounds of a request;
* ``mcp.client._memory.InMemoryTransport``: the in-process transport of ``Client(server)``;
* ``mcp.client.stdio._parse_line``: one line of a stdio server's stdout as the SDK's stdio
  client reads it (a JSON-RPC message, or the exception the session is given), used by
  Keen's own stdio reader (:mod:`keen.mcp.connection._stdio`);
* the bytes of one event the SDK's HTTP+SSE client reads, the default ``max_event_size`` of
  ``mcp.shared._httpx_utils.sse_within_origin`` (its ``sse_client`` passes none), and the
  event parser it reads with, httpx2's ``_sse._SSEParser``: Keen runs the same parser, with
  the same limit, beside it, to say why such a session ended (``keen.mcp.connection._http_bounds``).

They were read from the SDK version in :data:`SDK_READ`; ``tests/mcp/test_sdk_private.py``
fails when the installed SDK's minor version differs or a name moves, so an upgrade re-reads
them here first. The in-memory transport is imported on use: it loads the SDK's server half.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from typing import TYPE_CHECKING, Protocol

from mcp.client._input_required import DEFAULT_INPUT_REQUIRED_MAX_ROUNDS, run_input_required_driver
from mcp.client._probe import negotiate_auto
from mcp.client.stdio import _parse_line as parse_stdio_line  # pyright: ignore[reportPrivateUsage]

if TYPE_CHECKING:
    from mcp.client._memory import InMemoryTransport

__all__ = [
    "DEFAULT_INPUT_REQUIRED_MAX_ROUNDS",
    "SDK_READ",
    "EventParser",
    "in_memory_transport_class",
    "negotiate_auto",
    "parse_stdio_line",
    "run_input_required_driver",
    "sse_event_parser",
    "sse_transport_max_event_size",
]

SDK_READ = "2.3"
"""The ``mcp`` minor version these private names were read from."""


def in_memory_transport_class() -> type[InMemoryTransport]:
    """``mcp.client._memory.InMemoryTransport`` (imported on first use)."""
    from mcp.client._memory import InMemoryTransport

    return InMemoryTransport


class EventParser(Protocol):
    """httpx2's event-stream parser, as :func:`sse_event_parser` makes it."""

    def decode(self, text: str) -> Iterator[object]:
        """The events ``text`` completes; raises ``httpx2.SSEError`` past the event limit."""
        ...


def sse_transport_max_event_size() -> int:
    """The bytes of one event the SDK's HTTP+SSE client (``mcp.client.sse.sse_client``) reads:
    ``sse_within_origin``'s default ``max_event_size``, which ``sse_client`` does not set."""
    from mcp.shared._httpx_utils import sse_within_origin

    limit = inspect.signature(sse_within_origin).parameters["max_event_size"].default
    if not isinstance(limit, int):  # None would mean no limit: nothing to say then
        raise TypeError(f"mcp.shared._httpx_utils.sse_within_origin's max_event_size default is {limit!r}")
    return limit


def sse_event_parser(max_event_size: int) -> EventParser:
    """A new httpx2 event-stream parser (``httpx2._sse._SSEParser``) with ``max_event_size``,
    the one ``httpx2.EventSource`` reads an event stream's text with."""
    from httpx2._sse import _SSEParser  # pyright: ignore[reportPrivateUsage]

    return _SSEParser(max_event_size)
