"""One pipeline for every tool call: an ordered list of small stages, each with one job.

Every front end's calls (``keen mcp call``, ``keen chat``'s agent, ``keen serve``, a library
caller of :class:`keen.gateway.Gateway`) pass the stages of :data:`ORDER`, in that order
(docs/architecture.md "The data flow of one call"):

``validate``    the call's shape: ``call_mcp_tool``'s input parsed (:func:`keen.entry_tools.parse_call`),
                a local tool's arguments
``visibility``  the caller may see the capability (a harness's visible set, or keen serve's
                per-caller callback)
``mcp_checks``  :meth:`keen.mcp.Manager.check_call`, once per call: the server configured,
                enabled and connected, the tool listed, the arguments valid against its
                inputSchema (:class:`CheckCall`)
``pin_check``   the tool's definition is the pinned one (:class:`PinCheck`, ``keen.trust.pins``)
``permission``  who is asked, and how, is the call's own :class:`Approver`: an argument of the
                call, never a callback swapped into a shared object (:class:`Approve`, or the
                harness's permission modes)
``pre_hooks``   a harness's hooks, which may refuse
``execute``     send it: :meth:`keen.gateway.Gateway.execute` for MCP (``tools/call``), or a
                harness's local tools
``truncate``    :func:`shape`: the text cut with a note, ``structuredContent`` left out past
                the limit, a tool's own error said so, images, audio and blobs that are not
                what they claim (:func:`binary_fault`) noted
``post_hooks``  a harness's hooks, which may rewrite the result
``audit``       one record per call, a cancelled one too (:meth:`Pipeline.run` runs it last,
                whatever happened)

A front end builds its :class:`Pipeline` from the stages it has (a library call has no
visibility or hooks); the pipeline keeps them in :data:`ORDER`. A stage that raises a
:class:`~keen.errors.KeenError` stops the call: at a stage with a ``gate`` the call is
refused there (nothing was sent), at the others it failed.
"""

from __future__ import annotations

import binascii
import inspect
import json
import logging
import re
import time
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from types import FunctionType
from typing import TYPE_CHECKING, Any, NamedTuple

import anyio

from keen._json import encoder
from keen._redact import redactor
from keen._terminal import name_in_message
from keen.errors import ApprovalDenied, KeenError
from keen.mcp.types import Tool, ToolResult, media_type, named_type

if TYPE_CHECKING:
    from keen.mcp.manager import Manager
    from keen.trust.pins import PinGuard

__all__ = [
    "DEFAULT_MAX_RESULT_CHARS",
    "MAX_BINARY_BYTES",
    "ORDER",
    "Approval",
    "ApprovalRequest",
    "Approve",
    "Approver",
    "Call",
    "CheckCall",
    "PinCheck",
    "Pipeline",
    "Refusal",
    "Shaped",
    "Stage",
    "allow_all",
    "allow_read_only",
    "audit_record",
    "binary_fault",
    "blocks_fault",
    "cut_text",
    "fault_note",
    "result_text",
    "shape",
]

logger = logging.getLogger(__name__)

DEFAULT_MAX_RESULT_CHARS = 40_000

ORDER = (
    "validate",
    "visibility",
    "mcp_checks",
    "pin_check",
    "permission",
    "pre_hooks",
    "execute",
    "truncate",
    "post_hooks",
    "audit",
)
"""The stages of every call, in the order they run."""

_AFTER = frozenset({"truncate", "post_hooks"})
"""Stages that shape what a call brought back: they run after a failed execute too."""

_DEFAULT_HINT = "ask for less, e.g. with a narrower query or pagination arguments"

_json = encoder()
"""``json.dumps(..., ensure_ascii=False)`` with one encoder for every call (:mod:`keen._json`):
every call's structured result is measured with it."""


# -- who is asked, and how ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ApprovalRequest:
    """What an approval callback sees: the call and what the server says of the tool."""

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
"""Returns (or resolves to) True to allow the call, False to refuse it. Anything else (a
string such as ``"no"``, ``None``) and exceptions count as a denial by a broken callback."""


def allow_all(request: ApprovalRequest) -> bool:
    """An :data:`Approval` that allows every call, for a host that approves calls itself."""
    return True


