"""``keen mcp diff SERVER`` and ``keen mcp trust SERVER [TOOL ...]``: review and accept tool
definitions that changed since they were pinned (see ``keen.trust.pins``).

Both connect to the one server through the Manager, list its tools, and compare them with
``$KEEN_HOME/mcp/pins/<server>.json``. Every piece of server text shown is escaped
(``keen.trust.flags.escape_text``) and printed without markup, so a hostile description cannot
hide in or style the terminal.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

import typer
from rich.markup import escape

from keen.cli._common import err, fail, out, print_json, run
from keen.errors import ConfigError

if TYPE_CHECKING:
    # The MCP layer (and the SDK under it) loads only when a command runs, so registering
    # these commands costs other commands nothing at start-up.
    from keen.mcp import ServerInfo, Tool
    from keen.trust.flags import Flag
    from keen.trust.info_pins import InfoCheck
    from keen.trust.pins import PinReport, ToolCheck

__all__ = ["register"]

T = TypeVar("T")

_TIMEOUT_HELP = "Seconds to wait for the server to connect."
_REF_TAIL = re.compile(r"@[0-9a-f]{8,64}$")  # name@<hex>: keen.trust.pins.ToolCheck.ref
# A rename is held like a new tool: not styled as the safe one.
_STYLE = {"changed": "yellow", "new": "cyan", "renamed": "cyan", "removed": "red", "trusted": "dim"}
# What one shown diff prints at most (--full: all of it; --json: all of it, always): a server's
# 5 MB description is one line of its definition, and filled the terminal and its scrollback.
MAX_SHOWN_LINES = 200
MAX_SHOWN_LINE_CHARS = 2000
MAX_SHOWN_CHARS = 20_000


def register(mcp_app: typer.Typer) -> None:
    """Add ``diff`` and ``trust`` to the ``keen mcp`` group."""
    mcp_app.command("diff")(diff)
    mcp_app.command("trust")(trust_cmd)


async def _live_tools(
    server: str,
    timeout: float,
    live: bool,
    pin: Callable[[list[Tool], ServerInfo | None, dict[str, list[Tool]]], Awaitable[T]] | None = None,
) -> tuple[list[Tool], ServerInfo | None, str, dict[str, list[Tool]], T | None]:
    """The server's tools and initialize info (its instructions) as it sent them, its
    pinning policy, the other configured servers' pinned tools, and what ``pin(tools, info,
    others)`` returned: it runs while the server is connected, and when it returns something
    (pins were written) the server's skill is generated again, so the tools and
    instructions it shows follow the new pins at once."""
    import functools

    from keen.cli._live import connecting_view
    from keen.runtime import open_runtime
    from keen.trust.pins import pinning_policy

    async with open_runtime(only={server}) as rt:
        manager = rt.manager
        manager.status(server)  # ServerNotConfigured before any waiting
        await rt.wait_for_discovery(timeout, functools.partial(connecting_view, enabled=live))
        tools = list(manager.live_tools(server))  # what the server sends, not the pinned view
        info = manager.live_info(server)
        policy = pinning_policy(manager.config.servers[server])
        others = _pinned_names(list(manager.config.servers), server)
        done = await pin(tools, info, others) if pin is not None else None
        if done is not None:
            await rt.sync()
    return tools, info, policy, others, done


def _pinned_names(servers: list[str], skip: str) -> dict[str, list[Tool]]:
    """Other servers' tools from their pin files: the shadowing check without connecting to
    every server (a server never pinned contributes nothing)."""
    from keen.trust.pins import PinStore, pinned_tool

    store = PinStore()
    tools: dict[str, list[Tool]] = {}
    for name in servers:
        if name == skip:
            continue
        try:
            pins = store.load(name)
        except ConfigError:
            continue
        if pins is not None:
            tools[name] = [pinned_tool(name, pin.definition) for pin in pins.tools.values()]
    return tools


def _flags(server: str, tools: list[Tool], others: dict[str, list[Tool]]) -> dict[str, list[Flag]]:
    from keen.trust.flags import ShadowIndex, scan_server

    return scan_server(server, tools, ShadowIndex(others))


def diff(
    server: str = typer.Argument(..., help="Server name from configs.json."),
    as_json: bool = typer.Option(False, "--json", help="Print the comparison as JSON (each diff whole)."),
    full: bool = typer.Option(
        False,
        "--full",
        help=f"Print each diff whole (by default one stops after {MAX_SHOWN_LINES} lines or "
        f"{MAX_SHOWN_CHARS:,} characters, a line after {MAX_SHOWN_LINE_CHARS:,}).",
    ),
    timeout: float = typer.Option(60.0, "--timeout", help=_TIMEOUT_HELP),
) -> None:
    """Show how SERVER's live tools differ from the pinned ones (new, changed, renamed, removed)."""
    from keen.cli._terminal import shell_word
    from keen.trust.flags import escape_text
    from keen.trust.pins import PinStore, Review, compare

    async def body() -> tuple[PinReport, str, dict[str, list[Flag]], list[Tool]]:
        tools, info, policy, others, _ = await _live_tools(server, timeout, live=not as_json)
        report = compare(server, tools, PinStore().load(server), info)
        return report, policy, _flags(server, tools, others), tools

    report, policy, flags, tools = run(body)
    path = PinStore().path(server)
    # What this diff shows is what `keen mcp trust` may pin, and nothing else. The info counts
    # as shown only when the diff prints it (InfoCheck.shown); a definition (or the info) cut
    # short is recorded with how much was not printed, and trust refuses it until a --full diff.
    shown_info = report.info.fingerprint if report.info is not None and report.info.shown else None
    cut: dict[str, int] = {}
    if as_json:
        PinStore().save_review(Review.of(server, tools, shown_info))
        data: dict[str, Any] = {**report.to_dict(), "policy": policy, "pins_path": str(path)}
        for entry, check in zip(data["tools"], report.checks, strict=True):
            entry["diff"] = check.diff() if check.status != "trusted" else ""
            entry["flags"] = (
                [f.to_dict() for f in flags.get(check.name, [])] if check.status != "removed" else []
            )
        if data["info"] is not None and report.info is not None:
            data["info"]["diff"] = escape_text(report.info.diff())
        print_json(data)
        return
    if not report.pinned:
        # Every definition is shown: `keen mcp trust` pins only what a person could see.
        for check in report.checks:
            _add_cut(cut, check.name, _print_check(check, flags.get(check.name, []), server, full=full))
        info_cut = (
            _print_info(report.info, server, full=full)
            if report.info is not None and report.info.shown
            else 0
        )
        PinStore().save_review(Review.of(server, tools, shown_info, cut=cut, info_cut=info_cut))
        # Under `off` no call pins anything: only `keen mcp trust` does.
        by = " by" if policy == "off" else " by the first approved call or by"
        out.print(
            f"\n{escape(server)}: not pinned yet (policy {policy}); these {len(report.checks)} tools would be "
            f"pinned{by}: keen mcp trust {escape(server)}",
            highlight=False,
        )
        return
    out.print(f"{escape(server)}: policy {policy}; pins {escape(str(path))}", highlight=False)
    shown = [c for c in report.checks if c.status != "trusted"]
    for check in shown:
        _add_cut(cut, check.name, _print_check(check, flags.get(check.name, []), server, full=full))
    # A pin a first approved call wrote is one nobody reviewed: its readOnlyHint grants
    # nothing until `keen mcp trust` (keen.trust.pins.pinned_view), so it is not called
    # trusted, and its definition is printed: trust marks it reviewed only as shown here.
    unreviewed = [c for c in report.by_status("trusted") if not report.reviewed.get(c.name, False)]
    for check in unreviewed:
        _add_cut(cut, check.name, _print_unreviewed(check, flags.get(check.name, []), server, full=full))
    info = report.info
    info_cut = 0
    if info is not None and info.shown:  # changed, not pinned yet, or never reviewed
        info_cut = _print_info(info, server, full=full)
    PinStore().save_review(Review.of(server, tools, shown_info, cut=cut, info_cut=info_cut))
    counts = report.to_dict()["counts"]
    words = [
        f"{n} {status}"
        for status, n in {**counts, "trusted": counts["trusted"] - len(unreviewed)}.items()
        if n
    ]
    if unreviewed:
        words.insert(0, f"{len(unreviewed)} pinned by a first call, not reviewed")
    out.print(", ".join(words) or "no tools", highlight=False)
    # name@<fingerprint> binds the command to the definitions shown above.
    quarantined = [c.ref for c in report.quarantined]
    # A name longer than a shown line is not printed whole here either (--full prints it).
    too_long = [r for r in quarantined if not full and len(shell_word(r)) > MAX_SHOWN_LINE_CHARS]
    quarantined = [r for r in quarantined if r not in too_long]
    if too_long:
        out.print(
            f"{len(too_long)} held with a name too long to show here: keen mcp diff {shell_word(server)} --full "
            "prints the command to accept it",
            markup=False,
            emoji=False,
            highlight=False,
        )
    if quarantined:
        verb = {
            "quarantine": "quarantined",
            "warn": "not pinned (policy warn: allowed with a warning)",
        }.get(policy, f"not pinned (policy {policy}: allowed, calls are not checked against pins)")
        # A command to paste: each name one shell word (`$'...'` for control characters), so a
        # name such as `x$(...)` is not run by the shell and comes back exact; printed as plain
        # text (no markup, no emoji codes: `a\[x`, `x:smile:y` stay as they are), and after `--`,
        # so a name such as `--json@...` is a name to click, not an option.
        out.print(
            f"{len(quarantined)} {verb}; accept with: keen mcp trust {shell_word(server)} -- "
            + " ".join(shell_word(n) for n in quarantined),
            markup=False,
            emoji=False,
            highlight=False,
        )
    if info is not None and info.quarantined:
        verb = "held for review" if policy == "quarantine" else f"shown (policy {policy})"
        out.print(
            f"the server's info changed ({', '.join(info.changed_fields)}), {verb}; accept it with every tool: "
            f"keen mcp trust {shell_word(server)}",
            markup=False,
            emoji=False,
            highlight=False,
        )
    elif not quarantined and not too_long and not shown:
        out.print("every tool matches its pin", highlight=False)
    if unreviewed:
        out.print(
            f"{len(unreviewed)} not reviewed: their annotations (readOnlyHint) are the server's claims, "
            f"and count once you accept them: keen mcp trust {escape(server)}",
            highlight=False,
        )


