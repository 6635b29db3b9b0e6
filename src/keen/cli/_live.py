"""A live view of servers connecting, drawn on stderr so stdout stays clean for tables/JSON."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

from keen.cli._common import err, real_console
from keen.cli._terminal import cell
from keen.cli._wording import with_remedy
from keen.mcp.types import ServerState, ServerStatus

if TYPE_CHECKING:
    from rich.table import Table

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
) -> Table:
    """name, transport, auth, state, MCP protocol version, tools, last error; with ``flags``
    (server -> tool -> flag kinds, ``keen.mcp.flags``) a ``flags`` column too."""
    from rich.table import Table

    table = Table(title=title, title_justify="left", expand=False)
    columns = [
        "name",
        "transport",
        "auth",
        "state",
        "MCP",
        "tools",
        *(["flags"] if flags is not None else []),
    ]
    for column in (*columns, "last error"):
        table.add_column(column, overflow="fold", justify="right" if column == "tools" else "left")
    for s in statuses:
        style = STATE_STYLE.get(s.state, "")
        state = s.state.value if s.enabled else f"{s.state.value} (disabled)"
        row = [cell(s.name), s.transport, s.auth, cell(state, style=style), s.protocol_version or "-"]
        row.append(str(s.tool_count))
        if flags is not None:
            row.append(cell(flag_text(flags.get(s.name, {})), style="bold red"))
        row.append(cell(with_remedy(s.last_error, s.remedy, server=s.name)))
        table.add_row(*row)
    return table


def flag_text(flags: dict[str, list[str]], limit: int = 3) -> str:
    """``2 flagged: fetch (override, secrets), ...``, or "" when no tool is flagged."""
    if not flags:
        return ""
    shown = ", ".join(f"{name} ({', '.join(kinds)})" for name, kinds in list(flags.items())[:limit])
    more = f", and {len(flags) - limit} more" if len(flags) > limit else ""
    return f"{len(flags)} flagged: {shown}{more}; see keen mcp diff"


@asynccontextmanager
async def connecting_view(manager: Manager, *, enabled: bool) -> AsyncIterator[None]:
    """While the body runs, redraw the status table on stderr at each state change."""
    if not enabled or not err.is_terminal:
        yield
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
