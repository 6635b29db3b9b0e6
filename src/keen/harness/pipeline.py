"""The harness: one pipeline for every tool call, and the visible set per step.

Each call, local or MCP, passes the one pipeline every front end's calls pass
(:mod:`keen.calls`): validate > visibility > mcp_checks > pin_check > permission > pre-hooks >
execute > truncate > post-hooks > audit. The harness gives it the stages only it has
(validate, visibility, the permission modes, hooks, local tools); the gateway gives it
``mcp_checks`` and ``pin_check`` (:meth:`keen.gateway.Gateway.checks`) and its ``execute``
(:meth:`keen.gateway.Gateway.execute`). Who is asked about a call is the call's own
:class:`~keen.calls.Approver`; nothing is swapped into the gateway. A refusal at any gate is
an observation (an ``is_error`` :class:`Observation` saying why), never an exception that
ends the step.

Validation is split around the visibility gate: the call's shape (and a local tool's
arguments) is checked first; the MCP checks (server, tool, inputSchema: ``Manager.check_call``,
once) run once the capability is known to be visible, so a hidden tool's schema never leaks
through its errors. Every ``result`` event lists the stages the call passed, in order
(``stages``).

Two ways to decide visibility:

- steps (an agent; a step is one model request, docs/architecture.md "Names"):
  :meth:`Harness.begin_step` computes the visible set from the
  discovery policy, and a call outside it is refused;
- a ``visibility`` callback (``keen serve``): there are no steps; each call's capability is
  looked up in the live catalog and the callback, given it and the ``caller``, says whether
  that caller may use it (the ``tool_descriptions`` extension: a fetched description
  authorizes the tool).
"""

from __future__ import annotations

import contextlib
import itertools
import json
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from keen import paths
from keen._terminal import name_in_message
from keen.calls import (
    Approval,
    Approver,
    Call,
    Pipeline,
    Refusal,
    Stage,
    cut_text,
    shape,
)
from keen.capabilities import Capability, Catalog, PermissionMode, capability_id
from keen.capabilities.modes import check_mode
from keen.entry_tools import parse_call, parse_search
from keen.errors import KeenError, ServerNotConfigured
from keen.gateway import CALL_MCP_TOOL, Gateway, for_model
from keen.harness.changes import ChangeLog
from keen.harness.definitions import offered_definition
from keen.harness.entries import (
    DEFAULT_BUDGET,
    DEFAULT_MAX_RESULT_CHARS,
    ENTRY_TOOLS,
    GATE_CODES,
    HANDLE_KINDS,
    LOAD_SKILL,
    READ_RESOURCE,
    SEARCH_TOOLS,
    Observation,
    PostHook,
    PreHook,
    Visibility,
    entry_schema,
    local_capability,
)
from keen.harness.events import EventLog, LineShape, new_session_id, session_path
from keen.harness.executors import ask, hook_name, known_answer, read_handle, search_catalog
from keen.harness.local import LOCAL_TOOLS, LocalToolError, Output, Workspace
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
from keen.mcp.types import ServerState

__all__ = ["SEARCH_TOOLS", "Harness", "Observation", "PostHook", "PreHook", "Visibility"]


def _register_saved_secrets() -> None:
    """:func:`keen.mcp.auth.store.register_saved_secrets`, imported (with pydantic, which the
    store's reader needs) only when a sign-in was saved: most sessions have none, and the
    import would come before their first model request."""
    try:
        saved = any(paths.auth_dir().glob("*.json"))
    except OSError:
        saved = True  # let the store's own reader decide
    if saved:
        from keen.mcp.auth.store import register_saved_secrets

        register_saved_secrets()


