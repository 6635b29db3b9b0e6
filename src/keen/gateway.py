"""``call_mcp_tool``'s execute stage: the gateway every MCP call goes out through.

Generated skills and schema files are discovery material only; they grant nothing
(docs/architecture.md "The data flow of one call"). Every call, from any front end, passes
the one pipeline of :mod:`keen.calls`; the gateway is its ``execute`` stage
(:meth:`Gateway.execute`: ``tools/call`` on the server, once trust on first use pinned a
never-pinned server's tools) and the library's entry to it. :meth:`Gateway.call` runs

1. ``mcp_checks``: the server configured, not ``"enabled": false``, connected; the tool in
   its latest tools/list; the arguments valid against the cached inputSchema (Draft
   2020-12 unless ``$schema``): ``Manager.check_call``, once,
2. ``pin_check``: the tool's definition is the pinned one, under the server's pinning policy
   (:mod:`keen.trust.pins`: a new, renamed or changed tool of a pinned server is refused with the diff;
   no such stage, and nothing pinned, over a Manager given ``trust=None``),
3. ``permission``: the call's approval (an argument of the call; by default the Gateway's)
   sees server, tool and JSON arguments and says yes; without one, only tools annotated
   ``readOnlyHint`` by a server trusted for its annotations run (safe by default: pass
   ``approval=allow_all`` to a Gateway whose host approves calls elsewhere). The first
   approved call of a never-pinned server pins its tools: trust on first use,
4. ``execute`` (``tools/call``), then ``audit``.

A disabled *skill* only hides the server from the catalog; its tools stay callable
while it is connected (docs/architecture.md "Enabling and disabling"). Remote ``isError`` results come back
as results. Each call is audited: the optional ``audit`` callback receives one event
dict per call (arguments redacted).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from keen._text import closed
from keen.calls import (
    DEFAULT_MAX_RESULT_CHARS,
    Approval,
    ApprovalRequest,
    Approve,
    Approver,
    Call,
    CheckCall,
    PinCheck,
    Pipeline,
    Stage,
    allow_all,
    allow_read_only,
    audit_record,
    result_text,
    shape,
)
from keen.entry_tools import CALL_TOOL, call_tool_definition, parse_call
from keen.errors import InvalidArguments, KeenError, Remedy
from keen.mcp.types import ToolResult

if TYPE_CHECKING:
    # Typing only: ``tool_definition`` must be importable (by the CLI's ``keen prompt``)
    # without loading the MCP SDK that the Manager needs.
    from keen.mcp.manager import Manager
    from keen.trust.pins import PinGuard

__all__ = [
    "CALL_MCP_TOOL",
    "DEFAULT_MAX_RESULT_CHARS",
    "Approval",
    "ApprovalRequest",
    "Gateway",
    "GatewayResult",
    "allow_all",
    "allow_read_only",
    "for_model",
    "result_text",
    "tool_definition",
]

logger = logging.getLogger(__name__)

CALL_MCP_TOOL = CALL_TOOL
"""``call_mcp_tool``: the call tool's one name (:mod:`keen.entry_tools`)."""

tool_definition = call_tool_definition
"""The ``call_mcp_tool`` definition for an LLM API or MCP: :func:`keen.entry_tools.call_tool_definition`,
kept under the name library callers know."""

_DEFAULT: Any = object()
"""``approval`` not given to a call: the Gateway's own."""

# How the gateway words a remedy for a model (the front ends word it for a person).
_FOR_MODEL: dict[Remedy | None, str] = {
    Remedy.READ_SKILL: " Read the mcp:{server} skill's SKILL.md for the tool names.",
    Remedy.READ_SCHEMA: " Read the tool's schema file and pass arguments that match its inputSchema exactly.",
    Remedy.SIGN_IN: " The user has to sign in to this server again; tell them.",
    Remedy.RECONNECT: " The user has to fix and reconnect this server; tell them.",
    # Where (configs.json, or the config a library gave its Manager) is the message's to say.
    Remedy.ENABLE_SERVER: " The user has to enable this server where the message says; tell them.",
    Remedy.FIX_CONFIG: " The user has to fix this server's entry as the message says; tell them.",
}