def _add_cut(cut: dict[str, int], name: str, chars: int) -> None:
    if chars:
        cut[name] = cut.get(name, 0) + chars


def _shown_name(name: str, *, full: bool = False) -> tuple[str, int]:
    """A server's tool name as markup, escaped onto one line and, unless ``full``, cut at
    :data:`MAX_SHOWN_LINE_CHARS` (a 300,000-character name is one line too); with how many
    characters were cut."""
    from keen.trust.flags import escape_text

    text = escape_text(name, one_line=True)
    if full or len(text) <= MAX_SHOWN_LINE_CHARS:
        return escape(text), 0
    return escape(text[:MAX_SHOWN_LINE_CHARS]) + escape(" [...]"), len(text) - MAX_SHOWN_LINE_CHARS


def _print_cut_note(server: str, chars: int, parts: list[str]) -> None:
    from keen.cli._terminal import shell_word

    out.print(
        f"[... {chars:,} characters not shown ({'; '.join(parts)}): keen mcp diff {shell_word(server)} --full]",
        markup=False,
        highlight=False,
        emoji=False,
    )


def _print_header(words: str, names: list[str], tail: str, server: str, *, full: bool = False) -> int:
    """``words`` (markup) then each of ``names`` (the server's, cut as :func:`_shown_name`
    cuts them; the second and later ones as ``(was ...)``) then ``tail``, on one line, and a
    note of what was cut; returns how many characters were not shown."""
    shown = [_shown_name(n, full=full) for n in names]
    text = f"{words} {shown[0][0]}" + "".join(f" (was {n})" for n, _ in shown[1:])
    out.print(f"\n{text}{tail}", highlight=False)
    cut = sum(c for _, c in shown)
    if cut:
        short = sum(1 for _, c in shown if c)
        _print_cut_note(server, cut, [f"{short} name{'s' if short != 1 else ''} cut short at [...]"])
    return cut


