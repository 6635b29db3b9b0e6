"""The session event log, ``$KEEN_HOME/sessions/<id>.jsonl``, and its replay.

One JSON object a line, appended with one ``write`` to the file (no buffer in the process
to lose; a torn last line is skipped on reading). Events outside a call are written as they
come. A call's events are written together (:meth:`EventLog.held`): those before it is sent
in one ``write`` just before it is sent (:meth:`EventLog.release`), the rest in one when it
ends, refused or not. So a crash loses at most the events of the calls in progress not yet
sent (nothing of them left Keen) and the line being written. Every string is redacted
(:mod:`keen._redact`) before it is written, except the field names and the values Keen
makes itself (:data:`_PLAIN`: a call's id, a verdict, an outcome). Event types:

- ``session.start`` (mode, workspace), ``step.start`` (``offered``: tool names given to the
  model; ``skill_index``: skill names listed; ``handles``: resource and prompt names in
  the resource index), ``step.end``; a step is one model request (``keen chat``'s turn, what
  the user said and everything until the answer, is one or more steps: the agent's
  ``agent.user`` and ``agent.turn`` events mark it; ``agent.turn`` holds the turn's
  messages as the history keeps them). The chat's own events (``agent.*``,
  docs/architecture.md "The agent loop") include ``agent.start`` with ``log_format``,
  ``agent.activate`` with the skill's ``text`` and ``agent.resume``, the conversation a
  resumed session began with: :mod:`keen.agent.resume` reads them. Every event of a step carries ``step``;
  logs written before the rename say ``turn.start``, ``turn.end`` and ``turn`` and replay
  the same;
- ``capability.diff`` (``added``, ``removed``, ``changed`` with reasons, ``policy_inputs``),
  written before the ``step.start`` it explains; with ``source: "mcp.refresh"``, a server's
  tool list changed mid-session (``server``, ``reason``, tool names ``added``/``removed``,
  ``changed`` with the fields that differ, ``flags``): attribution only, the visible set
  follows in the next step's own diff;
- ``capability.flags`` (``server``, ``flags``: tool -> flags with kind, field and an escaped
  excerpt), once per server and session, before the step whose catalog first has it;
- ``capability.request`` (``added``: the capability ids the model just asked for, by a
  search, a schema read or a call to a tool not visible yet; ``requested``: the whole list,
  a discovery policy input), whenever that list grows: ``Harness.request``;
- ``call`` (name, arguments, caller, and the permission gate's verdict when it gave one:
  decision, by, reason), ``hook`` (a pre-hook's refusal, a post-hook's change), ``result``
  (outcome, the gate that denied, a code, the text exactly as the model saw it, the pipeline
  stages passed in order). Logs written before the verdict joined the call's line have it
  in an ``approval`` event (decision, by, reason) after the
  call: :func:`replay` and :func:`approvals` read both.

:func:`replay` rebuilds each step's visible set from the diffs alone and checks it against
the offered names.
"""

from __future__ import annotations

import json
import json.encoder
import logging
import os
import secrets
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager
from contextvars import ContextVar, Token
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from keen import paths
from keen._json import encoder
from keen._redact import redactor

__all__ = [
    "EventLog",
    "LineShape",
    "Replay",
    "ReplayedStep",
    "approvals",
    "new_session_id",
    "read_events",
    "replay",
    "session_path",
]


_INDEXED = ("skill", "resource", "prompt")
"""Kinds listed in an index (skills, resource handles), not offered as tools."""


def new_session_id() -> str:
    """``20261123T141500Z-1a2b3c``: sortable by start time, unique."""
    return datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ") + "-" + secrets.token_hex(3)


_MOST_ID_CHARS = 200
"""Longer ids are refused: Keen's are 22 characters, and a file name may have 255 bytes."""


