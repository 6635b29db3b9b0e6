"""Pinned tool definitions: trust on first use, then quarantine what changes (rug pulls).

A server's tools are pinned in ``$KEEN_HOME/mcp/pins/<server>.json`` (mode 0600, written
atomically by :mod:`keen.trust.pinstore`)::

    {"version": 1, "server": "github", "updated_at": "2026-11-23T12:00:00Z",
     "tools": {"create_issue": {"fingerprint": "sha256:...", "body": "sha256:...",
                                "definition": {"name": "create_issue", ...},
                                "pinned_at": "2026-11-23T12:00:00Z"}}}

``fingerprint`` is SHA-256 over the RFC 8785 canonical JSON of the definition
(:mod:`keen.trust.fingerprint`); ``body`` is the same without the name. Comparing a live
``tools/list`` with the pins (:func:`compare`) sorts every tool into one status:

- ``trusted``: same name, same fingerprint;
- ``renamed``: a new name whose definition is otherwise identical to a pinned tool that
  is gone: shown as a rename, but held like a new tool (the name is part of what the model
  reads and acts on: ``archive`` renamed ``purge_everything`` is not the tool you pinned);
- ``changed``: same name, different definition; or a new name that shares its description
  or inputSchema with a pinned tool that is gone (a rename that also changed), which is
  quarantined like any change;
- ``new``: not pinned under any name;
- ``removed``: pinned, no longer listed.

What happens to ``new``, ``renamed`` and ``changed`` tools is the server's policy
(:func:`pinning_policy`): ``quarantine`` refuses them until trusted, ``warn`` lets them
through with a warning, ``off`` skips pinning. A server without a pin file has never been
approved; its first approved call pins every tool it lists (trust on first use).

What a model or host reads is :func:`pinned_view`, never the live list: under
``quarantine`` the held tools show only as a count, a changed one as it was pinned.
:func:`trust` pins only what ``keen mcp diff`` showed (a :class:`Review`, kept in
``mcp/pins/reviews/<server>.json``), and records that a person did (``ToolPin.reviewed``):
only then, or with the server's ``"trust_annotations"``, is a ``readOnlyHint`` taken as true.

What a server says of itself at initialize (``serverInfo`` and ``instructions``) is pinned
as one beside the tools, and held or logged like a changed tool: :mod:`keen.trust.info_pins`
(:class:`InfoCheck` and :func:`compare_info` are this module's names too).
"""

from __future__ import annotations

import difflib
import logging
import operator
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Literal

from keen._terminal import name_in_message
from keen._text import some_of
from keen.errors import ConfigError, ToolNotFound, ToolQuarantined
from keen.mcp.listing.changes import ToolsChanged
from keen.mcp.types import ServerInfo, Tool
from keen.trust.fingerprint import (
    DEFINITION_FIELDS,
    body_fingerprint,
    definition,
    definition_fingerprint,
    fingerprint,
    pretty_json,
)
from keen.trust.flags import escape_text, flag_change
from keen.trust.info_pins import (
    InfoCheck,
    compare_info,
    info_as_shown,
    info_pin_after_trust,
    info_withheld,
    record_first_look,
)
from keen.trust.pinstore import PIN_FILE_VERSION, PinStore

if TYPE_CHECKING:
    # The config's and the pin files' models (pydantic) load when a pin file is read or
    # written, not with this module: `keen chat` builds its first prompt without them.

    from keen.mcp.config import HttpServerConfig, StdioServerConfig
    from keen.trust.pinstore import PinFile, Review, ToolPin

__all__ = [
    "PIN_FILE_VERSION",
    "InfoCheck",
    "PinFile",
    "PinGuard",
    "PinReport",
    "PinStore",
    "PinnedView",
    "PinningPolicy",
    "Review",
    "ToolCheck",
    "ToolPin",
    "ToolStatus",
    "changed_fields",
    "compare",
    "compare_info",
    "definition_diff",
    "notes_held_tools",
    "pinned_tool",
    "pinned_view",
    "pinning_policy",
    "quarantine_error",
    "stricter_annotations",
    "trust",
]