def allow_read_only(request: ApprovalRequest) -> bool:
    """An :data:`Approval` that allows the tools annotated ``readOnlyHint`` by a server
    trusted for its annotations (:attr:`ApprovalRequest.read_only`; the default)."""
    return request.read_only


@dataclass(frozen=True, slots=True)
class Approver:
    """Who is asked about a call, and how: part of the call itself.

    Attributes:
        ask: the callback (``None``: nobody to ask).
        by: who answers it, as the audit records it (``user``, ``MCP host``, ``--yes``).
    """

    ask: Approval | None = None
    by: str = "user"

    async def asks(self, request: ApprovalRequest) -> tuple[bool, str | None]:
        """The callback's answer, and why a no was no answer at all (nobody to ask, a callback
        that raised, or one that returned anything but a Python bool, ``numpy.bool`` included:
        logged, and treated as no)."""
        if self.ask is None:
            return False, "approval needed and no one to ask (no approval callback)"
        try:
            verdict = self.ask(request)
            if inspect.isawaitable(verdict):
                verdict = await verdict
        except Exception as exc:
            logger.warning(
                "approval callback failed for %s/%s: %r; treating as denied",
                request.server,
                request.tool,
                exc,
            )
            return False, f"the approval callback failed ({type(exc).__name__}); treated as no"
        if not isinstance(verdict, bool):
            # Only True allows: a callback returning the user's answer as text ("no"), or
            # forgetting to return, must not have its truthiness taken for a yes.
            # Its module named: "of type bool, not True or False" read as nonsense for numpy's bool.
            cls = type(verdict)
            named = (
                cls.__qualname__ if cls.__module__ == "builtins" else f"{cls.__module__}.{cls.__qualname__}"
            )
            kind = "None" if verdict is None else f"a value of type {named}"
            logger.warning(
                "approval callback for %s/%s returned %s, not True or False (return a Python bool: "
                "bool(x)); treating as denied",
                request.server,
                request.tool,
                kind,
            )
            return (
                False,
                f"the approval callback returned {kind}, not True or False (it must return a Python "
                "bool: bool(x)); treated as no",
            )
        return verdict, None


# -- one call as it passes the stages -----------------------------------------------------------


@dataclass(slots=True)
class Call:
    """One tool call on its way through a :class:`Pipeline`.

    The stages read and fill it in: ``server``/``tool``/``arguments`` once ``validate`` parsed
    the input, ``found`` once ``mcp_checks`` found the tool, ``result`` once ``execute`` sent
    it, ``text``/``structured``/``truncated_chars`` once ``truncate`` shaped it.
    """

    name: str
    arguments: Any
    approver: Approver = field(default_factory=Approver)
    caller: str | None = None
    call_id: str = ""
    server: str | None = None
    tool: str | None = None
    capability: Any = None
    """What the gates judge: a harness's ``keen.capabilities.Capability``."""
    capability_id: str = ""
    found: Tool | None = None
    pin: str | None = None
    """The tool's pin status when it is not ``trusted`` (``warn`` lets a changed tool run)."""
    pinning: tuple[Any, Sequence[Tool]] | None = None
    """The server's pinning policy and the live tools the pin check compared: what the
    execute stage pins on the first approved call of a never-pinned server."""
    pinned: bool = False
    """The pin check compared the tool with the server's pins: the server is pinned, so the
    execute stage has nothing to pin on first use (and need not look at the pins again)."""
    decision: str | None = None
    """``allowed`` or ``denied`` once the permission stage decided."""
    declined: bool = False
    """The permission stage's no was the asked approver's own answer: not a policy's (the
    mode's), nor one of an approver that failed."""
    result: ToolResult | None = None
    text: str = ""
    is_error: bool = False
    code: str | None = None
    structured: Any = None
    truncated_chars: int = 0
    hint: str | None = None
    """How to get the rest of a cut result (a local tool says; the default asks for less)."""
    unchanged: bool = True
    """``result`` is still what the caller gets (nothing cut, left out or rewritten)."""
    shown: Any = None
    """What the front end made of the call, when a stage made it (a harness's post-hooks)."""
    denied: str | None = None
    """The gate that refused the call (nothing was sent), None when none did."""
    error: KeenError | None = None
    cancelled: bool = False
    stages: list[str] = field(default_factory=list)  # made in C: no Python frame per call
    started: float = field(default_factory=time.perf_counter)
    started_at: float = field(default_factory=time.time)
    """When the call began (seconds since the epoch); :attr:`at` is its text."""
    tool_call_id: str = ""
    """The model's id of the call (a chat model's tool call ``id``), when a model sent it:
    its ``result`` event names it, so a resumed chat gives each result to its own call
    (last of the fields: added after the others, it shifts no one's position)."""

    @property
    def mcp(self) -> bool:
        """The call goes to an MCP server's tool."""
        return self.server is not None and self.tool is not None

    @property
    def outcome(self) -> str:
        """``ok``, ``error``, ``denied`` or ``cancelled``."""
        if self.cancelled:
            return "cancelled"
        if self.denied:
            return "denied"
        return "error" if self.is_error else "ok"

    @property
    def at(self) -> str:
        """When the call began, ISO 8601 in UTC (formatted only when an audit record asks)."""
        return datetime.fromtimestamp(self.started_at, UTC).isoformat()

    def seconds(self) -> float:
        return time.perf_counter() - self.started