def session_path(session_id: str) -> Path:
    """Where a session's log lives. Raises ValueError for an id that is not a plain name."""
    if (
        not session_id
        or "/" in session_id
        or "\\" in session_id
        or session_id.startswith(".")
        # Longer than a file name may be (the open's ENAMETOOLONG was an internal error), or
        # holding what a terminal acts on: no id Keen made.
        or len(session_id) > _MOST_ID_CHARS
        or not session_id.isprintable()
    ):
        shown = (
            session_id if len(session_id) <= 80 else f"{session_id[:60]}... ({len(session_id):,} characters)"
        )
        raise ValueError(f"invalid session id {shown!r}; use an id from `keen sessions list`")
    return paths.sessions_dir() / f"{session_id}.jsonl"


_MEMO_CHARS = 1024
"""Strings up to this long have their redacted JSON text remembered (:class:`_Quoted`)."""
_MEMO_ENTRIES = 4096
"""The memo is emptied when it holds this many strings (bounded memory)."""


class _Quoted(dict[str, str]):
    """A string -> its redacted JSON text (quotes included), made on a miss.

    Event lines are encoded with this as the encoder's string function
    (``_Quoted().__getitem__``, :func:`keen._json.encoder`): every string of a field's value,
    keys and values at any depth, is redacted as it is encoded, without a copy of the event
    made first, and a string seen before (a call's server, tool and argument values) costs
    one lookup in C, no Python call. Made again whenever the redactor's memo is
    replaced (a secret added: :meth:`keen._redact.Redactor.add`), so no text redacted without
    a secret is used once it is known."""

    __slots__ = ()

    def __missing__(self, text: str) -> str:
        quoted = _basestring(redactor.redact(text))
        if len(text) <= _MEMO_CHARS:
            if len(self) >= _MEMO_ENTRIES:
                self.clear()
            self[text] = quoted
        return quoted


def _line_encoder() -> tuple[dict[str, str], Callable[[Any], str], Callable[[str], str]]:
    """The redactor's memo now, an encoder of event fields that redacts every string as the
    redactor stands with that memo (:class:`_Quoted`), and that encoder's string function
    (a string field's redacted JSON text, without the encoder's own call around it)."""
    quote = _Quoted().__getitem__
    return redactor.memo, encoder(default=str, quote=quote), quote


_DIGITS = tuple(f"{n:03d}" for n in range(1000))
"""0 to 999 as three digits: an event's microseconds are two of them."""

_time_ns = time.time_ns

_stamp: tuple[int, str] = (-(10**20), "")
"""The start of the last second an event's ``ts`` formatted (nanoseconds since the epoch),
and its text: the date and time of day are formatted once a second (:meth:`EventLog.emit`).
The first start lies outside ``datetime``'s range, so no clock's second is taken for it."""


logger = logging.getLogger(__name__)

_encode = encoder(default=str)
"""The JSON text of names Keen makes (the session id, an event's type), unredacted."""

_basestring: Callable[[str], str] = json.encoder.encode_basestring  # pyright: ignore[reportAssignmentType]
"""A string's JSON text (``ensure_ascii=False``)."""

_lines = _line_encoder()
"""The redactor's memo when the event encoder was made, and the encoder (:meth:`EventLog.emit`
makes both again when the memo was replaced). No check for cycles: a cyclic value raises
``RecursionError`` (an event is the harness's own fields, made fresh for it)."""

_LONE_SURROGATES = "backslashreplace"
"""How a lone surrogate (a host's ``os.fsdecode`` of a file name's bad bytes, kept by
``ensure_ascii=False``) is written: as ``\\udcff``, which is that character's JSON escape, so
the line stays UTF-8 and reads back as it was sent, instead of failing the call's write."""

_HELD: ContextVar[_Held | None] = ContextVar("keen_held_events", default=None)
"""The innermost block holding the current call's lines (:meth:`EventLog.held`); per task, so
concurrent calls (``keen serve``) hold their own. A block holds one log's lines; a block of
another log the task holds too is its ``outer`` (:func:`_held`)."""