class Harness:
    """One agent session's gates and event log.

    Args:
        catalog_source: returns the live catalog (e.g. ``lambda: Catalog.from_manager(m, ...)``);
            called at each :meth:`begin_step`.
        gateway: the MCP entry: its checks and its execute stage (its own ``approval`` is for
            calls made on it directly, never for the harness's).
        mode: the permission mode: ``read-only``, ``ask`` or ``auto`` (anything else raises
            ValueError).
        approve: asked for calls the gate marks ``ask`` (``None``: such calls are denied),
            unless a call brings its own approver.
        workspace: the root of the local tools (plus ``$KEEN_HOME/skills``).
        budget: tokens available for the schemas of requested MCP tools (until a step
            passes its own, see :meth:`begin_step`).
        max_result_chars: longer results are cut with a note saying how to get the rest.
        pre_hooks: run in order after the permission gate; the first to return a string
            denies the call with it.
        post_hooks: run in order on the truncated observation; each may replace it.
        session_id: default a new one; the log is ``$KEEN_HOME/sessions/<id>.jsonl``.
        visibility: decide visibility per call instead of per step (see the module
            docstring); ``None`` uses the steps' visible sets.
        log_path: where the event log goes instead of the session's file.
        approved_by: who answers ``approve`` (logged with each decision): ``user``, or
            ``MCP host`` for a host that asked its own user before calling.
        remedy_words: an error's text for the model, its remedy worded (``gateway.for_model``).
        look: with ``visibility``, looks at a server's pin file before a call to it looks the
            capability up (``keen serve``: a catalog keyed on the pins' version then sees a
            pin written in another process on that very call); within the call's one look
            at the pins (:func:`keen.trust.pinstore.one_look`), so later stages stat no more.
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
        look: Callable[[str], object] | None = None,
    ) -> None:
        self.catalog_source = catalog_source
        self.gateway = gateway
        self.mode: PermissionMode = check_mode(mode)  # "readonly" would show and run writes
        self.approve = approve
        # Keen's own files (configs.json, sign-ins, logs) are not the model's to read, even
        # when KEEN_HOME lies in the workspace; tokens saved earlier are redacted if copied.
        self.workspace = Workspace(workspace, [paths.skills_dir()], private=[paths.keen_home()])
        _register_saved_secrets()
        self.budget = budget
        self.max_result_chars = max_result_chars
        self.pre_hooks, self.post_hooks = list(pre_hooks), list(post_hooks)
        self.session_id = session_id or new_session_id()
        self.visibility, self.approved_by, self.remedy_words = visibility, approved_by, remedy_words
        self.look = look
        self.log = EventLog(log_path or session_path(self.session_id), self.session_id)
        self.step = 0
        self.visible: dict[str, Entry] = {}
        self.catalog: Catalog | None = None
        self.requested: list[str] = []
        self.touched: list[str] = []
        self.failures: dict[str, int] = {}
        self._caps: dict[str, Capability] = {}
        self._by_name: dict[str, str] = {}
        self._ids = itertools.count(1)
        self._verdicts: dict[
            str, tuple[Capability, PermissionMode, Approver, str, str, bool, LineShape | None]
        ] = {}
        """Capability id -> the permission gate's last verdict known without asking, with the
        capability, mode and approver it was for, and an allowed logged verdict's fields'
        shape (:meth:`_permission`)."""
        self._shapes: dict[tuple[Any, ...], LineShape] = {}
        """A call's lines' fixed fields (:meth:`_shape`): the step, the tool, the caller, a
        verdict, an outcome and the stages passed are the same for every call of a tool."""
        self._found: tuple[Catalog, str, Capability] | None = None
        """The last capability the visibility callback's lookup found, the catalog and id it
        was found in (:meth:`_lookup`)."""
        self._base = {
            **{n: local_capability(n, d) for n, (d, _) in LOCAL_TOOLS.items()},
            **{n: local_capability(n, entry_schema(n)[0]) for n in ENTRY_TOOLS},
        }
        self.log.emit("session.start", mode=mode, workspace=str(self.workspace.workspace), budget=budget)
        self._changes = ChangeLog(self.log, gateway and gateway.manager, lambda: self.step)
        self._pipeline = Pipeline(
            [
                Stage("validate", self._validate),
                Stage("visibility", self._visibility),
                *(gateway.checks() if gateway is not None else ()),
                Stage("permission", self._permission),
                Stage("pre_hooks", self._pre_hooks),
                Stage("execute", self._execute),
                Stage("truncate", self._truncate),
                Stage("post_hooks", self._post_hooks),
            ],
            self._audit,
            self._describe,
        )

    # -- steps ------------------------------------------------------------------------------

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

    def begin_step(self, *, context_budget: int | None = None) -> list[dict[str, Any]]:
        """Compute this step's visible set (before one model request), log its diff and the
        offered names.

        Args:
            context_budget: tokens the model's context has left for MCP tool schemas this
                step (the agent measures its context); ``None`` keeps the last budget
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
        self.step += 1
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
            self.log.emit("capability.diff", step=self.step, **body, policy_inputs=inputs.to_dict())
        self.visible = selection.visible
        self._caps = {c.id: c for c in catalog if c.id in self.visible} | {
            c.id: c for c in self._base.values()
        }
        self._by_name = {e.name: i for i, e in self.visible.items()}
        offered = sorted(e.name for e in self.visible.values() if e.kind == "tool")
        self.log.emit(
            "step.start",
            step=self.step,
            offered=offered,
            skill_index=sorted(e.name for e in self.visible.values() if e.kind == "skill"),
            handles=sorted(e.name for e in self.visible.values() if e.kind in HANDLE_KINDS),
        )
        return [self._definition(self.visible[self._by_name[n]]) for n in offered]

    def end_step(self, **data: Any) -> None:
        self.log.emit("step.end", step=self.step, **data)

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
                # The URI is the server's (a template may run to thousands of characters).
                what = f"{cap.kind} {name_in_message(cap.name)} on {cap.server}"
                lines.append(f"- {entry.name} ({what}): {cap.summary}")
        return "\n".join(lines)

    def touch(self, *paths: str) -> None:
        """Record paths the session worked on (the agent's own tools; the local read tools
        record theirs), newest last: a policy input (path-scoped skills)."""
        for path in paths:
            if path in self.touched:
                self.touched.remove(path)
            self.touched.append(path)

    def request(self, cap_ids: Iterable[str]) -> list[str]:
        """Ask for capabilities (search hits, a schema read, a call to a tool that exists but
        is not visible yet): each id not asked for yet joins :attr:`requested`, a discovery
        policy input, so the next step may show it (docs/architecture.md "The harness").

        A ``capability.request`` event records the ids added and the whole list when any
        was: a session killed before its next step (whose ``capability.diff`` would say)
        still tells what the model unlocked (:mod:`keen.agent.resume`).

        Returns:
            The ids added, in order.
        """
        added = [i for i in dict.fromkeys(cap_ids) if i not in self.requested]
        if added:
            self.requested.extend(added)
            self.log.emit("capability.request", step=self.step, added=added, requested=list(self.requested))
        return added

    def set_mode(self, mode: PermissionMode) -> None:
        """Switch the permission mode; the visible set follows at the next step.

        Raises:
            ValueError: ``mode`` is not a permission mode (nothing changes).
        """
        mode = check_mode(mode)
        self.log.emit("mode.change", step=self.step, before=self.mode, after=mode)
        self.mode = mode

    def _definition(self, entry: Entry) -> dict[str, Any]:
        if entry.name in LOCAL_TOOLS or entry.name in ENTRY_TOOLS:
            return offered_definition(entry.name)  # as keen chat's first request has them
        loaded = self._caps[entry.id].load()
        description, schema = loaded.descriptor.summary, loaded.schema or {"type": "object"}
        return {"name": entry.name, "description": description, "inputSchema": schema}

    def close(self) -> None:
        """Close the event log (and stop logging the servers' tool changes)."""
        self._changes.close()
        self.log.close()

    # -- the pipeline -----------------------------------------------------------------------

    async def call(
        self,
        name: str,
        arguments: Any = None,
        *,
        caller: str | None = None,
        approver: Approver | None = None,
        tool_call_id: str = "",
    ) -> Observation:
        """Run one tool call the model proposed through every stage. Never raises KeenError.

        Args:
            name: a tool name offered this step (or ``call_mcp_tool``).
            arguments: its JSON object of arguments (``None``: ``{}``), or JSON text of one
                (as the OpenAI SDK hands a tool call's ``function.arguments`` over, and as
                ``Gateway.handle_tool_call`` takes it); anything else is refused at validate,
                and text (arguments that did not parse) is told whether it was JSON at all.
            caller: who sent the call (``keen serve``'s caller scope), logged with it and
                given to the ``visibility`` callback.
            approver: who the permission stage asks about this call, and how (default: the
                harness's ``approve``, answered by ``approved_by``).
            tool_call_id: the model's id of the call (its tool call ``id``), recorded in the
                call's ``result`` event when given ("": none).
        """
        call_id = f"{self.step}.{next(self._ids)}"
        arguments = {} if arguments is None else _object_of(arguments)
        step = self.step
        shape = self._shapes.get(("call", step, name, caller))
        if shape is None:
            who: dict[str, Any] = {"caller": caller} if caller else {}
            shape = self._shape(
                ("call", step, name, caller),
                ("call_id", "arguments"),
                step=step, call_id="", name=name, arguments=None, **who,
            )  # fmt: skip
        # The call's events are written together: those before execute as it starts, the rest
        # at the end (keen.harness.events); the call's own line is kept open for the
        # permission gate's verdict (annotate): one line less per call.
        with self.log.held("call", shape, call_id, arguments):
            approver = approver or Approver(self.approve, self.approved_by)
            call = await self._pipeline.run(
                Call(name, arguments, approver, caller=caller, call_id=call_id, tool_call_id=tool_call_id)
            )
        return call.shown or _observation(call)

    def _shape(self, key: tuple[Any, ...], varying: tuple[str, ...], **data: Any) -> LineShape:
        """A line's shape, kept under ``key`` (every fixed value of it) for the next call with
        the same; at most :data:`_SHAPES` kept (callers and steps come and go), and none
        whose fixed strings are long (a host or a model may send a name of any length: kept,
        it would hold on to it until the next clear)."""
        shape = LineShape(varying, **data)
        if all(value.__class__ is not str or len(value) <= _KEPT_CHARS for value in key):
            if len(self._shapes) >= _SHAPES:
                self._shapes.clear()
            self._shapes[key] = shape
        return shape

    def _lookup(self, cap_id: str, name: str) -> Capability | None:
        """The capability a call names, from the live catalog (``visibility`` callback mode)."""
        if name in self._base and name != CALL_MCP_TOOL:
            return self._base[name]
        catalog = self.catalog = self.catalog_source()
        found = self._found
        if found is not None and found[0] is catalog and found[1] == cap_id:  # the same tool again
            return found[2]
        for key in (cap_id, name if name != CALL_MCP_TOOL else ""):
            if key:
                try:
                    cap = catalog.get(key)  # an id, or a model tool name
                except KeyError:
                    continue
                if key == cap_id:  # a catalog is never changed in place: a new one is a new object
                    self._found = (catalog, cap_id, cap)
                return cap
        return None

    def _describe(self, call: Call, exc: KeenError) -> str:
        return self.remedy_words(exc, call.server or "")

    def _refuse(self, call: Call, gate: str, text: str, code: str | None = None) -> Refusal:
        return Refusal(gate, text, code or GATE_CODES[gate])

    def _validate(self, call: Call) -> bool:
        """The call's shape: an object of arguments; ``call_mcp_tool``'s input parsed; a local
        tool's arguments against its schema."""
        if not isinstance(call.arguments, dict):
            raise self._refuse(call, "validate", _not_an_object(call.arguments))
        name = call.name
        if name == CALL_MCP_TOOL:
            try:
                parsed = parse_call(call.arguments)  # never changes it; its arguments a copy
            except ValueError as exc:
                raise self._refuse(call, "validate", str(exc)) from None
            call.server, call.tool, args = parsed.server, parsed.tool, parsed.arguments
            call.capability_id = capability_id("tool", call.tool, call.server)
        else:
            args: dict[str, Any] = dict(call.arguments)  # type: ignore[arg-type]
            call.capability_id = self._by_name.get(name) or (
                self._base[name].id if name in self._base else ""
            )
        call.arguments = args
        if name == SEARCH_TOOLS:
            try:
                parse_search(args)
            except ValueError as exc:
                raise self._refuse(call, "validate", str(exc)) from None
        elif name in LOCAL_TOOLS or name in (LOAD_SKILL, READ_RESOURCE):
            import jsonschema  # with the first call, not before a session's first model request

            try:
                jsonschema.validate(args, (LOCAL_TOOLS.get(name) or entry_schema(name))[1])
            except jsonschema.ValidationError as exc:
                raise self._refuse(call, "validate", f"invalid arguments: {exc.message}") from None
        return True

    def _visibility(self, call: Call) -> bool | Awaitable[bool]:
        """Only what this step offered (or what the callback allows this caller); awaited only
        when the callback's answer has to be."""
        name, args, server, tool = call.name, call.arguments, call.server, call.tool
        cap_id = call.capability_id
        if name == READ_RESOURCE and self.visibility is None and cap_id in self.visible:
            # The call reads a handle: the handle is the capability the gates judge.
            wanted = str(args["name"])
            cap_id = self._by_name.get(wanted, "")  # visible entries only
            if not cap_id or self.visible[cap_id].kind not in HANDLE_KINDS:
                call.capability_id = cap_id or wanted
                raise self._refuse(
                    call,
                    "visibility",
                    f"no resource or prompt {wanted!r} in the resource index; search_tools finds them",
                )
        if self.visibility is not None:
            if self.look is not None and server is not None:
                self.look(server)
            cap = self._lookup(cap_id, name)
            if cap is None:  # the gateway's precise reason when there is one
                gate, why, code = not_in_catalog(self.gateway, self.remedy_words, server, tool, args)
                call.capability_id = ""
                raise self._refuse(call, gate, why, code)
            call.capability_id = cap.id
            hidden = self.visibility(cap, call.caller)
            if hidden is not None and hidden.__class__ is not str:  # an awaitable answer
                return self._visible_after(call, cap, hidden)  # pyright: ignore[reportArgumentType]  (checked: not a str)
            return self._visible(call, cap, hidden)  # pyright: ignore[reportArgumentType]  (checked: a str or None)
        else:
            cap = self._caps.get(cap_id)
            if cap_id not in self.visible or cap is None:
                why, code = why_hidden(
                    self.catalog, self.gateway, self.mode, self.remedy_words, cap_id, name, server, tool
                )
                call.capability_id = cap_id or name
                raise self._refuse(call, "visibility", why, code)
            call.capability_id = cap_id
        return self._visible(call, cap, None)

    async def _visible_after(self, call: Call, cap: Capability, answer: Awaitable[str | None]) -> bool:
        return self._visible(call, cap, await answer)

    def _visible(self, call: Call, cap: Capability, hidden: str | None) -> bool:
        """The rest of the visibility gate once the capability is known (``hidden``: why the
        callback hides it from this caller, None when it does not)."""
        if hidden:
            call.server, call.tool = cap.server, cap.name
            raise self._refuse(call, "visibility", hidden)
        server, tool = call.server, call.tool
        if server is not None and cap.server is not None and (cap.server, cap.name) != (server, tool):
            # Ids join server and tool with "__", so a/b__c and a__b/c are both mcp__a__b__c and
            # the catalog holds one of them: never run that one for a call that named the other.
            raise self._refuse(
                call, "visibility",
                f'"{name_in_message(f"{server}/{tool}")}" and "{name_in_message(f"{cap.server}/{cap.name}")}" have '
                f"the same capability id {name_in_message(cap.id)}, "
                "so Keen cannot tell them apart and runs neither in place of the other. The user has "
                'to rename one of these servers in configs.json (a name without "__"); tell them.',
            )  # fmt: skip
        if cap.server is not None and cap.kind == "tool":
            call.server, call.tool = cap.server, cap.name
        call.capability = cap
        return True

    def _permission(self, call: Call) -> bool | Awaitable[bool]:
        """The second gate: the mode's verdict, and the call's approver when the mode says ask
        (awaited only when its answer is not known without asking: :func:`known_answer`)."""
        cap: Capability = call.capability
        mode, approver = self.mode, call.approver
        # The verdict depends on the capability (its risk), the mode and the approver alone,
        # never on the arguments: the last one known without asking is kept per capability
        # id, and used while all three are the same objects (a catalog rebuilt after a
        # re-list or a pin change has new capabilities; set_mode a new mode).
        seen = self._verdicts.get(cap.id)
        if seen is not None and seen[0] is cap and seen[1] == mode and seen[2] is approver:
            said = seen[6]
            if said is not None and self.log.annotate_fields(said.fields()):  # allowed, as before
                call.decision = "allowed"
                return True
            return self._decided(call, cap, seen[3], seen[4], asked=seen[5])
        verdict, why = permission(cap, mode)
        asked = verdict == "ask"
        if asked:
            known = known_answer(approver)
            if known is None:
                return self._ask(call, cap)
            verdict, why = known
        # An allowed verdict that is logged: its fields' shape kept with it, for the calls
        # that are allowed the same way again (_decided's work in one step).
        said = (
            self._said(verdict, approver.by if asked else "policy", why)
            if verdict == "allow" and (asked or cap.server is not None)
            else None
        )
        self._verdicts[cap.id] = (cap, mode, approver, verdict, why, asked, said)
        return self._decided(call, cap, verdict, why, asked=asked)

    async def _ask(self, call: Call, cap: Capability) -> bool:
        verdict, why, call.declined = await ask(call.approver, cap, call.server, call.tool, call.arguments)
        return self._decided(call, cap, verdict, why, asked=True)

    def _decided(self, call: Call, cap: Capability, verdict: str, why: str, *, asked: bool) -> bool:
        """The permission gate's verdict: logged (an asked call's, and every MCP call's),
        recorded on the call, and a refusal raised when it is not ``allow``."""
        if asked or cap.server is not None:
            by = call.approver.by if asked else "policy"
            if not self.log.annotate_fields(
                self._said(verdict, by, why).fields()
            ):  # the call's line was written
                self.log.emit(
                    "approval", step=self.step, call_id=call.call_id, decision=verdict, by=by, reason=why
                )
        call.decision = "allowed" if verdict == "allow" else "denied"
        if verdict != "allow":
            raise self._refuse(call, "permission", why)
        return True

    def _said(self, verdict: str, by: str, why: str) -> LineShape:
        """The shape of a verdict's fields in the call's line (``decision``, ``by``, ``reason``)."""
        shape = self._shapes.get(("verdict", verdict, by, why))
        if shape is None:
            shape = self._shape(("verdict", verdict, by, why), (), decision=verdict, by=by, reason=why)
        return shape

    def _pre_hooks(self, call: Call) -> bool:
        for hook in self.pre_hooks:
            if refusal := hook(call.capability_id, call.arguments):
                self.log.emit(
                    "hook",
                    step=self.step,
                    call_id=call.call_id,
                    stage="pre",
                    hook=hook_name(hook),
                    denied=refusal,
                )
                raise self._refuse(call, "hook", refusal)
        return True

    def _execute(self, call: Call) -> Awaitable[bool]:
        """MCP tools through the gateway; resource reads; ToolSearch, skills and local tools.

        Returns the gateway's execute itself for an MCP call (awaited by the pipeline: a
        coroutine less to resume at every step of the call)."""
        self.log.release()  # the call and its approval are on disk before anything runs
        if call.mcp:
            assert self.gateway is not None
            return self.gateway.execute(call)
        return self._execute_here(call)

    async def _execute_here(self, call: Call) -> bool:
        """:meth:`_execute` of what the harness runs itself: resource reads, ToolSearch,
        skills and local tools."""
        cap: Capability = call.capability
        if cap.kind in HANDLE_KINDS:
            call.server = cap.server
            if self.gateway is None:
                raise ServerNotConfigured("no MCP servers in this session", server=cap.server or "")
            call.text = await read_handle(self.gateway.manager, cap, call.arguments.get("arguments") or {})
            call.hint = f'ask the user for a narrower part of "{name_in_message(cap.name)}"'
            return True
        name, args = call.name, call.arguments
        try:
            if name == SEARCH_TOOLS:
                assert self.catalog is not None
                wanted = parse_search(args)
                out = search_catalog(
                    self.catalog, self.mode, self.request, wanted.query, wanted.limit, wanted.kinds
                )
            elif name == LOAD_SKILL:
                out = self._load_skill(str(args["name"]))
            else:
                out = await self.workspace.run_cancellably(name, args)
        except (LocalToolError, KeenError, ValueError, OSError) as exc:
            message = exc.message if isinstance(exc, KeenError) else str(exc)
            call.code = exc.code if isinstance(exc, KeenError) else "local_tool_error"
            call.text, call.is_error = f"Error: {message}", True
            return True
        self.touch(*out.touched)
        call.text, call.hint = out.text, out.more
        return True

    def _load_skill(self, name: str) -> Output:
        cap_id = capability_id("skill", name)
        if cap_id not in self.visible:
            raise LocalToolError(
                f"no skill '{name_in_message(name)}' in the skill index; pick a name from the index"
            )
        loaded = self._caps[cap_id].load()
        self.log.emit("capability.loaded", step=self.step, id=cap_id)
        return Output(
            loaded.text,
            more=f"read_file the skill's SKILL.md at {self._caps[cap_id].location} with an offset",
        )

    def _truncate(self, call: Call) -> bool:
        """Past ``max_result_chars`` the text is cut with a note on how to get the rest; an MCP
        result is shaped as every front end's is (:func:`keen.calls.shape`)."""
        if call.result is not None:
            shaped = shape(call.result, self.max_result_chars, call.hint)
            call.text, call.truncated_chars = shaped.text, shaped.cut
            # A front end passing the raw result on (keen serve) may do so only while nothing
            # of it was cut or left out, and its images, audio and blobs are what they claim.
            call.unchanged = (
                not shaped.cut
                and shaped.structured is call.result.structured_content
                and shaped.binary_fault is None
            )
        else:
            call.text, call.truncated_chars = cut_text(call.text, self.max_result_chars, call.hint)
        return True

    def _post_hooks(self, call: Call) -> bool:
        obs = _observation(call)
        for hook in self.post_hooks:
            after = hook(obs)
            if after != obs:
                self.log.emit(
                    "hook",
                    step=self.step,
                    call_id=call.call_id,
                    stage="post",
                    hook=hook_name(hook),
                    changed=True,
                )
                # The text no longer is what the server sent: front ends must show this one.
                obs = replace(after, raw=None) if after.text != obs.text else after
        call.shown = obs
        return True

    def _audit(self, call: Call) -> None:
        """The ``result`` event (the text exactly as the model saw it, the stages passed), the
        tool's failure count, and the gateway's record of an MCP call that reached its checks."""
        if call.mcp and "mcp_checks" in call.stages and self.gateway is not None:
            self.gateway.record(call)
        if call.cancelled:
            # server and tool as every other result has them, so a search of the log by server
            # finds the cancelled calls too (None before validate parsed them).
            self.log.emit(
                "result", step=self.step, call_id=call.call_id,
                **({"tool_call_id": call.tool_call_id} if call.tool_call_id else {}),
                capability=call.capability_id or call.name,
                server=call.server, tool=call.tool, outcome="cancelled", code="cancelled", stages=call.stages,
                **({"caller": call.caller} if call.caller else {}),
            )  # fmt: skip
            return
        obs = call.shown = call.shown or _observation(call)
        cap_id = obs.capability
        if cap_id.startswith("mcp__"):
            failed = obs.is_error and obs.denied in (None, "validate")
            self.failures[cap_id] = self.failures.get(cap_id, 0) + 1 if failed else 0
            if obs.denied is None and not obs.is_error and cap_id in self.requested:
                # Used: the newest under a tight budget (policy: most recent request or use).
                self.requested.remove(cap_id)
                self.requested.append(cap_id)
        outcome = "denied" if obs.denied else ("error" if obs.is_error else "ok")
        # The model's id of the call varies as the harness's does; a call without one (keen
        # serve's, a library's) has a line without the field.
        model_id = call.tool_call_id
        key = (
            "result", self.step, cap_id, obs.server, obs.tool, outcome, obs.denied, obs.code,
            obs.truncated_chars, tuple(call.stages), call.caller, bool(model_id),
        )  # fmt: skip
        shape = self._shapes.get(key)
        if shape is None:
            shape = self._shape(
                key,
                ("call_id", "tool_call_id", "text") if model_id else ("call_id", "text"),
                step=self.step,
                call_id="",
                **({"tool_call_id": ""} if model_id else {}),
                capability=cap_id,
                server=obs.server,
                tool=obs.tool,
                outcome=outcome,
                gate=obs.denied,
                code=obs.code,
                text="",
                truncated_chars=obs.truncated_chars,
                stages=key[9],  # a copy: the shape may be made again later, from this
                **({"caller": call.caller} if call.caller else {}),
            )
        if model_id:
            self.log.emit_fields("result", shape.fields(call.call_id, model_id, obs.text))
        else:
            self.log.emit_fields("result", shape.fields(call.call_id, obs.text))


