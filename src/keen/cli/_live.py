"""A live view of servers connecting, drawn on stderr so stdout stays clean for tables/JSON."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

from rich.text import Text

from keen._text import some_of
from keen.cli._common import err, real_console
from keen.cli._terminal import cell
from keen.cli._wording import remedy_text
from keen.errors import with_hint
from keen.mcp.config.defaults import split_advice
from keen.mcp.types import ServerState, ServerStatus

if TYPE_CHECKING:
    from rich.console import RenderableType

    from keen.mcp.manager import Manager

__all__ = ["STATE_STYLE", "connecting_view", "flag_text", "status_table"]

STATE_STYLE = {
    ServerState.CONNECTED: "green",
    ServerState.CONNECTING: "yellow",
    ServerState.CONFIGURED: "dim",
    ServerState.DISCONNECTED: "red",
    ServerState.AUTH_REQUIRED: "magenta",
    ServerState.AUTH_FAILED: "red",
    ServerState.CONFIG_ERROR: "red",
}


def status_table(
    statuses: list[ServerStatus],
    *,
    title: str | None = "MCP servers",
    flags: dict[str, dict[str, list[str]]] | None = None,
) -> RenderableType:
    """name, transport, auth, state, MCP protocol version, tools, last error (cut to two
    lines, its fix kept whole); with ``flags`` (server -> tool -> flag kinds,
    ``keen.trust.flags``) how many tools each server has flagged, named under the table.

    On a narrow terminal the MCP version, then auth and transport, make way for the error
    (``keen mcp list --json`` has them all)."""
    from rich.console import Group

    from keen._tables import Clip, Col, Listing, error_in_row

    flagged = {s.name: flags[s.name] for s in statuses if flags and flags.get(s.name)}
    table = Listing(
        [
            Col("name", "key"),
            Col("transport", drop=2),
            Col("auth", drop=2),
            Col("state"),
            Col("MCP", drop=3),
            Col("tools", justify="right"),
            # The note under the table names every flagged tool: the count goes first.
            *([Col("flagged", justify="right", drop=1)] if flagged else []),
            # Wide enough to say what went wrong before a column that matters less is shown.
            Col("last error", "text", min_width=40),
        ],
        title=title,
        whole="keen mcp list --json",
    )
    for s in statuses:
        state = s.state.value if s.enabled else f"{s.state.value} (disabled)"
        if not s.enabled and s.state is ServerState.CONFIGURED:
            state = "disabled"  # never connected: "configured" says nothing more
        row: list[str | Text | Clip] = [
            cell(s.name),
            s.transport,
            s.auth,
            cell(state, style=STATE_STYLE.get(s.state, "")),
            s.protocol_version or "-",
            str(s.tool_count),
        ]
        if flagged:
            row.append(cell(str(len(flagged[s.name])) if s.name in flagged else "", style="bold red"))
        # The fix (`then run: keen mcp connect X`), and how to give a slow server more time,
        # ride whole at the end of a cut error.
        error, advice = split_advice(error_in_row(s.last_error, s.name))
        fix = with_hint(advice, remedy_text(s.remedy, server=s.name))
        row.append(Clip(cell(error), tail=cell(fix), lines=4 if advice else None))
        table.add_row(*row)
    notes = [flag_text(server, found) for server, found in flagged.items()]
    return Group(table, *notes) if notes else table


def flag_text(server: str, flags: dict[str, list[str]], limit: int = 3) -> Text:
    """``docs: 2 tools flagged: fetch (override, secrets), ...; review: keen mcp diff docs``."""
    shown = some_of(list(flags.items()), limit, say=lambda flag: f"{flag[0]} ({', '.join(flag[1])})")
    count = f"{len(flags)} tool{'s' if len(flags) != 1 else ''} flagged"
    text = Text.assemble(
        cell(server), ": ", (count, "bold red"), ": ", cell(shown), f"; review: keen mcp diff {server}"
    )
    # Wrapped at words under the table, even on a soft-wrapping console (the CLI's).
    text.no_wrap, text.overflow = False, "fold"
    return text


@asynccontextmanager
async def connecting_view(manager: Manager, *, enabled: bool, lines: bool = False) -> AsyncIterator[None]:
    """While the body runs, redraw the status table on stderr at each state change; when
    stderr is not a terminal and ``lines`` is set, write one line per server instead as each
    first attempt ends (a log, or a person following a piped run, sees progress)."""
    if not enabled:
        yield
        return
    if not err.is_terminal:
        if not lines:
            yield
            return
        unsubscribe = manager.subscribe(_done_lines(manager))
        try:
            yield
        finally:
            unsubscribe()
        return
    from rich.live import Live

    with Live(
        status_table(manager.servers(), title="connecting..."),
        console=real_console(err),
        transient=True,
        refresh_per_second=8,
    ) as live:
        unsubscribe = manager.subscribe(
            lambda _s: live.update(status_table(manager.servers(), title="connecting..."))
        )
        try:
            yield
        finally:
            unsubscribe()


def _done_lines(manager: Manager) -> Callable[[ServerStatus], None]:
    """A status observer writing ``NAME: STATE, N tools (S s)`` once per server, when its
    first attempt ends (connected, or not: the table after says why)."""
    began = time.monotonic()
    done: set[str] = set()

    def observe(status: ServerStatus) -> None:
        if status.state in (ServerState.CONNECTING, ServerState.CONFIGURED) or status.name in done:
            return
        done.add(status.name)
        took = f"{time.monotonic() - began:.1f} s"
        what = f"{status.tool_count} tools" if status.state is ServerState.CONNECTED else status.state.value
        err.print(Text.assemble(cell(status.name), f": {what} ({took})"), highlight=False)

    return observe
