"""``call_mcp_tool``: the one privileged entry from a model or remote client to MCP.

Generated skills and schema files are discovery material only; they grant nothing
(docs/architecture.md "The data flow of one call"). Every call passes, in this order:

1. the server is configured and not ``"enabled": false`` in configs.json,
2. the server is connected,
3. the tool is in the server's latest tools/list,
4. the arguments validate against the cached inputSchema (Draft 2020-12 unless ``$schema``),
5. the tool's definition is the pinned one, under the server's pinning policy
   (:mod:`keen.mcp.pins`: a new or changed tool of a pinned server is refused with the diff),
6. the approval callback, which sees server, tool and JSON arguments, says yes; without
   one, only tools the server annotates ``readOnlyHint`` run (safe by default: pass
   ``approval=allow_all`` to a Gateway whose host approves calls elsewhere). The first
   approved call of a never-pinned server pins its tools: trust on first use,
7. then ``tools/call``.

A disabled *skill* only hides the server from the catalog; its tools stay callable
while it is connected (docs/architecture.md "Enabling and disabling"). Remote ``isError`` results come back
as results. Each call is audited: the optional ``audit`` callback receives one event
dict per call (arguments redacted).
"""

from __future__ import annotations

import contextlib
import inspect
import json
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import anyio

from keen import paths
from keen._redact import redactor
from keen.errors import ApprovalDenied, KeenError, Remedy
from keen.mcp.types import Tool, ToolResult
from keen.mcpskills._layout import SCHEMAS_DIR, schema_path, skill_md_path

if TYPE_CHECKING:
    # Typing only: ``tool_definition`` must be importable (by the CLI's ``keen prompt``)
    # without loading the MCP SDK that the Manager needs.
    from keen.mcp.config import HttpServerConfig, StdioServerConfig
    from keen.mcp.manager import Manager
    from keen.mcp.pins import PinGuard, PinningPolicy

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

CALL_MCP_TOOL = "call_mcp_tool"
DEFAULT_MAX_RESULT_CHARS = 40_000

# The skills layout comes from keen.mcpskills (its one definition); "<skills>" becomes the real
# directory in tool_definition().
_DESCRIPTION = (
    "Call a tool on a connected MCP server. Before the first call to a server, read its skill file "
    f"{skill_md_path('<skills>', '<server>')} to find the tool, then read the tool's schema file "
    f"{schema_path('<skills>', '<server>', '<tool>')} and pass arguments that match its inputSchema "
    "exactly. The server and tool names are the ones listed in SKILL.md."
)

# How the gateway words a remedy for a model (the front ends word it for a person).
_FOR_MODEL: dict[Remedy | None, str] = {
    Remedy.READ_SKILL: " Read the mcp:{server} skill's SKILL.md for the tool names.",
    Remedy.READ_SCHEMA: " Read the tool's schema file and pass arguments that match its inputSchema exactly.",
    Remedy.SIGN_IN: " The user has to sign in to this server again; tell them.",
    Remedy.RECONNECT: " The user has to fix and reconnect this server; tell them.",
    Remedy.ENABLE_SERVER: " The user has to enable this server in configs.json.",
    Remedy.FIX_CONFIG: " The user has to fix this server's entry in configs.json; tell them.",
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
    if remedy and not exc.message.rstrip().endswith((".", "!", "?")):
        # The message may end with a server's own text (its last stderr line): close it.
        remedy = "." + remedy
    return exc.message + remedy


_INPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "server": {
            "type": "string",
            "description": "MCP server name, e.g. github (the skill is mcp:<server>)",
        },
        "tool": {"type": "string", "description": "Tool name exactly as listed in the server's SKILL.md"},
        "arguments": {
            "type": "object",
            "description": f"Arguments matching the tool's inputSchema from {SCHEMAS_DIR}/<tool>.json",
            "additionalProperties": True,
        },
    },
    "required": ["server", "tool", "arguments"],
    "additionalProperties": False,
}


