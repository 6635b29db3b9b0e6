"""Resuming a chat session from its event log: ``keen chat --resume [SESSION]``.

docs/chat.md "Resuming a session". The conversation is rebuilt from the session's log
(``$KEEN_HOME/sessions/<id>.jsonl``, :mod:`keen.harness.events`) as the agent recorded it:

- ``agent.user``: the user's message, which opens a turn;
- ``agent.model``: each model answer, its text and tool calls (a call of an answer that
  did not finish was never run: it gets the result :func:`~keen.agent.unfinished.not_run`
  gave it);
- ``result``: each call's result, the text the harness gave the model, matched to the
  turn's call whose id its ``tool_call_id`` names (the model's id of the call); a result
  without one (a log written before the field) goes to the turn's first call still
  waiting, the order the agent ran them in;
- ``agent.turn``: the turn's end, with the messages the agent kept of the turn (its tool
  traffic compacted, each result as the model read it: the front end's hints and notes
  included), which replace the turn's rebuilt messages. A log written before the event held
  them, and a turn the log does not end (the process was killed during it), get the turn
  rebuilt from the events above and compacted as the agent compacts
  (:func:`~keen.agent.compaction.compact_turn`), without an answer for a killed turn;
- ``agent.activate``: a skill activated with ``/SKILL`` (its text, which later turns keep);
- ``agent.resume``: the conversation a resumed session began with (its parent's, whole), so
  a log is enough on its own even when its parent is gone.

The tools the model unlocked (the harness's ``requested`` capability ids: search hits and
schemas read, docs/architecture.md "The harness") come back too, as the log last recorded
them: in ``agent.turn`` and ``agent.resume`` (``requested``), in each ``capability.request``
(the harness's, as the list grows: a tool unlocked in the last step of a turn the process
did not finish) and in each ``capability.diff`` of a step (``policy_inputs.requested``: a
log written before the others held them). They are asked for again, not shown: the
discovery policy checks each against the servers and their pins as they are now, so a tool
gone, held for review or quarantined since stays hidden.

The log holds every string redacted (:mod:`keen._redact`): a secret redacted there stays
redacted in the rebuilt conversation, since the rebuild reads nothing else; a secret Keen
knows now but did not when the log was written is redacted as the agent takes the
conversation (:func:`redacted`). The old log is
only read, never written: the resumed session gets a log of its own whose
``agent.resume`` event names its parent. A line that is not JSON (a crash mid-write, a
damaged copy) is skipped and said; a log written by a newer Keen, or that is not a chat
session, is refused with what to do (:class:`SessionNotResumable`).
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from keen import paths
from keen._text import one_line
from keen.agent.compaction import CallRecord, compact_turn
from keen.agent.models import Message
from keen.errors import KeenError

__all__ = [
    "LOG_FORMAT",
    "Restored",
    "SessionNotResumable",
    "find_session",
    "message_record",
    "redacted",
    "restore",
    "summary",
]

LOG_FORMAT = 1
"""The shape of the chat's own events (``agent.*``) this Keen writes (in ``agent.start``'s
``log_format``) and reads; a log without the field was written by a Keen before it (the
same shape)."""

_NO_RESULT = "no result recorded: the session ended before this call finished"
_PREVIEW = 60
_HEAD = 8
"""Events of a log read at most for its ``agent.start`` when looking for this directory's chat."""
_ROLES = ("user", "assistant", "tool")


class SessionNotResumable(KeenError):
    """A session cannot be resumed: none found, not a chat session, written by a newer Keen.
    The message says what to do; the log is never changed."""

    code = "session_not_resumable"


@dataclass
class Restored:
    """A conversation rebuilt from a session's log.

    Attributes:
        session_id: the session resumed (the new session's parent).
        path: its log.
        messages: the history as the session's agent held it after its last turn.
        turns: the user turns it holds (the new session's numbering goes on from there).
        calls: tool calls of those turns (in the history as compacted records).
        workspace: the session's workspace, as recorded ("" when the log does not say).
        servers: the MCP servers its calls used.
        requested: the capability ids the model had asked for (the tools it unlocked: search
            hits, schemas read), least recent first, as the log last recorded them.
        notes: what the rebuild skipped or could not restore, one line each.
    """

    session_id: str
    path: Path
    messages: list[Message]
    turns: int = 0
    calls: int = 0
    workspace: str = ""
    servers: list[str] = field(default_factory=lambda: list[str]())
    requested: list[str] = field(default_factory=lambda: list[str]())
    notes: list[str] = field(default_factory=lambda: list[str]())