def _print_check(check: ToolCheck, flags: list[Flag], server: str, *, full: bool = False) -> int:
    """One tool's status, names and (held for review) diff; returns how many characters of
    it were not shown (0 with ``full``)."""
    names = [check.name, *([check.previous_name] if check.previous_name else [])]
    tail = f": {', '.join(check.changed_fields)}" if check.status == "changed" else ""
    cut = _print_header(f"[bold {_STYLE[check.status]}]{check.status}[/]", names, tail, server, full=full)
    if check.quarantined:
        cut += _print_diff(check.diff(), server, full=full)
    for flag in flags:
        _print_flag(flag)
    return cut


def _print_unreviewed(check: ToolCheck, flags: list[Flag], server: str, *, full: bool = False) -> int:
    """A tool a first approved call pinned and nobody reviewed, with its whole pinned
    definition (what `keen mcp trust` then marks reviewed); returns how many characters of it
    were not shown (0 with ``full``)."""
    from keen.trust.pins import definition_diff

    cut = _print_header("[bold]pinned by a first call, not reviewed[/]", [check.name], "", server, full=full)
    cut += _print_diff(definition_diff(None, check.new, new_name=check.name), server, full=full)
    for flag in flags:
        _print_flag(flag)
    return cut


def _print_info(check: InfoCheck, server: str, *, full: bool = False) -> int:
    """What the server says of itself (name, title, version, instructions) as a change of its
    own: ``changed`` with a diff of the pinned and the live info; ``new`` (none pinned yet)
    and ``not reviewed`` (pinned by a first look nobody reviewed) in full. Escaped like a tool's.
    Returns how many characters were not shown."""
    if check.status == "trusted":
        out.print("\n[bold]pinned on first look, not reviewed[/] server info", highlight=False)
    else:
        fields = f": {', '.join(check.changed_fields)}" if check.status == "changed" else ""
        out.print(f"\n[bold {_STYLE[check.status]}]{check.status}[/] server info{fields}", highlight=False)
    return _print_diff(check.diff(), server, full=full)