class Refusal(Exception):
    """A stage refuses the call at ``gate`` (nothing was sent): ``text`` says why, for the
    caller; ``code`` is machine-readable (``None``: the gate's own)."""

    def __init__(self, gate: str, text: str, code: str | None = None) -> None:
        super().__init__(text)
        self.gate, self.text, self.code = gate, text, code


@dataclass(frozen=True, slots=True)
class Stage:
    """One stage: its ``name`` (one of :data:`ORDER`), what it does, and the ``gate`` a Keen
    error raised in it refuses the call at (``None``: the call failed there).

    ``run`` returns ``False`` when the stage has nothing to do for this call (a local tool at
    ``mcp_checks``): the call is not recorded as having passed it. It may be a plain function
    (a stage that never waits: its answer is used as it is) or return an awaitable of that
    answer (a coroutine function, or a function that hands back a coroutine only for the
    calls that wait): every call passes every stage, and a coroutine made, started and
    finished for a stage that never waits is work for nothing. The pipeline tells the two
    apart by type: a ``bool`` or ``None`` is the answer, anything else is awaited, so a plain
    ``run`` returns exactly ``True``, ``False`` or ``None``."""

    name: str
    run: Callable[[Call], bool | Awaitable[bool | None] | None]
    gate: str | None = None


def _callable(run: Callable[[Call], Any]) -> Callable[[Call], Any]:
    """``run`` itself, or the bound ``__call__`` of an object whose class defines one in Python."""
    if isinstance(type(run).__dict__.get("__call__"), FunctionType):
        return run.__call__
    return run


_one_look: Callable[[], AbstractContextManager[None]] | None = None
""":func:`keen.trust.pinstore.one_look`, once the first call imported it."""


