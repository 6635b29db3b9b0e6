"""``keen mcp refresh [SERVER]`` and ``keen mcp watch [--json]``: tools that change.

``refresh`` connects, lists the tools again, regenerates the skill and prints what changed
since the skill on disk was written (``capability.diff``: added, removed, changed with the
fields). ``watch`` keeps every configured server connected and prints each change as it
happens: a change notice (``notifications/tools/list_changed``, or ``subscriptions/listen``
in the 2026-07-28 era), an expired ``ttlMs``, a reconnect. Skills on disk follow each change
before its line is printed; so does a reconnect that changes only what a server says of itself
(its name, title, version or instructions as shown: ``server.info``). With ``--json`` every
line is one JSON object (``watch.ready``, ``capability.diff``, ``server.info``,
``server.state``) for scripts; Ctrl-C or SIGTERM ends it with exit 0.
A server's state is said once per new state, not per reconnect attempt, and not per new
error text either (a server's stderr may quote its pid, other at each start): each line or
event carries the latest error (``server.state``'s ``retries``: the failed attempts so far;
``--json`` says ``connecting`` as a reconnect begins, never at each retry).
A server that goes away, or is down at start, is reconnected on the back-off of
:class:`keen.mcp.Reconnector` until it is back (docs/architecture.md "Servers and their states").
"""

from __future__ import annotations

import dataclasses
import functools
import sys
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from keen.cli._common import EXIT_TOOL_ERROR, err, fail, out, print_json, run
from keen.cli._wording import with_remedy

if TYPE_CHECKING:
    from keen.mcp import Reconnector
    from keen.mcp.listing.changes import ToolsChanged
    from keen.mcp.manager import Manager
    from keen.mcp.types import ServerStatus
    from keen.mcpskills.sync import ServerSnapshot, SyncEntry

__all__ = ["register"]

JsonOpt = Annotated[bool, typer.Option("--json", help="Print what changed as JSON.")]
WatchJsonOpt = Annotated[bool, typer.Option("--json", help="Print each change as one JSON object a line.")]
TimeoutOpt = Annotated[
    float,
    typer.Option(
        "--timeout", help="Seconds to wait for discovery (each server also has its own connect timeout)."
    ),
]


def register(app: typer.Typer) -> None:
    """Add ``refresh`` and ``watch`` to the ``keen mcp`` group."""
    app.command("refresh")(refresh)
    app.command("watch")(watch)


def _live(enabled: bool) -> Any:
    """The discovery view: a live status table on stderr when it is a terminal."""
    from keen.cli._live import connecting_view

    return functools.partial(connecting_view, enabled=enabled)


def _diff_against_disk(manager: Manager, root: Path, server: str) -> ToolsChanged | None:
    """What changed between ``server``'s skill on disk and its live tools (``None``: not connected).

    The skill's schema files carry no outputSchema, so it is left out of the comparison.
    """
    from keen.mcp.listing.changes import diff_tools
    from keen.mcp.types import ServerState
    from keen.mcpskills import disk_tools

    status = manager.status(server)
    if status.state is not ServerState.CONNECTED or not status.enabled:
        return None
    live = [dataclasses.replace(t, output_schema=None) for t in manager.list_tools(server)]
    before = disk_tools(root, server) or []
    change = diff_tools(server, before, live, "sync", protocol_version=status.protocol_version)
    return manager.with_flags(change)


async def _write_skill(manager: Manager, root: Path, server: str) -> tuple[SyncEntry, ServerSnapshot]:
    """``server``'s skill written from one snapshot, and that snapshot: the tools it serves
    and its note on the tools the pins hold back ("" when none, or when the server was not
    connected)."""
    import anyio

    from keen.mcpskills import snapshot
    from keen.mcpskills.sync import sync_server

    snap = snapshot(manager, server)
    entry = await anyio.to_thread.run_sync(lambda: sync_server(snap, skills_root=root))
    return entry, snap


def _unchanged(status: ServerStatus, snap: ServerSnapshot) -> str:
    """``NAME: no changes (N tools, MCP VERSION)``: N counts the tools served (the skill's),
    not those the server lists, and the tools the pins hold back are counted apart."""
    served = len(snap.tools)
    counted = f"{served} tool{'s' if served != 1 else ''}"
    if snap.held_tools:
        counted += f" served, {len(snap.held_tools)} held for review"
    return f"{status.name}: no changes ({counted}, MCP {status.protocol_version})"


def _event(change: ToolsChanged, entry: SyncEntry | None) -> dict[str, Any]:
    data = change.to_dict()
    data["skill"] = entry.action if entry is not None else "error"
    return data