def message_record(message: Message) -> dict[str, Any]:
    """``message`` as the JSON object ``agent.resume`` records (fields at their defaults left out)."""
    record: dict[str, Any] = {"role": message.role, "content": message.content}
    if message.tool_calls:
        record["tool_calls"] = [
            {"id": c.id, "name": c.name, "arguments": c.arguments} for c in message.tool_calls
        ]
    for name in ("tool_call_id", "name", "kind", "is_error"):
        value = getattr(message, name)
        if value:
            record[name] = value
    return record


def redacted(message: Message) -> Message:
    """``message`` with every secret Keen knows now replaced by ``[REDACTED]`` (:mod:`keen._redact`),
    its text and its tool calls' arguments: a log holds a secret in clear when Keen learnt it
    only after the log was written (a key configured since), and a resumed conversation
    must not send it back to the model."""
    from dataclasses import replace

    from keen._redact import redactor

    calls = [
        replace(c, arguments=redactor.redact_json(c.arguments, patterns=True)) for c in message.tool_calls
    ]
    return replace(message, content=redactor.redact(message.content), tool_calls=calls)


def _tool_call(raw: Any, where: str) -> Any:
    from keen.agent.model_events import ToolCall

    if not (isinstance(raw, dict) and isinstance(raw.get("id"), str) and isinstance(raw.get("name"), str)):
        raise _shape(where, "a tool call without a string id and name")
    arguments = raw.get("arguments")
    return ToolCall(raw["id"], raw["name"], arguments if isinstance(arguments, dict) else {})


def _message(raw: Any, where: str) -> Message:
    """A message of an ``agent.resume`` event (:func:`message_record`'s shape)."""
    if not (isinstance(raw, dict) and raw.get("role") in _ROLES and isinstance(raw.get("content"), str)):
        raise _shape(where, "a message without a role (user, assistant, tool) and a text")
    calls = raw.get("tool_calls") or []
    if not isinstance(calls, list):
        raise _shape(where, "a message whose tool_calls is not a list")
    name, call_id, kind = raw.get("name"), raw.get("tool_call_id"), raw.get("kind")
    return Message(
        raw["role"],
        raw["content"],
        [_tool_call(c, where) for c in calls],
        tool_call_id=call_id if isinstance(call_id, str) else None,
        name=name if isinstance(name, str) else None,
        kind=kind if isinstance(kind, str) else "",
        is_error=raw.get("is_error") is True,
    )


def _shape(where: str, what: str) -> SessionNotResumable:
    return SessionNotResumable(
        f"{where} holds {what}, which this Keen does not know how to read (a log written by another "
        "version, or edited); the log is left as it is: `keen sessions show` replays what it can read"
    )


# -- finding the session ---------------------------------------------------------------------