_SHAPES = 256
"""Line shapes a harness keeps (:meth:`Harness._shape`): a served process sees many callers."""
_KEPT_CHARS = 1024
"""The longest fixed string (a name, a caller) of a line shape a harness keeps."""


def _observation(call: Call) -> Observation:
    """What the model sees of a call: what the post-hooks made of it, or the call as it stands."""
    if isinstance(call.shown, Observation):
        return call.shown
    # Every call makes one, and the frozen dataclass's __init__ sets each field through
    # object.__setattr__ (a call each, a third of the harness's object-making per call). The
    # same fields put in the new object's __dict__ directly make the same object: the
    # dataclass has no __post_init__, and its fields are these (tests/harness/test_pipeline.py).
    obs = _new(Observation)
    fields = obs.__dict__
    fields["call_id"], fields["name"], fields["text"] = call.call_id, call.name, call.text
    fields["is_error"], fields["denied"] = call.is_error, call.denied
    fields["truncated_chars"], fields["capability"] = call.truncated_chars, call.capability_id
    fields["code"], fields["server"], fields["tool"] = call.code, call.server, call.tool
    fields["raw"] = call.result if call.unchanged else None
    fields["declined"] = call.declined
    return obs


_new = object.__new__


def _object_of(arguments: Any) -> Any:
    """``arguments`` as an object when they are JSON text of one (a library's agent loop may
    pass a model's arguments as the SDK gave them), else as they came: ``validate`` words the
    refusal of anything else (:func:`_not_an_object`)."""
    if isinstance(arguments, str):
        with contextlib.suppress(ValueError, RecursionError):  # nested too deep: refused as text
            parsed = json.loads(arguments)
            if isinstance(parsed, dict):
                return parsed
    return arguments


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
        except RecursionError:  # "[[[[..." past Python's recursion limit: the call raised it
            return (
                "arguments must be a JSON object; these are not JSON (nested too deep); "
                "send them again as one JSON object"
            )
        return "arguments must be a JSON object, not another JSON value; send them again as one JSON object"
    return "arguments must be a JSON object"
