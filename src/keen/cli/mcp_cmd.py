"""``keen mcp``: list servers, their tools, call one, sync, connect (import/add/remove: mcp_config_cmd).

Every command that talks to servers opens one :func:`keen.runtime.open_runtime`; the
MCP SDK is imported inside the commands, so ``keen --version`` and ``keen skills`` start
without it.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from keen import paths
from keen.cli._common import EXIT_TOOL_ERROR, err, fail, json_object, out, print_json, run, typer_app
from keen.cli._wording import describe, remedy_text, with_remedy

if TYPE_CHECKING:
    from keen.gateway import ApprovalRequest
    from keen.mcp.types import ServerStatus
    from keen.mcpskills.sync import SyncEntry
    from keen.runtime import DiscoveryView

__all__ = ["app"]

app = typer_app("Configured MCP servers: status, tools, calls.")

ServerArg = Annotated[str, typer.Argument(help="Server name from configs.json.")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")]
TimeoutOpt = Annotated[
    float,
    typer.Option(
        "--timeout", help="Seconds to wait for discovery (each server also has its own connect timeout)."
    ),
]


def _live(enabled: bool, *, lines: bool = False) -> DiscoveryView:
    """The discovery view: a live status table on stderr when it is a terminal, else with
    ``lines`` one line per server as it is done."""
    from keen.cli._live import connecting_view

    return functools.partial(connecting_view, enabled=enabled, lines=lines)


@app.command("list")
def list_servers(as_json: JsonOpt = False, timeout: TimeoutOpt = 60.0) -> None:
    """Connect to every configured server and show its state."""
    from keen.cli._live import status_table
    from keen.runtime import open_runtime

    async def body() -> tuple[list[ServerStatus], dict[str, dict[str, list[str]]]]:
        async with open_runtime(wait=timeout, discovery_view=_live(not as_json, lines=True)) as rt:
            return [_still_connecting(s, timeout) for s in rt.manager.servers()], _flags(rt.manager)

    statuses, flags = run(body)
    if as_json:
        # The whole ServerStatus.to_dict() (enabled, timestamps and the list's ttl_ms and
        # cache_scope too, as the README names them), its last error worded with its remedy.
        print_json(
            [
                {
                    **s.to_dict(),
                    "last_error": with_remedy(s.last_error, s.remedy, server=s.name),
                    "flags": flags.get(s.name, {}),
                }
                for s in statuses
            ]
        )
        return
    if not statuses:
        out.print(
            "No MCP servers configured. Add one: keen mcp add NAME -- COMMAND [ARGS...] (or --url URL); "
            f"find other MCP hosts' servers: keen mcp import --detect. The file: {paths.mcp_config_path()}",
            highlight=False,
        )
        return
    out.print(status_table(statuses, flags=flags))


def _flags(manager: Any) -> dict[str, dict[str, list[str]]]:
    """server -> flagged tool -> flag kinds, over every connected server (keen.trust.flags)."""
    from keen.mcp.types import ServerState
    from keen.trust.flags import flag_kinds, scan_servers

    # What the servers send (held tools too): the flags warn a person, not a model.
    connected = {
        s.name: manager.live_tools(s.name) for s in manager.servers() if s.state is ServerState.CONNECTED
    }
    return {server: flag_kinds(found) for server, found in scan_servers(connected).items()}


def _still_connecting(status: ServerStatus, timeout: float) -> ServerStatus:
    from keen.mcp.types import ServerState

    if status.state is not ServerState.CONNECTING:
        return status
    message = f"still connecting after {timeout:g} s; raise --timeout or this server's timeouts.connect"
    return dataclasses.replace(status, last_error=message)


@app.command("tools")
def list_tools(server: ServerArg, as_json: JsonOpt = False, timeout: TimeoutOpt = 60.0) -> None:
    """Connect to SERVER and list its tools."""
    from keen.runtime import open_runtime

    async def body() -> Any:
        async with open_runtime(only={server}) as rt:
            rt.manager.status(server)  # ServerNotConfigured before any waiting
            await rt.wait_for_discovery(timeout, _live(not as_json))
            return rt.manager.view(server)

    view = run(body)  # tools the MCP schema rejects: a warning on stderr
    tools = list(view.tools)  # as pinned: what a model sees
    if view.note:
        err.print(view.note, markup=False, highlight=False)
    if as_json:
        print_json([t.to_dict() for t in tools])
        return
    from keen._tables import Col, Listing
    from keen.cli._terminal import cell

    # A tool's name is whole (a name longer than most of the terminal folds, never cut); its
    # description's first line is cut to two lines.
    table = Listing(
        [Col("tool", "key"), Col("description", "text", min_width=30)],
        title=f"{server}: {len(tools)} tools",
        whole=f"keen mcp tools {server} --json",
    )
    for tool in tools:
        first = (tool.description or "").strip().splitlines()
        table.add_row(cell(tool.name), cell(first[0] if first else ""))
    out.print(table)


@app.command("call")
def call(
    server: ServerArg,
    tool: Annotated[str, typer.Argument(help="Tool name as listed by `keen mcp tools SERVER`.")],
    args: Annotated[str, typer.Option("--args", help="Arguments as a JSON object.")] = "{}",
    as_json: Annotated[bool, typer.Option("--json", help="Print the whole result as JSON.")] = False,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Approve the call without asking.")] = False,
    timeout: TimeoutOpt = 60.0,
    output: Annotated[
        Path | None,
        typer.Option(
            "--output", "-o", help="Write the whole result to FILE (JSON with --json) instead of printing it."
        ),
    ] = None,
) -> None:
    """Call TOOL on SERVER through call_mcp_tool. Exit 0 ok; 1 the tool or the server failed the call
    (an isError result, or the server answered with an error); 2 Keen could not make the call.

    Printed results are escaped (no terminal control sequences) and cut at 64,000
    characters; --json and --output give the whole result. Each call is recorded in
    $KEEN_HOME/logs/cli-audit.jsonl (call and result events, secrets redacted)."""
    from rich.text import Text

    from keen.cli._signals import ask_cancellably, confirm_line
    from keen.cli._terminal import human_result, terminal_text
    from keen.errors import ApprovalDenied, RemoteProtocolError, find_keen_error
    from keen.gateway import result_text
    from keen.runtime import open_runtime

    arguments = json_object(args, "--args", "--args '{\"a\": 1}'")
    if output is not None:
        # Checked before the call: a tool that changes something must not run for a result
        # that then cannot be saved (and a retry would run it twice).
        _check_output(output)

    # Asked only once the gateway's checks passed (configured, connected, known tool, valid
    # arguments): a call that cannot run says why, not that it needs a terminal to approve.
    needs_terminal = False
    declined = False

    async def approve(request: ApprovalRequest) -> bool:
        nonlocal needs_terminal, declined
        if yes:
            return True
        if not sys.stdin.isatty():
            needs_terminal = True
            return False
        err.print(Text.assemble(("Call", "bold"), " ", terminal_text(f"{request.server}/{request.tool}")))
        err.print(Text(terminal_text(request.arguments_json())))
        # In a thread: SIGTERM or Ctrl-C during the question still ends the command at once.
        declined = not await ask_cancellably(lambda: confirm_line("Approve? [y/N]: "))
        return not declined

    audited: list[dict[str, Any]] = []

    async def body() -> Any:
        async with open_runtime(only={server}, audit=audited.append) as rt:
            rt.manager.status(server)
            await rt.wait_for_discovery(timeout, _live(not as_json))
            text = ""
            try:
                result = await rt.gateway.call(server, tool, arguments, approval=approve)
                text = rt.gateway.shape(result).text
                return result
            except ApprovalDenied:
                if needs_terminal or declined:
                    return None
                raise
            finally:
                if audited:
                    _audit(audited[-1], text, approver="--yes" if yes else "user")

    try:
        result = run(body)
    except (RemoteProtocolError, BaseExceptionGroup) as exc:
        found = find_keen_error(exc) if isinstance(exc, BaseExceptionGroup) else exc
        if not isinstance(found, RemoteProtocolError):
            raise
        # The server answered tools/call with a JSON-RPC error: the call failed, not Keen.
        fail(describe(found), EXIT_TOOL_ERROR)
    if result is None and declined:
        fail(f'you declined the call to "{server}/{tool}"; nothing was sent')
    if result is None:
        fail(
            f'the call to "{server}/{tool}" needs approval and stdin is not a terminal, so nothing was '
            "sent; rerun with --yes to approve it"
        )
    text = result_text(result, indent=2)
    if output is not None:
        data = json.dumps(result.to_dict(), indent=2, ensure_ascii=False) + "\n" if as_json else text
        try:
            output.write_text(data, encoding="utf-8")
        except OSError as exc:
            # The call ran: its result goes to stdout rather than being lost.
            if as_json:
                print_json(result.to_dict())
            else:
                sys.stdout.write(human_result(text, limit=max(len(text), 1)))
                sys.stdout.flush()
            fail(
                f"cannot write {output}: {exc.strerror or exc}; the call ran and its whole result "
                "is on stdout instead"
            )
        err.print(Text(terminal_text(f"wrote the whole result ({len(data):,} characters) to {output}")))
    elif as_json:
        print_json(result.to_dict())
    else:
        stream = sys.stderr if result.is_error else sys.stdout
        stream.write(human_result(text))
        stream.flush()
    if result.is_error:
        raise typer.Exit(EXIT_TOOL_ERROR)


def _audit(event: dict[str, Any], text: str, *, approver: str) -> None:
    """Append one ``keen mcp call`` to ``$KEEN_HOME/logs/cli-audit.jsonl`` as the harness's
    event log records a call (``keen.harness.events``: ``call`` with the permission verdict,
    then ``result``),
    from the gateway's audit event; a log that cannot be written is a warning, not a failure
    of the call that already ran."""
    import logging
    import secrets as token

    from keen.entry_tools import CALL_TOOL
    from keen.harness import EventLog, new_session_id

    try:
        log = EventLog(paths.logs_dir() / "cli-audit.jsonl", new_session_id())
    except OSError as exc:
        logging.getLogger(__name__).warning("cannot write the audit log: %s", exc)
        return
    call_id = "cli_" + token.token_hex(4)
    server, tool = event["server"], event["tool"]
    decision = event.get("decision")
    # The verdict is written in the call's own line, as the harness writes it.
    verdict = {"allowed": "allow", "denied": "deny"}.get(decision or "")
    said = {"decision": verdict, "by": approver} if verdict else {}
    try:
        log.emit("session.start", mode="cli", workspace=str(Path.cwd()), front_end="keen mcp call")
        log.emit(
            "call",
            call_id=call_id,
            name=CALL_TOOL,
            arguments={"server": server, "tool": tool, "arguments": event.get("arguments", {})},
            caller="cli",
            **said,
        )
        outcome = {"tool_error": "error", "error": "denied" if decision == "denied" else "error"}
        log.emit(
            "result",
            call_id=call_id,
            capability=f"mcp:{server}/{tool}",
            server=server,
            tool=tool,
            outcome=outcome.get(event.get("outcome", ""), event.get("outcome")),
            code=event.get("error_code"),
            text=event.get("error") or text,
            duration_ms=event.get("duration_ms"),
            caller="cli",
        )
    finally:
        log.close()


def _check_output(output: Path) -> None:
    """Fail (exit 2) unless ``output`` can be written: an existing folder, not a directory."""
    folder = output.parent if str(output.parent) else Path(".")
    if output.is_dir():
        fail(f"--output {output} is a directory; give a file path, e.g. {output / 'result.txt'}")
    if not folder.is_dir():
        fail(f"--output {output}: the folder {folder} does not exist; create it or choose another path")
    if not os.access(folder, os.W_OK) or (output.exists() and not os.access(output, os.W_OK)):
        fail(f"--output {output} is not writable; choose another path (nothing was called)")


@app.command("sync")
def sync(
    as_json: Annotated[bool, typer.Option("--json", help="Print the sync report as JSON.")] = False,
    timeout: TimeoutOpt = 60.0,
) -> None:
    """Connect every server, generate its mcp:<server> skill, and sync the skills config.

    Exit 0 when every enabled server connected and its skill was written, 1 when any did
    not (the others are synced all the same; the table or ``--json`` says which and why),
    2 when the sync could not run at all."""
    from keen._tables import Clip, Col, Listing
    from keen.cli._live import status_table
    from keen.cli._terminal import cell
    from keen.mcp.types import ServerState
    from keen.runtime import open_runtime

    async def body() -> Any:
        async with open_runtime(wait=timeout, discovery_view=_live(not as_json, lines=True), sync=True) as rt:
            assert rt.sync_report is not None  # sync=True
            return rt.sync_report, rt.manager.servers(), _flags(rt.manager)

    report, statuses, flags = run(body)
    data = report.to_dict()
    for entry, row in zip(report.entries, data["servers"], strict=True):
        row["hint"] = _hint(entry)
        row["flags"] = flags.get(entry.server, {})
    # A script learns that not every server made it, as from keen mcp import.
    failed = any(s.enabled and s.state is not ServerState.CONNECTED for s in statuses) or any(
        entry.action == "error" for entry in report.entries
    )
    if as_json:
        print_json(data)
        if failed:
            raise typer.Exit(EXIT_TOOL_ERROR)
        return
    if not statuses and not report.entries:
        out.print(
            "No MCP servers configured: nothing to sync. Add one: keen mcp add NAME -- COMMAND [ARGS...]"
        )
        return
    if statuses:
        out.print(status_table(statuses, flags=flags))
    table = Listing(
        [Col("skill", "key"), Col("action"), Col("enabled"), Col("hint", "text", min_width=30)],
        title="skills",
        whole="keen mcp sync --json",
    )
    for entry in report.entries:
        # The remedy (`then run: keen mcp connect X`) rides whole at the end of a cut hint.
        hint = Clip(cell(entry.hint), tail=cell(remedy_text(entry.remedy, server=entry.server)))
        if not hint.whole().plain:
            hint = Clip(
                cell(
                    entry.error
                    or (f"{entry.rejected_count} tool(s) rejected" if entry.rejected_count else "")
                )
            )
        table.add_row(f"mcp:{entry.server}", entry.action, "yes" if entry.enabled else "no", hint)
    out.print(table)
    out.print(f"skills are in {report.skills_root}")
    if failed:
        raise typer.Exit(EXIT_TOOL_ERROR)


@app.command("connect")
def connect(
    server: ServerArg,
    as_json: Annotated[bool, typer.Option("--json", help="Print the outcome as JSON.")] = False,
) -> None:
    """Reconnect SERVER (signing in if it uses OAuth), regenerate and enable its skill."""
    from keen.mcp.types import ServerState
    from keen.runtime import open_runtime

    def show_url(url: str, opened: bool) -> None:
        from rich.text import Text

        from keen.cli._terminal import terminal_text

        how = "Opened your browser to sign in" if opened else "Open this URL in a browser to sign in"
        # The URL comes from the server's metadata: printed escaped and literal.
        err.print(Text(terminal_text(f"{how} to {server} (waiting up to 5 minutes):\n{url}")))

    async def body() -> Any:
        async with open_runtime(only=set()) as rt:
            rt.manager.status(server)
            return await rt.connect(server, on_authorization_url=show_url)

    outcome = run(body)
    status = outcome.status
    if as_json:
        print_json({**status.to_dict(), "skill": outcome.entry.to_dict()})
    elif status.state is ServerState.CONNECTED:
        out.print(
            f"[green]connected[/] {server}: {status.tool_count} tools; skill mcp:{server} "
            f"{'enabled' if outcome.enabled else 'disabled'} at {outcome.entry.skill_path}"
        )
    if status.state is not ServerState.CONNECTED:
        error = with_remedy(status.last_error or status.state.value, status.remedy, server=server)
        fail(f"{error}; skill mcp:{server} is disabled until it connects")


def _hint(entry: SyncEntry) -> str:
    """A sync entry's hint with its remedy worded as a command."""
    return with_remedy(entry.hint, entry.remedy, server=entry.server)