def _line(change: ToolsChanged, entry: SyncEntry | None) -> str:
    from keen.cli._terminal import terminal_text

    stamp = change.at.astimezone().strftime("%H:%M:%S")
    skill = "" if entry is None or entry.action == "unchanged" else f"; skill {entry.action}"
    return terminal_text(f"{stamp} {change.summary()}{skill}")


def _json_line(data: dict[str, Any]) -> None:
    """One event as one compact JSON line, flushed at once (for scripts following along)."""
    from keen.cli._terminal import safe_json

    sys.stdout.write(safe_json(data, indent=None) + "\n")
    sys.stdout.flush()


def _state_event(status: ServerStatus, retries: int) -> dict[str, Any]:
    return {
        "type": "server.state",
        "server": status.name,
        "state": status.state.value,
        "protocol_version": status.protocol_version,
        "tool_count": status.tool_count,
        "last_error": with_remedy(status.last_error, status.remedy, server=status.name),
        "retries": retries,
        "at": datetime.now().astimezone().isoformat(),
    }


def refresh(
    server: Annotated[
        str | None, typer.Argument(help="Server name from configs.json (default: every server).")
    ] = None,
    as_json: JsonOpt = False,
    timeout: TimeoutOpt = 60.0,
) -> None:
    """List SERVER's tools again, regenerate its skill, and show what changed since the last sync.

    Exit 0 when every server asked for connected, 1 when one did not (the others are
    refreshed; as ``keen mcp sync``), 2 when Keen could not do it (a server not configured).
    """
    from keen import paths
    from keen.runtime import open_runtime

    root = paths.skills_dir()

    async def body() -> list[tuple[ServerStatus, ToolsChanged | None, SyncEntry, ServerSnapshot]]:
        async with open_runtime(only={server} if server else None) as rt:
            manager = rt.manager
            if server is not None:
                manager.status(server)  # ServerNotConfigured before any waiting
            await rt.wait_for_discovery(timeout, _live(not as_json))
            names = [server] if server else [s.name for s in manager.servers() if s.enabled]
            results: list[tuple[ServerStatus, ToolsChanged | None, SyncEntry, ServerSnapshot]] = []
            for name in names:
                change = _diff_against_disk(manager, root, name)
                entry, snap = await _write_skill(manager, root, name)
                # What the pins hold back never reaches the skill, so the diff above cannot
                # show it: said apart, or "no changes" would hide a changed server. From the
                # snapshot the skill was written from: the server may be gone by now.
                results.append((manager.status(name), change, entry, snap))
            return results

    results = run(body)
    failed = [s for s, change, _, _ in results if change is None]
    if as_json:
        print_json(
            [
                {
                    "server": s.name,
                    "state": s.state.value,
                    "protocol_version": s.protocol_version,
                    "tool_count": s.tool_count,
                    "last_error": with_remedy(s.last_error, s.remedy, server=s.name),
                    "diff": _event(change, entry) if change is not None else None,
                    "served": len(snap.tools) if change is not None else None,
                    "held": snap.held if change is not None else "",
                    "held_tools": list(snap.held_tools) if change is not None else [],
                }
                for s, change, entry, snap in results
            ]
        )
    else:
        from keen.cli._terminal import terminal_text

        for s, change, entry, snap in results:
            if change is None:
                # The last error may quote the server's stderr: escaped, and printed literally.
                words = f"{s.name}: {s.state.value}: {with_remedy(s.last_error, s.remedy, server=s.name)}"
                err.print(terminal_text(words), markup=False, highlight=False, emoji=False)
            elif change:
                out.print(_line(change, entry), highlight=False, markup=False)
            else:
                out.print(_unchanged(s, snap), markup=False, highlight=False)
            if change is not None and snap.held:
                err.print(snap.held, markup=False, highlight=False)
    if failed:
        # The server failed, not Keen: the same code keen mcp sync gives it.
        if not as_json:
            fail(f"not connected: {', '.join(s.name for s in failed)}", EXIT_TOOL_ERROR)
        raise typer.Exit(EXIT_TOOL_ERROR)


def watch(as_json: WatchJsonOpt = False, timeout: TimeoutOpt = 60.0) -> None:
    """Keep every server connected and print each change of their tools as it happens (Ctrl-C ends)."""
    from keen.cli._signals import Signalled, run_until_signal

    try:
        run_until_signal(functools.partial(_watch, as_json, timeout))
    except (Signalled, KeyboardInterrupt):
        # Ending is what a watch is for: a clean exit, every session closed already.
        if not as_json:
            err.print("stopped; MCP servers closed")
        raise typer.Exit(0) from None


