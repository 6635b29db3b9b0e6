"""The harness: one pipeline for every tool call, and the visible set per turn.

Each call, local or MCP, passes validate > visibility > permission (approval) > pre-hooks >
execute > truncate > post-hooks > audit. A refusal at any gate is an observation (an
``is_error`` :class:`Observation` saying why), never an exception that ends the turn.

MCP calls go through :class:`keen.gateway.Gateway`, which keeps its MCP checks
(configured, connected, known tool, schema-valid). The gateway's approval callback is
replaced by the harness's permission gate (:meth:`Harness._gateway_approval` answers yes
only for the call the gate has just cleared), so approval, truncation and audit live here
once.

Validation is split around the visibility gate: the call's shape (and a local tool's
arguments) is checked first; the gateway's MCP checks (server, tool, inputSchema) run once
the capability is known to be visible, so a hidden tool's schema never leaks through its
errors. Every ``result`` event lists the stages the call passed, in order (``stages``).

Two ways to decide visibility:

- turns (an agent): :meth:`Harness.begin_turn` computes the visible set from the
  discovery policy, and a call outside it is refused;
- a ``visibility`` callback (``keen serve``): there are no turns; each call's capability is
  looked up in the live catalog and the callback, given it and the ``caller``, says whether
  that caller may use it (the ``tool_descriptions`` extension: a fetched description
  authorizes the tool).
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import anyio
import jsonschema

from keen import paths
from keen.capabilities import Capability, Catalog, PermissionMode, capability_id
from keen.errors import KeenError
from keen.gateway import CALL_MCP_TOOL, Approval, ApprovalRequest, Gateway, for_model
from keen.harness.changes import ChangeLog
from keen.harness.entries import (
    DEFAULT_BUDGET,
    DEFAULT_MAX_RESULT_CHARS,
    ENTRY_SCHEMAS,
    GATE_CODES,
    HANDLE_KINDS,
    LOAD_SKILL,
    READ_RESOURCE,
    SEARCH_TOOLS,
    Observation,
    PostHook,
    PreHook,
    Visibility,
    local_capability,
)
from keen.harness.events import EventLog, new_session_id, session_path
from keen.harness.executors import ask, cut_text, hook_name, search_catalog
from keen.harness.local import LOCAL_TOOLS, LocalToolError, Output, Workspace
from keen.harness.mcp_calls import (
    ApprovalHandover,
    cleared_approval,
    mcp_checks,
    parse_call_mcp_tool,
    read_handle_call,
    run_mcp_call,
)
from keen.harness.policy import (
    TOUCHED_WINDOW,
    Entry,
    PolicyInputs,
    Selection,
    diff,
    permission,
    select,
)
from keen.harness.refusals import not_in_catalog, why_hidden
from keen.mcp.auth.store import register_saved_secrets
from keen.mcp.types import ServerState

__all__ = ["SEARCH_TOOLS", "Harness", "Observation", "PostHook", "PreHook", "Visibility"]


class Harness:
    """One agent session's gates and event log.

    Args:
        catalog_source: returns the live catalog (e.g. ``lambda: Catalog.from_manager(m, ...)``);
            called at each :meth:`begin_turn`.
        gateway: the MCP entry (its ``approval`` is taken over by the permission gate).
        mode: the permission mode.
        approve: asked for calls the gate marks ``ask`` (``None``: such calls are denied).
        workspace: the root of the local tools (plus ``$KEEN_HOME/skills``).
        budget: tokens available for the schemas of requested MCP tools (until a turn
            passes its own, see :meth:`begin_turn`).
        max_result_chars: longer results are cut with a note saying how to get the rest.
        pre_hooks: run in order after the permission gate; the first to return a string
            denies the call with it.
        post_hooks: run in order on the truncated observation; each may replace it.
        session_id: default a new one; the log is ``$KEEN_HOME/sessions/<id>.jsonl``.
        visibility: decide visibility per call instead of per turn (see the module
            docstring); ``None`` uses the turns' visible sets.
        log_path: where the event log goes instead of the session's file.
        approved_by: who answers ``approve`` (logged with each decision): ``user``, or
            ``MCP host`` for a host that asked its own user before calling.
        remedy_words: an error's text for the model, its remedy worded (``gateway.for_model``).
    """

    def __init__(
        self,
        catalog_source: Callable[[], Catalog],
        gateway: Gateway | None,
        *,
        mode: PermissionMode = "ask",
        approve: Approval | None = None,
        workspace: Path,
        budget: int = DEFAULT_BUDGET,
        max_result_chars: int = DEFAULT_MAX_RESULT_CHARS,
        pre_hooks: Sequence[PreHook] = (),
        post_hooks: Sequence[PostHook] = (),
        session_id: str | None = None,
        visibility: Visibility | None = None,
        log_path: Path | None = None,
        approved_by: str = "user",
        remedy_words: Callable[[KeenError, str], str] = for_model,
    ) -> None:
        self.catalog_source = catalog_source
        self.gateway = gateway
        self._handover = ApprovalHandover(gateway, self._gateway_approval) if gateway is not None else None
        self.mode: PermissionMode = mode
        self.approve = approve
        # Keen's own files (configs.json, sign-ins, logs) are not the model's to read, even
        # when KEEN_HOME lies in the workspace; tokens saved earlier are redacted if copied.
        self.workspace = Workspace(workspace, [paths.skills_dir()], private=[paths.keen_home()])
        register_saved_secrets()
        self.budget = budget
        self.max_result_chars = max_result_chars
        self.pre_hooks, self.post_hooks = list(pre_hooks), list(post_hooks)
        self.session_id = session_id or new_session_id()
        self.visibility, self.approved_by, self.remedy_words = visibility, approved_by, remedy_words
        self.log = EventLog(log_path or session_path(self.session_id), self.session_id)
        self.turn = 0
        self.visible: dict[str, Entry] = {}
        self.catalog: Catalog | None = None
        self.requested: list[str] = []
        self.touched: list[str] = []
        self.failures: dict[str, int] = {}
        self._caps: dict[str, Capability] = {}
        self._by_name: dict[str, str] = {}
        self._ids = itertools.count(1)
        self._more: str | None = None
        self._base = {
            **{n: local_capability(n, d) for n, (d, _) in LOCAL_TOOLS.items()},
            **{n: local_capability(n, d) for n, (d, _) in ENTRY_SCHEMAS.items()},
        }
        self.log.emit("session.start", mode=mode, workspace=str(self.workspace.workspace), budget=budget)
        self._changes = ChangeLog(self.log, gateway and gateway.manager, lambda: self.turn)

    # -- turns ------------------------------------------------------------------------------

    def _connected(self) -> tuple[str, ...]:
        manager = self.gateway.manager if self.gateway else None
        if manager is None:
            return ()
        return tuple(s.name for s in manager.servers() if s.state is ServerState.CONNECTED and s.enabled)

    def inputs(self, connected: tuple[str, ...]) -> PolicyInputs:
        return PolicyInputs(
            permission_mode=self.mode,
            connected_servers=connected,
            context_budget_remaining=self.budget,
            touched_paths=tuple(self.touched[-TOUCHED_WINDOW:]),
            recent_failures=tuple(i for i, n in self.failures.items() if n),
            requested=tuple(self.requested),
        )

    def begin_turn(self, *, context_budget: int | None = None) -> list[dict[str, Any]]:
        """Compute this turn's visible set, log its diff and the offered names.

        Args:
            context_budget: tokens the model's context has left for MCP tool schemas this
                turn (the agent measures its context); ``None`` keeps the last budget
                (at first the constructor's ``budget``).

        Returns:
            The tool definitions to give the model (MCP ``name``/``description``/``inputSchema``
            shape); the skill index is :meth:`skill_index`.

        Raises:
            ValueError: a negative ``context_budget``.
        """
        if context_budget is not None:
            if context_budget < 0:
                raise ValueError(f"context_budget must be >= 0 tokens, got {context_budget}")
            self.budget = context_budget
        self.turn += 1
        connected = self._connected()
        self._changes.log_flags(connected)
        self.catalog = catalog = self.catalog_source()
        names = catalog.names  # model_names of its ids, computed once per catalog
        base = [
            Entry(c.id, c.name, "tool", "base local tool")
            for c in self._base.values()
            if c.name != READ_RESOURCE
        ]
        inputs = self.inputs(connected)
        selection: Selection = select(base, catalog, names, inputs, self.failures)
        # read_resource is offered only while the resource index lists something to read.
        reader = self._base[READ_RESOURCE].id
        if any(e.kind in HANDLE_KINDS for e in selection.visible.values()):
            selection.visible[reader] = Entry(
                reader, READ_RESOURCE, "tool", "the resource index lists handles"
            )
        else:
            selection.hidden[reader] = "the resource index is empty"
        gone = {
            i: f"server {cap.server} is not connected"
            for i, cap in self._caps.items()
            if cap.server is not None and cap.server not in connected
        }
        body = diff(self.visible, selection, gone)
        if any(body.values()):
            self.log.emit("capability.diff", turn=self.turn, **body, policy_inputs=inputs.to_dict())
        self.visible = selection.visible
        self._caps = {c.id: c for c in catalog if c.id in self.visible} | {
            c.id: c for c in self._base.values()
        }
        self._by_name = {e.name: i for i, e in self.visible.items()}
        offered = sorted(e.name for e in self.visible.values() if e.kind == "tool")
        self.log.emit(
            "turn.start",
            turn=self.turn,
            offered=offered,
            skill_index=sorted(e.name for e in self.visible.values() if e.kind == "skill"),
            handles=sorted(e.name for e in self.visible.values() if e.kind in HANDLE_KINDS),
        )
        return [self._definition(self.visible[self._by_name[n]]) for n in offered]

    def end_turn(self, **data: Any) -> None:
        self.log.emit("turn.end", turn=self.turn, **data)

    def skill_index(self) -> str:
        """The skill index: one line per skill (name: summary), never a body."""
        skills = [self._caps[i] for i, e in self.visible.items() if e.kind == "skill"]
        return "\n".join(f"- {c.name}: {c.summary}" for c in sorted(skills, key=lambda c: c.name))

    def resource_index(self) -> str:
        """The resource index: one line per visible MCP resource or prompt (the name to give
        ``read_resource``, what it is, its summary), never its contents."""
        lines = []
        for cap_id, entry in sorted(self.visible.items(), key=lambda item: item[1].name):
            if entry.kind in HANDLE_KINDS:
                cap = self._caps[cap_id]
                lines.append(f"- {entry.name} ({cap.kind} {cap.name} on {cap.server}): {cap.summary}")
        return "\n".join(lines)

    def touch(self, *paths: str) -> None:
        """Record paths the session worked on (the agent's own tools; the local read tools
        record theirs), newest last: a policy input (path-scoped skills)."""
        for path in paths:
            if path in self.touched:
                self.touched.remove(path)
            self.touched.append(path)

    def set_mode(self, mode: PermissionMode) -> None:
        """Switch the permission mode; the visible set follows at the next turn."""
        self.log.emit("mode.change", turn=self.turn, before=self.mode, after=mode)
        self.mode = mode

    def _definition(self, entry: Entry) -> dict[str, Any]:
        if entry.name in LOCAL_TOOLS:
            description, schema = LOCAL_TOOLS[entry.name]
        elif entry.name in ENTRY_SCHEMAS:
            description, schema = ENTRY_SCHEMAS[entry.name]
        else:
            loaded = self._caps[entry.id].load()
            description, schema = loaded.descriptor.summary, loaded.schema or {"type": "object"}
        return {"name": entry.name, "description": description, "inputSchema": schema}

    def close(self) -> None:
        """Close the event log and give the gateway back the approval it had before (or on
        to a harness opened on it later and still open: :class:`ApprovalHandover`)."""
        if self._handover is not None:
            self._handover.give_back()
        self._changes.close()
        self.log.close()

    # -- the pipeline -----------------------------------------------------------------------

    async def call(self, name: str, arguments: Any = None, *, caller: str | None = None) -> Observation:
        """Run one tool call the model proposed through every gate. Never raises KeenError.

        Args:
            name: a tool name offered this turn (or ``call_mcp_tool``).
            arguments: its JSON object of arguments (``None``: ``{}``); anything else is
                refused at validate, and text (arguments that did not parse) is told
                whether it was JSON at all.
            caller: who sent the call (``keen serve``'s caller scope), logged with it and
                given to the ``visibility`` callback.
        """
        call_id = f"{self.turn}.{next(self._ids)}"
        arguments = {} if arguments is None else arguments
        who: dict[str, Any] = {"caller": caller} if caller else {}
        self.log.emit("call", turn=self.turn, call_id=call_id, name=name, arguments=arguments, **who)
        stages: list[str] = []
        try:
            obs = await self._gates(call_id, name, arguments, stages, caller)
        except anyio.get_cancelled_exc_class():
            # Audited before the cancellation goes on: a call with no result reads as a crash.
            self.log.emit(
                "result", turn=self.turn, call_id=call_id, capability=self._by_name.get(name, name),
                outcome="cancelled", code="cancelled", stages=[*stages, "audit"], **who,
            )  # fmt: skip
            raise
        if obs.denied is None:
            obs = self._truncate(obs)
            stages.append("truncate")
            obs = self._post_hooks(call_id, obs)
            stages.append("post_hooks")
        cap_id = obs.capability
        if cap_id.startswith("mcp__"):
            failed = obs.is_error and obs.denied in (None, "validate")
            self.failures[cap_id] = self.failures.get(cap_id, 0) + 1 if failed else 0
            if obs.denied is None and not obs.is_error and cap_id in self.requested:
                # Used: the newest under a tight budget (policy: most recent request or use).
                self.requested.remove(cap_id)
                self.requested.append(cap_id)
        self.log.emit(
            "result",
            turn=self.turn,
            call_id=call_id,
            capability=cap_id,
            server=obs.server,
            tool=obs.tool,
            outcome="denied" if obs.denied else ("error" if obs.is_error else "ok"),
            gate=obs.denied,
            code=obs.code,
            text=obs.text,
            truncated_chars=obs.truncated_chars,
            stages=[*stages, "audit"],
            **who,
        )
        return obs

    def _deny(
        self,
        call_id: str,
        name: str,
        gate: str,
        text: str,
        cap_id: str = "",
        code: str | None = None,
        where: tuple[str | None, str | None] = (None, None),
    ) -> Observation:
        return Observation(
            call_id,
            name,
            f"Denied ({gate}): {text}",
            is_error=True,
            denied=gate,
            capability=cap_id,
            code=code or GATE_CODES[gate],
            server=where[0],
            tool=where[1],
        )

    def _lookup(self, cap_id: str, name: str) -> Capability | None:
        """The capability a call names, from the live catalog (``visibility`` callback mode)."""
        if name in self._base and name != CALL_MCP_TOOL:
            return self._base[name]
        catalog = self.catalog = self.catalog_source()
        for key in (cap_id, name if name != CALL_MCP_TOOL else ""):
            if key:
                try:
                    return catalog.get(key)  # an id, or a model tool name
                except KeyError:
                    pass
        return None

    async def _gates(
        self, call_id: str, name: str, arguments: Any, stages: list[str], caller: str | None
    ) -> Observation:
        # validate: the shape of the call (and a local tool's arguments).
        if not isinstance(arguments, dict):
            return self._deny(call_id, name, "validate", _not_an_object(arguments))
        args: dict[str, Any] = dict(arguments)  # type: ignore[arg-type]
        server = tool = None
        if name == CALL_MCP_TOOL:
            parsed = parse_call_mcp_tool(args)
            if parsed is None:
                return self._deny(
                    call_id, name, "validate", 'send {"server": ..., "tool": ..., "arguments": {...}}'
                )
            server, tool, args = parsed
            cap_id = capability_id("tool", tool, server)
        else:
            cap_id = self._by_name.get(name) or (self._base[name].id if name in self._base else "")
        handle = name == READ_RESOURCE and self.visibility is None
        if name in LOCAL_TOOLS or (name in ENTRY_SCHEMAS and name != CALL_MCP_TOOL):
            try:
                jsonschema.validate(args, (LOCAL_TOOLS.get(name) or ENTRY_SCHEMAS[name])[1])
            except jsonschema.ValidationError as exc:
                return self._deny(call_id, name, "validate", f"invalid arguments: {exc.message}", cap_id)
        stages.append("validate")
        if handle and cap_id in self.visible:
            # The call reads a handle: the handle is the capability the gates judge.
            wanted = str(args["name"])
            cap_id = self._by_name.get(wanted, "")  # visible entries only
            if not cap_id or self.visible[cap_id].kind not in HANDLE_KINDS:
                return self._deny(
                    call_id, name, "visibility",
                    f"no resource or prompt {wanted!r} in the resource index; search_tools finds them",
                    cap_id or wanted,
                )  # fmt: skip
        # visibility: only what this turn offered (or what the callback allows this caller).
        if self.visibility is not None:
            cap = self._lookup(cap_id, name)
            if cap is None:  # the gateway's precise reason when there is one
                gate, why, code = not_in_catalog(self.gateway, self.remedy_words, server, tool, args)
                return self._deny(call_id, name, gate, why, "", code, (server, tool))
            cap_id = cap.id
            if hidden := await self.visibility(cap, caller):
                return self._deny(call_id, name, "visibility", hidden, cap_id, where=(cap.server, cap.name))
        else:
            cap = self._caps.get(cap_id)
            if cap_id not in self.visible or cap is None:
                why, code = why_hidden(
                    self.catalog, self.gateway, self.mode, self.remedy_words, cap_id, name, server, tool, args
                )
                return self._deny(
                    call_id, name, "visibility", why, cap_id or name, code, where=(server, tool)
                )  # fmt: skip
        if server is not None and cap.server is not None and (cap.server, cap.name) != (server, tool):
            # Ids join server and tool with "__", so a/b__c and a__b/c are both mcp__a__b__c and
            # the catalog holds one of them: never run that one for a call that named the other.
            return self._deny(
                call_id, name, "visibility",
                f'"{server}/{tool}" and "{cap.server}/{cap.name}" have the same capability id {cap_id}, '
                "so Keen cannot tell them apart and runs neither in place of the other. The user has "
                'to rename one of these servers in configs.json (a name without "__"); tell them.',
                cap_id, where=(server, tool),
            )  # fmt: skip
        if cap.server is not None and cap.kind == "tool":
            server, tool = cap.server, cap.name
        stages.append("visibility")
        where = (server, tool)
        if server is not None and tool is not None and self.gateway is not None:
            if refused := mcp_checks(self.gateway, self.remedy_words, server, tool, args):
                return self._deny(call_id, name, "validate", refused[0], cap_id, refused[1], where)
            stages.append("mcp_checks")
        # permission: the second gate (approval when the mode says ask).
        verdict, why = permission(cap, self.mode)
        asked = verdict == "ask"
        if asked:
            verdict, why = await ask(self.approve, self.approved_by, cap, server, tool, args)
        if asked or cap.server is not None:
            by = self.approved_by if asked else "policy"
            self.log.emit("approval", turn=self.turn, call_id=call_id, decision=verdict, by=by, reason=why)
        if verdict != "allow":
            return self._deny(call_id, name, "permission", why, cap_id, where=where)
        stages.append("permission")
        for hook in self.pre_hooks:
            if refusal := hook(cap_id, args):
                self.log.emit(
                    "hook", turn=self.turn, call_id=call_id, stage="pre", hook=hook_name(hook), denied=refusal
                )
                return self._deny(call_id, name, "hook", refusal, cap_id, where=where)
        stages.append("pre_hooks")
        stages.append("execute")
        if server is not None and tool is not None:
            return await self._mcp(call_id, name, cap_id, server, tool, args)
        if cap.kind in HANDLE_KINDS:
            return await self._read_handle(call_id, name, cap, args)
        return await self._run_local(call_id, name, cap_id, args)

    async def _read_handle(
        self, call_id: str, name: str, cap: Capability, args: dict[str, Any]
    ) -> Observation:
        obs = await read_handle_call(self.gateway, self.remedy_words, call_id, name, cap, args)
        if not obs.is_error:
            self._more = f"ask the user for a narrower part of {cap.name}"
        return obs

    def _gateway_approval(self, request: ApprovalRequest) -> bool:
        """The gateway's approval: yes only for the call the permission gate just cleared."""
        return cleared_approval(request)

    async def _mcp(
        self, call_id: str, name: str, cap_id: str, server: str, tool: str, args: dict[str, Any]
    ) -> Observation:
        assert self.gateway is not None
        return await run_mcp_call(self.gateway, self.remedy_words, call_id, name, cap_id, server, tool, args)

    async def _run_local(self, call_id: str, name: str, cap_id: str, args: dict[str, Any]) -> Observation:
        try:
            if name == SEARCH_TOOLS:
                assert self.catalog is not None
                kinds = list(args.get("kinds") or ["tool"])
                query, k = str(args["query"]), int(args.get("k", 5))
                out = search_catalog(self.catalog, self.mode, self.requested, query, k, kinds)
            elif name == LOAD_SKILL:
                out = self._load_skill(str(args["name"]))
            else:
                out = await self.workspace.run_cancellably(name, args)
        except (LocalToolError, KeenError, ValueError, OSError) as exc:
            message = exc.message if isinstance(exc, KeenError) else str(exc)
            code = exc.code if isinstance(exc, KeenError) else "local_tool_error"
            return Observation(
                call_id, name, f"Error: {message}", is_error=True, capability=cap_id, code=code
            )
        self.touch(*out.touched)
        self._more = out.more
        return Observation(call_id, name, out.text, capability=cap_id)

    def _load_skill(self, name: str) -> Output:
        cap_id = capability_id("skill", name)
        if cap_id not in self.visible:
            raise LocalToolError(f"no skill {name!r} in the skill index; pick a name from the index")
        loaded = self._caps[cap_id].load()
        self.log.emit("capability.loaded", turn=self.turn, id=cap_id)
        return Output(
            loaded.text,
            more=f"read_file the skill's SKILL.md at {self._caps[cap_id].location} with an offset",
        )

    def _truncate(self, obs: Observation) -> Observation:
        more, self._more = self._more, None
        text, cut = cut_text(obs.text, self.max_result_chars, more)
        if cut:
            return replace(obs, text=text, truncated_chars=cut, raw=None)
        raw = obs.raw
        if raw is not None and raw.text and raw.structured_content is not None:
            # The text fits, but a front end passing the raw result on (keen serve) would send
            # its structuredContent too, whatever its size: leave it out, as Gateway.shape does.
            size = len(json.dumps(raw.structured_content, ensure_ascii=False))
            if len(text) + size > self.max_result_chars:
                note = (
                    f"\n[structuredContent left out: its {size} characters of JSON would pass the "
                    f"{self.max_result_chars}-character limit; the text above carries the result]"
                )
                return replace(obs, text=text + note, raw=None)
        return obs

    def _post_hooks(self, call_id: str, obs: Observation) -> Observation:
        for hook in self.post_hooks:
            after = hook(obs)
            if after != obs:
                self.log.emit(
                    "hook", turn=self.turn, call_id=call_id, stage="post", hook=hook_name(hook), changed=True
                )
                # The text no longer is what the server sent: front ends must show this one.
                obs = replace(after, raw=None) if after.text != obs.text else after
        return obs


def _not_an_object(arguments: Any) -> str:
    """Why arguments that are not an object are refused; text (a model's arguments that did
    not parse) says whether it is JSON at all, so the model knows what to fix."""
    if isinstance(arguments, str):
        try:
            json.loads(arguments)
        except json.JSONDecodeError as exc:
            return (
                f"arguments must be a JSON object; these are not JSON ({exc.msg} at character {exc.pos}); "
                "send them again as one JSON object"
            )
        return "arguments must be a JSON object, not another JSON value; send them again as one JSON object"
    return "arguments must be a JSON object"