def _events(path: Path, notes: list[str] | None = None) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(line number, event)`` of each line of ``path`` that is a JSON object, read a line
    at a time; each line that is not is said in ``notes`` (a last line without its newline
    was cut while it was written; one before it, the file was damaged)."""
    with path.open("rb") as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                event = json.loads(line)
            except (ValueError, RecursionError):
                # JSONDecodeError and UnicodeDecodeError are ValueErrors; a line nested
                # deeper than the parser's recursion limit raises RecursionError.
                event = None
            if isinstance(event, dict) and isinstance(event.get("type"), str):
                yield number, event  # pyright: ignore[reportUnknownArgumentType]
            elif notes is not None:
                notes.append(
                    f"line {number}, the last, was cut while it was written (the session ended then); skipped"
                    if not line.endswith(b"\n")
                    else f"line {number} is not a readable event (the file was damaged); skipped"
                )


def _resumable_here(path: Path, cwd: Path) -> bool:
    """Whether the log at ``path`` is a chat session of workspace ``cwd`` with a conversation
    to resume (a user turn, a skill activated, or a conversation it resumed); read up to
    where that is known."""
    chat = False
    try:
        for seen, (_, event) in enumerate(_events(path), 1):
            kind = event["type"]
            if kind == "session.start" and not _same_place(str(event.get("workspace") or ""), cwd):
                return False
            if kind == "agent.start":
                chat = True
            elif not chat and seen >= _HEAD:
                # The agent writes agent.start right after session.start: a log without it
                # by now is a keen serve or library session, read no further (one can be GBs).
                return False
            elif chat and kind in ("agent.user", "agent.resume", "agent.activate"):
                return True
    except OSError:
        pass
    return False


def _same_place(recorded: str, cwd: Path) -> bool:
    try:
        return bool(recorded) and Path(recorded).resolve() == cwd.resolve()
    except (OSError, RuntimeError):
        return False


def find_session(session: str | None, cwd: Path) -> Path:
    """The log of the session to resume.

    Args:
        session: a session id as ``keen sessions list`` shows it, or the start of one;
            ``None``: the session of this KEEN_HOME whose workspace is ``cwd`` that was
            written to last and has a conversation.
        cwd: the current directory.

    Raises:
        SessionNotResumable: no such session, more than one starts so, or none of ``cwd``.
    """
    folder = paths.sessions_dir()
    logs = list(folder.glob("*.jsonl")) if folder.is_dir() else []
    if session is not None:
        exact = [p for p in logs if p.stem == session]
        found = exact or sorted(p for p in logs if session and p.stem.startswith(session))
        if len(found) == 1:
            return found[0]
        if found:
            raise SessionNotResumable(
                f"{session!r} starts {len(found)} session ids ({', '.join(p.stem for p in found[:5])}); give more of it"
            )
        raise SessionNotResumable(
            f"no session {session!r} in {folder}; `keen sessions list` lists them (or --resume "
            "alone resumes this directory's last one)"
        )

    def written(path: Path) -> tuple[float, str]:
        try:
            return path.stat().st_mtime, path.stem
        except OSError:
            return 0.0, path.stem

    for path in sorted(logs, key=written, reverse=True):
        if _resumable_here(path, cwd):
            return path
    raise SessionNotResumable(
        f"no chat session of this directory ({cwd}) to resume in {folder}; `keen sessions list` lists "
        "every session: resume one by its id with keen chat --resume ID"
    )


# -- rebuilding the conversation -------------------------------------------------------------


class _Rebuild:
    """The conversation as the log's events build it (module doc)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.history: list[Message] = []
        self.turns = 0
        self.calls = 0
        self.servers: dict[str, None] = {}
        self.notes: list[str] = []
        self.start: int | None = None
        """Where the open turn's messages begin in :attr:`history`; None between turns."""
        self.records: list[CallRecord] = []
        self.waiting: list[Any] = []
        """The open turn's tool calls still without a result, in the model's order."""
        self.said = ""
        self.requested: list[str] = []
        """The capability ids the model had asked for, as the latest event recording them says."""

    def asked(self, raw: object) -> None:
        """The requested ids an event records (a list of strings; anything else, or a log
        written before the field, leaves the last ones known)."""
        if isinstance(raw, list):
            self.requested = [i for i in raw if isinstance(i, str)]  # pyright: ignore[reportUnknownVariableType]

    def where(self, number: int) -> str:
        return f"line {number} of {self.path}"

    def user(self, event: dict[str, Any], number: int) -> None:
        self.close(finished=False)
        text = event.get("text")
        if not isinstance(text, str):
            raise _shape(self.where(number), "a user message that is not text")
        self.start, self.said = len(self.history), text
        self.history.append(Message("user", text))
        self.turns += 1

    def model(self, event: dict[str, Any], number: int) -> None:
        if self.start is None:
            return
        from keen.agent.unfinished import UNFINISHED, not_run

        raw = event.get("tool_calls") or []
        content = event.get("content")
        if not isinstance(raw, list) or not isinstance(content, str):
            raise _shape(self.where(number), "a model answer without a text and a list of tool calls")
        calls = [_tool_call(c, self.where(number)) for c in raw]
        self.history.append(Message("assistant", content, calls, kind="tool_traffic" if calls else ""))
        if event.get("stop") in UNFINISHED:
            # The agent answered these itself, without running them (keen.agent.unfinished).
            for call in calls:
                message, record, _ = not_run(call)
                self.history.append(message)
                self.records.append(record)
            return
        self.waiting += calls

    def result(self, event: dict[str, Any]) -> None:
        if self.start is None or not self.waiting:
            return  # a call outside a turn (a slash command's): not the model's
        text, outcome = str(event.get("text") or ""), str(event.get("outcome") or "error")
        if outcome == "cancelled":
            # The call was stopped with its turn: the agent gave it no result of this call's
            # (the turn's end answers it: close).
            return
        call = self.waiting.pop(self._waiting_index(event.get("tool_call_id")))
        self.answer(call, text, outcome)
        server = event.get("server")
        if isinstance(server, str) and server:
            self.servers[server] = None

    def _waiting_index(self, model_id: object) -> int:
        """Where in :attr:`waiting` the call a result answers is: the one with the model's id
        the result names; without an id (a log written before results named it, or a model
        that gave none) or with one no call waiting has, the first, as the agent ran them."""
        if isinstance(model_id, str) and model_id:
            for index, call in enumerate(self.waiting):
                if call.id == model_id:
                    return index
        return 0

    def answer(self, call: Any, text: str, outcome: str) -> None:
        self.history.append(
            Message(
                "tool",
                text,
                tool_call_id=call.id,
                name=call.name,
                kind="tool_traffic",
                is_error=outcome != "ok",
            )
        )
        self.records.append(CallRecord(call.name, call.arguments, outcome, text))

    def ended(self, event: dict[str, Any], number: int) -> None:
        """The turn's end: the messages the agent kept of it, when the log holds them (a Keen
        before it did not write them: the turn is rebuilt from its events instead)."""
        self.asked(event.get("requested"))
        raw = event.get("messages")
        if self.start is None or raw is None:
            self.close(finished=True, cancelled=event.get("cancelled") is True)
            return
        if not isinstance(raw, list):
            raise _shape(self.where(number), "a turn's messages that are not a list")
        kept = [_message(m, self.where(number)) for m in raw]
        calls = event.get("calls")
        self.calls += calls if isinstance(calls, int) and calls >= 0 else len(self.records)
        self.history = self.history[: self.start] + kept
        self.start, self.records, self.waiting = None, [], []

    def close(self, *, finished: bool, cancelled: bool = False) -> None:
        """End the open turn: calls without a result get one saying so (as the agent answered
        them when the turn was cancelled: :func:`~keen.agent.unfinished.answer_pending`), then
        compaction."""
        if self.start is None:
            return
        if cancelled:
            from keen.agent.unfinished import CANCELLED, answer_pending

            answer_pending(self.history, CANCELLED)
        else:
            for call in self.waiting:
                self.answer(call, _NO_RESULT, "error")
        if not finished:
            self.notes.append(
                f"turn {self.turns} ({one_line(self.said, _PREVIEW)}) did not finish (the session ended "
                "during it): it is restored as far as it was recorded"
            )
        self.calls += len(self.records)
        self.history = compact_turn(self.history, self.start, self.records)
        self.start, self.records, self.waiting = None, [], []

    def resumed(self, event: dict[str, Any], number: int) -> None:
        self.close(finished=False)
        raw = event.get("messages")
        if not isinstance(raw, list):
            raise _shape(self.where(number), "a resumed conversation that is not a list of messages")
        self.history = [_message(m, self.where(number)) for m in raw]
        turns, calls = event.get("turns"), event.get("calls")
        self.turns = turns if isinstance(turns, int) else 0
        self.calls = calls if isinstance(calls, int) else 0
        servers = event.get("servers")
        self.servers = (
            dict.fromkeys(s for s in servers if isinstance(s, str)) if isinstance(servers, list) else {}
        )
        self.asked(event.get("requested"))

    def activated(self, event: dict[str, Any]) -> None:
        text = event.get("text")
        if isinstance(text, str):
            self.history.append(Message("user", text, kind="skill_activation"))
        else:  # a log written before activations recorded their text
            self.notes.append(
                f"skill {one_line(str(event.get('skill')), _PREVIEW)} was activated, but the log does not "
                "hold its text; activate it again with /SKILL if you need it"
            )


