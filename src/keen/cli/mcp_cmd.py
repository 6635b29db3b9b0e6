"""``keen mcp``: list servers, their tools, call one, import another host's config."""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path
from typing import Any

import typer
from rich.table import Table
from rich.text import Text

from keen import paths
from keen.cli._common import EXIT_TOOL_ERROR, err, fail, out, print_json, run
from keen.cli._live import status_table, wait_for_discovery
from keen.cli._signals import ask_cancellably, confirm_line
from keen.cli._terminal import cell, human_result, terminal_text
from keen.errors import KeenError
from keen.gateway import ApprovalRequest, Gateway
from keen.mcp import Manager, ServerState, ServerStatus
from keen.mcp.config import load_config, save_config

__all__ = ["app"]

app = typer.Typer(help="Configured MCP servers: status, tools, calls.", no_args_is_help=True)

_TIMEOUT_HELP = "Seconds to wait for discovery (each server also has its own connect timeout)."


@app.command("list")
def list_servers(
    as_json: bool = typer.Option(False, "--json", help="Print a JSON list instead of a table."),
    timeout: float = typer.Option(60.0, "--timeout", help=_TIMEOUT_HELP),
) -> None:
    """Connect to every configured server and show its state."""

    async def body() -> None:
        async with Manager() as manager:
            await wait_for_discovery(manager, timeout=timeout, live=not as_json)
            statuses = [_still_connecting(s, timeout) for s in manager.servers()]
        if as_json:
            keys = ("name", "transport", "auth", "state", "tool_count", "last_error")
            print_json([{k: s.to_dict()[k] for k in keys} for s in statuses])
            return
        if not statuses:
            out.print(
                f"No MCP servers configured. Add them to {paths.mcp_config_path()} "
                "or import another host's file: keen mcp import FILE"
            )
            return
        out.print(status_table(statuses))

    run(body)


def _still_connecting(status: ServerStatus, timeout: float) -> ServerStatus:
    if status.state is not ServerState.CONNECTING:
        return status
    message = f"still connecting after {timeout:g} s; raise --timeout or this server's timeouts.connect"
    return dataclasses.replace(status, last_error=message)


@app.command("tools")
def list_tools(
    server: str = typer.Argument(..., help="Server name from configs.json."),
    as_json: bool = typer.Option(False, "--json", help="Print the tool definitions as JSON."),
    timeout: float = typer.Option(60.0, "--timeout", help=_TIMEOUT_HELP),
) -> None:
    """Connect to SERVER and list its tools."""

    async def body() -> None:
        async with Manager(only={server}) as manager:
            manager.status(server)  # ServerNotConfigured before any waiting
            await wait_for_discovery(manager, timeout=timeout, live=not as_json)
            tools = manager.list_tools(server)  # tools the MCP schema rejects: a warning on stderr
        if as_json:
            print_json([t.to_dict() for t in tools])
            return
        table = Table(title=f"{server}: {len(tools)} tools", title_justify="left")
        table.add_column("tool", no_wrap=True)
        table.add_column("description", overflow="fold")
        for tool in tools:
            first = (tool.description or "").strip().splitlines()
            table.add_row(cell(tool.name), cell(first[0] if first else ""))
        out.print(table)

    run(body)


@app.command("call")
def call(
    server: str = typer.Argument(..., help="Server name from configs.json."),
    tool: str = typer.Argument(..., help="Tool name as listed by `keen mcp tools SERVER`."),
    args: str = typer.Option("{}", "--args", help="Arguments as a JSON object."),
    as_json: bool = typer.Option(False, "--json", help="Print the whole result as JSON."),
    yes: bool = typer.Option(False, "--yes", "-y", help="Approve the call without asking."),
    timeout: float = typer.Option(60.0, "--timeout", help=_TIMEOUT_HELP),
    output: Path | None = typer.Option(
        None,
        "--output",
        "-o",
        help="Write the whole result to FILE (JSON with --json) instead of printing it.",
    ),
) -> None:
    """Call TOOL on SERVER through call_mcp_tool. Exit 0 ok, 1 tool error, 2 Keen error.

    Printed results are escaped (no terminal control sequences) and cut at 64,000
    characters; --json and --output give the whole result."""
    try:
        arguments = json.loads(args)
    except json.JSONDecodeError as exc:
        fail(
            f"--args is not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg}); "
            "pass an object like --args '{\"a\": 1}'"
        )
    if not isinstance(arguments, dict):
        fail("--args must be a JSON object like '{\"a\": 1}'")
    if not yes and not sys.stdin.isatty():
        fail(
            f'the call to "{server}/{tool}" needs approval and stdin is not a terminal; '
            "rerun with --yes to approve it"
        )

    async def approve(request: ApprovalRequest) -> bool:
        if yes:
            return True
        err.print(Text.assemble(("Call", "bold"), " ", terminal_text(f"{request.server}/{request.tool}")))
        err.print(Text(terminal_text(request.arguments_json())))
        # In a thread: SIGTERM or Ctrl-C during the question still ends the command at once.
        return await ask_cancellably(lambda: confirm_line("Approve? [y/N]: "))

    async def body() -> Any:
        async with Manager(only={server}) as manager:
            manager.status(server)
            await wait_for_discovery(manager, timeout=timeout, live=not as_json)
            gateway = Gateway(manager, approval=approve)
            return await gateway.call(server, tool, arguments)

    result = run(body)
    text = result.text
    if not text and result.structured_content is not None:
        text = json.dumps(result.structured_content, indent=2, ensure_ascii=False)
    if output is not None:
        data = json.dumps(result.to_dict(), indent=2, ensure_ascii=False) + "\n" if as_json else text
        try:
            output.write_text(data, encoding="utf-8")
        except OSError as exc:
            fail(f"cannot write {output}: {exc.strerror or exc}; choose another --output path")
        err.print(Text(terminal_text(f"wrote the whole result ({len(data):,} characters) to {output}")))
    elif as_json:
        print_json(result.to_dict())
    else:
        stream = sys.stderr if result.is_error else sys.stdout
        stream.write(human_result(text))
        stream.flush()
    if result.is_error:
        raise typer.Exit(EXIT_TOOL_ERROR)