class Pipeline:
    """The stages a front end runs, kept in :data:`ORDER`, and its audit.

    Args:
        stages: the front end's stages (each name at most once, ``audit`` excluded).
        audit: told every call once, at the end, whatever happened (a refusal, a failure, a
            cancellation: then before the cancellation goes on).
        describe: words a Keen error for the caller; when given, the call's ``text`` says
            ``Denied (<gate>): <why>`` for a refusal and ``Error: <what>`` for a failure.

    Raises:
        ValueError: an unknown or repeated stage name.
    """

    def __init__(
        self,
        stages: Sequence[Stage],
        audit: Callable[[Call], None],
        describe: Callable[[Call, KeenError], str] | None = None,
    ) -> None:
        names = [s.name for s in stages]
        unknown = [n for n in names if n not in ORDER or n == "audit"]
        if unknown or len(set(names)) != len(names):
            raise ValueError(f"stages must be distinct names from {ORDER[:-1]}, got {names}")
        self.stages = sorted(stages, key=lambda s: ORDER.index(s.name))
        self.audit, self.describe = audit, describe
        # What the loop of every call asks of each stage, worked out once; a stage object
        # with a Python ``__call__`` (CheckCall, PinCheck) is called through its bound method,
        # not through the type's call slot, which looks ``__call__`` up at every call.
        self._plan = tuple(
            (s.name, _callable(s.run), s.gate, s.name in _AFTER, s.name == "execute") for s in self.stages
        )

    async def run(self, call: Call) -> Call:
        """Pass ``call`` through every stage in order; a refusal or a failure stops it (the
        shaping stages still run on a failure, so its text is cut too). Returns the call.

        The stages share one look at each pin file (:func:`keen.trust.pinstore.one_look`)."""
        global _one_look
        if _one_look is None:
            # Imported with the first call: ``keen prompt`` imports this module for the call
            # tool's definition alone, and the pin store needs pydantic.
            from keen.trust.pinstore import one_look

            _one_look = one_look
        with _one_look():  # the loop is here, not one coroutine deeper: resumed at every step
            try:
                stopped = False
                passed = call.stages.append
                for name, run, gate, after, execute in self._plan:
                    if stopped and (call.denied or not after):
                        continue
                    if execute:
                        passed(name)  # entered: a cancellation here is audited so
                    try:
                        ran = run(call)
                        if ran is True:  # most stages, most calls
                            if not execute:
                                passed(name)
                            continue
                        if ran is not None and ran.__class__ is not bool:  # an awaitable: wait for it
                            ran = await ran  # pyright: ignore[reportGeneralTypeIssues]  (checked: not a bool)
                    except Refusal as refusal:
                        call.denied, call.code, call.is_error, stopped = (
                            refusal.gate,
                            refusal.code,
                            True,
                            True,
                        )
                        call.text = f"Denied ({refusal.gate}): {refusal.text}"
                        continue
                    except KeenError as exc:
                        call.error, call.code, call.is_error, stopped = exc, exc.code, True, True
                        call.denied = gate
                        if self.describe is not None:
                            said = self.describe(call, exc)
                            call.text = f"Denied ({gate}): {said}" if gate else f"Error: {said}"
                        continue
                    if ran is not False and not execute:
                        passed(name)
            except anyio.get_cancelled_exc_class():
                call.cancelled = True
                self._audit(call)
                raise
            self._audit(call)
            return call

    def _audit(self, call: Call) -> None:
        call.stages.append("audit")
        try:
            self.audit(call)
        except Exception:
            logger.exception("audit sink failed")


# -- the stages every front end shares ----------------------------------------------------------


class CheckCall:
    """``mcp_checks``: :meth:`keen.mcp.Manager.check_call`, the one run of it per call."""

    name = "mcp_checks"

    def __init__(self, manager: Manager) -> None:
        self.manager = manager

    def __call__(self, call: Call) -> bool:
        if call.server is None or call.tool is None:
            return False
        call.found = self.manager.check_call(call.server, call.tool, call.arguments)
        return True


class PinCheck:
    """``pin_check``: the tool's definition is the pinned one (``keen.trust.pins``): a new,
    renamed or changed tool of a pinned server is refused under ``quarantine``
    (``ToolQuarantined``)."""

    name = "pin_check"

    def __init__(self, manager: Manager, pins: PinGuard) -> None:
        self.manager, self.pins = manager, pins
        self._passed: dict[tuple[str, str], tuple[Sequence[Tool], object, object, Any, bool]] = {}
        """(server, tool) -> the live tools, the server's config entry and the pin file's
        stamp of the last check that passed quietly (trusted, or no pins yet), its policy,
        and whether the server was pinned: a call with the same three passes the same way
        without the comparison being asked again (:meth:`__call__`)."""

    def __call__(self, call: Call) -> bool:
        server, tool = call.server, call.tool
        if server is None or tool is None:
            return False
        # What the Manager holds first, then the guard: the call goes down once, not back and
        # forth. The one route to the policy: execute pins on first use with what this decided.
        tools = self.manager.live_tools(server)
        config = self.manager.config.servers[server]
        policy = self.pins.policy(config)
        if policy == "off":  # no pin is read or written for it: its file is not looked at
            call.pinning = (policy, tools)
            return True
        # The pin file is looked at on every call (one stat per call, shared by the call's
        # stages): a pin written elsewhere, a re-list (a new tuple) or a config reload (a new
        # entry, and with it the policy) is a new key, so the very next call is compared again.
        stamp = self.pins.stamp(server)
        key = (server, tool)
        passed = self._passed.get(key)
        if passed is not None and passed[0] is tools and passed[1] is config and passed[2] == stamp:
            call.pinned, call.pinning = passed[4], (passed[3], tools)
            return True
        pin = self.pins.enforce(server, tool, tools, policy)
        if pin is not None:  # a check is made only against pins (enforce: None when there are none)
            call.pinned = True
            if pin.status != "trusted":
                call.pin = pin.status
        call.pinning = (policy, tools)
        if call.pin is None:  # a warned or held tool goes the long way each time (its warning)
            self._passed[key] = (tools, config, stamp, policy, call.pinned)
        return True