def tool_definition(style: str = "openai", *, skills_dir: str | None = None) -> dict[str, Any]:
    """The ``call_mcp_tool`` definition for an LLM API.

    Args:
        style: ``"openai"`` (Chat Completions ``{"type": "function", "function": {...}}``),
            ``"anthropic"`` (``{"name", "description", "input_schema"}``) or ``"mcp"``
            (``{"name", "description", "inputSchema"}``, MCP 2025-11-25 "Tools").
        skills_dir: the skills directory the description tells the model to read
            (``<skills>/mcp:<server>/SKILL.md``); default ``$KEEN_HOME/skills``, where the
            sync writes them.

    Returns:
        A new dict each call (safe to modify).

    Raises:
        ValueError: another style.
    """
    description = _DESCRIPTION.replace("<skills>", skills_dir or str(paths.skills_dir()))
    schema = json.loads(json.dumps(_INPUT_SCHEMA))
    if style == "openai":
        return {
            "type": "function",
            "function": {"name": CALL_MCP_TOOL, "description": description, "parameters": schema},
        }
    if style == "anthropic":
        return {"name": CALL_MCP_TOOL, "description": description, "input_schema": schema}
    if style == "mcp":
        return {"name": CALL_MCP_TOOL, "description": description, "inputSchema": schema}
    raise ValueError(f"unknown tool definition style {style!r}; use openai, anthropic or mcp")


@dataclass(frozen=True, slots=True)
class ApprovalRequest:
    """What the approval callback sees: the call and what the server says of the tool."""

    server: str
    tool: str
    arguments: dict[str, Any]
    description: str = ""
    annotations: dict[str, Any] | None = None
    annotations_trusted: bool = False
    """The server's annotations are taken as true (``keen.mcp.types.Tool.annotations_trusted``)."""

    @property
    def read_only(self) -> bool:
        """True when a server whose annotations are trusted marks the tool ``readOnlyHint``
        (from any other server the hint is a claim: it grants nothing)."""
        return self.annotations_trusted and bool((self.annotations or {}).get("readOnlyHint"))

    def arguments_json(self) -> str:
        return redactor.redact(json.dumps(self.arguments, indent=2, ensure_ascii=False))


Approval = Callable[[ApprovalRequest], bool | Awaitable[bool]]
"""Returns (or resolves to) True to allow the call. Exceptions count as a denial."""


def allow_all(request: ApprovalRequest) -> bool:
    """An :data:`Approval` that allows every call, for a host that approves calls itself."""
    return True


def allow_read_only(request: ApprovalRequest) -> bool:
    """An :data:`Approval` that allows the tools annotated ``readOnlyHint`` (the default)."""
    return request.read_only