async def _watch(as_json: bool, timeout: float) -> None:
    import anyio

    from keen import paths
    from keen.cli._live import status_table
    from keen.cli._terminal import terminal_text
    from keen.mcp import Reconnector
    from keen.mcp.connection.reconnect import DEFAULT_BACKOFF_CAP
    from keen.mcp.types import ServerState
    from keen.mcpskills import LiveSkills
    from keen.runtime import open_runtime

    root = paths.skills_dir()
    said: dict[str, str] = {}

    def show(change: ToolsChanged, entry: SyncEntry | None) -> None:
        if as_json:
            _json_line(_event(change, entry))
        else:
            out.print(_line(change, entry), highlight=False, markup=False)
            sys.stdout.flush()

    def info_shown(server: str, entry: SyncEntry | None) -> None:
        skill = entry.action if entry is not None else "error"
        if as_json:
            at = datetime.now().astimezone().isoformat()
            _json_line(
                {"type": "server.info", "server": server, "reason": "reconnect", "skill": skill, "at": at}
            )
            return
        stamp = datetime.now().astimezone().strftime("%H:%M:%S")
        words = f"{stamp} {server}: server info changed (reconnect); skill {skill}"
        out.print(terminal_text(words), highlight=False, markup=False)
        sys.stdout.flush()

    def state(status: ServerStatus, retries: int) -> None:
        # A reconnect that fails again says nothing new: one line (or event) per new state or
        # error, not a connecting/disconnected pair per retry. --json says "connecting" when
        # a reconnect begins (no retry failed yet), never again at each retry; the text lines
        # say only where the attempts end. A new error text alone is not a new state: a
        # server that quotes its pid in its stderr would otherwise be said at every retry.
        now = status.state.value
        if said.get(status.name) == now:
            return
        if status.state is ServerState.CONNECTING and (retries or not as_json):
            return
        said[status.name] = now
        if as_json:
            _json_line(_state_event(status, retries))
            return
        # The last error may quote the server's stderr: escaped, and printed literally.
        words = terminal_text(f"{status.name}: {status.state.value} {status.last_error}".rstrip())
        out.print(words, markup=False, highlight=False, emoji=False)
        sys.stdout.flush()

    async with open_runtime(wait=timeout, discovery_view=_live(not as_json), live=False) as rt:
        manager = rt.manager
        # What changed since the skills on disk were written, then the skills follow.
        for status in manager.servers():
            change = _diff_against_disk(manager, root, status.name) if status.enabled else None
            entry = (await _write_skill(manager, root, status.name))[0] if status.enabled else None
            if change:
                show(change, entry)
        statuses = manager.servers()
        said.update({s.name: s.state.value for s in statuses})
        if as_json:
            ready = [
                {"server": s.name, "state": s.state.value, "protocol_version": s.protocol_version}
                for s in statuses
            ]
            _json_line({"type": "watch.ready", "servers": ready})
        else:
            out.print(status_table(statuses, title="watching (Ctrl-C to stop)"))
        # Following every server is what a watch is for: one that went away (or was down at
        # start) is reconnected on the Reconnector's back-off, 1 s doubling to 30 s, until it is
        # back; its tools' changes meanwhile come as one "reconnect" change. A reconnect counts
        # as back for good (the back-off starts at 1 s again) once it lasted as long as the
        # longest window: a server that crashes right after each connect is not restarted
        # every second for ever.
        reconnector = Reconnector(manager, stable_after=DEFAULT_BACKOFF_CAP)
        async with anyio.create_task_group() as tg:
            reconnector.task_group = tg
            keeping: set[str] = set()

            def keep(name: str) -> None:
                if name not in keeping and reconnector.reconnectable(name):
                    keeping.add(name)
                    tg.start_soon(_keep_connected, reconnector, name, keeping, name=f"keen-watch-{name}")

            def on_state(status: ServerStatus) -> None:
                retries = reconnector.failures(status.name)
                # Announced from inside a running attempt, which the Reconnector counts only
                # once it returns: a state it ended in other than connected is one more failure.
                ended = status.state not in (ServerState.CONNECTING, ServerState.CONNECTED)
                if ended and reconnector.attempting(status.name):
                    retries += 1
                state(status, retries)
                if status.state is ServerState.DISCONNECTED:
                    keep(status.name)

            unsubscribe = manager.subscribe(on_state)
            try:
                for status in statuses:
                    keep(status.name)
                async with LiveSkills(manager, skills_root=root, on_synced=show, on_info_synced=info_shown):
                    await anyio.sleep_forever()
            finally:
                unsubscribe()
                tg.cancel_scope.cancel()


async def _keep_connected(reconnector: Reconnector, server: str, keeping: set[str]) -> None:
    """Reconnect ``server`` until it is back (or no longer one to reconnect: disabled, or it
    needs the user to sign in), one attempt per back-off window."""
    import anyio

    try:
        while reconnector.reconnectable(server):
            await anyio.sleep(max(reconnector.retry_in(server), reconnector.first))
            await reconnector.ensure([server])
    finally:
        keeping.discard(server)
