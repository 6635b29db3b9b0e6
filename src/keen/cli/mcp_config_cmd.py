"""``keen mcp import|add|remove``: edit configs.json from another host's file or the command line.

``keen mcp add NAME -- COMMAND [ARGS...]`` and ``keen mcp add NAME --url URL [--header K=V]
[--oauth]`` add one server, ``keen mcp remove NAME`` removes one, as ``claude mcp add`` and
``claude mcp remove`` do; ``keen mcp import FILE`` merges another host's servers and
``keen mcp import --detect`` lists the host files on this machine. Every edit is atomic and
locked (:mod:`keen.mcp.config.edit`); none connects to a server. Values (env, headers, keys)
are never printed.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape

from keen import paths
from keen._redact import redact_url
from keen.cli._common import EXIT_TOOL_ERROR, err, fail, json_object, out, print_json

if TYPE_CHECKING:
    from keen.mcp.config.hosts import HostFile

__all__ = ["register"]

_HEADER = re.compile(r"^\s*([^:=\s]+)\s*[:=]\s*(.*)$", re.DOTALL)
_ENV = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=(.*)$", re.DOTALL)


def register(mcp_app: typer.Typer) -> None:
    """Add ``import``, ``add``, ``add-json``, ``get``, ``enable``, ``disable`` and ``remove`` to
    the ``keen mcp`` group."""
    mcp_app.command("import")(import_servers)
    mcp_app.command("add")(add)
    mcp_app.command("add-json")(add_json)
    mcp_app.command("get")(get)
    mcp_app.command("enable")(enable)
    mcp_app.command("disable")(disable)
    mcp_app.command("remove")(remove)


def import_servers(
    file: Annotated[
        Path | None,
        typer.Argument(
            help='A file with {"mcpServers": {...}} (Claude Desktop, Claude Code, Cursor, Windsurf, Gemini CLI), '
            'VS Code\'s mcp.json or settings.json; JSONC is fine; "-" reads standard input.',
            show_default=False,
        ),
    ] = None,
    detect: Annotated[
        bool, typer.Option("--detect", help="List the MCP host files on this machine and what each holds.")
    ] = False,
    overwrite: Annotated[
        bool, typer.Option("--overwrite", help="Replace servers that already exist.")
    ] = False,
    rename: Annotated[
        list[str] | None, typer.Option("--rename", help="OLD=NEW: import server OLD under the name NEW.")
    ] = None,
    include_projects: Annotated[
        bool,
        typer.Option(
            "--include-projects",
            help="Also import Claude Code's project-scoped servers (~/.claude.json) as NAME-<project folder>.",
        ),
    ] = False,
    as_json: Annotated[
        bool, typer.Option("--json", help="With --detect: print the host files as JSON.")
    ] = False,
) -> None:
    """Import another MCP host's servers into Keen's configs.json (written with mode 0600).

    Exit 0 when every server was imported (or already was), 1 when any was refused or skipped
    (the others are imported all the same), 2 when the file could not be used."""
    if detect:
        if file is not None:
            fail("give FILE or --detect, not both")
        _detect(as_json)
        return
    if file is None:
        fail("give the FILE to import (or - for standard input), or --detect to find host files")
    if as_json:
        fail("--json works with --detect only; keen mcp import FILE prints what it imported")
    from keen.cli._terminal import shell_word
    from keen.mcp.config.edit import import_into_config
    from keen.mcp.config.importer import suggest_name

    renames: dict[str, str] = {}
    for pair in rename or []:
        # NEW is a valid server name (no "="); OLD, from another host's file, may hold one.
        old, sep, new = pair.rpartition("=")
        if not sep or not old or not new:
            fail(f"--rename takes OLD=NEW, got {pair!r}")
        renames[old] = new
    outcome = import_into_config(
        file, paths.mcp_config_path(), rename=renames, overwrite=overwrite, include_projects=include_projects
    )
    for name in outcome.imported:
        out.print(f"[green]imported[/] {_shown(name)}")
    for name in outcome.unchanged:
        out.print(f"unchanged {_shown(name)}: already configured as imported")
    for name in outcome.conflicts:
        other = outcome.case_conflicts.get(name)
        if other is None:
            why = "already configured (use --overwrite to replace it)"
        else:
            # --overwrite replaces a server of the same name only: renaming is what helps.
            rename_to = suggest_name(f"{name}-2", {*outcome.case_conflicts.values(), *outcome.result.servers})
            why = (
                f"differs from the configured server {other!r} only in letter case, which server names may not; "
                f"import it under another name (keen mcp import {shell_word(str(file))} "
                f"--rename {shell_word(f'{name}={rename_to}')})"
            )
        err.print(f"[yellow]skipped[/] {_shown(name)}: {_shown(why)}", highlight=False)
    for name, reason in outcome.result.refused:
        err.print(f"[red]refused[/] {_shown(name)}: {_shown(reason)}", highlight=False)
    for name, note in outcome.result.notes:
        err.print(f"[yellow]note[/] {_shown(name)}: {_shown(note)}", highlight=False)
    if outcome.written is not None:
        out.print(f"wrote {outcome.written}")
    result = outcome.result
    if not (result.servers or result.refused or result.notes):
        source = "standard input" if str(file) == "-" else str(file)
        out.print(f"{escape(source)} lists no servers; nothing to import", highlight=False)
    if outcome.result.refused or outcome.conflicts:
        # The rest was imported; a script still learns that not every entry made it.
        raise typer.Exit(EXIT_TOOL_ERROR)


def _shown(text: str) -> str:
    """A server name or message from an imported file, for the console: control characters
    escaped (the file is another program's, its names are untrusted), markup literal."""
    from keen.cli._terminal import terminal_text

    return escape(terminal_text(text, one_line=True))


def _detect(as_json: bool) -> None:
    from rich.text import Text

    from keen._tables import Col, Listing
    from keen.cli._terminal import cell, terminal_text
    from keen.mcp.config.hosts import detect_host_files, host_file_candidates

    found = detect_host_files()
    if as_json:
        print_json([host.to_dict() for host in found])
        return
    if not found:
        looked = "\n".join(f"  {host}: {path}" for host, path in host_file_candidates())
        out.print(f"No MCP host files found. Looked for:\n{escape(looked)}", highlight=False)
        return
    table = Listing(
        [Col("host", drop=1), Col("file", "key"), Col("holds", "text", lines=4)],
        title="MCP host files on this machine",
        whole="keen mcp import --detect --json",
    )
    for host in found:
        # One line per project in "holds"; names come from files other programs wrote.
        table.add_row(host.host, cell(str(host.path)), Text(terminal_text(_holds(host))))
    out.print(table)
    out.print("import one with: keen mcp import FILE")


def _holds(host: HostFile) -> str:
    if host.error:
        return f"unreadable: {host.error}"
    parts = [f"{len(host.servers)} server(s): {', '.join(host.servers)}" if host.servers else "no servers"]
    for project, names in host.projects.items():
        parts.append(f"project {project}: {', '.join(names)} (--include-projects)")
    return "\n".join(parts)


def add(
    name: Annotated[str, typer.Argument(help="The new server's name: 1-64 letters, digits, '_' or '-'.")],
    command: Annotated[
        list[str] | None,
        typer.Argument(
            help="After --: the command that starts a stdio server, and its arguments; with -t http or "
            "-t sse: the server's URL.",
            show_default=False,
        ),
    ] = None,
    transport: Annotated[
        str | None,
        typer.Option(
            "--transport",
            "-t",
            help="stdio (a command after --), http (streamable HTTP) or sse (the deprecated HTTP+SSE); "
            "default: stdio, or from --url (sse when its path ends in /sse).",
            show_default=False,
        ),
    ] = None,
    url: Annotated[
        str | None,
        typer.Option("--url", help="A remote server's streamable HTTP endpoint.", show_default=False),
    ] = None,
    header: Annotated[
        list[str] | None,
        typer.Option(
            "--header",
            "-H",
            help="K=V or 'K: V', an HTTP header for --url (repeatable); Authorization (or an API-key "
            "header) becomes the server's api_key auth. Write '${VAR}' to keep a key out of the file.",
            show_default=False,
        ),
    ] = None,
    oauth: Annotated[
        bool,
        typer.Option("--oauth", help="The server signs in with MCP OAuth (then: keen mcp connect NAME)."),
    ] = False,
    env: Annotated[
        list[str] | None,
        typer.Option(
            "--env",
            "-e",
            help="K=V, an environment variable for the stdio server (repeatable).",
            show_default=False,
        ),
    ] = None,
    description: Annotated[
        str | None,
        typer.Option(
            "--description", help="The server's catalog line, the one the model reads.", show_default=False
        ),
    ] = None,
    timeout: Annotated[
        float | None,
        typer.Option(
            "--timeout",
            help="Seconds the server has to start and answer initialize (its timeouts.connect; "
            "default: KEEN_MCP_TIMEOUT, else 15).",
            min=0.001,
            show_default=False,
        ),
    ] = None,
    overwrite: Annotated[
        bool,
        typer.Option(
            "--overwrite",
            help="Replace a server of that name: what this command gives changes, the rest of its entry "
            "(timeouts, description, env...) stays.",
        ),
    ] = False,
) -> None:
    """Add a server to configs.json: keen mcp add NAME -- COMMAND [ARGS...], keen mcp add NAME --url URL,
    or keen mcp add -t http|sse NAME URL."""
    from keen.mcp.config.edit import add_server

    command = command or []
    chosen = _transport(transport)
    if chosen != "stdio" and not url and len(command) == 1 and _is_url(command[0]):
        url, command = command[0], []  # `keen mcp add -t http NAME URL`, as `claude mcp add` takes it
    if chosen == "stdio" and url:
        fail("-t stdio takes a command after --, not --url; for a remote server use -t http (or -t sse)")
    if chosen in ("http", "sse") and not url:
        fail(f"-t {chosen} takes the server's URL: keen mcp add -t {chosen} {name} URL")
    if bool(command) == bool(url):
        fail(
            "give a stdio command after -- (keen mcp add NAME -- COMMAND ARGS...) or a remote server's "
            "URL (keen mcp add -t http NAME URL), one of the two"
        )
    entry: dict[str, Any] = {}
    if url:
        if env:
            fail("--env is for a stdio server; a remote server takes --header")
        entry["url"] = url
        if chosen is not None:
            entry["type"] = chosen
        if header:
            entry["headers"] = _pairs(header, _HEADER, "--header", "K=V or 'K: V'")
        if oauth:
            entry["oauth"] = True
    else:
        if header or oauth:
            fail(
                "--header and --oauth are for a remote server (--url); pass a stdio server's secrets with --env"
            )
        entry["command"], entry["args"] = command[0], command[1:]
        if env:
            entry["env"] = _pairs(env, _ENV, "--env", "NAME=VALUE")
    if description is not None:
        entry["description"] = description
    if timeout is not None:
        entry["timeouts"] = {"connect": timeout}
    path = paths.mcp_config_path()
    notes = add_server(path, name, entry, overwrite=overwrite)
    shown_command = command[0] if command else ""
    if not url and len(command) == 1 and " " in command[0].strip():
        from keen.mcp.config.secrets import arg_secret_references, hide_arg_secrets

        # The importer's note speaks of a file's "args"; here the fix is to unquote the command.
        notes = [note for note in notes if not note.startswith('"command" contains spaces')]
        try:
            words = shlex.split(command[0])
        except ValueError:  # unbalanced quotes: split on spaces
            words = command[0].split()
        # The line may hold a key (`--api-key VALUE`): never printed back, not even one only
        # the redactor's rules see (`X-Custom: Bearer <token>`). The command to paste reads
        # each from a variable instead, which the note names.
        shown_command = " ".join(hide_arg_secrets(words, {}))
        referenced, variables, holds = arg_secret_references(words, name)
        again = shlex.join(["keen", "mcp", "add", name, "--overwrite", "--", *referenced])
        if variables:
            wanted = ", ".join(f"{v} ({holds[v]})" if v in holds else v for v in variables)
            notes.append(
                f"the command {shown_command!r} is one word with spaces; if those are its arguments, "
                f"set {wanted} to the credential{'s' if len(variables) != 1 else ''} "
                f"it holds, then add it again without the quotes, reading "
                f"{'them' if len(variables) != 1 else 'it'} from the environment: {again}"
            )
        else:
            notes.append(
                f"the command {shown_command!r} is one word with spaces; if those are its arguments, "
                f"add it again without the quotes: {again}"
            )
    for note in notes:
        err.print(f"[yellow]note[/] {escape(note)}", highlight=False)
    # The URL may carry a key in its query, a quoted command line one of its words: printed without it.
    kind = f"remote server {redact_url(url)}" if url else f"stdio server {shown_command}"
    out.print(f"[green]added[/] {escape(name)} ({escape(kind)}) to {escape(str(path))}", highlight=False)
    nxt = f"keen mcp connect {name}" if oauth else f"keen mcp tools {name}"
    _next_step(path, name, nxt)


def _next_step(path: Path, name: str, command: str) -> None:
    """``next: COMMAND``; for an entry that cannot start as written (an unset ``${VAR}``, a
    field the schema refuses), first a note with what to fix, so the next step does not fail."""
    from rich.text import Text

    from keen.cli._terminal import terminal_text
    from keen.mcp.config import load_config

    problem = load_config(path, strict=False).invalid.get(name)
    if problem:
        note = f" {name} cannot start as written yet: {problem}"
        err.print(Text.assemble(("note", "yellow"), terminal_text(note)), highlight=False)
        out.print(f"next, once that is fixed: {escape(command)}", highlight=False)
        return
    out.print(f"next: {escape(command)}", highlight=False)


_TRANSPORTS = {
    "stdio": "stdio",
    "http": "http",
    "streamable-http": "http",
    "streamable_http": "http",
    "sse": "sse",
}


def _transport(value: str | None) -> str | None:
    """``-t``'s value as ``stdio``, ``http`` or ``sse`` (``None`` when not given)."""
    if value is None:
        return None
    kind = _TRANSPORTS.get(value.strip().lower())
    if kind is None:
        fail(f"-t/--transport takes stdio, http or sse, not {value!r}")
    return kind


def _is_url(text: str) -> bool:
    return text.startswith(("http://", "https://"))


def _pairs(texts: list[str], pattern: re.Pattern[str], option: str, shape: str) -> dict[str, str]:
    """The ``K=V`` values of a repeated option; one name given twice is refused (the first
    value would be dropped without a word). Header names compare without case, as HTTP's do."""
    pairs: dict[str, str] = {}
    for text in texts:
        key, value = _pair(text, pattern, option, shape)
        fold = key.lower() if option == "--header" else key
        if any((k.lower() if option == "--header" else k) == fold for k in pairs):
            fail(f"{option} gives {key} twice; keep one of the two values")
        pairs[key] = value
    return pairs


def _pair(text: str, pattern: re.Pattern[str], option: str, shape: str) -> tuple[str, str]:
    match = pattern.match(text)
    if match is None:
        # The value may be a secret: name the option and the shape, never echo the text.
        fail(f"{option} takes {shape}; one value has no name before '=' (or ':')")
    return match.group(1), match.group(2).strip() if option == "--header" else match.group(2)


def remove(
    name: Annotated[str, typer.Argument(help="The server's name in configs.json.")],
) -> None:
    """Remove a server from configs.json; the next sync deletes its skill mcp:NAME."""
    from keen.mcp.config.edit import remove_server

    path = paths.mcp_config_path()
    remove_server(path, name)
    out.print(f"[green]removed[/] {escape(name)} from {escape(str(path))}", highlight=False)
    out.print(f"its skill mcp:{escape(name)} is deleted at the next keen mcp sync", highlight=False)


def add_json(
    name: Annotated[str, typer.Argument(help="The new server's name: 1-64 letters, digits, '_' or '-'.")],
    json_text: Annotated[
        str,
        typer.Argument(
            metavar="JSON",
            help='One server entry in the mcpServers shape other hosts use, e.g. \'{"command": "uvx", '
            '"args": ["mcp-server-time"]}\' or \'{"type": "http", "url": "https://..."}\'.',
            show_default=False,
        ),
    ],
    overwrite: Annotated[
        bool,
        typer.Option(
            "--overwrite",
            help="Replace a server of that name: what the JSON gives changes, the rest of its entry stays.",
        ),
    ] = False,
) -> None:
    """Add a server from its JSON entry, as claude mcp add-json does (converted as keen mcp import converts)."""
    from keen.mcp.config.edit import add_server

    entry = json_object(json_text, "JSON", '\'{"command": "uvx", "args": ["mcp-server-time"]}\'')
    if "mcpServers" in entry:
        fail(
            "JSON is a whole mcpServers file; give one server's entry, or import the file: keen mcp import FILE"
        )
    path = paths.mcp_config_path()
    for note in add_server(path, name, entry, overwrite=overwrite):
        err.print(f"[yellow]note[/] {escape(note)}", highlight=False)
    out.print(f"[green]added[/] {escape(name)} to {escape(str(path))}", highlight=False)
    _next_step(path, name, f"keen mcp tools {name}")


def get(
    name: Annotated[str, typer.Argument(help="The server's name in configs.json.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print the entry as JSON.")] = False,
) -> None:
    """Show one server's entry in configs.json (values of env, headers and keys hidden; it does not connect)."""
    from keen.cli._terminal import terminal_text

    path = paths.mcp_config_path()
    shown = _shown_entry(path, name)
    if as_json:
        print_json(shown)
        return
    from rich.text import Text

    lines = [f"{name}:"]
    for key, value in shown.items():
        if key == "name" or value in (None, [], {}):
            continue
        if isinstance(value, list):
            value = " ".join(map(str, value)) if key == "args" else ", ".join(map(str, value))
        elif isinstance(value, dict):
            value = ", ".join(
                f"{k} {' '.join(map(str, v)) if isinstance(v, list) else v}"
                for k, v in value.items()  # pyright: ignore[reportUnknownVariableType]
                if v not in (None, [])
            )
        elif isinstance(value, bool):
            value = "yes" if value else "no"
        lines.append(f"  {key}: {value}")
    out.print(Text(terminal_text("\n".join(lines))))
    # The next step for this entry as it is: listing the tools of a broken or disabled
    # server fails, so those get the command that makes it usable.
    if "error" in shown:
        out.print(
            f"fix its entry in {escape(str(path))} as the error says; then run: keen mcp connect {escape(name)}",
            highlight=False,
        )
    elif shown.get("enabled") is False:
        out.print(
            f"Keen does not start it; start it again with: keen mcp enable {escape(name)}", highlight=False
        )
    else:
        out.print(f"connect and list its tools: keen mcp tools {escape(name)}", highlight=False)


def _shown_entry(path: Path, name: str) -> dict[str, Any]:
    """Server ``name``'s entry as ``keen mcp get`` shows it: what Keen uses (defaults filled
    in), the names of env variables and headers without their values, no key."""
    from keen.mcp.config import ApiKeyAuth, HttpServerConfig, OAuthAuth, load_config
    from keen.mcp.config.edit import server_entry
    from keen.mcp.config.secrets import hide_arg_secrets
    from keen.trust import pinning_policy

    raw = server_entry(path, name)
    config = load_config(path, strict=False)
    server = config.servers.get(name)
    shown: dict[str, Any] = {"name": name}
    if server is None:
        shown["error"] = config.invalid.get(name, "the entry is invalid")
        shown["fields"] = sorted(raw)
        return shown
    shown["transport"] = server.transport
    if isinstance(server, HttpServerConfig):
        shown["url"] = redact_url(raw.get("url", server.url))
        shown["headers"] = sorted(server.headers)
        auth: dict[str, Any] = {"type": server.auth.type}
        if isinstance(server.auth, ApiKeyAuth):
            auth["header"] = server.auth.header
        elif isinstance(server.auth, OAuthAuth):
            # What the sign-in asks for and where it listens; never client_id or its secret.
            # Scopes as written, as command and args: a ${VAR} stays unexpanded.
            written: Any = raw.get("auth")
            scopes: Any = written.get("scopes") if isinstance(written, dict) else None  # pyright: ignore[reportUnknownMemberType]
            auth["scopes"] = scopes if isinstance(scopes, list) else server.auth.scopes
            auth["callback_port"] = server.auth.callback_port
        shown["auth"] = auth
        if server.transport == "sse":
            shown["note"] = (
                "HTTP+SSE, deprecated since MCP 2025-03-26: use its streamable HTTP endpoint if it has one"
            )
    else:
        shown["command"] = raw.get("command", server.command)
        # As written (${VAR} unexpanded); a key written literally into args is hidden where
        # the args' own words say it stands (`--api-key VALUE`, `GITHUB_TOKEN=...`).
        args = [str(arg) for arg in raw.get("args", server.args)]
        shown["args"] = hide_arg_secrets(args, server.env)
        shown["env"] = sorted(server.env)
        shown["cwd"] = server.cwd
        # Names only, as for env: which of Keen's own variables the server also gets.
        shown["inherit_env"] = server.inherit_env
    shown["enabled"] = server.enabled
    shown["timeouts"] = server.timeouts.model_dump()
    shown["description"] = server.description
    # What the trust makes of its tools: the policy in use (its transport's default when the
    # entry names none) and whether its annotations count.
    shown["pinning"] = pinning_policy(server)
    shown["trust_annotations"] = server.trust_annotations
    return shown


def enable(name: Annotated[str, typer.Argument(help="The server's name in configs.json.")]) -> None:
    """Let Keen start server NAME again ("enabled" in configs.json)."""
    _set_enabled(name, True)


def disable(name: Annotated[str, typer.Argument(help="The server's name in configs.json.")]) -> None:
    """Stop starting server NAME without removing it ("enabled": false in configs.json)."""
    _set_enabled(name, False)


def _set_enabled(name: str, enabled: bool) -> None:
    from keen.mcp.config.edit import set_enabled

    path = paths.mcp_config_path()
    changed = set_enabled(path, name, enabled)
    word = "enabled" if enabled else "disabled"
    if not changed:
        out.print(f"{escape(name)} is already {word}; nothing changed", highlight=False)
        return
    out.print(f"[green]{word}[/] {escape(name)} in {escape(str(path))}", highlight=False)
    if enabled:
        out.print(f"next: keen mcp connect {escape(name)} (or /mcp connect {escape(name)} in keen chat)")
    else:
        out.print(
            f"Keen no longer starts it; its skill mcp:{escape(name)} is disabled at the next keen mcp sync",
            highlight=False,
        )
