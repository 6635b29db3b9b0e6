"""Every tool call ``keen serve`` runs goes through the harness pipeline, once.

:class:`CallRouter` owns one :class:`keen.harness.Harness` for the served process. Each
call (search mode's ``call_tool``, an extension-mode tool call) passes the same stages an
agent's call does: validate > visibility > the gateway's MCP checks > permission >
pre-hooks > execute > truncate > post-hooks > audit. Only two things differ, and both are
decided here:

- Visibility is per caller, not per turn: the server passes a callback (extension mode:
  a tool is visible to a caller once that caller fetched its description; search mode:
  every connected upstream tool is).
- Permission is effectively ``auto`` without its refusals: keen serve is a server for
  another MCP host, and that host asks its own user before it sends ``tools/call`` (as it
  does for any server's tool). So the permission gate runs in ``ask`` mode and each call
  brings the host as its approver (:data:`HOST_APPROVES`): every call that reaches it is
  allowed and logged ``by: "MCP host"``. Keen's own ``auto`` mode would refuse destructive tools the host's
  user has approved.

The audit is the harness's event log, one JSON object a line (``$KEEN_HOME/logs/
serve-audit.jsonl`` by default, 0600, secrets redacted): per call a ``call`` event with the
permission verdict in it, any ``hook`` events and a ``result`` event with the caller
(``session:<id>``, ``principal:<id>`` or ``stdio:<id>``), server, tool, outcome, the gate
that refused it and the stages it passed.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import mcp_types as mt
from mcp.shared.dispatcher import ProgressFnT

from keen._text import closed, shorten
from keen.calls import Approver, allow_all
from keen.capabilities import Catalog
from keen.errors import (
    AuthFailed,
    AuthRequired,
    ConfigError,
    KeenError,
    Remedy,
    ServerDisconnected,
    ServerMisconfigured,
    ServerNotConfigured,
)
from keen.gateway import CALL_MCP_TOOL, DEFAULT_MAX_RESULT_CHARS, for_model
from keen.harness import Harness, Observation, Visibility
from keen.mcp.calls.send import LAST_ERROR
from keen.mcp.connection.relay import CALL_PEER, CallPeer
from keen.mcp.manager import CALL_PROGRESS
from keen.runtime import Runtime

__all__ = [
    "APPROVER",
    "HOST_APPROVES",
    "CallRouter",
    "Withheld",
    "call_result",
    "error_result",
    "host_remedy_words",
    "reconnect_words",
]

logger = logging.getLogger("keen.serve")

APPROVER = "MCP host"
"""Who approves served calls, as the event log records it."""


# The host's model has no skill files: it learns tool names and schemas through keen serve's
# own surface, so the remedies that point at SKILL.md and schema files are worded for that.
# keen serve reconnects a server that went away by itself (keen.mcp.connection.reconnect), so that
# remedy says when; what needs the user (configs.json, credentials) needs a restart too, as
# keen serve reads its configuration once.
_RESTART = (
    " The user has to fix this server, then restart keen serve (or the MCP host running it); tell them."
)


_FIX_LOCAL = " Its tools are held until the user fixes that; tell them."


def _enable(server: str) -> str:
    # keen serve may have been started with --config: `keen mcp enable` edits only
    # $KEEN_HOME's file, so the words name the field too.
    return (
        f' The user has to enable it (keen mcp enable {shorten(server, 65)}, or "enabled": true in the'
        " configs.json keen serve was started with), then restart keen serve (or the MCP host running it);"
        " tell them."
    )


_FOR_HOST: dict[str, dict[Remedy, str]] = {
    "search": {
        Remedy.FIX_CONFIG: _RESTART,
        Remedy.READ_SKILL: " Use search_tools to find the tool's exact server and name.",
        Remedy.READ_SCHEMA: " Call describe_tools for its inputSchema and pass arguments that match it exactly.",
    },
    "extension": {
        Remedy.FIX_CONFIG: _RESTART,
        Remedy.READ_SKILL: " Read resource:///tool_descriptions?tools=NAME for the tools you want to use.",
        Remedy.READ_SCHEMA: (
            " Read resource:///tool_descriptions?tools=NAME for its inputSchema and pass arguments"
            " that match it exactly."
        ),
    },
}


def reconnect_words(retry_in: float) -> str:
    """The remedy of a server that went away, for the host's model: keen serve reconnects it
    on a later call, ``retry_in`` seconds from now at the earliest."""
    when = (
        "on the next call to it"
        if retry_in <= 0
        else f"on a call made {max(1, round(retry_in))} s from now or later"
    )
    return (
        f" keen serve reconnects this server {when} (it never repeats a failed call by itself)."
        " If this keeps happening, the user has to fix the server; tell them."
    )


_NOT_CONNECTED = (ServerDisconnected, AuthRequired, AuthFailed)
"""The errors of a server that is not connected (``keen.mcp.calls.send.not_connected``)."""
_MAX_WITHHELD = 1000
"""Distinct withheld messages logged once each (past that, the record starts again)."""


class Withheld:
    """keen serve's log of what no host is shown (about the local setup: paths, the config,
    a server's stderr), for whoever runs it: each distinct text once per served process
    (one per :class:`keen.serve.KeenServer`)."""

    def __init__(self) -> None:
        self._seen: set[str] = set()

    def __call__(self, message: str) -> None:
        """Log ``message`` unless this server logged the same text already."""
        if message not in self._seen:
            if len(self._seen) >= _MAX_WITHHELD:
                self._seen.clear()
            self._seen.add(message)
            logger.warning("%s (MCP hosts are told only the server's name and what is wrong)", message)


def host_remedy_words(
    mode: str, retry_in: Callable[[str], float] | None = None, withheld: Withheld | None = None
) -> Callable[[KeenError, str], str]:
    """How ``keen serve`` in ``mode`` words an error and its remedy for the host's model;
    ``retry_in(server)`` says when the next reconnect attempt of a server may start.

    The host may be remote and is not trusted with the machine keen serve runs on: what an
    error says of the local setup reaches it as the server's name and what is wrong, never
    the text itself, which names local paths (the configs.json file, a stdio command), the
    config's fields and variables, a URL, or the server's stderr. That is a server's invalid
    configs.json entry (``ServerMisconfigured``), a file of the local setup that cannot be read
    (``ConfigError``: a pin file or its folder), a server not in configs.json, and the last
    error of a server that is not connected (after ``LAST_ERROR``). keen serve's own log
    (stderr, for whoever runs it) gets each such text whole, once (``withheld``; a log of
    its own when None).
    """
    words = _FOR_HOST.get(mode, _FOR_HOST["search"])
    if withheld is None:
        withheld = Withheld()

    def word(exc: KeenError, server: str) -> str:
        name = shorten(server, 65)
        if isinstance(exc, ServerNotConfigured):
            # Its message gives the local configs.json path (for a person at this machine):
            # nothing a remote host's model can use, and not the host's business.
            return f'MCP server "{name}" is not configured in keen serve.' + words[Remedy.READ_SKILL]
        if isinstance(exc, ServerMisconfigured):
            withheld(exc.message)
            return (
                f'MCP server "{name}" cannot be used: its entry in the configs.json keen serve was started '
                "with is invalid (keen serve's log says what is wrong)." + _RESTART
            )
        if isinstance(exc, ConfigError):
            # A file of the local setup (a pin file, or its folder) cannot be read: its
            # message names the file's path.
            withheld(exc.message)
            return (
                f'MCP server "{name}" cannot be used: keen serve cannot read its local setup for it '
                "(keen serve's log says what is wrong)." + _FIX_LOCAL
            )
        if isinstance(exc, _NOT_CONNECTED) and LAST_ERROR in exc.message:
            withheld(exc.message)
            summary = exc.message.partition(LAST_ERROR)[0].rstrip().removesuffix(".")
            exc = type(exc)(
                f"{summary} (keen serve's log says why).", server=exc.server, tool=exc.tool, remedy=exc.remedy
            )
        if exc.remedy is Remedy.RECONNECT:
            if isinstance(exc, ServerDisconnected):
                return closed(exc.message) + reconnect_words(retry_in(server) if retry_in else 0.0)
            return closed(exc.message) + _RESTART  # rejected credentials: configs.json needs the user
        if exc.remedy is Remedy.ENABLE_SERVER:
            return closed(exc.message) + _enable(server)
        if exc.remedy is not None and exc.remedy in words:
            return closed(exc.message) + words[exc.remedy]
        return for_model(exc, server)

    return word


HOST_APPROVES = Approver(allow_all, APPROVER)
"""Who is asked about a served call: the host, which sent tools/call after asking its own
user (keen serve does not ask again); given with each call."""


class CallRouter:
    """Run remote callers' tool calls through one harness, audited in one log.

    The harness is the session runtime's (:meth:`keen.runtime.Runtime.harness`, over its
    gateway), made when ``keen serve`` opens the runtime (:meth:`open`).

    Args:
        catalog: returns the served capability catalog (cached by the caller; called per call).
        visibility: decides, per capability and caller, whether the caller may use it.
        audit_path: the event log's file.
        look: looks at a server's pin file before a call to it (then ``catalog`` need not):
            the harness's ``look``, asked inside the call's one look at the pins.
        max_result_chars: longer result text is cut with a note (the harness's truncation).
        mode: the served surface (``search`` or ``extension``): errors point the host's model
            at its tools for names and schemas.
        retry_in: seconds until a server's next reconnect attempt (worded into its errors).
        withheld: keen serve's log of what the host's words leave out (:class:`Withheld`).
    """

    def __init__(
        self,
        catalog: Callable[[], Catalog],
        visibility: Visibility,
        audit_path: Path,
        *,
        look: Callable[[str], object] | None = None,
        max_result_chars: int = DEFAULT_MAX_RESULT_CHARS,
        mode: str = "search",
        retry_in: Callable[[str], float] | None = None,
        withheld: Withheld | None = None,
    ) -> None:
        self.catalog, self.visibility, self.look, self.audit_path = catalog, visibility, look, audit_path
        self.max_result_chars = max_result_chars
        self.remedy_words = host_remedy_words(mode, retry_in, withheld)
        self._harness: Harness | None = None

    def open(self, runtime: Runtime) -> None:
        """Make the harness over ``runtime`` (its gateway); its event log starts here."""
        self._harness = runtime.harness(
            mode="ask",
            workspace=Path.cwd(),
            catalog=self.catalog,
            max_result_chars=self.max_result_chars,
            visibility=self.visibility,
            log_path=self.audit_path,
            remedy_words=self.remedy_words,
            look=self.look,
        )

    @property
    def harness(self) -> Harness:
        """The harness every served call goes through.

        Raises:
            RuntimeError: the runtime is not open (``async with`` the server first).
        """
        if self._harness is None:
            raise RuntimeError("keen serve's runtime is not open: enter the KeenServer first")
        return self._harness

    def call(
        self,
        server: str,
        tool: str,
        arguments: Any,
        *,
        caller: str,
        progress: ProgressFnT | None = None,
        peer: CallPeer | None = None,
    ) -> Coroutine[Any, Any, Observation]:
        """One call through the pipeline (await it); refusals and failures are observations,
        never raised.

        ``progress`` gets the upstream server's progress notifications for the call (the
        host's own progress token is the caller's to put on them); ``peer`` gets what the
        upstream asks and logs during it (:mod:`keen.serve.relay`)."""
        # :meth:`call_input`'s coroutine itself, not one awaiting it: a coroutine less to
        # resume at every step of the call.
        wanted = {"server": server, "tool": tool, "arguments": arguments}
        return self.call_input(wanted, caller=caller, progress=progress, peer=peer)

    async def call_input(
        self,
        call_input: Any,
        *,
        caller: str,
        progress: ProgressFnT | None = None,
        peer: CallPeer | None = None,
    ) -> Observation:
        """:meth:`call` for ``call_mcp_tool``'s input as the host sent it: the pipeline's
        validate stage parses it, so input that is not a call is refused and audited like
        any other refusal (docs/architecture.md, "One pipeline")."""
        # The harness and the gateway know nothing of either: the Manager reads them here.
        # Each is set only when the context does not hold that value already (a call without
        # progress or a peer, in a context without them): a set and its reset copy the
        # context's mapping, and the call sees the same value either way.
        token = CALL_PROGRESS.set(progress) if CALL_PROGRESS.get() is not progress else None
        peer_token = CALL_PEER.set(peer) if CALL_PEER.get() is not peer else None
        try:
            # The called server's pin file is looked at once for the whole call (its catalog
            # lookup, checks and pin check), by the harness (its ``look``): a trust given in
            # another process counts now.
            harness = self._harness if self._harness is not None else self.harness  # (raises)
            return await harness.call(CALL_MCP_TOOL, call_input, caller=caller, approver=HOST_APPROVES)
        finally:
            if peer_token is not None:
                CALL_PEER.reset(peer_token)
            if token is not None:
                CALL_PROGRESS.reset(token)

    def close(self) -> None:
        if self._harness is not None:
            self._harness.close()


def call_result(obs: Observation) -> mt.CallToolResult:
    """The MCP result for an observation: the upstream result as sent when the harness left it
    unchanged; otherwise the text the harness made (cut, or rewritten by a post-hook); a
    refusal or Keen-side failure as an ``isError`` result whose JSON says the code and what to do."""
    if obs.raw is not None:
        return mt.CallToolResult.model_validate(
            {
                "content": obs.raw.content,
                "structuredContent": obs.raw.structured_content,
                "isError": obs.raw.is_error,
            }
        )
    if obs.is_error and obs.code is not None:
        return error_result({"error": {"code": obs.code, "message": obs.text}})
    return mt.CallToolResult(content=[mt.TextContent(type="text", text=obs.text)], is_error=obs.is_error)


def error_result(body: dict[str, Any]) -> mt.CallToolResult:
    """An ``isError`` result carrying ``body`` as JSON text and as structured content."""
    return mt.CallToolResult(
        content=[mt.TextContent(type="text", text=json.dumps(body, ensure_ascii=False))],
        structured_content=body,
        is_error=True,
    )