class Approve:
    """``permission`` for a call with no harness: the call's :class:`Approver` is asked about
    the tool as a model was shown it (annotations at the stricter of pinned and live; a
    ``readOnlyHint`` a server is not trusted for grants nothing). With nobody to ask, only
    tools whose trusted annotations say ``readOnlyHint`` run."""

    name = "permission"

    def __init__(self, manager: Manager) -> None:
        self.manager = manager

    async def __call__(self, call: Call) -> bool:
        assert call.server is not None and call.tool is not None and call.found is not None
        server, tool = call.server, call.tool
        shown = self.manager.shown_by_name(server).get(tool) or replace(call.found, annotations_trusted=False)
        request = ApprovalRequest(
            server, tool, call.arguments, shown.description, shown.annotations, shown.annotations_trusted
        )
        if call.approver.ask is None:
            if request.read_only:
                call.decision = "allowed"
                return True
            call.decision = "denied"
            # A tool that claims readOnlyHint from a server not trusted for its annotations
            # is refused too (README "Security: what Keen trusts"): say so, or the claim
            # reads as a contradiction of the rule.
            # keen mcp trust pins configs.json's servers; a config given in code takes the
            # field only in configs.json's shape (the mcpServers shape drops Keen's own fields).
            how = (
                f'"trust_annotations": true in its configs.json entry, or pin its tools with keen mcp trust {server}'
                if self.manager.reads_config_file
                else '"trust_annotations": true in its entry of the config this Manager was given, in '
                'configs.json\'s shape ({"version": 1, "servers": ...}; the mcpServers shape drops it)'
            )
            claim = (
                f' ("{server}" claims readOnlyHint for it, but its annotations are not trusted: set {how})'
                if (shown.annotations or {}).get("readOnlyHint")
                else ""
            )
            raise ApprovalDenied(
                f'the call to "{server}/{name_in_message(tool)}" was refused, so nothing was sent: without an approval '
                "callback only tools annotated readOnlyHint by a server trusted for its annotations "
                f"run{claim}; pass approval= to the Gateway (or open_runtime) to decide, e.g. "
                "approval=keen.gateway.allow_all",
                server=server,
                tool=tool,
            )
        approved, why = await call.approver.asks(request)
        if not approved:
            call.decision = "denied"
            # A callback that raised is the host's fault, not the user's no: say so, or the
            # model would read a crash as a refusal and try around it.
            message = (
                f'the call to "{server}/{name_in_message(tool)}" was not approved, so nothing was sent; ask the user, or try '
                "another approach"
                if why is None
                else f'the call to "{server}/{name_in_message(tool)}" was not sent: {why}. Nobody said no: the host\'s '
                "approval step is broken (its log has the error), so do not try another way around it"
            )
            raise ApprovalDenied(message, server=server, tool=tool)
        call.decision = "allowed"
        return True


# -- truncate -----------------------------------------------------------------------------------


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
        content = result.structured_content
        text = _json(content) if indent is None else json.dumps(content, indent=indent, ensure_ascii=False)
    return text


def cut_text(text: str, limit: int, hint: str | None = None) -> tuple[str, int]:
    """``text`` cut to ``limit`` characters with a note saying how much was cut and how to get
    the rest (``hint``); returns the text and the number of characters cut (0: unchanged)."""
    if len(text) <= limit:
        return text, 0
    cut = len(text) - limit
    note = f"\n[truncated: {cut} of {len(text)} characters cut; to get the rest, {hint or _DEFAULT_HINT}]"
    return text[:limit] + note, cut


