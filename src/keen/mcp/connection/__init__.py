"""One server's connection: transports, the owner task and its session, the server's requests.

* :mod:`~keen.mcp.connection.server`: ``ServerConnection``, the owner task of one server.
* :mod:`~keen.mcp.connection.spawn` (with ``_stdio``, ``_orphans``, ``_stderr``): stdio
  servers started off the event loop, stopped with their daemons, stderr copied redacted.
* ``_http``: Streamable HTTP and HTTP+SSE (``_http_bounds``: one message bounded;
  ``_http_exchanges``: a POST given up on ended); :mod:`~keen.mcp.connection.memory`: in-process servers.
* :mod:`~keen.mcp.connection.message_size`: how much of one message Keen reads, on every transport.
* :mod:`~keen.mcp.connection.translate`: SDK, OS and httpx2 exceptions become Keen's.
* :mod:`~keen.mcp.connection.elicitation`, :mod:`~keen.mcp.connection.relay`: a server's
  questions and log messages during a call, passed to whoever made it.
* :mod:`~keen.mcp.connection.reconnect`: bring back a server that went away.
* :mod:`~keen.mcp.connection.sdk_private`: the SDK's private names, imported there only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from keen._lazy import exports_from, lazy_module_attrs

if TYPE_CHECKING:
    from keen.mcp.connection.elicitation import ElicitAnswer, ElicitationCallback, UrlElicitationCallback
    from keen.mcp.connection.memory import in_memory_transport
    from keen.mcp.connection.reconnect import Reconnector
    from keen.mcp.connection.relay import CALL_PEER, CallPeer, Relay
    from keen.mcp.connection.server import ServerConnection
    from keen.mcp.connection.translate import (
        AUTH_STATUSES,
        auth_status_error,
        sign_in_message,
        translate_call_error,
        unreachable_message,
    )

__all__ = [
    "AUTH_STATUSES",
    "CALL_PEER",
    "CallPeer",
    "ElicitAnswer",
    "ElicitationCallback",
    "Reconnector",
    "Relay",
    "ServerConnection",
    "UrlElicitationCallback",
    "auth_status_error",
    "in_memory_transport",
    "sign_in_message",
    "translate_call_error",
    "unreachable_message",
]

_EXPORTS = {
    **exports_from(
        "keen.mcp.connection.elicitation", ("ElicitAnswer", "ElicitationCallback", "UrlElicitationCallback")
    ),
    **exports_from("keen.mcp.connection.memory", ("in_memory_transport",)),
    **exports_from("keen.mcp.connection.reconnect", ("Reconnector",)),
    **exports_from("keen.mcp.connection.relay", ("CALL_PEER", "CallPeer", "Relay")),
    **exports_from("keen.mcp.connection.server", ("ServerConnection",)),
    **exports_from(
        "keen.mcp.connection.translate",
        (
            "AUTH_STATUSES",
            "auth_status_error",
            "sign_in_message",
            "translate_call_error",
            "unreachable_message",
        ),
    ),
}

__getattr__, __dir__ = lazy_module_attrs(__name__, _EXPORTS)
