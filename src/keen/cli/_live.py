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

__all__ = ["STATE_STYLE", "connecting_view", "status_table"]

STATE_STYLE = {
    ServerState.CONNECTED: "green",
    ServerState.CONNECTING: "yellow",
    ServerState.CONFIGURED: "dim",
    ServerState.DISCONNECTED: "red",
    ServerState.AUTH_REQUIRED: "magenta",
    ServerState.AUTH_FAILED: "red",
    ServerState.CONFIG_ERROR: "red",
}


def status_table(statuses: list[ServerStatus], *, title: str | None = "MCP servers") -> Table:
    """name, transport, auth, state, tools, last error."""
    from rich.table import Table

    table = Table(title=title, title_justify="left", expand=False)
    for column in ("name", "transport", "auth", "state", "tools", "last error"):
        table.add_column(column, overflow="fold", justify="right" if column == "tools" else "left")
    for s in statuses:
        style = STATE_STYLE.get(s.state, "")
        state = s.state.value if s.enabled else f"{s.state.value} (disabled)"
        table.add_row(
            cell(s.name),
            s.transport,
            s.auth,
            cell(state, style=style),
            str(s.tool_count),
            cell(with_remedy(s.last_error, s.remedy, server=s.name)),
        )
    return table


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
