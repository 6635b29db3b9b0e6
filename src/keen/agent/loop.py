"""The turn loop of ``keen chat``: a model on top of the harness.

One user turn (:meth:`Agent.run_turn`) is a series of steps. Each step asks the harness for
the visible set (:meth:`keen.harness.Harness.begin_step`, so search hits and schemas read
in one step become callable in the next), builds the system prompt (base + budgeted
catalog), streams one model call, and runs every proposed tool call through the harness
pipeline (:data:`keen.calls.ORDER`: validate > visibility > mcp_checks > pin_check > permission >
hooks > execute > truncate > audit). A denial or a tool error is an observation the model
reads, never an exception. The turn
ends when the model answers without tool calls, or at the step limit; then its tool
traffic is compacted (:mod:`keen.agent.compaction`). An answer that did not finish (cut at
the output token limit, filtered, refused) is said so, never taken for a complete one, and
its tool calls do not run (:mod:`keen.agent.unfinished`); a paused one (Anthropic's
``pause_turn``) is sent back so the model goes on. Tool-call arguments that were not a JSON
object reach the harness as the model sent them, and its validate gate says what is wrong.

What the model asked for: reading a tool's schema file (``.../mcp:<server>/schemas/<tool>.json``)
or calling a tool that exists but is not visible yet counts as asking for that tool, so the
discovery policy may show it at the next step (docs/architecture.md "The harness").

Approval: the permission gate asks the :class:`ApprovalPrompt` for each call it marks ``ask``;
``always`` is remembered per (server, tool) for the session. When a call fails because its
server is not connected, the observation says how the user reconnects it (the front
end's command, ``connect_command``).

A server that went away (a crashed stdio server, a restarted HTTP server) is reconnected
on demand, as ``keen serve`` does (:mod:`keen.mcp.connection.reconnect`: only ``disconnected`` and
enabled servers, one attempt per back-off window, concurrent needs share one): before a
call to one of its tools, the agent asks the session's :class:`~keen.mcp.connection.reconnect.Reconnector`
to bring it back and waits for that attempt. When it is back, the visible set is computed
again (its tools were hidden while it was down), then the call runs; when it is still
down the call fails as usual and the observation says when Keen tries again. Either way
one line tells the user (:attr:`Agent.on_reconnect`, else the view's notice) and the event
log records an ``agent.reconnect`` event. A call that failed is never repeated.

Cancellation (Ctrl-C in the REPL cancels the scope around ``run_turn``) stops the model
stream or the running call, answers every pending tool call with "cancelled", compacts
and records the turn, and re-raises; the session and its servers stay open.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

import anyio

from keen._terminal import name_in_message
from keen._text import closed
from keen.agent.compaction import CallRecord, compact_turn
from keen.agent.models import Message, Model, ModelDone, ModelError, TextDelta, ToolCall
from keen.agent.reconnect import reconnect_line, retry_words
from keen.agent.resume import LOG_FORMAT, Restored, message_record, redacted
from keen.agent.system_prompt import DEFAULT_PROMPT_BUDGET, build_system_prompt, offered_skills
from keen.agent.unfinished import CANCELLED, CUT_CALLS, UNFINISHED, answer_pending, not_run
from keen.capabilities import PermissionMode, capability_id
from keen.errors import KeenError, Remedy, ServerDisconnected
from keen.gateway import CALL_MCP_TOOL, ApprovalRequest, for_model
from keen.harness import Harness, Observation, visibility
from keen.mcp.connection.elicitation import ElicitationCallback
from keen.mcp.connection.reconnect import Reconnector
from keen.mcp.types import ServerState, ServerStatus
from keen.skills import Discovery, activate

if TYPE_CHECKING:
    from keen.runtime import Runtime

__all__ = ["Agent", "ApprovalAnswer", "ApprovalPrompt", "TurnResult", "TurnView"]

ApprovalAnswer = Literal["yes", "no", "always"]
DEFAULT_MAX_STEPS = 20
_SCHEMA_PATH = re.compile(r"mcp:([A-Za-z0-9_-]{1,64})/schemas/(.+)\.json$")


class ApprovalPrompt(Protocol):
    """Asked for every call the permission gate marks ``ask`` (server, tool, JSON arguments):
    a person at a prompt (``keen chat``'s, :meth:`keen.agent.asking.Asker.approve`) or a
    script, answering with an :data:`ApprovalAnswer`.

    The agent passes each answer on as its harness's approval callback's (a
    :data:`keen.calls.Approval`, which each call holds with who answers it in its
    :class:`keen.calls.Approver`, for the audit), remembering ``always``.
    """

    async def __call__(self, request: ApprovalRequest) -> ApprovalAnswer | bool:
        """``yes``, ``no``, or ``always`` (yes, and for this tool the rest of the session);
        a Python bool is taken too (``True``: yes, ``False``: no), as a gateway approval
        callback's answer is.

        Anything else (``"y"``, ``None``, ``1``, ``numpy.bool``) denies the call as a broken
        approval prompt, not as the user's no: logged with what to return, and the call's result
        says the approval step failed.
        """
        ...


class TurnView(Protocol):
    """What a front end sees of a turn as it happens (every method is optional to act on)."""

    def text(self, delta: str) -> None:
        """A chunk of the model's answer, as streamed."""

    def tool_call(self, name: str, arguments: dict[str, Any]) -> None:
        """The model proposed a call (before it runs)."""

    def observation(self, obs: Observation) -> None:
        """A call's result, as the model will see it."""

    def notice(self, line: str) -> None:
        """A line for the user (e.g. the step limit)."""


@dataclass
class TurnResult:
    """How a turn ended.

    Attributes:
        answer: the model's final text ("" when it gave none).
        ok: the model answered within the step limit, and when the turn made MCP calls,
            at least one of them succeeded.
        steps: model calls made.
        tool_calls: one dict per call: ``name``, ``arguments``, ``outcome`` (``ok``,
            ``error``, ``denied``), ``gate`` (the refusing gate or None), ``declined`` (the
            approver asked said no, not the mode's policy), ``text``.
        error: why the turn failed (a model error, the step limit), or None.
        usage: each model call's usage (``prompt_tokens``, ``completion_tokens``).
        cancelled: the turn was cancelled.
        session_id: the harness session (``keen sessions show ID``).
    """

    answer: str
    ok: bool
    steps: int
    tool_calls: list[dict[str, Any]] = field(default_factory=lambda: list[dict[str, Any]]())
    error: str | None = None
    usage: list[dict[str, int]] = field(default_factory=lambda: list[dict[str, int]]())
    cancelled: bool = False
    session_id: str = ""

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready record (what ``keen chat -p --json`` prints)."""
        return {
            "answer": self.answer,
            "ok": self.ok,
            "steps": self.steps,
            "tool_calls": self.tool_calls,
            "error": self.error,
            "usage": self.usage,
            "cancelled": self.cancelled,
            "session": self.session_id,
        }


class _Quiet:
    def text(self, delta: str) -> None: ...
    def tool_call(self, name: str, arguments: dict[str, Any]) -> None: ...
    def observation(self, obs: Observation) -> None: ...
    def notice(self, line: str) -> None: ...


class Agent:
    """One chat session: a model, the harness over an open runtime, and the history.

    Args:
        runtime: an open :class:`keen.runtime.Runtime` (the agent never closes it).
        model: the model (:func:`keen.agent.providers.open_model`).
        mode: the permission mode (``read-only``, ``ask``, ``auto``).
        approval_prompt: asked for calls that need approval; None denies them.
        elicitor: answers servers' questions to the user; installed on the runtime's
            Manager (servers that connected before see the capability only if the runtime
            was opened with ``elicitation=``).
        workspace: the root of the local tools; default the current directory.
        max_steps: model calls per turn at most.
        session_id: the harness session id; default a new one.
        prompt_budget: tokens for the catalog plus the offered tool definitions.
        connect_command: how this front end reconnects a server, ``{server}`` filled in.
        denial_note: added to each permission denial the model sees (e.g. one-shot's
            "rerun with --yes").

    Attributes:
        reconnector: reconnects servers that went away before calls that need them (module
            docstring); a front end with a long-lived task group sets its ``task_group``.
        on_reconnect: told each reconnect attempt's outcome (the server's status when the
            wait ended, seconds until the next attempt may start, seconds waited); ``None``:
            the turn's view gets a notice line instead. A status still ``connecting`` means
            the attempt outlasted the wait and goes on (in the front end's task group).
        reconnect_wait: how long a call waits for its server's reconnect, in seconds;
            ``None`` (default): the server's ``timeouts.connect`` + ``timeouts.list_tools``.
    """

    def __init__(
        self,
        runtime: Runtime,
        model: Model,
        *,
        mode: PermissionMode = "ask",
        approval_prompt: ApprovalPrompt | None = None,
        elicitor: ElicitationCallback | None = None,
        workspace: Path | None = None,
        max_steps: int = DEFAULT_MAX_STEPS,
        session_id: str | None = None,
        prompt_budget: int = DEFAULT_PROMPT_BUDGET,
        connect_command: str = "keen mcp connect {server}",
        denial_note: str = "",
    ) -> None:
        self.runtime = runtime
        self.model = model
        self.approval_prompt = approval_prompt
        self.max_steps = max_steps
        self.prompt_budget = prompt_budget
        self.connect_command = connect_command
        self.denial_note = denial_note
        self.history: list[Message] = []
        self.turns = 0
        """User turns run so far (each is one or more model steps: ``Harness.step``)."""
        self.always: set[tuple[str, str]] = set()
        self.last_result: TurnResult | None = None
        self._prompt: tuple[Discovery, str, frozenset[str], str] | None = None
        self._elicitor = elicitor
        self.reconnector = Reconnector(runtime.manager)
        self.on_reconnect: Callable[[ServerStatus, float, float], None] | None = None
        self.reconnect_wait: float | None = None
        self._server_of: dict[str, str] = {}
        """Model tool name -> server, of every MCP tool offered this session."""
        if elicitor is not None:
            runtime.manager.elicitation = elicitor
        self.harness: Harness = runtime.harness(
            mode=mode,
            approve=self._approve if approval_prompt is not None else None,
            workspace=workspace,
            session_id=session_id,
            pre_hooks=[self._note_schema_read],
            remedy_words=self._remedy_words,
        )
        self.harness.log.emit("agent.start", model=model.name, max_steps=max_steps, log_format=LOG_FORMAT)

    @property
    def session_id(self) -> str:
        """The harness session id (its log is ``$KEEN_HOME/sessions/<id>.jsonl``)."""
        return self.harness.session_id

    # -- the turn ---------------------------------------------------------------------------

    async def run_turn(self, text: str, view: TurnView | None = None) -> TurnResult:
        """Run one user turn to its answer (module doc).

        Args:
            text: the user's message.
            view: the front end's eyes on the turn.

        Returns:
            The :class:`TurnResult` (also kept as :attr:`last_result`). A model failure
            (:class:`~keen.agent.models.ModelError`) ends the turn with ``ok=False`` and
            the error's message.

        Raises:
            SkillError: the skills config is broken (the system prompt cannot be built).
            The cancellation exception, after the turn was recorded, when cancelled.
        """
        view = view or _Quiet()
        start = len(self.history)
        self.history.append(Message("user", text))
        self.turns += 1
        self.harness.log.emit("agent.user", turn=self.turns, step=self.harness.step + 1, text=text)
        result = TurnResult("", ok=False, steps=0, session_id=self.session_id)
        records: list[CallRecord] = []
        began = time.monotonic()
        try:
            await self._steps(view, result, records)
        except ModelError as exc:
            result.error = exc.message
            view.notice(f"model error: {exc.message}")
        except (anyio.get_cancelled_exc_class(), KeyboardInterrupt):
            result.cancelled, result.error = True, "cancelled by the user"
            answer_pending(self.history, CANCELLED)
            raise
        finally:
            self._finish(start, records, result, time.monotonic() - began)
        return result

    async def _steps(self, view: TurnView, result: TurnResult, records: list[CallRecord]) -> None:
        paused: list[str] = []
        for _ in range(self.max_steps):
            tools = self._begin()
            result.steps += 1
            try:
                done = await self._model_call(tools, view)
                result.usage.append(done.usage)
                traffic = "tool_traffic" if done.tool_calls else ""
                self.history.append(Message("assistant", done.content, list(done.tool_calls), kind=traffic))
                if done.stop == "pause" and not done.tool_calls:
                    # Anthropic's pause_turn: the answer goes on when sent back as it is.
                    paused.append(done.content)
                    continue
                if done.stop in UNFINISHED:
                    if done.tool_calls and done.stop == "length":
                        # A call cut mid-arguments must not run; the model can send it again.
                        self._refuse_calls(done.tool_calls, view, result, records)
                        view.notice(CUT_CALLS)
                        continue
                    self._refuse_calls(done.tool_calls, view, result, records)
                    result.answer = "".join([*paused, done.content])
                    result.error = UNFINISHED[done.stop]
                    view.notice(result.error)
                    return
                if not done.tool_calls:
                    result.answer = "".join([*paused, done.content])
                    mcp = [r for r in result.tool_calls if r["name"] == CALL_MCP_TOOL]
                    result.ok = not mcp or any(r["outcome"] == "ok" for r in mcp)
                    if not result.ok:
                        result.error = "every MCP tool call of this turn failed or was denied"
                    return
                paused.clear()
                for call in done.tool_calls:
                    await self._run_call(call, view, result, records)
            finally:
                self.harness.end_step(steps_in_turn=result.steps)
        result.error = f"stopped after {self.max_steps} steps without an answer (the step limit)"
        view.notice(result.error)

    def _refuse_calls(
        self, calls: list[ToolCall], view: TurnView, result: TurnResult, records: list[CallRecord]
    ) -> None:
        """Answer the calls of an unfinished answer without running them (:func:`not_run`)."""
        for call in calls:
            message, record, entry = not_run(call)
            self.history.append(message)
            records.append(record)
            result.tool_calls.append(entry)

    def system_prompt(self, tools: list[dict[str, Any]]) -> str:
        """The system prompt for a step offering ``tools``; rebuilt when the offered tools
        or the skills changed, or the servers the session starts (the catalog leaves out a
        server it never starts: :func:`offered_skills`; or after :meth:`reload_catalog`). The skills come from the
        runtime's :class:`~keen.skills.cache.DiscoveryCache`, which returns the same
        discovery while no ``SKILL.md``, skill folder, symlink or ``config.json`` changed."""
        found = self.runtime.skills.discover()
        servers = frozenset(self.runtime.manager.to_start())
        tools_key = json.dumps(tools, sort_keys=True, default=str)
        cached = self._prompt
        if cached is None or cached[0] is not found or cached[1] != tools_key or cached[2] != servers:
            skills = offered_skills(found.enabled, servers)
            text = build_system_prompt(
                self.runtime.skills_root, tools, budget=self.prompt_budget, skills=skills
            )
            self._prompt = cached = (found, tools_key, servers, text)
        return cached[3]

    async def _model_call(self, tools: list[dict[str, Any]], view: TurnView) -> ModelDone:
        system = self.system_prompt(tools)
        messages = [Message("system", system), *self.history]
        done: ModelDone | None = None
        async for event in self.model.stream(messages, tools):
            if isinstance(event, TextDelta):
                view.text(event.text)
            else:
                done = event
        if done is None:
            raise ModelError(f"{self.model.name} ended its answer without finishing it; retry")
        self.harness.log.emit(
            "agent.model",
            step=self.harness.step,
            content=done.content,
            tool_calls=[{"id": c.id, "name": c.name, "arguments": c.arguments} for c in done.tool_calls],
            usage=done.usage,
            stop=done.stop,
        )
        return done

    def _begin(self) -> list[dict[str, Any]]:
        """The harness's visible set for a step; remembers which server each MCP tool is on."""
        tools = self.harness.begin_step()
        catalog = self.harness.catalog
        for cap_id, entry in self.harness.visible.items():
            if catalog is not None and entry.kind == "tool" and cap_id in catalog:
                server = catalog.get(cap_id).server
                if server is not None:
                    self._server_of[entry.name] = server
        return tools

    async def joined(self, server: str, view: TurnView | None = None) -> ServerStatus | None:
        """Wait for ``server`` while it is still connecting (a first attempt: the session
        answered before its servers were up; docs/chat.md "Startup"), up to its own time limit
        (``reconnect_wait``, else its ``timeouts.connect`` + ``timeouts.list_tools``).

        Returns:
            Its status after the wait, or ``None`` when it was not connecting.
        """
        manager = self.runtime.manager
        try:
            if manager.status(server).state is not ServerState.CONNECTING:
                return None
        except KeenError:
            return None
        if view is not None:
            view.notice(f"{server}: still connecting; the call waits for it")
        status = await manager.wait_attempt(server, self.reconnect_wait)
        if view is not None and status.state is ServerState.CONNECTED:
            view.notice(f"{server}: connected, {status.tool_count} tools")
        return status

    async def revive(self, server: str, view: TurnView | None = None) -> ServerStatus | None:
        """Reconnect ``server`` if it went away and its back-off window allows (module doc),
        tell the user the outcome, and log it.

        Returns:
            The server's status after the attempt, or ``None`` when none was made (it is not
            ``disconnected``, it is disabled or unknown, or its last attempt failed less
            than a window ago).
        """
        started = time.monotonic()
        if not self.reconnector.reconnectable(server) or not await self.reconnector.ensure(
            [server], self.reconnect_wait
        ):
            return None
        waited = time.monotonic() - started
        status = self.runtime.manager.status(server)
        retry_in = self.reconnector.retry_in(server)
        self.harness.log.emit(
            "agent.reconnect",
            step=self.harness.step,
            server=server,
            state=status.state.value,
            error=status.last_error,
            retry_in=round(retry_in, 1),
            waited=round(waited, 1),
        )
        if self.on_reconnect is not None:
            self.on_reconnect(status, retry_in, waited)
        elif view is not None:
            view.notice(reconnect_line(status, retry_in, self.connect_command, waited))
        return status

    async def _run_call(
        self, call: ToolCall, view: TurnView, result: TurnResult, records: list[CallRecord]
    ) -> None:
        view.tool_call(call.name, call.arguments)
        server = self._call_server(call)
        if server is not None:
            status = await self.joined(server, view) or await self.revive(server, view)
            if status is not None and status.state is ServerState.CONNECTED:
                # The visible set was computed while the server was down (its tools hidden):
                # compute it again, so this call and the rest of the step see them.
                self.harness.end_step(steps_in_turn=result.steps, reconnected=server)
                self._begin()
        # Arguments that were not a JSON object go as sent: the validate gate refuses them.
        obs = await self.harness.call(
            call.name, call.arguments if call.unparsed is None else call.unparsed, tool_call_id=call.id
        )
        text = self._explain(call, obs)
        view.observation(obs if text == obs.text else _with_text(obs, text))
        outcome = "denied" if obs.denied else ("error" if obs.is_error else "ok")
        self.history.append(
            Message(
                "tool", text, tool_call_id=call.id, name=call.name, kind="tool_traffic", is_error=obs.is_error
            )
        )
        records.append(CallRecord(call.name, call.arguments, outcome, text))
        result.tool_calls.append(
            {
                "name": call.name,
                "arguments": call.arguments,
                "outcome": outcome,
                "gate": obs.denied,
                "declined": obs.declined,
                "text": text,
            }
        )

    def _finish(self, start: int, records: list[CallRecord], result: TurnResult, seconds: float) -> None:
        self.history = compact_turn(self.history, start, records)
        self.last_result = result
        self.harness.log.emit(
            "agent.turn",
            turn=self.turns,
            step=self.harness.step,
            ok=result.ok,
            steps=result.steps,
            answer=result.answer,
            error=result.error,
            cancelled=result.cancelled,
            seconds=round(seconds, 3),
            # What the history keeps of the turn, as the model reads it from now on (the
            # explained texts, compacted): a resumed session takes this, not a rebuild
            # from the calls' raw results (keen.agent.resume).
            calls=len(records),
            messages=[message_record(m) for m in self.history[start:]],
            # The tools the model unlocked, the last step's too: a resumed session asks for
            # them again (keen.agent.resume).
            requested=list(self.harness.requested),
        )

    # -- gates and wording -------------------------------------------------------------------

    async def _approve(self, request: ApprovalRequest) -> bool:
        key = (request.server, request.tool)
        if key in self.always:
            return True
        assert self.approval_prompt is not None
        answer: object = await self.approval_prompt(request)
        if type(answer) is bool:  # exactly Python's: numpy's bool is refused below
            return answer
        if not isinstance(answer, str) or answer not in ("yes", "no", "always"):
            # Taken as the user's no, True included: the turn read "the user did not approve"
            # and nothing said the prompt answered in the wrong terms. Raised, the call's
            # approval logs this and states a failed approval step (keen.calls.Approver.asks).
            cls = type(answer)
            named = (
                cls.__qualname__ if cls.__module__ == "builtins" else f"{cls.__module__}.{cls.__qualname__}"
            )
            raise TypeError(
                f"the Agent's approval prompt returned {answer!r:.60} ({named}); it must return 'yes', "
                "'no' or 'always' (keen.agent.ApprovalAnswer), or a Python bool"
            )
        if answer == "always":
            self.always.add(key)
        return answer in ("yes", "always")

    def _note_schema_read(self, cap_id: str, arguments: dict[str, Any]) -> str | None:
        """Pre-hook: reading a tool's schema file asks for that tool (never denies)."""
        path = arguments.get("path") if cap_id == capability_id("local", "read_file") else None
        match = _SCHEMA_PATH.search(str(path).replace("\\", "/")) if path else None
        if match:
            self._request(capability_id("tool", match.group(2), match.group(1)), server=match.group(1))
        return None

    def _request(self, cap_id: str, *, server: str | None = None) -> None:
        """Ask for ``cap_id``: a tool of the catalog, or one of ``server`` while that server
        is still connecting (its tools join the catalog when it is up; docs/chat.md "Startup")."""
        catalog = self.harness.catalog
        known = catalog is not None and cap_id in catalog
        if not known and server is not None:
            try:
                known = self.runtime.manager.status(server).state is ServerState.CONNECTING
            except KeenError:
                known = False
        if known:
            self.harness.request([cap_id])

    def _explain(self, call: ToolCall, obs: Observation) -> str:
        """The observation's text, plus what the user can do about a disconnected server or
        a denial the front end words (the harness's text is kept in its log as is)."""
        text = obs.text
        if not obs.is_error:
            return text
        by_id = call.name == CALL_MCP_TOOL
        # By its model name too (mcp__<server>__<tool>, offered in an earlier step): the same
        # hint, so the model reads that Keen reconnects the server either way.
        server = self._call_server(call)
        hint = self._server_hint(server) if server is not None else ""
        if obs.denied == "visibility" and hint:
            # Hidden only because its server is down: searching would not help; say that.
            tool = call.arguments.get("tool") if by_id else call.name
            return f"{tool!s} of server {server} cannot run now.{hint}"
        if obs.denied == "visibility" and by_id and server is not None:
            tool = call.arguments.get("tool")
            catalog = self.harness.catalog
            cap_id = capability_id("tool", tool, server) if isinstance(tool, str) else ""
            if catalog is not None and cap_id in catalog:
                if visibility(catalog.get(cap_id), self.harness.mode):
                    # The harness's text already says which mode forbids it and why
                    # (keen.harness.policy.hidden_reason); only the remedy is the front end's.
                    text += "; the user can switch the permission mode."
                else:
                    # The harness's text points at search_tools; this tool needs no search
                    # (the request below offers it), so say only what is true here.
                    self._request(cap_id)
                    text = (
                        f"{name_in_message(f'{server}/{tool}')} is not among this step's tools; it exists and the "
                        f"{self.harness.mode} mode allows it: it is callable from your next "
                        "step, no search needed."
                    )
            elif isinstance(tool, str) and (missing := self._no_such_tool(server, tool)) is not None:
                # A tool its (connected) server does not list: "use search_tools to find a
                # tool" sent the model searching for a name it got wrong; the server's own
                # list has the close names.
                text = f"Denied (visibility): {missing}"
        text += hint
        if obs.denied == "permission" and self.denial_note:
            text += f" {self.denial_note}"
        return text

    def _remedy_words(self, exc: KeenError, server: str) -> str:
        """The gateway's wording of an error's remedy for the model, except for a server that
        went away and may come back: its remedy is :meth:`_server_hint`'s (Keen reconnects it
        by itself at a later call), not the gateway's "the user has to fix and reconnect
        this server", which the hint after it contradicted."""
        if (
            exc.remedy is Remedy.RECONNECT
            and isinstance(exc, ServerDisconnected)
            and self.reconnector.reconnectable(server)
        ):
            return closed(exc.message)
        return for_model(exc, server)

    def _no_such_tool(self, server: str, tool: str) -> str | None:
        """What the model reads when connected ``server`` lists no ``tool`` (up to three close
        names, and where the names are); None when it lists it (a tool held for review) or the
        server cannot say now."""
        from keen.errors import ToolNotFound

        try:
            self.runtime.manager.find_tool(server, tool)
        except ToolNotFound as exc:
            return for_model(exc, server)
        except KeenError:
            return None
        return None

    def _call_server(self, call: ToolCall) -> str | None:
        """The server ``call`` needs: ``call_mcp_tool``'s ``server`` argument, or the server
        of the MCP tool offered under the call's model name; ``None`` for neither."""
        server = (
            call.arguments.get("server") if call.name == CALL_MCP_TOOL else self._server_of.get(call.name)
        )
        return server if isinstance(server, str) else None

    def _server_hint(self, server: str) -> str:
        try:
            status = self.runtime.manager.status(server)
        except KeenError:
            return ""
        if status.state is ServerState.CONNECTED:
            return ""
        why = f" ({status.last_error})" if status.last_error else ""
        command = self.connect_command.format(server=server)
        if status.state in (ServerState.CONFIGURED, ServerState.CONNECTING):
            # The first connection is still under way (a turn sent before discovery ended),
            # or a reconnect outlasted the call's wait: calling again later is what helps.
            return f" Server {server} is still connecting.{retry_words(0, ServerState.CONNECTING)}"
        if self.reconnector.reconnectable(server):
            retry = retry_words(self.reconnector.retry_in(server))
            return f" Server {server} is {status.state.value}{why}.{retry} If it stays down, the user can fix it and run `{command}`."
        return f" Server {server} is {status.state.value}{why}; the user can reconnect it with `{command}`."

    # -- session ------------------------------------------------------------------------------

    def activate_skill(self, name: str, args: str = "") -> None:
        """Put skill ``name`` in the conversation as a retained message (``/SKILL ARGS``,
        ``/mcp:SERVER ARGS``): the SKILL.md body with ``$ARGUMENTS`` substituted; it
        survives compaction.

        Raises:
            SkillError: unknown or disabled skill, unreadable file, unbalanced quotes.
        """
        text = activate(name, args, skills_root=self.runtime.skills_root)
        self.history.append(Message("user", text, kind="skill_activation"))
        # The text too: a resumed session restores it (keen.agent.resume), as this one keeps it.
        self.harness.log.emit("agent.activate", skill=name, arguments=args, text=text)

    def resume(self, restored: Restored) -> None:
        """Go on with a conversation rebuilt from an earlier session's log
        (:func:`keen.agent.resume.restore`; ``keen chat --resume``): it becomes the history,
        the turns are numbered on from it, and this session's log records it whole in an
        ``agent.resume`` event naming its parent, so this log suffices to resume this
        session in turn. Call it before the first turn, once the runtime and the model are
        open: each message is redacted again with the secrets known then (a key configured
        since the log was written; :func:`keen.agent.resume.redacted`).

        The tools the model had unlocked (``restored.requested``) are asked for again: the
        discovery policy offers each from the next step on while its server is connected,
        it is in the catalog (not gone, held for review or quarantined) and the mode allows
        it, as for a tool the model asked for in this session."""
        self.history = [redacted(m) for m in restored.messages]
        self.turns = restored.turns
        requested = self.harness.requested
        requested[:0] = [i for i in restored.requested if i not in requested]
        self.harness.log.emit(
            "agent.resume",
            parent=restored.session_id,
            turns=restored.turns,
            calls=restored.calls,
            servers=restored.servers,
            messages=[message_record(m) for m in self.history],
            requested=list(requested),
        )

    def reload_catalog(self) -> None:
        """Note that the skills changed (after discovery or ``/skills reload``): the catalog
        and visible set are rebuilt from disk and the Manager at the next step."""
        self._prompt = None
        self.harness.log.emit("agent.reload", step=self.harness.step)

    def set_mode(self, mode: PermissionMode) -> None:
        """Switch the permission mode (from the next step on)."""
        self.harness.set_mode(mode)

    def close(self) -> None:
        """End the session: close the log, take the elicitor off the Manager."""
        if self._elicitor is not None and self.runtime.manager.elicitation is self._elicitor:
            self.runtime.manager.elicitation = None
        self.harness.close()


def _with_text(obs: Observation, text: str) -> Observation:
    from dataclasses import replace

    return replace(obs, text=text)