def restore(path: Path) -> Restored:
    """Rebuild the conversation of the session logged at ``path`` (module doc).

    Raises:
        SessionNotResumable: the log cannot be read, is not a chat session, or was written
            by a newer Keen; the message says what to do.
    """
    session_id = path.stem
    notes: list[str] = []
    rebuild = _Rebuild(path)
    workspace, chat = "", False
    try:
        for number, event in _events(path, notes):
            kind = event["type"]
            if kind == "session.start":
                workspace = str(event.get("workspace") or "")
            elif kind == "agent.start":
                chat = True
                found = event.get("log_format", 1)
                if not isinstance(found, int) or found > LOG_FORMAT:
                    raise SessionNotResumable(
                        f"session {session_id} was written by a newer Keen (chat log format {found!r}; this "
                        f"Keen reads {LOG_FORMAT}); update Keen to resume it. Its log is left as it is"
                    )
            elif not chat:
                continue
            elif kind == "agent.user":
                rebuild.user(event, number)
            elif kind == "agent.model":
                rebuild.model(event, number)
            elif kind == "result":
                rebuild.result(event)
            elif kind == "agent.turn":
                rebuild.ended(event, number)
            elif kind == "agent.activate":
                rebuild.activated(event)
            elif kind == "agent.resume":
                rebuild.resumed(event, number)
            elif kind == "capability.diff" and isinstance(inputs := event.get("policy_inputs"), dict):
                rebuild.asked(inputs.get("requested"))  # pyright: ignore[reportUnknownMemberType]
            elif kind == "capability.request":
                rebuild.asked(event.get("requested"))
    except OSError as exc:
        raise SessionNotResumable(f"cannot read the log {path} ({exc.strerror or exc})") from None
    if not chat:
        raise SessionNotResumable(
            f"session {session_id} is not a chat session (its log has no conversation: a `keen serve` "
            "or library session); `keen sessions show` replays it"
        )
    rebuild.close(finished=False)
    return Restored(
        session_id,
        path,
        rebuild.history,
        turns=rebuild.turns,
        calls=rebuild.calls,
        workspace=workspace,
        servers=list(rebuild.servers),
        requested=list(dict.fromkeys(rebuild.requested)),
        notes=[*notes, *rebuild.notes],
    )