def pinning_policy(server: HttpServerConfig | StdioServerConfig) -> PinningPolicy:
    """:func:`keen.mcp.pins.pinning_policy`, imported on the first call: ``keen prompt`` and
    the library's budgeted prompt import this module for :func:`tool_definition` alone, and
    the pins module loads the config models (pydantic) with it."""
    from keen.mcp.pins import pinning_policy as policy

    return policy(server)


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
    """``call_mcp_tool`` over a :class:`~keen.mcp.Manager`.

    Args:
        manager: a started Manager.
        approval: asked before every call that passed the checks. ``None`` (the default)
            allows only tools annotated ``readOnlyHint`` and refuses any other call with
            ``ApprovalDenied``; :func:`allow_all` allows every call (a host that approves
            calls itself).
        audit: receives one event dict per call: ``ts, server, tool, arguments`` (redacted),
            ``decision`` (allowed|denied|refused, or cancelled when the caller was cancelled
            before it), ``outcome`` (ok|tool_error|error|cancelled), ``error_code``
            (``cancelled`` for a cancelled call), ``duration_ms``.
        max_result_chars: text longer than this is cut, with a note saying how much.
        pins: the pin check (default: pins under ``$KEEN_HOME/mcp/pins``).
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
        pins = pins or getattr(manager, "pins", None)
        if pins is None:
            from keen.mcp.pins import PinGuard

            pins = PinGuard()
        self.pins = pins
        self.approval = approval
        self.audit = audit
        self.max_result_chars = max_result_chars

    async def call(self, server: str, tool: str, arguments: Any = None) -> ToolResult:
        """Check, ask, then run one call (docs/architecture.md "The data flow of one call").

        Args:
            server: the server's name in configs.json.
            tool: the tool's name in its latest tools/list.
            arguments: a JSON object (``None``: ``{}``), validated against the inputSchema.

        Returns:
            The raw result; a tool's own failure comes back with ``is_error`` set.

        Raises:
            ServerNotConfigured, ServerDisabled, ServerDisconnected, AuthRequired,
            AuthFailed, ToolNotFound, InvalidArguments: a check failed (nothing was sent).
            ToolQuarantined: the tool is new or changed since it was pinned (nothing was sent).
            ApprovalDenied: the approval callback said no (nothing was sent).
            CallTimeout, ServerDisconnected, RemoteProtocolError: the call failed.
            ToolNotFound, ToolChanged: the server refused the call as stale, and its tools/list,
            listed again, no longer has the tool or defines it otherwise (not resent).
        """
        started = time.perf_counter()
        arguments = {} if arguments is None else arguments
        event: dict[str, Any] = {
            "ts": datetime.now(UTC).isoformat(),
            "server": server,
            "tool": tool,
            "arguments": _redacted(arguments),
        }
        try:
            found = self.manager.check_call(server, tool, arguments)
            policy = pinning_policy(self.manager.config.servers[server])
            tools = self.manager.live_tools(server)
            pin = self.pins.enforce(server, tool, tools, policy)  # ToolQuarantined
            if pin is not None and pin.status != "trusted":
                event["pin"] = pin.status
            # Asked with the tool as a model was shown it: annotations at the stricter of
            # pinned and live, and a readOnlyHint a server is not trusted for is no grant.
            shown = next((t for t in self.manager.list_tools(server) if t.name == tool), None)
            await self._ask(shown or replace(found, annotations_trusted=False), server, tool, arguments)
            self.pins.approved(server, tools, policy)
            event["decision"] = "allowed"
            result = await self.manager.call_tool(server, tool, arguments, validate=False)
        except KeenError as exc:
            event.setdefault("decision", "denied" if isinstance(exc, ApprovalDenied) else "refused")
            event.update(outcome="error", error_code=exc.code, error=exc.message)
            self._emit(event, started)
            raise
        except anyio.get_cancelled_exc_class():
            # Audited before the cancellation goes on: a call with no event reads as never made.
            event.setdefault("decision", "cancelled")
            event.update(outcome="cancelled", error_code="cancelled")
            self._emit(event, started)
            raise
        event.update(outcome="tool_error" if result.is_error else "ok")
        self._emit(event, started)
        return result

    async def call_for_model(self, server: str, tool: str, arguments: Any = None) -> GatewayResult:
        """Like :meth:`call`, shaped for a model: every failure becomes an ``is_error`` result.

        Returns:
            The shaped result (:meth:`shape`); for a Keen error, its message and what the
            model can do about it (the error's remedy), with ``error_code`` set. Never
            raises a ``KeenError``.
        """
        try:
            result = await self.call(server, tool, arguments)
        except KeenError as exc:
            message = exc.message
            if len(message) > self.max_result_chars:  # it may quote a server's (unbounded) error
                message = message[: self.max_result_chars] + " [error message cut]"
            remedy = for_model(exc, server)[len(exc.message) :]
            return GatewayResult(
                server=server,
                tool=tool,
                text=f"Error: {message}{remedy}",
                is_error=True,
                error_code=exc.code,
            )
        return self.shape(result)

    async def handle_tool_call(self, raw: str | dict[str, Any]) -> GatewayResult:
        """Run a ``call_mcp_tool`` invocation as an LLM sends it.

        Args:
            raw: the tool call's input, as JSON text or a parsed dict with ``server``,
                ``tool`` and ``arguments`` (arguments sent as a JSON string are parsed too).

        Returns:
            The shaped result; malformed input is an ``is_error`` result saying the shape.
        """
        try:
            data = json.loads(raw) if isinstance(raw, str) else raw
        except json.JSONDecodeError as exc:
            return GatewayResult(
                server="",
                tool="",
                is_error=True,
                error_code="invalid_arguments",
                text=f"Error: call_mcp_tool input is not valid JSON ({exc.msg}); send "
                '{"server": ..., "tool": ..., "arguments": {...}}',
            )
        if (
            not isinstance(data, dict)
            or not isinstance(data.get("server"), str)
            or not isinstance(data.get("tool"), str)
        ):
            return GatewayResult(
                server="",
                tool="",
                is_error=True,
                error_code="invalid_arguments",
                text='Error: call_mcp_tool needs {"server": "<name>", "tool": "<name>", "arguments": {...}}',
            )
        arguments = data.get("arguments", {})
        if isinstance(arguments, str):
            # Some models send the arguments object as a JSON string.
            with contextlib.suppress(json.JSONDecodeError):
                arguments = json.loads(arguments)
        return await self.call_for_model(data["server"], data["tool"], arguments)

    def shape(self, result: ToolResult) -> GatewayResult:
        """Text content joined; structured content kept (as JSON text when there is no text);
        text past ``max_result_chars`` cut with a note giving the number of characters cut.

        The limit holds for everything :meth:`GatewayResult.to_dict` carries to a model:
        ``structured_content`` is kept only while its JSON fits beside the text, else it is
        left out with a note (the text, or its JSON cut to the limit, stands for it)."""
        text = result_text(result)
        structured = result.structured_content
        structured_json = "" if structured is None else json.dumps(structured, ensure_ascii=False)
        cut = 0
        if len(text) > self.max_result_chars:
            cut = len(text) - self.max_result_chars
            text = (
                text[: self.max_result_chars]
                + f"\n[truncated: {cut} of {cut + self.max_result_chars} characters cut; ask for less, "
                "e.g. with a narrower query or pagination arguments]"
            )
        if structured is not None and len(text) + len(structured_json) > self.max_result_chars:
            structured = None
            if result.text:
                text += (
                    f"\n[structuredContent left out: its {len(structured_json)} characters of JSON would pass "
                    f"the {self.max_result_chars}-character limit; the text above carries the result]"
                )
        if result.is_error:
            text = f"The tool reported an error: {text}" if text else "The tool reported an error."
        return GatewayResult(
            server=result.server,
            tool=result.tool,
            text=text,
            is_error=result.is_error,
            structured_content=structured,
            truncated_chars=cut,
            result=result,
        )

    async def _ask(self, found: Tool, server: str, tool: str, arguments: dict[str, Any]) -> None:
        request = ApprovalRequest(
            server=server,
            tool=tool,
            arguments=arguments,
            description=found.description,
            annotations=found.annotations,
            annotations_trusted=found.annotations_trusted,
        )
        if self.approval is None:
            if request.read_only:
                return
            raise ApprovalDenied(
                f'the call to "{server}/{tool}" was refused, so nothing was sent: without an approval '
                "callback only tools annotated readOnlyHint run; pass approval= to the Gateway "
                "(or open_runtime) to decide, e.g. approval=keen.gateway.allow_all",
                server=server,
                tool=tool,
            )
        try:
            verdict = self.approval(request)
            if inspect.isawaitable(verdict):
                verdict = await verdict
        except Exception as exc:
            logger.warning("approval callback failed for %s/%s: %r; treating as denied", server, tool, exc)
            verdict = False
        if not verdict:
            raise ApprovalDenied(
                f'the call to "{server}/{tool}" was not approved, so nothing was sent; ask the user, or try '
                "another approach",
                server=server,
                tool=tool,
            )

    def _emit(self, event: dict[str, Any], started: float) -> None:
        event["duration_ms"] = round((time.perf_counter() - started) * 1000, 3)
        logger.debug("call_mcp_tool %s/%s: %s", event["server"], event["tool"], event.get("outcome"))
        if self.audit is not None:
            try:
                self.audit(event)
            except Exception:
                logger.exception("audit sink failed")


def result_text(result: ToolResult, *, indent: int | None = None) -> str:
    """A result's text content joined, or its ``structuredContent`` as JSON when it has no text.

    Args:
        result: the tool's result.
        indent: JSON indentation for structured content (``None``: compact, for a model).

    Returns:
        The text ("" when the result has neither).
    """
    text = result.text
    if not text and result.structured_content is not None:
        text = json.dumps(result.structured_content, indent=indent, ensure_ascii=False)
    return text


def _redacted(arguments: Any) -> Any:
    try:
        return json.loads(redactor.redact(json.dumps(arguments, ensure_ascii=False)))
    except (TypeError, ValueError):
        return redactor.redact(repr(arguments))
