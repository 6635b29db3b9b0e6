"""How ``keen chat`` words an on-demand reconnect (docs/chat.md "When a server goes away").

The agent reconnects a server that went away before a tool call that needs it, with the
one :class:`keen.mcp.connection.reconnect.Reconnector` (the same back-off and sharing rules as
``keen serve``). This module only words the outcome: one line for the user
(:func:`reconnect_line`) and, when the server is still down, what the model reads after
the call's error (:func:`retry_words`).
"""

from __future__ import annotations

from keen.mcp.types import ServerState, ServerStatus

__all__ = ["STILL_CONNECTING", "reconnect_line", "retry_words", "when_words"]

STILL_CONNECTING = (
    " Keen is still connecting this server in the background; call it again in a moment"
    " (it never repeats a failed call by itself)."
)
"""What the model reads after the error of a call to a server still ``connecting``: a
reconnect that outlasted the call's wait, or a first connection still under way."""


def when_words(retry_in: float) -> str:
    """When the next attempt may start: ``at the next call to it`` or ``at a call made N s
    from now or later`` (``retry_in`` in seconds, rounded up to at least 1)."""
    if retry_in <= 0:
        return "at the next call to it"
    return f"at a call made {max(1, round(retry_in))} s from now or later"


def reconnect_line(status: ServerStatus, retry_in: float, connect_command: str, waited: float = 0.0) -> str:
    """The user's one line after an attempt: ``demo: reconnected, 5 tools``;
    ``demo: still disconnected (why); Keen tries again at ...; /mcp connect demo tries now``;
    or, when the attempt outlasted the wait (the server is still ``connecting``),
    ``demo: still reconnecting after 45 s; Keen goes on in the background ...``.

    Args:
        status: the server's status when the wait ended.
        retry_in: seconds until the next attempt may start.
        connect_command: the front end's reconnect command, ``{server}`` filled in here.
        waited: how long the caller waited for the attempt, in seconds.
    """
    if status.state is ServerState.CONNECTED:
        return f"{status.name}: reconnected, {status.tool_count} tools"
    if status.state is ServerState.CONNECTING:
        # The attempt is still running (it is not cancelled with the wait): another attempt
        # would join it, so "tries again" or "tries now" would not be true.
        return (
            f"{status.name}: still reconnecting after {max(1, round(waited))} s; Keen goes on in the"
            " background, and calls that need the server fail until it is back"
        )
    why = f" ({status.last_error})" if status.last_error else ""
    command = connect_command.format(server=status.name)
    return (
        f"{status.name}: still {status.state.value}{why}; Keen tries again {when_words(retry_in)};"
        f" `{command}` tries now"
    )


def retry_words(retry_in: float, state: ServerState = ServerState.DISCONNECTED) -> str:
    """What the model reads after the error of a call to a server that is still down: Keen
    reconnects it by itself on a later call (or is still at it, ``state`` ``connecting``),
    and never repeats a failed call."""
    if state is ServerState.CONNECTING:
        return STILL_CONNECTING
    return (
        f" Keen reconnects this server by itself {when_words(retry_in)} (it never repeats a"
        " failed call by itself)."
    )