def summary(
    restored: Restored,
    session_id: str,
    configured: Collection[str],
    cwd: Path,
    disabled: Collection[str] = (),
) -> list[str]:
    """What a front end says about a resumed conversation: what came back, the new session's
    id and its parent, and one line per thing the user should know (a line of the log
    skipped, a turn that did not finish, a server no longer configured or ``disabled`` in
    configs.json, another directory)."""
    last = next((m.content for m in reversed(restored.messages) if m.role == "user" and not m.kind), "")
    said = f'; last message: "{one_line(last, _PREVIEW)}"' if last else ""
    lines = [
        f"resumed session {restored.session_id}: {restored.turns} turn(s), {restored.calls} tool call(s) "
        f"(compacted){said}",
        f"this is session {session_id}; its log names {restored.session_id} as its parent, which is left as it was",
    ]
    lines += restored.notes
    for server in restored.servers:
        if server not in configured:
            lines.append(
                f"server {server}, which the conversation used, is no longer configured: its calls stay in "
                "the history as recorded, and new calls to it fail until it is added again (keen mcp add)"
            )
        elif server in disabled:
            lines.append(
                f"server {server}, which the conversation used, is disabled in configs.json: its calls stay in "
                f"the history as recorded, and new calls to it fail until it is enabled (keen mcp enable {server})"
            )
    if restored.workspace and not _same_place(restored.workspace, cwd):
        lines.append(f"the session ran in {restored.workspace}; the local tools now read {cwd}")
    return lines
