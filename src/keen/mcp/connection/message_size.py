"""How much of one message from an MCP server Keen reads, on every transport.

Everything a server sends is untrusted: one message without an end (an endless stdout line,
an endless server-sent event, an endless or compressed JSON body) could otherwise take the
host's memory. :data:`MAX_MESSAGE_SIZE` bounds one message, and a message over it ends the
way its transport allows:

* stdio: the characters of one line kept while its newline is awaited
  (``keen.mcp.connection._stdio``); the stream cannot be read past the message, so the
  session ends (:class:`MessageTooLarge`) and the call waiting on it fails as
  ``ServerDisconnected``, saying why.
* Streamable HTTP: the bytes of one server-sent event (the SDK's ``max_sse_event_size``),
  or of a JSON response's body once decoded (``keen.mcp.connection._http_bounds``); each request
  has a response of its own, so only the call fails (``RemoteProtocolError``, saying why),
  and the session goes on.
* HTTP+SSE (deprecated): the SDK's ``sse_client`` keeps its own 1 MiB an event, with no
  setting; every message comes on one stream, so a larger one ends the session, and the
  call and the server's status say why (``keen.mcp.connection._http_bounds.HttpSseEventWatch``).

``keen serve`` keeps the same bound on one message from its host over stdio
(``keen.serve._stdin``: a longer line is dropped with a warning).

The limit is far above what a model can use of one result (a result is cut for the model,
docs/architecture.md "The data flow of one call"); the MCP SDK's own default for one event,
1 MiB, failed a 900 KB text result (its text and its ``structuredContent`` copy).
"""

from __future__ import annotations

__all__ = [
    "JSON_BODY_TOO_LARGE",
    "MAX_MESSAGE_SIZE",
    "SDK_JSON_BODY_FAILED",
    "SSE_EVENT_TOO_LARGE",
    "MessageTooLarge",
    "StdinStalled",
    "StreamClosing",
]

MAX_MESSAGE_SIZE = 100_000_000
"""The most of one message Keen reads: characters of a stdio line, bytes of an HTTP one."""

SSE_EVENT_TOO_LARGE = "SSE stream failed: Server-sent event exceeded the "
"""How the MCP SDK words the error of a request whose server-sent event went over the bound
(``mcp.client.streamable_http``, over httpx2's ``SSEError``)."""

JSON_BODY_TOO_LARGE = "a JSON response of more than "
"""How Keen words a JSON body over the bound (``keen.mcp.connection._http_bounds``)."""

SDK_JSON_BODY_FAILED = "Failed to parse JSON response: "
"""What the MCP SDK puts before the error of a JSON body it could not read
(``mcp.client.streamable_http``), :data:`JSON_BODY_TOO_LARGE` included."""


class StreamClosing(ValueError):
    """Why Keen ends a stdio server's stream, in Keen's own words: handed to the session as
    its transport error, then the stream ends (the connection records it as ``closed_why``)."""


class MessageTooLarge(StreamClosing):
    """A stdio server sent more than :data:`MAX_MESSAGE_SIZE` characters of one message:
    handed to the session as its transport error, then the stream ends."""


class StdinStalled(StreamClosing):
    """A stdio server read nothing of what Keen wrote to its stdin for as long as a call may
    take (its ``timeouts.call_tool``): the pipe stayed full, so every request behind it would
    wait for ever. Handed to the session as its transport error, then the stream ends."""