def _held(log: EventLog) -> _Held | None:
    """The block holding ``log``'s lines in this task, if one does."""
    block = _HELD.get()
    # A block without its token has ended: a task made inside it still sees it in its context.
    while block is not None and (block.log is not log or block.token is None):
        block = block.outer
    return block


_PLAIN = frozenset(
    {"step", "turn", "call_id", "outcome", "gate", "code", "stages", "truncated_chars", "decision", "by"}
)
"""Fields whose values the harness makes itself (never user or server text: a call's id, a
verdict, an outcome): written as they are, like every field's name. A secret that happens to
be a common word ("allow", "user", "server") then still leaves the log readable."""


_NAMES: dict[str, str] = {}
"""A field's name -> its JSON text and the separator after it (names are the harness's own,
a few dozen: never redacted)."""


def _fields(data: dict[str, Any]) -> str:
    """The JSON text of ``data``'s fields without the braces: each name, and each value of a
    :data:`_PLAIN` field, as it is; every string of the other values redacted as the encoder
    meets it (:class:`_Quoted`)."""
    encode, quote = _encoders()
    # A loop, not a generator: every event passes, and a generator is resumed per field.
    parts: list[str] = []
    for name, value in data.items():
        head = _NAMES.get(name)
        if head is None:
            head = _NAMES[name] = f"{_basestring(name)}: "
        parts.append(head + _value(value, name in _PLAIN, encode, quote))
    return ", ".join(parts)


def _value(value: Any, plain: bool, encode: Callable[[Any], str], quote: Callable[[str], str]) -> str:
    """A field's value as JSON text: as it is when ``plain`` (:data:`_PLAIN`), else every
    string in it redacted (``encode``, ``quote``: :func:`_encoders`). Most of an event's
    values are a string, an int or None: their JSON text is what the encoder would write,
    made without a call of the encoder (each costs about as much as the rest of the field);
    lists and objects go through it."""
    kind = value.__class__
    if kind is str:
        return _basestring(value) if plain else quote(value)
    if value is None:
        return "null"
    if kind is int:
        return str(value)
    return _encode(value) if plain else encode(value)


def _encoders() -> tuple[Callable[[Any], str], Callable[[str], str]]:
    """The event encoder and its string function, as the redactor stands now (made again
    when a secret was added since: nothing redacted before counts)."""
    global _lines
    memo, encode, quote = _lines
    if memo is not redactor.memo:
        _lines = memo, encode, quote = _line_encoder()
    return encode, quote