MAX_BINARY_BYTES = 5 * 1024 * 1024
"""Bytes of a result's images, audio and resource blobs, decoded and together, that a front
end may pass on as the server sent them (``keen serve`` to its host): 5 MiB, the largest
image Anthropic's Messages API takes."""

# The leading bytes of the formats whose MIME type a server most often names; data that
# does not start with them is something else under that name.
_MAGIC: dict[str, tuple[bytes, ...]] = {
    "image/png": (b"\x89PNG\r\n\x1a\n",),
    "image/jpeg": (b"\xff\xd8\xff",),
    "image/gif": (b"GIF87a", b"GIF89a"),
    "image/webp": (b"RIFF",),
    "audio/wav": (b"RIFF",),
    "audio/x-wav": (b"RIFF",),
    "audio/ogg": (b"OggS",),
    "audio/flac": (b"fLaC",),
}
_RIFF_FORMS = {"image/webp": b"WEBP", "audio/wav": b"WAVE", "audio/x-wav": b"WAVE"}
# Types a host runs rather than shows: an SVG image or an HTML blob may carry script, so
# whatever their bytes, they are never passed on as the server sent them (README "Security").
_ACTIVE = frozenset(
    {
        "image/svg+xml",
        "text/html",
        "application/xhtml+xml",
        "text/javascript",
        "application/javascript",
        "application/ecmascript",
    }
)
# Base64 as RFC 2045 section 6.8 lets it travel: wrapped into lines; padding is often dropped.
_BASE64_SPACE = re.compile(rb"[ \t\r\n\f\v]+")


def _base64(data: str) -> bytes:
    """``data`` decoded, line breaks and missing padding accepted; anything else that is not
    base64 raises :class:`binascii.Error`."""
    packed = _BASE64_SPACE.sub(b"", data.encode("ascii", "strict"))
    return binascii.a2b_base64(packed + b"=" * (-len(packed) % 4), strict_mode=True)


def blocks_fault(blocks: Sequence[Any], limit: int = MAX_BINARY_BYTES) -> str | None:
    """Why the images, audio and blobs among MCP content ``blocks`` may not be passed on as
    the server sent them, or ``None`` when they may (blocks of text alone always may).

    A server's content blocks are untrusted like its text (MCP 2025-11-25 "Tools > Tool
    Result": ``image`` and ``audio`` carry base64 ``data`` and a ``mimeType``; an embedded
    ``resource`` may carry a base64 ``blob`` and its own ``mimeType``). A host shows or
    renders them by their MIME type, so an image block whose type is ``text/html``, an SVG
    image or HTML blob (either may carry script), bytes that are not the PNG they claim, or
    data that is not base64 at all is not passed on; nor are more than ``limit`` bytes of
    them (one message may hold 100 million characters). The media type is read as a host
    reads it (parameters and spaces cut, any case); base64 may be wrapped or unpadded.
    """
    total = 0
    for block in blocks:
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind in ("image", "audio"):
            data, mime = block.get("data"), block.get("mimeType")
        elif kind == "resource" and isinstance(block.get("resource"), dict) and "blob" in block["resource"]:
            data, mime = block["resource"]["blob"], block["resource"].get("mimeType")
        else:
            continue
        article = "a" if kind == "resource" else "an"
        parsed = media_type(mime)
        what = f"{article} {kind} {parsed}" if parsed is not None else f"{article} {kind}"
        if not isinstance(data, str):
            return f"{what} block has no base64 data"
        total += len(data) * 3 // 4
        if total > limit:
            return f"its images, audio and blobs pass {limit:,} bytes"
        try:
            raw = _base64(data)
        except (binascii.Error, UnicodeEncodeError):
            return f"the data of {what} block is not base64"
        if mime is None and kind == "resource":
            continue
        if parsed is None or (kind != "resource" and not parsed.startswith(f"{kind}/")):
            return f"{article} {kind} block says its data is {named_type(mime)}"
        if parsed in _ACTIVE:
            return f"{what} block may carry script, which a host could run"
        magic = _MAGIC.get(parsed)
        form = _RIFF_FORMS.get(parsed)
        if (magic and not raw.startswith(magic)) or (form and raw[8:12] != form):
            return f"the data of {what} block is not {parsed}"
    return None