def _print_diff(diff: str, server: str, *, full: bool = False) -> int:
    """A definition diff, escaped (its lines quote the server's text), one line at a time:
    unless ``full``, at most :data:`MAX_SHOWN_LINES` lines and :data:`MAX_SHOWN_CHARS`
    characters, a line at most :data:`MAX_SHOWN_LINE_CHARS`, then what was cut and how to
    see it all (``keen mcp diff SERVER --full``; ``--json`` has it whole). Returns how many
    characters were not shown."""
    from keen.trust.flags import escape_text

    lines = escape_text(diff).splitlines()
    shown_chars = cut_chars = cut_short = cut_lines = 0
    for index, line in enumerate(lines):
        if not full and (index >= MAX_SHOWN_LINES or shown_chars >= MAX_SHOWN_CHARS):
            cut_lines = len(lines) - index
            cut_chars += sum(len(rest) for rest in lines[index:])
            break
        if not full:
            keep = min(MAX_SHOWN_LINE_CHARS, MAX_SHOWN_CHARS - shown_chars)
            if len(line) > keep:
                cut_chars += len(line) - keep
                cut_short += 1
                line = line[:keep] + " [...]"
            shown_chars += min(len(line), keep)
        style = "green" if line.startswith("+") else "red" if line.startswith("-") else ""
        out.print(line, style=style or None, markup=False, highlight=False, emoji=False)
    if cut_chars or cut_lines:
        parts = [f"{cut_short} line{'s' if cut_short != 1 else ''} cut short at [...]"] if cut_short else []
        parts += [f"{cut_lines:,} more line{'s' if cut_lines != 1 else ''}"] if cut_lines else []
        _print_cut_note(server, cut_chars, parts)
    return cut_chars