class LineShape:
    """An event's fields with all but ``varying`` fixed: the fixed fields' JSON is made once
    (as :meth:`EventLog.emit` makes it: each name and each :data:`_PLAIN` value as it is,
    every other string redacted), and :meth:`fields` puts each call's values between.

    A repeated call writes lines that differ in a few fields (its id, its arguments, its
    result's text): a front end keeps a shape per set of fixed values and gives
    :meth:`EventLog.emit_fields` (or :meth:`EventLog.opening_fields`) what :meth:`fields`
    makes, the same text :meth:`EventLog.emit` would write for the same fields. The fixed
    part is made again whenever the redactor learnt a secret since it was made.

    Args:
        varying: the names of the fields given to :meth:`fields`, in the order they are in
            ``data``.
        data: every field in the line's order (the varying ones' values are not used).
    """

    __slots__ = ("_data", "_memo", "_pieces", "_plain", "_tail", "_varying")

    def __init__(self, varying: tuple[str, ...], **data: Any) -> None:
        if [name for name in data if name in varying] != list(varying):
            raise ValueError(f"varying fields {varying} must be fields of the line, in its order")
        self._data, self._varying = data, varying
        self._plain = tuple(name in _PLAIN for name in varying)
        self._memo: dict[str, str] | None = None
        self._pieces: tuple[str, ...] = ()
        self._tail = ""
        self._make()

    def _make(self) -> None:
        memo = redactor.memo  # before encoding: a secret added meanwhile makes it again
        _encoders()  # the event encoder as of this memo, for fields() until it changes
        pieces: list[str] = []
        text, first = "", True
        for name, value in self._data.items():
            head = f"{'' if first else ', '}{_basestring(name)}: "
            first = False
            if name in self._varying:
                pieces.append(text + head)
                text = ""
            else:
                text += head + _fields({name: value})[len(_NAMES[name]) :]
        self._pieces, self._tail, self._memo = tuple(pieces), text, memo

    def fields(self, *values: Any) -> str:
        """The line's fields' JSON (no braces) with ``values`` for the varying fields (one
        each, in their order), each written as :meth:`EventLog.emit` writes it."""
        if self._memo is not redactor.memo:
            self._make()  # and with it the event encoder
        pieces, plain = self._pieces, self._plain
        if len(values) != len(pieces):
            raise ValueError(f"the line has {len(pieces)} varying fields; {len(values)} values were given")
        if not pieces:
            return self._tail
        _, encode, quote = _lines  # made for this memo or a newer one (_make)
        if len(pieces) == 2:  # a call's lines (its id, and its arguments or its result's text)
            first, second = values
            return (
                f"{pieces[0]}{_value(first, plain[0], encode, quote)}"
                f"{pieces[1]}{_value(second, plain[1], encode, quote)}{self._tail}"
            )
        # Not zip(..., strict=True): zip with a keyword is made through the type's generic call.
        out = ""
        for i, value in enumerate(values):
            out += pieces[i] + _value(value, plain[i], encode, quote)
        return out + self._tail