def binary_fault(result: ToolResult, limit: int = MAX_BINARY_BYTES) -> str | None:
    """Why the images, audio and blobs of ``result`` may not be passed on as the server sent
    them, or ``None`` when they may: :func:`blocks_fault` of its content."""
    return blocks_fault(result.content, limit)


def fault_note(fault: str) -> str:
    """The note a text carries when the server's images, audio or blobs are left out."""
    return f"[the server's images, audio or blobs are left out: {fault}; the text above stands for them]"


class Shaped(NamedTuple):
    """A result as a model or host gets it: ``text`` within the limit (with its notes),
    ``structured`` only when its JSON fits beside the text, ``cut`` characters cut, and
    ``binary_fault``: why its images, audio or blobs may not be passed on as sent
    (:func:`binary_fault`; the text says it too), ``None`` when they may.

    A named tuple, not a frozen dataclass: every call makes one, and a frozen dataclass's
    ``__init__`` sets each field through ``object.__setattr__``."""

    text: str
    structured: Any
    cut: int
    binary_fault: str | None = None


def shape(result: ToolResult, limit: int, hint: str | None = None) -> Shaped:
    """The one shaping of a tool's result (``truncate``): its text (:func:`result_text`), said
    to be the tool's own error when ``isError``, cut past ``limit`` with a note (:func:`cut_text`);
    ``structuredContent`` kept only while its JSON fits beside the text, else left out with a
    note (the text, or its JSON cut to the limit, stands for it)."""
    text = result_text(result)
    if result.is_error:
        text = f"The tool reported an error: {text}" if text else "The tool reported an error."
    fault = binary_fault(result)
    # The note is Keen's, after the server's text: room is kept for it within the limit.
    note = "" if fault is None else "\n" + fault_note(fault)
    text, cut = cut_text(text, max(limit - len(note), 0), hint)
    structured = result.structured_content
    if structured is not None:
        size = len(_json(structured))
        if cut or len(text) + len(note) + size > limit:
            structured = None
            if result.text:
                text += (
                    f"\n[structuredContent left out: its {size} characters of JSON would pass the "
                    f"{limit}-character limit; the text above carries the result]"
                )
    text += note
    return Shaped(text, structured, cut, fault)


# -- audit --------------------------------------------------------------------------------------


def audit_record(call: Call) -> dict[str, Any]:
    """An MCP call as one audit record: ``ts, server, tool, arguments`` (redacted), ``pin`` (a
    status other than trusted), ``decision`` (allowed|denied|refused, or cancelled when the
    caller was cancelled before it), ``outcome`` (ok|tool_error|error|cancelled),
    ``error_code`` and ``error`` for a failure (``cancelled`` for a cancelled call), and
    ``duration_ms``."""
    record: dict[str, Any] = {
        "ts": call.at,
        "server": call.server or "",
        "tool": call.tool or "",
        "arguments": _redacted(call.arguments),
    }
    if call.pin is not None:
        record["pin"] = call.pin
    if call.cancelled:
        record.update(decision=call.decision or "cancelled", outcome="cancelled", error_code="cancelled")
    elif call.error is not None or call.denied:
        refused = "denied" if isinstance(call.error, ApprovalDenied) else "refused"
        message = call.error.message if call.error is not None else call.text
        record.update(decision=call.decision or refused, outcome="error", error_code=call.code, error=message)
    else:
        failed = call.result is not None and call.result.is_error
        record.update(decision=call.decision or "allowed", outcome="tool_error" if failed else "ok")
    record["duration_ms"] = round(call.seconds() * 1000, 3)
    return record


def _redacted(arguments: Any) -> Any:
    try:
        return json.loads(redactor.redact(_json(arguments)))
    except (TypeError, ValueError, RecursionError):  # not JSON, or cyclic
        return redactor.redact(repr(arguments))