def for_model(exc: KeenError, server: str) -> str:
    """``exc``'s message and what the model can do about it (its remedy), worded for a model.

    Args:
        exc: the error a call met (a check before it, or the call itself).
        server: the server the call named (fills the remedy's wording).

    Returns:
        One line of text; the remedy part is empty when the error has none or the model can
        do nothing about it.
    """
    remedy = _FOR_MODEL.get(exc.remedy, "").format(server=server)
    # The message may end with a server's own text (its last stderr line): close it.
    return closed(exc.message) + remedy if remedy else exc.message


def _unnamed(server: Any, tool: Any) -> InvalidArguments | None:
    """The error of a call whose ``server`` or ``tool`` is no name (``None``, a number: a
    model's ``arguments.get("server")`` passed on), else None. Without it every stage took
    the call for no MCP call, and the caller met a bare ``AssertionError``."""
    if isinstance(server, str) and server and isinstance(tool, str) and tool:
        return None
    got = ", ".join(
        f"{what} {'empty' if value == '' else f'a {type(value).__name__}'}"
        for what, value in (("server", server), ("tool", tool))
        if not (isinstance(value, str) and value)
    )
    return InvalidArguments(
        f"a call names its server and tool by their names (non-empty strings), got {got}; "
        'pass the names call_mcp_tool gives ({"server": "<name>", "tool": "<name>"})',
        server=server if isinstance(server, str) else str(server),
        tool=tool if isinstance(tool, str) else str(tool),
        remedy=None,
    )


@dataclass(frozen=True, slots=True)
class GatewayResult:
    """A call's outcome shaped for a model: ``text`` is what to show it (already truncated);
    ``structured_content`` is there only when it fits the same limit. ``result`` keeps the
    whole ``ToolResult`` for library callers; :meth:`to_dict` never includes it."""

    server: str
    tool: str
    text: str
    is_error: bool = False
    structured_content: Any = None
    truncated_chars: int = 0
    result: ToolResult | None = None
    error_code: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "server": self.server,
            "tool": self.tool,
            "is_error": self.is_error,
            "text": self.text,
        }
        if self.structured_content is not None:
            out["structured_content"] = self.structured_content
        if self.truncated_chars:
            out["truncated_chars"] = self.truncated_chars
        if self.error_code:
            out["error_code"] = self.error_code
        return out


