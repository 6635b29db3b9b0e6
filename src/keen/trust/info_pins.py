"""What a server says of itself, pinned: trust on first look, then hold what changes.

What a server says of itself at initialize (MCP 2025-11-25 "Lifecycle": ``serverInfo``'s
``name``, ``title`` and ``version``, and ``instructions``) reaches the model too (SKILL.md's
"The server calls itself" and "Server instructions", the catalog line): it is pinned as one,
beside the tools (:mod:`keen.trust.pins`), in ``mcp/pins/info/<server>.json``
(:class:`~keen.trust.pinstore.InfoPin`: ``{"fingerprint": ..., "info": {"name": ..., "title":
..., "version": ..., "instructions": ...}}``), and compared like one more definition
(:func:`compare_info`). A file of its own: a Keen that pins only tools reads the pin file
strictly and would call a pin file holding it broken. A server pinned without it has it
recorded at the next look (:func:`record_first_look`), as on first use; a change later is
held under ``quarantine`` (the pinned info is shown: :func:`info_as_shown`), logged under
``warn``. ``keen mcp trust`` pins it as the diff showed it (:func:`info_pin_after_trust`).
"""

from __future__ import annotations

import difflib
import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Literal

from keen.errors import ToolQuarantined
from keen.mcp.types import ServerInfo
from keen.trust.fingerprint import SHOWN_INFO_FIELDS, info_fingerprint, shown_info
from keen.trust.flags import escape_text

if TYPE_CHECKING:
    # The pin files' models (pydantic) load when a pin file is read or written.
    from keen.trust.pinstore import InfoPin, PinFile, PinStore, Review

__all__ = [
    "InfoCheck",
    "compare_info",
    "info_as_shown",
    "info_pin_after_trust",
    "info_withheld",
    "record_first_look",
]

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class InfoCheck:
    """What a server says of itself (:func:`keen.trust.fingerprint.shown_info`: ``serverInfo``
    name, title, version, and ``instructions``) against its pin (:func:`compare_info`).

    ``status``: ``trusted`` (as pinned), ``changed``, or ``new`` (none pinned yet: recorded at
    the next look, as on first use). ``old`` is the pinned info (``None`` when none is
    pinned), ``new`` the live one.
    """

    status: Literal["trusted", "changed", "new"]
    new: dict[str, Any]
    old: dict[str, Any] | None = None
    reviewed: bool = False
    """Whether ``keen mcp trust`` pinned the pinned info after a diff showed it."""

    @property
    def quarantined(self) -> bool:
        """True when the info changed since it was pinned."""
        return self.status == "changed"

    @property
    def fingerprint(self) -> str:
        """``sha256:<hex>`` of the live info."""
        return info_fingerprint(self.new)

    @property
    def changed_fields(self) -> tuple[str, ...]:
        """The fields (:data:`SHOWN_INFO_FIELDS`) that differ from the pin (all, when none)."""
        old = self.old or {}
        return tuple(f for f in SHOWN_INFO_FIELDS if self.old is None or old.get(f) != self.new.get(f))

    @property
    def shown(self) -> bool:
        """Whether ``keen mcp diff`` shows it (and a trust after that diff may accept it):
        changed, not pinned yet, or pinned by a first look that nobody reviewed."""
        return self.status != "trusted" or not self.reviewed

    def diff(self) -> str:
        """What ``keen mcp diff`` shows (``""`` when not :attr:`shown`): a unified diff of the
        pinned and the live info, a field a line and the instructions line by line; a pin
        nobody reviewed, and info not pinned yet, in full (against nothing). Each value is
        quoted as a JSON string, as a tool's definition diff quotes its text: a line of the
        server's cannot pass for a diff header (``+++ live/...``) or another field, and
        trailing spaces and control characters show."""
        if not self.shown:
            return ""
        before = _info_lines(self.old) if self.old is not None and self.status == "changed" else []
        lines = difflib.unified_diff(
            before,
            _info_lines(self.new),
            fromfile="pinned/server-info" if before else "/dev/null",
            tofile="live/server-info",
            lineterm="",
            n=3,
        )
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "quarantined": self.quarantined,
            "reviewed": self.status != "new" and self.reviewed,
            "changed_fields": list(self.changed_fields) if self.status != "trusted" else [],
            "fingerprint": self.fingerprint,
        }


def _quoted(value: Any) -> str:
    """``value`` as JSON (a lone surrogate as ``\\udXXX``), every invisible character written
    visibly (:func:`keen.trust.flags.escape_text`)."""
    text = json.dumps(value, ensure_ascii=False).encode("utf-8", "backslashreplace").decode("utf-8")
    return escape_text(text, one_line=True)


def _info_lines(info: Mapping[str, Any]) -> list[str]:
    """A shown info as diff lines: ``name: "..."``, ``title: ...``, ``version: ...``, then
    ``instructions:`` and the instructions a quoted line each (:func:`_quoted_lines`)."""
    lines = [f"{key}: {_quoted(info.get(key))}" for key in SHOWN_INFO_FIELDS[:-1]]
    return [*lines, "instructions:", *_quoted_lines(info.get("instructions") or "")]