def _print_to_accept(report: PinReport, wanted: set[str] | None, flags: dict[str, list[Flag]]) -> int:
    """Everything ``keen mcp trust`` is about to accept, before it asks: each new, renamed and
    changed definition (as ``keen mcp diff`` shows it); the pins a first approved call wrote,
    which a person never saw, too (once accepted, their ``readOnlyHint`` counts); and, when
    every tool is trusted, the removed tools whose pins are dropped. Names and text come
    from the server: escaped, and cut as the diff cuts them. Returns how many characters of
    what would be pinned were not shown (then nothing may be accepted here)."""
    cut = 0
    for check in report.checks:
        if check.status == "removed":
            if wanted is None:
                # Its pin is dropped, nothing of it pinned: what was cut of its name is not counted.
                _print_header(
                    f"[bold {_STYLE['removed']}]removed[/]",
                    [check.name],
                    ": its pin is dropped",
                    report.server,
                )
            continue
        if wanted is not None and check.name not in wanted:
            continue
        if check.quarantined:
            cut += _print_check(check, flags.get(check.name, []), report.server)
        elif report.pinned and not report.reviewed.get(check.name, False):
            cut += _print_unreviewed(check, flags.get(check.name, []), report.server)
    # Trusting every tool pins the server info too: shown unless pinned and reviewed as it is.
    if wanted is None and report.info is not None and report.info.shown:
        cut += _print_info(report.info, report.server)
    return cut


def _print_flags(flags: dict[str, list[Flag]], order: list[str]) -> None:

    for name in order:
        if name in flags:
            out.print(f"[bold]{_shown_name(name)[0]}[/]:", highlight=False)
            for flag in flags[name]:
                _print_flag(flag)


def _print_flag(flag: Flag) -> None:
    out.print(f"  [bold red]flag {flag.kind}[/] {_flag_words(flag)}", highlight=False, emoji=False)


def _flag_words(flag: Flag) -> str:
    """Where ``flag`` is and why, as rich markup. The field path names the server's own
    properties (``inputSchema.properties.<name>.description``) and the reason may quote tool
    names (``defines "<name>", a tool the server ... defines otherwise``): both are escaped
    like any server text (the excerpt already is)."""
    from keen.trust.flags import escape_text

    field, reason = escape_text(flag.field), escape_text(flag.reason)
    return f"in {escape(field)}: {escape(reason)}: {escape(flag.excerpt)}"