def __getattr__(name: str) -> Any:
    # PEP 562: the pin files' models are this module's names too, loaded when first named.
    if name in ("PinFile", "Review", "ToolPin"):
        from keen.trust import _pinmodels

        return getattr(_pinmodels, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


logger = logging.getLogger(__name__)

REF_HEX = 12
"""Hex digits of the fingerprint in a ``name@<hex>`` reference (48 bits: no accidental match)."""
_REF = re.compile(r"^(?P<name>.+)@(?P<hex>[0-9a-f]{8,64})$")
MAX_DIFF_CHARS = 4000
"""A refusal carries at most this much of the diff (the rest: ``keen mcp diff``)."""
PinningPolicy = Literal["quarantine", "warn", "off"]
ToolStatus = Literal["trusted", "renamed", "changed", "new", "removed"]


def pinning_policy(server: HttpServerConfig | StdioServerConfig) -> PinningPolicy:
    """The server's ``"pinning"`` from configs.json, else the default for its transport.

    Remote (``streamable_http``, ``sse``) servers default to ``quarantine``: their code can change
    between two calls without the user doing anything. Local ``stdio`` servers default to
    ``warn``: the user installed and runs that code, and upgrades it themselves.
    """
    if server.pinning is not None:
        return server.pinning
    return "warn" if server.transport == "stdio" else "quarantine"


@dataclass(frozen=True, slots=True)
class ToolCheck:
    """One tool's standing against the pins.

    ``old`` is the pinned definition (``None`` for a new tool), ``new`` the live one
    (``None`` for a removed tool). ``previous_name`` is set for renames.
    """

    name: str
    status: ToolStatus
    previous_name: str | None = None
    changed_fields: tuple[str, ...] = ()
    old: dict[str, Any] | None = None
    new: dict[str, Any] | None = None

    @property
    def quarantined(self) -> bool:
        """True for ``new``, ``renamed`` and ``changed``: not pinned as it is now (a rename
        changes the name the model reads, so it is reviewed like a new tool)."""
        return self.status in ("new", "renamed", "changed")

    @property
    def fingerprint(self) -> str | None:
        """``sha256:<hex>`` of the live definition (``None`` for a removed tool)."""
        return definition_fingerprint(self.new) if self.new is not None else None

    @property
    def ref(self) -> str:
        """``name@<12 hex>``: the tool bound to this exact live definition, for :func:`trust`
        (so what is accepted is what was reviewed, even if the server changes again)."""
        fp = self.fingerprint
        return f"{self.name}@{fp.removeprefix('sha256:')[:REF_HEX]}" if fp else self.name

    def diff(self) -> str:
        """Unified diff of the pinned and the live definition (see :func:`definition_diff`)."""
        return definition_diff(
            self.old, self.new, old_name=self.previous_name or self.name, new_name=self.name
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "status": self.status,
            "quarantined": self.quarantined,
            "previous_name": self.previous_name,
            "changed_fields": list(self.changed_fields),
            "fingerprint": self.fingerprint,
            "ref": self.ref if self.new is not None else None,
        }


@dataclass(frozen=True, slots=True)
class PinReport:
    """A live tool list compared with a server's pins. ``pinned`` is False when the server
    has no pin file yet (every tool is then ``new``, awaiting trust on first use)."""

    server: str
    pinned: bool
    checks: tuple[ToolCheck, ...] = field(default_factory=tuple)
    reviewed: dict[str, bool] = field(default_factory=lambda: dict[str, bool]())
    """Pinned name -> whether ``keen mcp trust`` pinned it (:attr:`ToolPin.reviewed`)."""
    info: InfoCheck | None = None
    """What the server says of itself against its pin (``None``: not compared)."""
    _by_name: dict[str, ToolCheck] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # :meth:`check` answers every call's pin check: one lookup, not a scan of the list.
        by_name: dict[str, ToolCheck] = {}
        for c in self.checks:
            if c.status != "removed" and (
                c.name not in by_name or (c.quarantined and not by_name[c.name].quarantined)
            ):
                by_name[c.name] = c
        object.__setattr__(self, "_by_name", by_name)

    def by_status(self, status: ToolStatus) -> list[ToolCheck]:
        return [c for c in self.checks if c.status == status]

    @property
    def quarantined(self) -> list[ToolCheck]:
        return [c for c in self.checks if c.quarantined]

    def check(self, tool: str) -> ToolCheck | None:
        """The live tool named ``tool`` (never a removed one), or None.

        A server that lists one name twice with different definitions gets the quarantined
        one: which of the two a call would run is the server's choice, not Keen's.
        """
        return self._by_name.get(tool)

    def to_dict(self) -> dict[str, Any]:
        """The report as ``keen mcp diff --json`` prints it; each tool's ``reviewed`` says
        whether a person pinned its pinned definition (``keen mcp trust``), not only a first
        approved call (False for a tool with no pin)."""
        counts = {s: len(self.by_status(s)) for s in ("trusted", "renamed", "changed", "new", "removed")}
        return {
            "server": self.server,
            "pinned": self.pinned,
            "counts": counts,
            "info": self.info.to_dict() if self.info is not None else None,
            "tools": [
                {
                    **c.to_dict(),
                    "reviewed": c.status != "new" and self.reviewed.get(c.previous_name or c.name, False),
                }
                for c in self.checks
            ],
        }


def changed_fields(old: dict[str, Any] | None, new: dict[str, Any] | None) -> tuple[str, ...]:
    """The definition fields (MCP spelling, in :data:`DEFINITION_FIELDS` order) that differ."""
    old, new = old or {}, new or {}
    return tuple(f for f in DEFINITION_FIELDS if old.get(f) != new.get(f))


def definition_diff(
    old: dict[str, Any] | None, new: dict[str, Any] | None, *, old_name: str = "", new_name: str = ""
) -> str:
    """A unified diff (``difflib``) of two definitions as pretty canonical JSON; ``""`` if equal.

    A missing side diffs against nothing, so a new tool shows as all ``+`` lines. The names
    in the header lines are escaped onto one line (:func:`keen.trust.flags.escape_text`):
    they are the server's, and a newline in one would start a diff line of its choosing.
    """
    before = pretty_json(old).splitlines() if old is not None else []
    after = pretty_json(new).splitlines() if new is not None else []
    lines = difflib.unified_diff(
        before,
        after,
        fromfile=f"pinned/{escape_text(old_name, one_line=True)}" if old is not None else "/dev/null",
        tofile=f"live/{escape_text(new_name, one_line=True)}" if new is not None else "/dev/null",
        lineterm="",
        n=3,
    )
    return "\n".join(lines)


def compare(
    server: str, tools: Sequence[Tool], pins: PinFile | None, info: ServerInfo | None = None
) -> PinReport:
    """Sort every live tool (and every pinned one gone) into a status; see the module docstring.

    Pure: reads and writes nothing. Checks come in live-list order, removed tools last.
    ``info``: what the server said at initialize; compared too (:attr:`PinReport.info`)
    when given.
    """
    info_check = compare_info(info, pins) if info is not None else None
    if pins is None:
        fresh = [ToolCheck(name=t.name, status="new", new=definition(t)) for t in tools]
        return PinReport(server=server, pinned=False, checks=tuple(fresh), info=info_check)
    pinned = pins.tools
    live_names = {t.name for t in tools}
    gone = [name for name in pinned if name not in live_names]
    gone_by_body: dict[str, list[str]] = {}
    for name in gone:
        gone_by_body.setdefault(pinned[name].body, []).append(name)
    consumed: set[str] = set()
    checks: list[ToolCheck | None] = []
    unmatched: list[tuple[int, Tool, dict[str, Any]]] = []
    for tool in tools:
        live = definition(tool)
        pin = pinned.get(tool.name)
        if pin is not None:
            if pin.fingerprint == fingerprint(tool):
                checks.append(ToolCheck(name=tool.name, status="trusted", old=pin.definition, new=live))
            else:
                fields = changed_fields(pin.definition, live)
                checks.append(
                    ToolCheck(
                        name=tool.name, status="changed", changed_fields=fields, old=pin.definition, new=live
                    )
                )
            continue
        candidates = [n for n in gone_by_body.get(body_fingerprint(live), []) if n not in consumed]
        if candidates:
            previous = candidates[0]
            consumed.add(previous)
            checks.append(
                ToolCheck(
                    name=tool.name,
                    status="renamed",
                    previous_name=previous,
                    changed_fields=("name",),
                    old=pinned[previous].definition,
                    new=live,
                )
            )
            continue
        unmatched.append((len(checks), tool, live))
        checks.append(None)
    # A new name that shares its description or inputSchema with a vanished pin is that
    # tool renamed and changed: show it as a change against its predecessor.
    for index, tool, live in unmatched:
        previous = next(
            (n for n in gone if n not in consumed and _same_substance(pinned[n].definition, live)), None
        )
        if previous is None:
            checks[index] = ToolCheck(name=tool.name, status="new", new=live)
            continue
        consumed.add(previous)
        old = pinned[previous].definition
        checks[index] = ToolCheck(
            name=tool.name,
            status="changed",
            previous_name=previous,
            changed_fields=changed_fields(old, live),
            old=old,
            new=live,
        )
    done = [c for c in checks if c is not None]
    done += [ToolCheck(name=n, status="removed", old=pinned[n].definition) for n in gone if n not in consumed]
    reviewed = {name: pin.reviewed for name, pin in pinned.items()}
    return PinReport(server=server, pinned=True, checks=tuple(done), reviewed=reviewed, info=info_check)


def _same_substance(old: dict[str, Any], new: dict[str, Any]) -> bool:
    """Same non-empty description; or the same inputSchema (with properties) and a similar
    description (``difflib`` ratio >= 0.6). Only pairs a change with its likely predecessor
    for display: either way the tool is quarantined."""
    description = new.get("description") or ""
    if description.strip() and old.get("description") == description:
        return True
    schema = new.get("inputSchema") or {}
    if not schema.get("properties") or old.get("inputSchema") != schema:
        return False
    return difflib.SequenceMatcher(None, old.get("description") or "", description).ratio() >= 0.6


def trust(
    server: str,
    tools: Sequence[Tool],
    names: Iterable[str] | None = None,
    *,
    store: PinStore | None = None,
    reviewed: Review | None = None,
    by_user: bool = False,
    info: ServerInfo | None = None,
) -> tuple[PinFile, list[ToolCheck]]:
    """Pin the live definitions of ``names`` (every listed tool when ``None``) and save.

    ``reviewed``: what ``keen mcp diff`` showed (:class:`~keen.trust.pinstore.Review`); when
    given, every tool to pin must have a fingerprint that was shown, or nothing is written
    (a server that lists another definition to the trust than to the diff gets nothing
    pinned). ``by_user``: a person reviewed these definitions (``keen mcp trust``), which is
    recorded in each pin it writes (``reviewed``); a pin on first use is not.

    With ``names=None`` the pin file becomes exactly the live list: removed tools are
    dropped and renames recorded under their new names. With names, only those tools are
    pinned (a renamed tool's old pin is dropped); other pins stay as they are. A name may be
    a reference ``name@<hex>`` (:attr:`ToolCheck.ref`): it is trusted only while its live
    fingerprint starts with those hex digits.

    ``info``: what the server said at initialize. With ``names=None`` it is pinned too (with
    ``reviewed``, only as the diff showed it; an unchanged pin is marked reviewed only when
    the diff showed it); otherwise, and without it, the pinned info stays as it is.

    Returns:
        The saved pins and the checks of the tools trusted, as they stood before.

    Raises:
        ToolNotFound: a name is not in the live list (nothing is written).
        ToolQuarantined: a ``name@<hex>`` no longer matches (nothing is written).
        ConfigError: the existing pin file is broken.
    """
    from keen.trust._pinmodels import PinFile, ToolPin  # pydantic: only when pinning

    store = store or PinStore()
    current = store.load(server)
    report = compare(server, tools, current)
    live = {t.name: t for t in tools}
    expected: dict[str, str] = {}
    if names is None:
        wanted = list(live)
    else:
        wanted = []
        for raw in dict.fromkeys(names):
            ref = _REF.match(raw)
            if ref is not None and raw not in live:
                expected[ref["name"]] = ref["hex"]
                raw = ref["name"]
            wanted.append(raw)
        missing = [n for n in wanted if n not in live]
        if missing:
            # The names are the user's and the server's: each cut, and a long list named in part.
            raise ToolNotFound(
                f'MCP server "{server}" lists no tool {some_of(missing, 5, say=_quoted)}; '
                f"trust only tools it lists now ({some_of(sorted(live), 20, say=name_in_message) or 'none'})",
                server=server,
                tool=missing[0],
            )
    for name, hex_prefix in expected.items():
        check = report.check(name)
        if check is not None and not (check.fingerprint or "").removeprefix("sha256:").startswith(hex_prefix):
            said = name_in_message(name)
            raise ToolQuarantined(
                f'the tool "{server}/{said}" is no longer the definition {said}@{hex_prefix} you reviewed '
                f"(now {said}@{check.ref.rpartition('@')[2]}): it changed again; nothing was trusted. Review it again.",
                server=server,
                tool=name,
                status=check.status,
                previous_name=check.previous_name,
                changed_fields=check.changed_fields,
                diff=check.diff(),
            )
    if reviewed is not None:
        _check_reviewed(server, [t for t in tools if t.name in set(wanted)], reviewed)
    info_pin = info_pin_after_trust(
        server, current, info if names is None else None, reviewed=reviewed, by_user=by_user
    )
    old_pins = dict(current.tools) if current is not None else {}
    new_pins: dict[str, ToolPin] = {} if names is None else dict(old_pins)
    trusted: list[ToolCheck] = []
    for name in wanted:
        check = report.check(name)
        keep = old_pins.get(name)
        tool = live[name]
        if check is not None and check.status == "trusted" and keep is not None:
            new_pins[name] = keep.model_copy(update={"reviewed": True}) if by_user else keep
        else:
            new_pins[name] = ToolPin.of(tool, reviewed=by_user)
        if check is not None and check.previous_name:
            new_pins.pop(check.previous_name, None)
        if check is not None:
            trusted.append(check)
    pins = PinFile(server=server, tools=new_pins, info=info_pin)
    store.save(pins)
    return pins, trusted


def _quoted(name: str) -> str:
    # Quoted, not repr'd: the text is escaped already, and repr would double each backslash.
    return f"'{name_in_message(name)}'"


def _check_reviewed(server: str, tools: Sequence[Tool], reviewed: Review) -> None:
    """Raise ``ToolQuarantined`` unless every one of ``tools`` is a definition ``reviewed`` holds."""
    for tool in tools:
        shown = reviewed.tools.get(tool.name)
        if shown is not None and fingerprint(tool) in shown:
            if reviewed.cut.get(tool.name):
                raise ToolQuarantined(
                    f'the tool "{server}/{name_in_message(tool.name)}" was not shown whole by `keen mcp diff {server}` at '
                    f"{reviewed.reviewed_at} ({reviewed.cut[tool.name]:,} characters of it were not shown), "
                    f"so nothing was trusted. Run `keen mcp diff {server} --full`, review all of it, then trust.",
                    server=server,
                    tool=tool.name,
                    status="changed",
                )
            continue
        what = "differs from the one" if shown else "was not among the tools"
        raise ToolQuarantined(
            f'the tool "{server}/{name_in_message(tool.name)}" as the server lists it now {what} `keen mcp diff {server}` '
            f"showed at {reviewed.reviewed_at}: the server changed it since, so nothing was trusted. Run "
            f"`keen mcp diff {server}` again, review what it shows, then trust.",
            server=server,
            tool=tool.name,
            status="changed" if shown else "new",
        )


def stricter_annotations(pinned: dict[str, Any] | None, live: dict[str, Any] | None) -> dict[str, Any] | None:
    """The live ``annotations`` with each MCP hint (2025-11-25 "Tool annotations") at the
    stricter of its pinned and live value, spec defaults for a missing one: read-only and
    idempotent only when both say so, destructive and open-world when either does. A tool
    that turns ``readOnlyHint: true`` after it was pinned is still judged as it was."""
    if pinned == live:
        return live
    old, new = pinned or {}, live or {}

    def hint(values: dict[str, Any], key: str, default: bool) -> bool:
        value = values.get(key)
        return value if isinstance(value, bool) else default

    out = dict(new)
    out["readOnlyHint"] = hint(old, "readOnlyHint", False) and hint(new, "readOnlyHint", False)
    out["idempotentHint"] = hint(old, "idempotentHint", False) and hint(new, "idempotentHint", False)
    # destructiveHint means something only for a tool that is not read-only (spec): a tool
    # read-only on one side counts as non-destructive there.
    out["destructiveHint"] = (
        not hint(old, "readOnlyHint", False) and hint(old, "destructiveHint", True)
    ) or (not hint(new, "readOnlyHint", False) and hint(new, "destructiveHint", True))
    out["openWorldHint"] = hint(old, "openWorldHint", True) or hint(new, "openWorldHint", True)
    return out


@dataclass(frozen=True, slots=True)
class PinnedView:
    """What a model or host may read of one server's tools: :func:`pinned_view`.

    ``tools``: the listing to show; ``held``: the checks of the tools held for review
    (quarantined: new, renamed, or changed since pinned), shown only as :attr:`note`; ``error``: why
    nothing can be shown (a broken pin file). ``info``: what the server said at initialize as
    it may be shown (under ``quarantine``, changed info as it was pinned; with an ``error``,
    none of what the server says of itself); ``held_info``: the check of info held for review.
    """

    server: str
    tools: tuple[Tool, ...] = ()
    held: tuple[ToolCheck, ...] = ()
    error: str = ""
    info: ServerInfo | None = None
    held_info: InfoCheck | None = None

    @property
    def note(self) -> str:
        """``N tools changed and are held for review: keen mcp diff SERVER``, or ``1 new tool,
        1 renamed tool and 2 changed tools are held ...`` when some are new or renamed ("" when
        none)."""
        if self.error:
            return f"The tools of {self.server} are held: {self.error}"
        counts = {
            kind: sum(1 for check in self.held if check.status == kind)
            for kind in ("new", "renamed", "changed")
        }
        total = sum(counts.values())
        if self.held_info is not None:
            # Counted like a held tool: the same note, the same command to review it.
            if not total:
                return f"The server's info changed and is {_HELD_FOR_REVIEW}{self.server}"
            parts = [f"{n} {kind} tool{'s' if n != 1 else ''}" for kind, n in counts.items() if n]
            return f"{', '.join(parts)} and changed server info are {_HELD_FOR_REVIEW}{self.server}"
        if not total:
            return ""
        if total == counts["changed"]:
            what = "tools changed and are" if total != 1 else "tool changed and is"
            return f"{total} {what} {_HELD_FOR_REVIEW}{self.server}"
        # A new or renamed tool did not change: counted as one, it sent the reader looking
        # for an edit.
        parts = [f"{n} {kind} tool{'s' if n != 1 else ''}" for kind, n in counts.items() if n]
        listed = parts[0] if len(parts) == 1 else f"{', '.join(parts[:-1])} and {parts[-1]}"
        return f"{listed} {'are' if total != 1 else 'is'} {_HELD_FOR_REVIEW}{self.server}"


_HELD_FOR_REVIEW = "held for review: keen mcp diff "


def notes_held_tools(text: str, server: str) -> bool:
    """Whether ``text`` (a generated skill's description, which ends with the pins' note when
    it was written) carries :attr:`PinnedView.note` of tools of ``server`` held for review:
    what tells, of a skill whose marker does not name its held tools, whether any were."""
    return f"{_HELD_FOR_REVIEW}{server}" in text


def pinned_view(
    server: str,
    tools: Sequence[Tool],
    report: PinReport | None,
    policy: PinningPolicy,
    *,
    trust_annotations: bool = False,
    info: ServerInfo | None = None,
    info_check: InfoCheck | None = None,
) -> PinnedView:
    """The listing everything a model or host reads is built from (SKILL.md, schema files,
    the catalog line, search, ``keen serve``), in place of the live ``tools/list``.

    Under ``quarantine`` (a pinned server): a trusted tool as listed (its definition is the
    pinned one); a changed tool as it was pinned; a new or renamed tool (a pinned definition
    under a new name, changed or not) not at all. Those quarantined tools are
    :attr:`PinnedView.held`. Under ``warn`` a changed or renamed tool is shown as listed (calls
    are let through), with its annotations at the stricter of pinned and live
    (:func:`stricter_annotations`). Under
    ``off`` or for a server never pinned, the live list. Annotations are claims (MCP
    2025-11-25 "Tool annotations": untrusted unless from a trusted server): a tool's
    ``annotations_trusted`` is True, so its ``readOnlyHint`` lets it run unasked, only for a
    server with ``trust_annotations`` or a tool ``keen mcp trust`` pinned unchanged.

    Args:
        server: the server's name.
        tools: its live tools.
        report: :func:`compare` of ``tools`` with the pins (``None`` under ``off``).
        policy: the server's :func:`pinning_policy`.
        trust_annotations: the server's ``"trust_annotations"`` in configs.json.
        info: what the server said at initialize (:attr:`PinnedView.info` is it as shown).
        info_check: :func:`compare_info` of ``info`` (``None`` under ``off``): under
            ``quarantine`` a change shows the pinned name, title, version and instructions,
            and is held.
    """
    checks = report.checks[: len(tools)] if report is not None and report.pinned else ()
    shown: list[Tool] = []
    held: list[ToolCheck] = []
    seen: set[str] = set()
    for index, tool in enumerate(tools):
        check = checks[index] if index < len(checks) else None
        if check is None or check.status == "trusted":
            view = tool
        elif policy == "quarantine":
            held.append(check)
            if check.status != "changed" or check.previous_name or check.old is None:
                continue
            view = pinned_tool(server, check.old)
        elif check.old is not None:  # warn, changed or renamed: let through, by the stricter annotations
            view = replace(
                tool, annotations=stricter_annotations(check.old.get("annotations"), tool.annotations)
            )
        else:  # warn, new: nothing pinned to compare with (its annotations are claims all the same)
            view = tool
        if view.name in seen:
            continue  # a name listed twice shows once (the call is refused: PinReport.check)
        seen.add(view.name)
        reviewed = check is not None and check.status == "trusted" and _reviewed(report, tool.name)
        if not (trust_annotations or reviewed):
            view = replace(view, annotations_trusted=False)
        shown.append(view)
    info, held_info = info_as_shown(info, info_check, hold=policy == "quarantine")
    return PinnedView(server, tuple(shown), tuple(held), info=info, held_info=held_info)


def _reviewed(report: PinReport | None, name: str) -> bool:
    return report is not None and report.reviewed.get(name, False)


def pinned_tool(server: str, data: dict[str, Any]) -> Tool:
    """A :class:`Tool` from a pinned definition (:attr:`ToolPin.definition`, MCP wire spelling)."""
    return Tool(
        server=server,
        name=str(data.get("name", "")),
        description=str(data.get("description") or ""),
        input_schema=dict(data.get("inputSchema") or {}),
        title=data.get("title"),
        annotations=data.get("annotations"),
        output_schema=data.get("outputSchema"),
    )


class PinGuard:
    """The pinning check for call paths: caches each server's comparison until its tool
    list or its pin file changes (one ``stat`` per call: :func:`keen.trust.pinstore.one_look`),
    so a call does not canonicalize every tool again. The tool list is known by the identity
    of the tuple the Manager hands out per listing, so a call's check does not walk it.

    It is also the :class:`keen.mcp.ToolTrust` Keen gives every Manager it builds
    (:meth:`shown`, :meth:`stamp`, :meth:`flagged`): :mod:`keen.mcp` imports nothing of
    :mod:`keen.trust`, which sits above it.

    Args:
        store: where pins live (default ``$KEEN_HOME/mcp/pins``).
    """

    def __init__(self, store: PinStore | None = None) -> None:
        self.store = store or PinStore()
        self._cache: dict[str, tuple[tuple[Tool, ...], tuple[int, int, int] | None, PinReport]] = {}
        self._views: dict[str, tuple[PinReport | None, tuple[Tool, ...], tuple[Any, ...], PinnedView]] = {}
        self._loaded: dict[str, tuple[tuple[int, int, int], PinFile | None]] = {}
        self._info: dict[str, tuple[tuple[int, int, int] | None, ServerInfo, InfoCheck]] = {}
        self._seen: dict[str, tuple[int, int, int] | None] = {}
        self.version = 0
        """Moves each time this guard sees a pin file other than it last saw it (written by
        ``keen mcp trust`` in another process, or on first use here): a cache of views
        (``keen serve``'s catalog) keys on it instead of looking at every pin file."""

    policy = staticmethod(pinning_policy)
    """:func:`pinning_policy`, here so a caller holding a guard needs no other import."""

    def report(self, server: str, tools: Sequence[Tool]) -> PinReport:
        """:func:`compare` of ``tools`` with the stored pins (cached). Raises ``ConfigError``."""
        stamp = self.stamp(server)  # one stat per call: a pin written elsewhere counts at once
        cached = self._cache.get(server)
        if (
            cached is not None
            and cached[1] == stamp
            and (cached[0] is tools or _same_tools(cached[0], tools))
        ):
            return cached[2]
        report = compare(server, tools, self._load(server, stamp))
        # The Manager's tuple itself; a copy of any other sequence (a list may change in place).
        self._cache[server] = (tools if isinstance(tools, tuple) else tuple(tools), stamp, report)
        return report

    def _load(self, server: str, stamp: tuple[int, int, int] | None) -> PinFile | None:
        """The pin file as :meth:`PinStore.load` reads it, read again only when ``stamp`` moved."""
        if stamp is None:
            return None
        cached = self._loaded.get(server)
        if cached is not None and cached[0] == stamp:
            return cached[1]
        pins = self.store.load(server)
        self._loaded[server] = (stamp, pins)
        return pins

    def info_check(self, server: str, info: ServerInfo) -> InfoCheck:
        """:func:`compare_info` of ``info`` with the stored pins (cached while the pin file and
        ``info`` are the same). A pinned server with no info pinned (pinned by a Keen that
        pinned only tools) gets it recorded now, as on first use. Raises ``ConfigError`` (a
        broken pin file)."""
        stamp = self.stamp(server)
        cached = self._info.get(server)
        if cached is not None and cached[0] == stamp and cached[1] is info:
            return cached[2]
        pins = self._load(server, stamp)
        check = compare_info(info, pins)
        if pins is not None and check.status == "new":
            recorded = record_first_look(self.store, server, pins, check)
            if recorded is not None:
                stamp = self.stamp(server)
                check = compare_info(info, recorded)
        self._info[server] = (stamp, info, check)
        return check

    def shown(
        self,
        server: str,
        tools: Sequence[Tool],
        config: HttpServerConfig | StdioServerConfig,
        info: ServerInfo | None = None,
    ) -> PinnedView:
        """:meth:`view` under the server's configured policy (:func:`pinning_policy`) and
        ``trust_annotations``: what a Manager lists (``ToolTrust.shown``)."""
        return self.view(
            server, tools, pinning_policy(config), trust_annotations=config.trust_annotations, info=info
        )

    def stamp(self, server: str) -> tuple[int, int, int] | None:
        """The pin file's change key (:meth:`PinStore.stamp`): :meth:`shown` may differ for the
        same tools once it changes, e.g. after ``keen mcp trust`` in another process; a change
        seen moves :attr:`version`."""
        stamp = self.store.stamp(server)
        if self._seen.get(server, 0) != stamp:  # 0: never looked (a stamp is a tuple or None)
            self._seen[server] = stamp
            self.version += 1
        return stamp

    def flagged(
        self,
        change: ToolsChanged,
        tools_by_name: Mapping[str, Tool],
        others: Mapping[str, Iterable[str | Tool]],
    ) -> ToolsChanged:
        """:func:`keen.trust.flags.flag_change`: ``change`` with the flags its added and changed
        tools raise (``ToolTrust.flagged``)."""
        return flag_change(change, tools_by_name, others)

    def view(
        self,
        server: str,
        tools: Sequence[Tool],
        policy: PinningPolicy,
        *,
        trust_annotations: bool = False,
        info: ServerInfo | None = None,
    ) -> PinnedView:
        """:func:`pinned_view` of ``tools`` and ``info`` (what a model or host may read); a
        broken pin file shows no tool at all and nothing the server says of itself, with the
        error (calls are refused for it too). Under ``warn`` changed info is shown and logged."""
        report: PinReport | None = None
        info_check: InfoCheck | None = None
        if policy != "off":
            try:
                report = self.report(server, tools)
                info_check = self.info_check(server, info) if info is not None else None
            except ConfigError as exc:
                return PinnedView(
                    server,
                    error=exc.message,
                    info=info_withheld(info) if info else None,
                )
        # Cached while the report is the same object (the cache keeps it alive): readers
        # get the same Tool objects until something changed, as from the Manager.
        options = (policy, trust_annotations, info, info_check)
        cached = self._views.get(server)
        if (
            cached is not None
            and cached[0] is report
            and cached[2] == options
            and (cached[1] is tools or _same_tools(cached[1], tools))
        ):
            return cached[3]
        view = pinned_view(
            server,
            tools,
            report,
            policy,
            trust_annotations=trust_annotations,
            info=info,
            info_check=info_check,
        )
        if policy == "warn" and info_check is not None and info_check.quarantined:
            logger.warning(
                "the server info of %s changed since it was pinned; shown by pinning policy warn "
                "(review: keen mcp diff %s)",
                server,
                server,
            )
        self._views[server] = (report, tools if isinstance(tools, tuple) else tuple(tools), options, view)
        return view

    def first_use(self, server: str, tools: Sequence[Tool], info: ServerInfo | None = None) -> bool:
        """Trust on first use: pin every listed tool, and ``info`` (what
        the server said at initialize) when given, when the server has no pins yet.

        Returns True when it wrote the pins, False when the server was already pinned.
        """
        if self.stamp(server) is not None:
            return False
        trust(server, tools, store=self.store, info=info)
        logger.info("pinned %d tools of %s on first approval", len(tools), server)
        return True

    def enforce(
        self, server: str, tool: str, tools: Sequence[Tool], policy: PinningPolicy
    ) -> ToolCheck | None:
        """The pin check of one call, before approval.

        Returns the tool's check (``None`` when ``policy`` is ``off`` or the server has no pins
        yet). Under ``quarantine`` a ``new``, ``renamed`` or ``changed`` tool of a pinned server
        raises ``ToolQuarantined``; under ``warn`` it is logged and allowed. A server never pinned passes (trust on first use follows the
        approval: :meth:`approved`).

        Raises:
            ToolQuarantined: its message says what changed and how to review it, never the
                new text (a model reads it); its ``diff`` holds that (hidden characters
                escaped, at most :data:`MAX_DIFF_CHARS`).
            ConfigError: the pin file is broken.
        """
        if policy == "off":
            return None
        report = self.report(server, tools)
        if not report.pinned:
            return None
        check = report.check(tool)
        if check is None or not check.quarantined:
            return check
        if policy == "warn":
            logger.warning(
                "%s/%s is %s since it was pinned (%s); allowed by pinning policy warn",
                server,
                name_in_message(escape_text(tool, one_line=True)),
                check.status,
                ", ".join(check.changed_fields) or "not pinned",
            )
            return check
        raise quarantine_error(server, check)

    def approved(
        self, server: str, tools: Sequence[Tool], policy: PinningPolicy, info: ServerInfo | None = None
    ) -> bool:
        """After a call was approved: pin the server's tools (and ``info``) if
        it has no pins yet. Returns True when this was the first approval (pins written)."""
        return policy != "off" and self.first_use(server, tools, info)

    def quarantined(self, server: str, tools: Sequence[Tool], policy: PinningPolicy) -> set[str]:
        """Names of the tools a call would be refused for under ``policy`` (empty unless the
        policy is ``quarantine`` and the server is pinned): what a visible set should hide."""
        if policy != "quarantine":
            return set()
        report = self.report(server, tools)
        return {c.name for c in report.quarantined} if report.pinned else set()


def _same_tools(held: tuple[Tool, ...], tools: Sequence[Tool]) -> bool:
    """Whether ``tools`` are the (frozen) Tool objects ``held``. A tuple is the Manager's
    (:meth:`keen.mcp.Manager.live_tools`: one per listing, which a call's pin check and the
    Manager's view both pass), so it is ``held`` itself or another listing: never walked.
    Another sequence (a caller's list, which may change in place) is compared object by
    object; the cache keeps ``held`` alive, so no id is reused meanwhile."""
    if isinstance(tools, tuple):
        return held is tools
    return len(held) == len(tools) and all(map(operator.is_, held, tools))


def quarantine_error(server: str, check: ToolCheck) -> ToolQuarantined:
    """The refusal of a quarantined tool: what changed, the diff, and how to accept it."""
    # Both names are the server's (the old one as it once listed it, kept in the pin file):
    # escaped onto one line, so neither can end the sentence and start one of its own.
    name = name_in_message(escape_text(check.name, one_line=True))
    previous = name_in_message(escape_text(check.previous_name or "", one_line=True))
    if check.status == "new":
        what = "is new since this server's tools were pinned"
    elif check.status == "renamed":
        what = f'was renamed from "{previous}" (its definition is otherwise the same)'
    elif check.previous_name:
        what = f'was renamed from "{previous}" and changed ({", ".join(check.changed_fields)})'
    else:
        what = f"changed since it was pinned ({', '.join(check.changed_fields)})"
    diff = escape_text(check.diff())
    if len(diff) > MAX_DIFF_CHARS:
        diff = (
            diff[:MAX_DIFF_CHARS]
            + f"\n[... {len(diff) - MAX_DIFF_CHARS} more characters: keen mcp diff {server}]"
        )
    # The message reaches the model: it names the change but never quotes the new
    # definition (that is what is held back); ``diff`` carries it for a person.
    message = (
        f'the tool "{server}/{name}" {what}, so it is held for review and nothing was sent. '
        f"The user can review it with `keen mcp diff {server}`, then accept it with `keen mcp trust {server}`."
    )
    return ToolQuarantined(
        message,
        server=server,
        tool=check.name,
        status=check.status,
        previous_name=check.previous_name,
        changed_fields=check.changed_fields,
        diff=diff,
    )