def _quoted_lines(text: str) -> list[str]:
    """Each line of ``text`` quoted (:func:`_quoted`). Lines end at ``"\\n"`` only (not at
    ``\\r``, ``\\u2028`` or ``\\x85``, as ``str.splitlines`` would): a change of line endings
    alone is a change the diff shows (``"a\\r"``)."""
    return [_quoted(line) for line in (text.split("\n") if text else ())]


def compare_info(live: ServerInfo | None, pins: PinFile | None) -> InfoCheck:
    """``live`` (what the server said at initialize) against the info pinned with ``pins``. Pure."""
    shown = shown_info(live)
    pinned = pins.info if pins is not None else None
    if pinned is None:
        return InfoCheck(status="new", new=shown)
    status = "trusted" if pinned.fingerprint == info_fingerprint(shown) else "changed"
    return InfoCheck(status=status, new=shown, old=dict(pinned.info), reviewed=pinned.reviewed)


def info_withheld(info: ServerInfo) -> ServerInfo:
    """``info`` with none of what the server says of itself: shown when its pins cannot be read."""
    return replace(info, name="", title=None, version="", instructions=None)


def info_as_shown(
    info: ServerInfo | None, check: InfoCheck | None, *, hold: bool
) -> tuple[ServerInfo | None, InfoCheck | None]:
    """``info`` as a model or host may read it, and the check of it when it is held.

    ``hold`` (the ``quarantine`` policy): info changed since it was pinned is shown as it was
    pinned, and held (returned ``check``); otherwise ``info`` as sent and ``None``.
    """
    if info is None or check is None or not check.quarantined or not hold:
        return info, None
    old = check.old or {}
    pinned = replace(
        info,
        name=old.get("name") or "",
        title=old.get("title"),
        version=old.get("version") or "",
        instructions=old.get("instructions") or None,
    )
    return pinned, check


def record_first_look(store: PinStore, server: str, pins: PinFile, check: InfoCheck) -> PinFile | None:
    """Pin ``check.new`` beside ``pins`` (a server pinned without its info, by a Keen that
    pinned only tools), not reviewed, as on first use. Returns the pins saved, or ``None``
    when they could not be written (logged; the info is then shown as on a first use whose
    pins could not be written)."""
    from keen.trust._pinmodels import InfoPin

    recorded = pins.model_copy(update={"info": InfoPin.of(server, check.new)})
    try:
        store.save(recorded)
    except OSError as exc:
        logger.warning("could not record the server info of %s beside its pins: %s", server, exc)
        return None
    logger.info("pinned the server info of %s on first look", server)
    return recorded


def info_pin_after_trust(
    server: str,
    current: PinFile | None,
    info: ServerInfo | None,
    *,
    reviewed: Review | None,
    by_user: bool,
) -> InfoPin | None:
    """The info pin a :func:`keen.trust.pins.trust` of every tool writes.

    ``info``: what the server sends now (``None``: the pinned info stays as it is). With
    ``reviewed`` (what ``keen mcp diff`` showed), it is pinned only as the diff showed it; an
    unchanged pin is marked reviewed only when the diff showed it (or, with no review, by
    the listing an interactive trust printed).

    Raises:
        ToolQuarantined: the info differs from what the diff showed (nothing is to be written).
    """
    from keen.trust._pinmodels import InfoPin  # pydantic: only when pinning

    info_pin = current.info if current is not None else None
    if info is None:
        return info_pin
    check = compare_info(info, current)
    # Shown cut short (a long instruction): a person may not have seen what it ends with.
    if reviewed is not None and reviewed.info == check.fingerprint and reviewed.info_cut:
        raise ToolQuarantined(
            f"the server info of {server} (name, title, version, instructions) was not shown whole "
            f"by `keen mcp diff {server}` at {reviewed.reviewed_at} ({reviewed.info_cut:,} characters of "
            f"it were not shown), so nothing was trusted. Run `keen mcp diff {server} --full`, review "
            "all of it, then trust.",
            server=server,
            status=check.status,
        )
    if check.status == "trusted" and info_pin is not None:
        # Marked reviewed only when a person was shown it: by the diff this review
        # records, or (no review) by the listing the interactive trust printed.
        seen = reviewed is None or reviewed.info == check.fingerprint
        if by_user and seen and not info_pin.reviewed:
            info_pin = info_pin.model_copy(update={"reviewed": True})
        return info_pin
    if check.status == "new" and reviewed is not None and reviewed.info is None:
        # A review that showed none of it: recorded as a first use would, not as reviewed.
        return InfoPin.of(server, check.new)
    if reviewed is not None and reviewed.info != check.fingerprint:
        raise ToolQuarantined(
            f"the server info of {server} (name, title, version, instructions) as it sends it "
            f"now differs from the one `keen mcp diff {server}` showed at {reviewed.reviewed_at}: "
            f"the server changed it since, so nothing was trusted. Run `keen mcp diff {server}` "
            "again, review what it shows, then trust.",
            server=server,
            status=check.status,
            diff=escape_text(check.diff()),
        )
    return InfoPin.of(server, check.new, reviewed=by_user)