class EventLog:
    """An append-only JSONL writer. ``path`` is created (mode 0600) with its folder."""

    def __init__(self, path: Path, session_id: str) -> None:
        self.path = path
        self.session_id = session_id
        self._seq = 0
        self._session_json = f'"session": {_encode(session_id)}'
        self._heads: dict[str, str] = {}
        """Event type -> the line's text from the session to the type (see :meth:`emit`)."""
        path.parent.mkdir(parents=True, exist_ok=True)
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o600)

    def emit(self, type: str, **data: Any) -> None:
        """Write one event (redacted): at once, or with the call's others when a call holds
        them (:meth:`held`). ``seq``, ``ts``, ``session`` and ``type`` come first; ``data``'s
        keys are the harness's own field names, never those four."""
        self.emit_fields(type, _fields(data))

    def emit_fields(self, type: str, fields: str) -> None:
        """:meth:`emit` of fields whose JSON (no braces) is made already: by
        :meth:`LineShape.fields`, redacted as :meth:`emit` redacts."""
        block = _held(self)
        if block is None:
            self._write(self._line(type, fields))
            return
        if block.type:  # the call's first event goes first
            self._open(block)
        block.lines.append(self._line(type, fields))

    def _line(self, type: str, fields: str) -> str:
        """The line of an event of ``type`` whose fields' JSON (no braces) is ``fields``: the
        next ``seq`` and the time now."""
        self._seq += 1
        # The head is formatted by hand (the session's and the type's JSON made once): the
        # same line json.dumps(event) writes with each string redacted, for less work.
        head = self._heads.get(type) or self._head(type)
        # ts: now, as datetime.now(UTC).isoformat() writes it (microseconds left out when 0),
        # made here, not one call deeper: every event passes.
        global _stamp
        now = _time_ns()
        start, ts = _stamp
        nanos = now - start  # within the second: a small int, cheap to divide (now is not)
        if not 0 <= nanos < 1_000_000_000:
            seconds = now // 1_000_000_000
            ts = datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%S")
            start = seconds * 1_000_000_000
            _stamp, nanos = (start, ts), now - start
        micros = nanos // 1000
        # The six digits from a table of three (a format spec is parsed at every use).
        fraction = f".{_DIGITS[micros // 1000]}{_DIGITS[micros % 1000]}" if micros else ""
        comma = ", " if fields else ""
        return f'{{"seq": {self._seq}, "ts": "{ts}{fraction}+00:00"{head}{comma}{fields}}}\n'

    def _head(self, type: str) -> str:
        """A line's text from the session to the type (kept in :attr:`_heads`)."""
        head = self._heads[type] = f', {self._session_json}, "type": {_encode(type)}'
        return head

    def opening(self, type: str, **data: Any) -> None:
        """Begin the current call's events with this one, kept open for :meth:`annotate`
        until the call's next event, its :meth:`release` or its end, whichever comes first:
        then written as :meth:`emit` writes it (its ``seq`` and ``ts`` are that moment's; its
        fields are encoded now, as they are at this moment, and again when written if a
        secret was learnt meanwhile). Outside a call that holds its
        events, or after its first, it is emitted at once."""
        self.opening_fields(type, _fields(data))

    def opening_fields(self, type: str, fields: str) -> None:
        """:meth:`opening` of fields whose JSON (no braces) is made already
        (:meth:`LineShape.fields`)."""
        block = _held(self)
        if block is None or block.type or block.lines:
            self.emit_fields(type, fields)
            return
        block.type, block.fields = type, fields

    def annotate(self, **fields: Any) -> bool:
        """Add ``fields`` to the current call's first event (:meth:`opening`) if it is not
        written yet; False when there is none to add them to (then say them in an event of
        their own)."""
        return self.annotate_fields(_fields(fields))

    def annotate_fields(self, more: str) -> bool:
        """:meth:`annotate` with the fields' JSON (no braces) made already
        (:meth:`LineShape.fields`)."""
        block = _held(self)
        if block is None or not block.type:
            return False
        fields = block.fields
        block.fields = f"{fields}, {more}" if fields and more else fields or more
        return True

    def _open(self, block: _Held) -> None:
        """The call's first event, kept open, made its line (the block's first: any other
        event of the call opens it before it is held)."""
        block.lines.append(self._line(block.type, block.fields))
        block.type = ""

    def held(
        self, type: str = "", shape: LineShape | None = None, *values: Any
    ) -> AbstractContextManager[None]:
        """Hold the events this task emits in the block (one call's) and write them with one
        ``write`` when it ends, however it ends (:meth:`release` writes them sooner).

        Args:
            type: the call's first event, kept open as :meth:`opening_fields` keeps it
                (``""``: none yet).
            shape: that event's line shape; its fields are :meth:`LineShape.fields` of
                ``values``, encoded here, after the redactor's memo is read: a secret learnt
                from then on has the line encoded again before it is written.
            *values: the shape's varying values, in its order.
        """
        memo = redactor.memo  # before the line is encoded, never after (see above)
        fields = shape.fields(*values) if shape is not None else ""
        block = _new(_Held)
        block.log, block.type, block.fields, block.lines, block.memo = self, type, fields, [], memo
        return block

    def release(self) -> None:
        """Write what the current call holds now (before it is sent: the log shows every
        call that left Keen, even if Keen dies during it)."""
        block = _held(self)
        if block is not None:
            self._flush(block)

    def _flush(self, block: _Held) -> None:
        if block.type:  # written with the rest, in the one write
            self._open(block)
        lines = block.lines
        if lines:
            if block.memo is not redactor.memo:
                lines[:] = [self._redacted_again(line) for line in lines]
                block.memo = redactor.memo  # lines held after a release are encoded as of now
            text = "".join(lines)
            lines.clear()
            try:
                self._write(text)
            except (OSError, ValueError):  # closed or unwritable: the call goes on, as when its
                logger.exception("could not write a call's events to %s", self.path)  # audit failed

    def _write(self, text: str) -> None:
        if self._fd < 0:
            raise ValueError(f"the event log {self.path} is closed")
        data = text.encode("utf-8", _LONE_SURROGATES)
        written = os.write(self._fd, data)
        while written < len(data):  # a regular file takes it whole; a short write is carried on
            data = data[written:]
            written = os.write(self._fd, data)

    def _redacted_again(self, line: str) -> str:
        """``line`` (one of :meth:`_line`'s) with its fields encoded again as they would be
        now: redacted with every secret known now, its ``seq``, ``ts`` and head as they were.
        A line that cannot be read and encoded again (nested deeper than the encoder goes)
        has the secrets replaced in its text instead: the call's lines are written, whatever
        they hold. Known limits: a new secret that holds an older one leaves its own ends in
        the line (the older one was replaced when the line was encoded), and two keys of an
        object that were both secrets are one key when read again."""
        try:
            return self._encoded_again(line)
        except (ValueError, RecursionError):
            return redactor.redact(line)

    def _encoded_again(self, line: str) -> str:
        event = json.loads(line)  # this log's line: its session is this log's
        seq, ts, type = event.pop("seq"), event.pop("ts"), event.pop("type")
        del event["session"]
        fields = _fields(event)
        head = self._heads.get(type) or self._head(type)
        return f'{{"seq": {seq}, "ts": "{ts}"{head}{", " + fields if fields else ""}}}\n'

    def close(self) -> None:
        if self._fd >= 0:
            fd, self._fd = self._fd, -1
            os.close(fd)