class Gateway:
    """``call_mcp_tool`` over a :class:`~keen.mcp.Manager`: the execute stage of the one
    pipeline (:mod:`keen.calls`), and the library's way to run a call through it.

    Args:
        manager: a started Manager.
        approval: asked before every call that passed the checks, unless the call brings its
            own. ``None`` (the default) allows only tools annotated ``readOnlyHint`` by a
            server trusted for its annotations (:attr:`ApprovalRequest.read_only`) and
            refuses any other call with ``ApprovalDenied``; :func:`allow_all` allows every
            call (a host that approves calls itself).
        audit: receives one event dict per call: ``ts, server, tool, arguments`` (redacted),
            ``decision`` (allowed|denied|refused, or cancelled when the caller was cancelled
            before it), ``outcome`` (ok|tool_error|error|cancelled), ``error_code``
            (``cancelled`` for a cancelled call), ``duration_ms``.
        max_result_chars: text longer than this is cut, with a note saying how much.
        pins: the pin check. By default the Manager's own guard when it is a
            :class:`~keen.trust.pins.PinGuard`; none for a Manager given ``trust=None``
            (tools called as listed, nothing pinned or written, as its listing shows them);
            otherwise pins under ``$KEEN_HOME/mcp/pins``.
    """

    def __init__(
        self,
        manager: Manager,
        *,
        approval: Approval | None = None,
        audit: Callable[[dict[str, Any]], None] | None = None,
        max_result_chars: int = DEFAULT_MAX_RESULT_CHARS,
        pins: PinGuard | None = None,
    ) -> None:
        self.manager = manager
        if pins is None and manager.trust is not None:
            from keen.trust.pins import PinGuard

            # The Manager's own guard when it has one: one in-memory view of the pins per
            # session, so what the listing showed is what the call is checked against.
            trust = manager.trust
            pins = trust if isinstance(trust, PinGuard) else PinGuard()
        # None: the Manager shows the tools as listed (trust=None), so the calls go as listed
        # too; a guard here would check them against, and pin into, the user's own pins.
        self.pins: PinGuard | None = pins
        self.approval = approval
        self.audit = audit
        self.max_result_chars = max_result_chars
        self._pipelines: dict[bool, tuple[Manager, PinGuard | None, Pipeline]] = {}
        """Shaped or not -> the Manager and guard its pipeline was made for, and that pipeline
        (:meth:`_pipeline`)."""

    # -- the stages the gateway gives the pipeline --------------------------------------------

    def checks(self) -> list[Stage]:
        """``mcp_checks`` and ``pin_check`` (none without :attr:`pins`): a refusal at either
        sends nothing."""
        stages = [Stage("mcp_checks", CheckCall(self.manager), gate="validate")]
        if self.pins is not None:
            stages.append(Stage("pin_check", PinCheck(self.manager, self.pins)))
        return stages

    async def execute(self, call: Call) -> bool:
        """The ``execute`` stage of an MCP call that passed every gate: pin a never-pinned
        server's tools (trust on first use follows an approved call), then ``tools/call``.
        Sets ``call.result``; a tool's own failure comes back as a result (``is_error``)."""
        if call.server is None or call.tool is None:
            return False
        server, tool = call.server, call.tool
        if self.pins is not None and not call.pinned:  # a pinned server has nothing to pin
            # What the pin check decided; without that stage, the same guard's policy.
            policy, tools = call.pinning or (
                self.pins.policy(self.manager.config.servers[server]),
                self.manager.live_tools(server),
            )
            self.pins.approved(server, tools, policy, self.manager.live_info(server))
        result = await self.manager.call_tool(server, tool, call.arguments, validate=False)
        call.result, call.is_error = result, result.is_error
        call.code = "tool_error" if result.is_error else None
        return True

    def record(self, call: Call) -> None:
        """The ``audit`` stage's record of an MCP call, to the ``audit`` callback."""
        if logger.isEnabledFor(logging.DEBUG):  # every call passes here: no arguments made for nothing
            logger.debug("call_mcp_tool %s/%s: %s", call.server, call.tool, call.outcome)
        if self.audit is not None:
            self.audit(audit_record(call))

    def _pipeline(self, *, shaped: bool) -> Pipeline:
        """The library's pipeline, made once per Gateway (and again should ``manager`` or
        ``pins`` be set to another): its stages hold nothing of one call, and the pin check
        keeps a tool's last quiet pass for the next call (:class:`keen.calls.PinCheck`), which
        a pipeline made per call would lose at every call."""
        kept = self._pipelines.get(shaped)
        if kept is not None and kept[0] is self.manager and kept[1] is self.pins:
            return kept[2]
        stages = [*self.checks(), Stage("permission", Approve(self.manager)), Stage("execute", self.execute)]
        if shaped:
            stages.append(Stage("truncate", self._truncate))
        pipeline = Pipeline(stages, self.record)
        self._pipelines[shaped] = (self.manager, self.pins, pipeline)
        return pipeline

    def _truncate(self, call: Call) -> bool:
        if call.result is None:
            return False
        shaped = shape(call.result, self.max_result_chars)
        call.text, call.structured, call.truncated_chars = shaped.text, shaped.structured, shaped.cut
        return True

    # -- the library's calls ----------------------------------------------------------------

    async def call(
        self, server: str, tool: str, arguments: Any = None, *, approval: Approval | None = _DEFAULT
    ) -> ToolResult:
        """Check, ask, then run one call (docs/architecture.md "The data flow of one call").

        Args:
            server: the server's name in configs.json.
            tool: the tool's name in its latest tools/list.
            arguments: a JSON object (``None``: ``{}``), validated against the inputSchema.
            approval: who is asked about this call (default: the Gateway's ``approval``).

        Returns:
            The raw result; a tool's own failure comes back with ``is_error`` set.

        Raises:
            ServerNotConfigured, ServerDisabled, ServerDisconnected, AuthRequired,
            AuthFailed, ToolNotFound, InvalidArguments: a check failed (nothing was sent);
                ``InvalidArguments`` too for a ``server`` or ``tool`` that is no name.
            ToolQuarantined: the tool is new, renamed or changed since it was pinned (nothing was sent).
            ApprovalDenied: the approval callback said no (nothing was sent).
            CallTimeout, ServerDisconnected, RemoteProtocolError: the call failed.
            ToolNotFound, ToolChanged: the server refused the call as stale, and its tools/list,
            listed again, no longer has the tool or defines it otherwise (not resent).
        """
        if (unnamed := _unnamed(server, tool)) is not None:
            raise unnamed
        call = await self._pipeline(shaped=False).run(self._call(server, tool, arguments, approval))
        if call.error is not None:
            raise call.error
        assert call.result is not None
        return call.result

    async def call_for_model(
        self, server: str, tool: str, arguments: Any = None, *, approval: Approval | None = _DEFAULT
    ) -> GatewayResult:
        """Like :meth:`call`, shaped for a model: every failure becomes an ``is_error`` result.

        Returns:
            The shaped result (:meth:`shape`); for a Keen error, its message and what the
            model can do about it (the error's remedy), with ``error_code`` set. Never
            raises a ``KeenError``.
        """
        if (unnamed := _unnamed(server, tool)) is not None:
            return self._failure(unnamed, str(server), str(tool))
        call = await self._pipeline(shaped=True).run(self._call(server, tool, arguments, approval))
        if call.error is not None:
            return self._failure(call.error, server, tool)
        assert call.result is not None
        return GatewayResult(
            server=server,
            tool=tool,
            text=call.text,
            is_error=call.is_error,
            structured_content=call.structured,
            truncated_chars=call.truncated_chars,
            result=call.result,
        )

    async def handle_tool_call(self, raw: str | dict[str, Any]) -> GatewayResult:
        """Run a ``call_mcp_tool`` invocation as an LLM sends it.

        Args:
            raw: the tool call's input, as JSON text or a parsed dict with ``server``,
                ``tool`` and ``arguments`` (arguments sent as a JSON string are parsed too).

        Returns:
            The shaped result; malformed input is an ``is_error`` result saying the shape.
        """
        try:
            parsed = parse_call(raw)
        except ValueError as exc:
            return GatewayResult(
                server="", tool="", is_error=True, error_code="invalid_arguments", text=f"Error: {exc}"
            )
        return await self.call_for_model(parsed.server, parsed.tool, parsed.arguments)

    def shape(self, result: ToolResult) -> GatewayResult:
        """Text content joined; structured content kept (as JSON text when there is no text);
        text past ``max_result_chars`` cut with a note giving the number of characters cut
        (:func:`keen.calls.shape`, the pipeline's ``truncate``)."""
        shaped = shape(result, self.max_result_chars)
        return GatewayResult(
            server=result.server,
            tool=result.tool,
            text=shaped.text,
            is_error=result.is_error,
            structured_content=shaped.structured,
            truncated_chars=shaped.cut,
            result=result,
        )

    def _call(self, server: str, tool: str, arguments: Any, approval: Approval | None) -> Call:
        ask = self.approval if approval is _DEFAULT else approval
        arguments = {} if arguments is None else arguments
        return Call(CALL_MCP_TOOL, arguments, Approver(ask), server=server, tool=tool)

    def _failure(self, exc: KeenError, server: str, tool: str) -> GatewayResult:
        message = exc.message
        if len(message) > self.max_result_chars:  # it may quote a server's (unbounded) error
            message = message[: self.max_result_chars] + " [error message cut]"
        remedy = for_model(exc, server)[len(exc.message) :]
        return GatewayResult(
            server=server, tool=tool, text=f"Error: {message}{remedy}", is_error=True, error_code=exc.code
        )