@app.command("import")
def import_servers(
    file: Path = typer.Argument(
        ..., help='A file with {"mcpServers": {...}} (Claude Desktop, Claude Code, Cursor).'
    ),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace servers that already exist."),
    rename: list[str] = typer.Option([], "--rename", help="OLD=NEW: import server OLD under the name NEW."),
) -> None:
    """Import another MCP host's servers into Keen's configs.json (written with mode 0600)."""
    from keen.mcp.importer import import_mcp_file, merge_into_config

    renames: dict[str, str] = {}
    for pair in rename:
        old, sep, new = pair.partition("=")
        if not sep or not old or not new:
            fail(f"--rename takes OLD=NEW, got {pair!r}")
        renames[old] = new
    path = paths.mcp_config_path()
    try:
        result = import_mcp_file(file, rename=renames)
        existing: dict[str, Any] | None = None
        if path.exists():
            load_config(path)  # never merge into a broken file: the ConfigError says what to fix
            existing = json.loads(path.read_text(encoding="utf-8"))
        merged, conflicts = merge_into_config(existing, result, overwrite=overwrite)
    except KeenError as exc:
        fail(exc.message)
    imported = [n for n in result.servers if n not in conflicts]
    if imported:
        save_config(merged, path)
    for name in imported:
        out.print(f"[green]imported[/] {name}")
    for name in conflicts:
        err.print(f"[yellow]skipped[/] {name}: already configured (use --overwrite to replace it)")
    for name, reason in result.refused:
        err.print(f"[red]refused[/] {name}: {reason}", markup=True, highlight=False)
    for name, note in result.notes:
        err.print(f"[yellow]note[/] {name}: {note}", markup=True, highlight=False)
    if imported:
        out.print(f"wrote {path}")
    if not imported and (result.refused or conflicts):
        raise typer.Exit(2)


@app.command("sync")
def sync(
    as_json: bool = typer.Option(False, "--json", help="Print the sync report as JSON."),
    timeout: float = typer.Option(60.0, "--timeout", help=_TIMEOUT_HELP),
) -> None:
    """Connect every server, generate its mcp:<server> skill, and sync the skills config."""
    from keen.mcpskills.startup import sync_from_manager

    async def body() -> None:
        async with Manager() as manager:
            await wait_for_discovery(manager, timeout=timeout, live=not as_json)
            report = await sync_from_manager(manager)
            statuses = manager.servers()
        if as_json:
            print_json(report.to_dict())
            return
        out.print(status_table(statuses))
        table = Table(title="skills", title_justify="left")
        for column in ("skill", "action", "enabled", "hint"):
            table.add_column(column, overflow="fold")
        for entry in report.entries:
            hint = (
                entry.hint
                or entry.error
                or (f"{entry.rejected_count} tool(s) rejected" if entry.rejected_count else "")
            )
            table.add_row(
                f"mcp:{entry.server}",
                entry.action,
                "yes" if entry.enabled else "no",
                cell(hint),
            )
        out.print(table)
        out.print(f"skills are in {report.skills_root}")

    run(body)


@app.command("connect")
def connect(
    server: str = typer.Argument(..., help="Server name from configs.json."),
    as_json: bool = typer.Option(False, "--json", help="Print the outcome as JSON."),
) -> None:
    """Reconnect SERVER (signing in if it uses OAuth), regenerate and enable its skill."""
    from keen.mcpskills.startup import connect_server

    async def body() -> Any:
        async with Manager(only=set()) as manager:
            manager.status(server)

            def show_url(url: str, opened: bool) -> None:
                how = "Opened your browser to sign in" if opened else "Open this URL in a browser to sign in"
                # The URL comes from the server's metadata: printed escaped and literal.
                err.print(Text(terminal_text(f"{how} to {server} (waiting up to 5 minutes):\n{url}")))

            return await connect_server(manager, server, on_authorization_url=show_url)

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
        fail(f"{status.last_error or status.state.value}; skill mcp:{server} is disabled until it connects")