def trust_cmd(
    server: str = typer.Argument(..., help="Server name from configs.json."),
    tools: list[str] = typer.Argument(None, help="Tools to trust (default: every tool the server lists)."),
    as_json: bool = typer.Option(False, "--json", help="Print what was trusted as JSON."),
    timeout: float = typer.Option(60.0, "--timeout", help=_TIMEOUT_HELP),
) -> None:
    """Pin SERVER's definitions of TOOL ... (or of all its tools) as `keen mcp diff` showed them.

    Only a definition a person saw is pinned: the ones the last `keen mcp diff SERVER` showed
    (the server must still list exactly those), or, without one, the ones shown here first
    and confirmed at a terminal.
    """
    from keen.cli._signals import ask_cancellably, confirm_line
    from keen.trust.info_pins import compare_info
    from keen.trust.pins import PinStore, Review, compare, trust

    store = PinStore()
    review = store.load_review(server)
    if review is None:
        from keen.mcp.config.edit import server_entry
        from keen.paths import mcp_config_path

        server_entry(mcp_config_path(), server)  # a misspelt name is said so, not sent to a diff
    if review is None and (as_json or not sys.stdin.isatty()):
        fail(
            f"nothing was trusted: run `keen mcp diff {server}` first and review what it shows; "
            f"`keen mcp trust {server}` then pins exactly those definitions",
            code=2,
        )

    not_shown = [0]  # characters the listing below did not show (it cuts as the diff does)

    async def pin(
        live: list[Tool], info: ServerInfo | None, others: dict[str, list[Tool]]
    ) -> tuple[list[ToolCheck], int, set[str], InfoCheck | None, bool] | None:
        shown = review
        if shown is None:
            # No diff to bind to: show what would be pinned, from this very listing, and ask.
            report = compare(server, live, store.load(server), info)
            wanted = {_REF_TAIL.sub("", n) for n in tools} if tools else None
            not_shown[0] = _print_to_accept(report, wanted, _flags(server, live, others))
            if not_shown[0]:
                return None  # not asked: a yes would pin text nobody was shown (it may end in an instruction)
            if not await ask_cancellably(lambda: confirm_line(f"Pin these definitions of {server}? [y/N]: ")):
                return None
            seen = report.info.fingerprint if report.info is not None and report.info.shown else None
            shown = Review.of(server, live, seen if wanted is None else None)
        before = store.load(server)
        first_use = {n for n, p in before.tools.items() if not p.reviewed} if before is not None else set()
        # Trusting every tool accepts the server info too (trusting some tools leaves it).
        accepted = compare_info(info, before) if info is not None and not tools else None
        pins, trusted = trust(
            server, live, tools or None, store=store, reviewed=shown, by_user=True, info=info
        )
        # Info pinned unchanged on a first look, which this trust marked reviewed: said, as a
        # first call's pins reviewed are, or the trust looks as if it did nothing to it.
        info_reviewed = (
            accepted is not None
            and accepted.status == "trusted"
            and not accepted.reviewed
            and pins.info is not None
            and pins.info.reviewed
        )
        return trusted, len(pins.tools), first_use, accepted, info_reviewed

    async def body() -> (
        tuple[list[ToolCheck], dict[str, list[Flag]], int, set[str], InfoCheck | None, bool] | None
    ):
        live, _info, _policy, others, done = await _live_tools(server, timeout, live=not as_json, pin=pin)
        if done is None:
            return None
        return done[0], _flags(server, live, others), done[1], done[2], done[3], done[4]

    done = run(body)
    if done is None and not_shown[0]:
        fail(
            f"nothing was trusted: {not_shown[0]:,} characters of what would be pinned were not shown; run "
            f"`keen mcp diff {server} --full`, review all of it, then `keen mcp trust {server}`",
            code=1,
        )
    if done is None:
        fail(f"nothing was trusted: {server}'s definitions were not accepted", code=1)

    trusted, flags, pinned, first_use, instructions, info_reviewed = done
    path = store.path(server)
    if as_json:
        print_json(
            {
                "server": server,
                "pins_path": str(path),
                "pinned": pinned,
                "trusted": [
                    {**c.to_dict(), "flags": [f.to_dict() for f in flags.get(c.name, [])]} for c in trusted
                ],
                "info": (
                    {**instructions.to_dict(), "marked_reviewed": info_reviewed}
                    if instructions is not None
                    else None
                ),
            }
        )
        return
    accepted = [c for c in trusted if c.status != "trusted"]
    for check in accepted:
        was = f" (was {_shown_name(check.previous_name)[0]})" if check.previous_name else ""
        out.print(f"trusted {_shown_name(check.name)[0]}: {check.status}{was}", highlight=False)
        for flag in flags.get(check.name, []):
            err.print(
                f"  [bold red]warning: flag {flag.kind}[/] {_flag_words(flag)}", highlight=False, emoji=False
            )
    if instructions is not None and instructions.status != "trusted":
        out.print(f"trusted server info: {instructions.status}", highlight=False)
    elif info_reviewed:
        out.print("reviewed server info: pinned on first look before, unchanged", highlight=False)
    # Pinned by a first call and unchanged: reviewed now (their readOnlyHint counts from here).
    reviewed = [c for c in trusted if c.status == "trusted" and c.name in first_use]
    unchanged = len(trusted) - len(accepted) - len(reviewed)
    words = [f"{len(accepted)} accepted"]
    if reviewed:
        words.append(f"{len(reviewed)} reviewed (pinned by a first call before)")
    if unchanged or not reviewed:
        words.append(f"{unchanged} already trusted")
    if instructions is not None and instructions.status != "trusted":
        words.append(f"server info accepted ({instructions.status})")
    elif info_reviewed:
        words.append("server info reviewed (pinned on first look before)")
    out.print(
        f"{escape(server)}: {', '.join(words)}; {pinned} tools pinned in {escape(str(path))}",
        highlight=False,
    )