class _Held:
    """:meth:`EventLog.held`'s block (a class: every call enters one, and a generator-based
    context manager costs several times as much): the call's first event while it is kept
    open (``type``, empty once it is a line, and ``fields``), the lines made after it
    (``lines``), and the redactor's memo when they were encoded (``memo``): a secret learnt
    while the call waits (an approval, an elicitation) replaces the memo, and the lines
    encoded before it are then encoded again before they are written. ``outer``: the block
    around it while it is entered (another log's: a log's lines are held by one block)."""

    __slots__ = ("fields", "lines", "log", "memo", "outer", "token", "type")

    log: EventLog
    type: str
    fields: str
    lines: list[str]
    memo: dict[str, str]
    outer: _Held | None
    token: Token[_Held | None] | None
    # No __init__: EventLog.held sets the first five (every call makes one, and a Python
    # __init__ is a frame more), __enter__ the last two.

    def __enter__(self) -> None:
        outer = _HELD.get()
        if _held(self.log) is not None:  # already held by the call around
            self.token = None
            if self.type:
                self.log.opening_fields(self.type, self.fields)
            return
        self.outer = outer
        self.token = _HELD.set(self)

    def __exit__(self, *exc: object) -> None:
        if self.token is not None:
            _HELD.reset(self.token)
            # outer stays: a task made inside this block keeps it in its context and must
            # still find the blocks around it (its lines then keep their order).
            self.token = None
            self.log._flush(self)  # pyright: ignore[reportPrivateUsage]


_new = object.__new__


def read_events(path: Path) -> Iterator[dict[str, Any]]:
    """The events of a log in order; a torn or unreadable line (a crash mid-write) is skipped."""
    with path.open(encoding="utf-8", errors="replace") as f:
        for line in f:
            try:
                event = json.loads(line)
            except (ValueError, RecursionError):  # nested deeper than the parser goes: damaged too
                continue
            if isinstance(event, dict):
                yield event  # type: ignore[misc]


def approvals(events: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """The permission gate's verdicts in a log's events, in order, each as ``call_id``,
    ``decision``, ``by`` and ``reason``: from a ``call`` line that carries them, and from an
    ``approval`` line (the shape of logs written before the verdict joined the call's line)."""
    return [
        {k: event.get(k) for k in ("call_id", "decision", "by", "reason")}
        for event in events
        if event.get("type") == "approval" or (event.get("type") == "call" and "decision" in event)
    ]


@dataclass
class ReplayedStep:
    """One step rebuilt from the log. ``visible``: id -> entry dict; ``consistent``: the
    rebuilt tool names equal the offered ones (and the skill and resource indexes too)."""

    step: int
    visible: dict[str, dict[str, Any]]
    offered: list[str]
    skill_index: list[str]
    handles: list[str] = field(default_factory=lambda: list[str]())
    diffs: list[dict[str, Any]] = field(default_factory=lambda: list[dict[str, Any]]())
    calls: list[dict[str, Any]] = field(default_factory=lambda: list[dict[str, Any]]())
    ended: bool = False

    @property
    def rebuilt(self) -> list[str]:
        return sorted(e["name"] for e in self.visible.values() if e.get("kind") not in _INDEXED)

    def _named(self, *kinds: str) -> list[str]:
        return sorted(e["name"] for e in self.visible.values() if e.get("kind") in kinds)

    @property
    def consistent(self) -> bool:
        return (
            self.rebuilt == sorted(self.offered)
            and self._named("skill") == sorted(self.skill_index)
            and self._named("resource", "prompt") == sorted(self.handles)
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "step": self.step,
            "consistent": self.consistent,
            "ended": self.ended,
            "offered": self.offered,
            "skill_index": self.skill_index,
            "handles": self.handles,
            "visible": sorted(self.visible),
            "diffs": self.diffs,
            "calls": self.calls,
        }


@dataclass
class Replay:
    """A session rebuilt from its log."""

    session_id: str
    start: dict[str, Any]
    steps: list[ReplayedStep]

    @property
    def ok(self) -> bool:
        """Every step's rebuilt visible set equals what the model was offered."""
        return all(t.consistent for t in self.steps)

    def to_dict(self) -> dict[str, Any]:
        return {
            "session": self.session_id,
            "start": self.start,
            "ok": self.ok,
            "steps": [t.to_dict() for t in self.steps],
        }


def replay(path: Path) -> Replay:
    """Rebuild every step's visible set from the log at ``path`` alone (logs written before
    steps were named so, with ``turn.start``/``turn.end``, too).

    Raises OSError when the file cannot be read.
    """
    visible: dict[str, dict[str, Any]] = {}
    pending: list[dict[str, Any]] = []
    steps: list[ReplayedStep] = []
    calls: dict[str, dict[str, Any]] = {}
    start: dict[str, Any] = {}
    session = path.stem
    for event in read_events(path):
        kind = event.get("type")
        if kind == "session.start":
            start, session = event, str(event.get("session", session))
        elif kind == "capability.diff" and event.get("source") != "mcp.refresh":
            for entry in event.get("removed", []):
                visible.pop(entry["id"], None)
            for entry in event.get("added", []):
                visible[entry["id"]] = entry
            for entry in event.get("changed", []):
                if entry["id"] in visible:
                    visible[entry["id"]] = {**visible[entry["id"]], "fingerprint": entry["after"]}
            pending.append(event)
        elif kind in ("step.start", "turn.start"):
            steps.append(
                ReplayedStep(
                    step=int(event.get("step", event.get("turn", len(steps) + 1))),
                    visible=dict(visible),
                    offered=list(event.get("offered", [])),
                    skill_index=list(event.get("skill_index", [])),
                    handles=list(event.get("handles", [])),
                    diffs=pending,
                )
            )
            pending = []
        elif kind in ("step.end", "turn.end") and steps:
            steps[-1].ended = True
        elif kind == "call" and steps:
            call = {
                "id": event.get("call_id"),
                "name": event.get("name"),
                "arguments": event.get("arguments"),
            }
            if "decision" in event:  # the permission gate's verdict in the call's own line
                call["approval"] = {k: event.get(k) for k in ("decision", "by", "reason")}
            calls[str(event.get("call_id"))] = call
            steps[-1].calls.append(call)
        elif kind in ("approval", "result"):
            call = calls.get(str(event.get("call_id")))
            if call is not None:
                keys = ("decision", "by", "reason") if kind == "approval" else ("outcome", "gate", "text")
                call[kind] = {k: event.get(k) for k in keys}
    return Replay(session, start, steps)
