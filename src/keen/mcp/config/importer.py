"""``keen mcp import``: convert other MCP hosts' server files into Keen's configs.json entries.

Input: the ``{"mcpServers": {name: entry}}`` shape shared by Claude Desktop
(``claude_desktop_config.json``), Claude Code (``.mcp.json``), Cursor (``mcp.json``),
Windsurf, Cline and Gemini CLI, and VS Code's ``{"servers": {...}}``. An entry is stdio
(``command``, ``args``, ``env``, ``cwd``) or remote (``url``/``httpUrl``/``serverUrl``,
``headers``), with an optional ``type`` (``stdio`` | ``http`` | ``streamable-http`` |
``sse``). ``sse`` (and a URL ending in ``/sse`` with no ``type``, as Cursor infers it) becomes
the deprecated HTTP+SSE transport (``transport: "sse"``), with a note saying so. Output: entries of the configs.json shape (see :mod:`keen.mcp.config`).

Rules:

- ``Authorization: <scheme> <key>`` becomes ``auth: {type: api_key, header: Authorization,
  scheme, key}``; without ``Authorization``, one header whose name looks like a key
  (``X-API-Key``, ``CONTEXT7_API_KEY``, ``X-Auth-Token``…) becomes api_key with
  ``scheme: ""``. Every other header stays in ``headers``. An ``oauth`` object
  (Claude Code, Gemini CLI) becomes ``auth: {type: oauth, ...}``.
- ``${VAR}`` and ``${VAR:-default}`` are kept as written (Keen expands them when it
  loads the file); Cursor/VS Code's ``${env:VAR}`` becomes ``${VAR}``, ``${userHome}``
  becomes ``${HOME}``. Entries using ``${workspaceFolder}`` or ``${input:...}`` are refused:
  Keen has no workspace or prompt to fill them from.
- Refused, with a reason that says what to do (never silently changed or dropped):
  names that do not match
  ``^[A-Za-z0-9_-]{1,64}$`` (a valid name is suggested; ``rename=`` imports it under another name);
  entries with neither ``command`` nor a URL, or with both and no ``type``; Cursor's
  ``envFile``; values of the wrong type.
- Fields Keen has no use for (``alwaysAllow``, ``autoApprove``, ``timeout``, ``trust``…)
  are dropped and reported in ``notes``; ``disabled: true`` becomes ``enabled: false``.

Reasons and notes never contain header values, env values or keys.
"""

from __future__ import annotations

import difflib
import json
import re
import sys
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from keen._redact import Redactor, redact_url
from keen._terminal import shell_word
from keen.errors import ConfigError
from keen.mcp.config.servers import (
    SERVER_NAME_PATTERN,
    misspelling_of,
    neither_command_nor_url,
    nested_too_deep,
    object_pairs,
    read_json,
    repeated_keys,
    too_deep,
    validate_config,
)
from keen.mcp.config.values import header_name

__all__ = [
    "KEEN_SETTINGS",
    "OWN_SETTING_FIX",
    "ImportResult",
    "import_mcp_file",
    "import_mcp_servers",
    "load_host_document",
    "project_servers",
    "suggest_name",
]

_HTTP_TYPES = frozenset({"http", "streamable-http", "streamable_http", "streamablehttp"})
_SSE_TYPES = frozenset({"sse", "http+sse"})
_URL_KEYS = ("url", "httpUrl", "serverUrl")
_TYPE_KEYS = ("type", "transport", "transportType")
_APPROVALS = "approvals are Keen's own (permission mode and the approval prompt)"
KEEN_SETTINGS = ("trust_annotations", "inherit_env", "pinning")
"""Per-server fields of Keen's own (README "Configure servers") that grant trust or pass the
environment on: never taken from another host's file (a project's ``.mcp.json`` may come from
anyone); ``keen mcp add-json``, typed by the user, keeps them."""
OWN_SETTING_FIX = "set it yourself in configs.json, or with keen mcp add-json NAME JSON --overwrite"
"""How to set a Keen setting the conversion dropped, in a note about a file on disk."""
_OWN_SETTING = f"a Keen setting that is not taken from another host's file; {OWN_SETTING_FIX}"
_DROPPED_WHY = {
    **dict.fromkeys(KEEN_SETTINGS, _OWN_SETTING),
    "alwaysAllow": _APPROVALS,
    "autoApprove": _APPROVALS,
    "trust": _APPROVALS,
    "disabledTools": "Keen lists every tool; hide the server's skill instead if needed",
    "excludeTools": "Keen lists every tool; hide the server's skill instead if needed",
    "includeTools": "Keen lists every tool; hide the server's skill instead if needed",
    "timeout": 'its unit differs between hosts; set "timeouts": {"call_tool": <seconds>} if needed',
    "networkTimeout": 'set "timeouts": {"call_tool": <seconds>} if needed',
}
_KEYISH_HEADER = re.compile(r"(api[-_]?key|token|secret|auth)", re.IGNORECASE)
_CURSOR_ENV = re.compile(r"\$\{env:([A-Za-z_][A-Za-z0-9_]*)\}")
_UNFILLABLE = re.compile(r"\$\{(workspaceFolder[A-Za-z]*|input:[^}]*|config:[^}]*|command:[^}]*)\}")
_INVALID_NAME_CHARS = re.compile(r"[^A-Za-z0-9_-]+")
_JSON5_ERROR = re.compile(r"^<string>:(?P<line>\d+) (?P<why>.*) at column (?P<column>\d+)$", re.DOTALL)


class _Refused(Exception):
    """One entry cannot be converted; the message is the reason shown to the user."""


class _SchemeOnly(_Refused):
    """An Authorization header that is an authentication scheme alone (its key was lost);
    the advice on how to write it depends on where the entry came from (:func:`_add`)."""

    def __init__(self, header: str, scheme: str) -> None:
        super().__init__(
            f"the {header} header is the scheme {scheme!r} with no key after it; write the key after it"
        )
        self.scheme = scheme


@dataclass
class ImportResult:
    """Converted entries by name (configs.json ``servers`` shape, ``${VAR}`` kept), refused
    entries as ``(name, reason)``, and ``(name, note)`` for what was dropped or may need a look."""

    servers: dict[str, dict[str, Any]] = field(default_factory=dict)
    refused: list[tuple[str, str]] = field(default_factory=list)
    notes: list[tuple[str, str]] = field(default_factory=list)


def suggest_name(name: str, taken: set[str] | frozenset[str] = frozenset()) -> str:
    """A valid server name close to ``name`` (``"My Server.v2"`` -> ``"My-Server-v2"``), not in ``taken``."""
    # Accents are dropped rather than the letters they sit on ("café" -> "cafe", not "caf").
    ascii_name = unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode("ascii")
    base = _INVALID_NAME_CHARS.sub("-", ascii_name).strip("-")[:64] or "server"
    candidate, counter = base, 2
    while candidate in taken:
        suffix = f"-{counter}"
        candidate = base[: 64 - len(suffix)] + suffix
        counter += 1
    return candidate


def import_mcp_file(
    path: Path, *, rename: Mapping[str, str] | None = None, include_projects: bool = False
) -> ImportResult:
    """Read ``path`` (JSON or JSONC; ``-`` is standard input) and convert it with
    :func:`import_mcp_servers`.

    Raises ``ConfigError`` when the file cannot be read, is not JSON (with line/column),
    or has no ``mcpServers``/``servers`` object.
    """
    source = "standard input" if str(path) == "-" else str(path)
    return import_mcp_servers(
        load_host_document(path),
        rename=rename,
        source=source,
        include_projects=include_projects,
        import_command=f"keen mcp import {shell_word(str(path))}",
    )


def load_host_document(path: Path) -> Any:
    """An MCP host's settings file parsed as JSON, or JSONC (comments, trailing commas) as
    VS Code, Cursor and Claude Code write it; ``-`` reads standard input.

    Raises:
        ConfigError: the file cannot be read or parsed (with line and column).
    """
    try:
        text = sys.stdin.read() if str(path) == "-" else path.read_text(encoding="utf-8")
    except FileNotFoundError as exc:
        raise ConfigError(f"{path} does not exist; check the path", path=str(path)) from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(
            f"cannot read {path}: {exc}; check the path and its permissions", path=str(path)
        ) from exc
    return _load_jsonc(text, "standard input" if str(path) == "-" else str(path))


def _load_jsonc(text: str, source: str) -> Any:
    """JSON, or JSONC as VS Code, Cursor and Claude Code write it (comments, trailing commas);
    nested no deeper than configs.json may be (:func:`keen.mcp.config.servers.nested_too_deep`)."""
    data = _parse_jsonc(text, source)
    if nested_too_deep(data):
        raise ConfigError(too_deep(source), path=source)
    return data


def _parse_jsonc(text: str, source: str) -> Any:
    try:
        return json.loads(text, object_pairs_hook=object_pairs)
    except RecursionError:
        raise ConfigError(too_deep(source), path=source) from None
    except json.JSONDecodeError as exc:
        import json5  # only for the files plain JSON cannot read

        try:
            return json5.loads(text, object_pairs_hook=object_pairs)
        except RecursionError:
            raise ConfigError(too_deep(source), path=source) from None
        except ValueError as jsonc_exc:
            # json5 read past the comments and trailing commas plain JSON stopped at, so its
            # position is the real one ("<string>:4 Unexpected "{" at column 7").
            found = _JSON5_ERROR.match(str(jsonc_exc))
            line, column, why = (
                (int(found["line"]), int(found["column"]), found["why"])
                if found
                else (exc.lineno, exc.colno, exc.msg)
            )
            raise ConfigError(
                f"{source}: invalid JSON at line {line}, column {column}: {why} "
                "(comments and trailing commas are fine); fix the syntax there",
                path=source,
                line=line,
                column=column,
            ) from exc


def import_mcp_servers(
    data: Any,
    *,
    rename: Mapping[str, str] | None = None,
    source: str = "the imported file",
    include_projects: bool = False,
    import_command: str | None = None,
    settings: Mapping[str, Any] | None = None,
    typed: bool = False,
) -> ImportResult:
    """Convert a parsed ``{"mcpServers": {...}}`` (or VS Code ``{"servers": {...}}``) document.

    ``rename`` maps a source name to the name to import it under (used after a refusal
    suggested one). Every returned entry validates with :func:`keen.mcp.config.servers.validate_config`
    once its ``${VAR}`` references are set. Raises ``ConfigError`` when ``data`` has no
    server map; problems inside one entry are refusals, never exceptions.

    Claude Code's ``~/.claude.json`` also holds servers scoped to one project
    (``projects.<path>.mcpServers``): with ``include_projects`` each is imported as
    ``<name>-<project folder>`` with a note naming the project; without it each is left out
    with a note (never silently).

    ``import_command``: the command that imports this document again (``keen mcp import
    FILE``); a refused name's reason then gives it with the ``--rename`` that fixes it.

    ``settings``: fields set on every converted entry as given, before it is validated
    (``keen mcp add-json``'s own :data:`KEEN_SETTINGS`, which a conversion drops): a bad
    value refuses the entry like any other.

    ``typed``: the document was typed on a command line (``keen mcp add``, ``add-json``),
    where a shell may have expanded an unset ``$VAR`` to nothing; a refusal's advice then
    speaks of shell quoting, else of the file.
    """
    projects = project_servers(data)
    servers_raw = _server_map(data, source) if not projects or "mcpServers" in data else {}
    rename = dict(rename or {})
    result = ImportResult()
    for unknown in sorted(set(rename) - set(servers_raw)):
        result.notes.append((unknown, "--rename names a server that is not in the file; nothing to rename"))
    final_names = {rename.get(name, name) for name in servers_raw}
    for name in repeated_keys(servers_raw):
        result.notes.append(
            (
                name,
                f"{source} defines {name!r} more than once; imported its last entry, the one MCP hosts "
                "use (remove the others there to silence this)",
            )
        )
    for name, entry in servers_raw.items():
        target = rename.get(name, name)
        if not SERVER_NAME_PATTERN.fullmatch(target):
            suggestion = suggest_name(target, (final_names | set(result.servers)) - {target})
            how = (
                f"import it as {suggestion!r} ({import_command} --rename {shell_word(f'{name}={suggestion}')})"
                " or rename it in the file"
                if import_command
                else f"rename it, e.g. to {suggestion!r}"
            )
            result.refused.append(
                (
                    name,
                    f"Keen server names may use only letters, digits, '_' and '-' (1-64 characters); {how}",
                )
            )
            continue
        twin = next((other for other in result.servers if other.lower() == target.lower()), None)
        if twin is not None:
            # Names differing only in case would share one skill directory on macOS and Windows.
            same = "as" if twin == target else f"as {twin!r}, which differs only in letter case from"
            result.refused.append(
                (name, f"another entry is already imported {same} {target!r}; rename one of them")
            )
            continue
        _add(result, name, target, entry, settings, typed=typed)
    for project, name, entry in projects:
        target = suggest_name(f"{name}-{_folder(project)}", final_names | set(result.servers))
        if not include_projects:
            result.notes.append(
                (
                    name,
                    f"scoped to the project {project} (Claude Code); not imported: rerun with "
                    f"--include-projects to import it as {target!r}",
                )
            )
            continue
        if _add(result, name, target, entry, settings, typed=typed):
            result.notes.append((target, f"imported from the project {project} (Claude Code)"))
    return result


def project_servers(data: Any) -> list[tuple[str, str, Any]]:
    """``(project path, server name, entry)`` for each project-scoped server of Claude Code's
    ``~/.claude.json`` (``{"projects": {path: {"mcpServers": {...}}}}``); ``[]`` for other files."""
    projects = data.get("projects") if isinstance(data, dict) else None
    found: list[tuple[str, str, Any]] = []
    for project, settings in projects.items() if isinstance(projects, dict) else ():
        servers = settings.get("mcpServers") if isinstance(settings, dict) else None
        if isinstance(servers, dict):
            found.extend((str(project), str(name), entry) for name, entry in servers.items())
    return found


def _folder(project: str) -> str:
    """The last folder of a project path, POSIX or Windows."""
    return re.split(r"[\\/]", project.rstrip("\\/"))[-1] or "project"


def _add(
    result: ImportResult,
    name: str,
    target: str,
    entry: Any,
    settings: Mapping[str, Any] | None = None,
    *,
    typed: bool = False,
) -> bool:
    """Convert one entry into ``result`` under ``target``, with ``settings`` set on it as
    given; a refusal is recorded, not raised."""
    notes: list[str] = []
    try:
        converted = _convert(entry, notes)
        converted.update(settings or {})
        _validate(target, converted)
    except _SchemeOnly as exc:
        scheme = exc.scheme
        if typed:
            # What `-H "Authorization: Bearer $KEY"` leaves when the shell expands an unset KEY.
            how = (
                f"a shell expands $VAR inside double quotes, to nothing when it is unset: write "
                f"'{scheme} ${{VAR}}' in single quotes and Keen expands it when it connects"
            )
        else:
            how = (
                f"or write '{scheme} ${{VAR}}' there and Keen takes the key from the environment "
                f"variable VAR when it connects"
            )
        result.refused.append((name, f"{exc} ({how})"))
        return False
    except _Refused as exc:
        result.refused.append((name, str(exc)))
        return False
    result.servers[target] = converted
    result.notes.extend((target, note) for note in notes)
    return True


def _server_map(data: Any, source: str) -> dict[str, Any]:
    if not isinstance(data, dict):
        raise ConfigError(f'{source}: expected a JSON object with "mcpServers"', path=source)
    if isinstance(data.get("mcp"), dict) and "servers" in data["mcp"]:
        servers = data["mcp"]["servers"]  # VS Code's user settings.json
    elif "mcpServers" in data:
        servers = data["mcpServers"]
    elif "servers" in data and "version" not in data:
        servers = data["servers"]  # VS Code's .vscode/mcp.json
    elif "servers" in data:
        raise ConfigError(
            f"{source}: this looks like Keen's own configs.json; there is nothing to convert: copy "
            "its entries into $KEEN_HOME/mcp/configs.json (default ~/.keen) instead",
            path=source,
        )
    else:
        raise ConfigError(
            f'{source}: no "mcpServers" object found; point keen mcp import at a Claude Desktop, '
            "Claude Code (.mcp.json), Cursor, Windsurf or VS Code MCP file",
            path=source,
            field="mcpServers",
        )
    if not isinstance(servers, dict):
        raise ConfigError(
            f"{source}: the server list must be an object mapping names to entries", path=source
        )
    return servers


def _convert(entry: Any, notes: list[str]) -> dict[str, Any]:
    if not isinstance(entry, dict):
        raise _Refused('the entry is not an object; expected {"command": ...} or {"url": ...}')
    entry = _rewrite_variables(entry)
    kind = _kind(entry)
    out: dict[str, Any] = {}
    if kind == "stdio":
        out.update(_stdio(entry, notes))
    else:
        out.update(_http(entry, notes, sse=kind == "sse"))
    if entry.get("disabled") is True or entry.get("enabled") is False:
        out["enabled"] = False
    if isinstance(entry.get("timeouts"), dict):
        out["timeouts"] = entry["timeouts"]  # already Keen's shape; validated below
    if isinstance(entry.get("description"), str) and entry["description"]:
        out["description"] = entry["description"]
    handled = {
        "command",
        "args",
        "env",
        "cwd",
        "headers",
        "oauth",
        "disabled",
        "enabled",
        "description",
        "timeouts",
        *_URL_KEYS,
        *_TYPE_KEYS,
    }
    for key in sorted(set(entry) - handled):
        why = _DROPPED_WHY.get(key, "Keen does not use it")
        if key not in _DROPPED_WHY:
            # A misspelt field would otherwise vanish with a note that reads as by design.
            close = difflib.get_close_matches(key, sorted(handled | set(KEEN_SETTINGS)), n=1, cutoff=0.75)
            if close:
                why += f"; did you mean {close[0]!r}?"
        notes.append(f"dropped {key!r}: {why}")
    return out


def _kind(entry: dict[str, Any]) -> str:
    declared = next((entry[key] for key in _TYPE_KEYS if key in entry), None)
    url_key = next((key for key in _URL_KEYS if key in entry), None)
    has_command = "command" in entry
    if declared is not None:
        if not isinstance(declared, str):
            raise _Refused('"type" must be a string: "stdio", "http" or "sse"')
        kind = declared.strip().lower()
        # A key none of these (a misspelt "url" or "command") is named as such, as configs.json's rules do.
        others = [str(key) for key in entry if key not in ("command", *_URL_KEYS, *_TYPE_KEYS)]
        if kind in _SSE_TYPES:
            if url_key is None:
                fix = _url_misspelling(others) or "add the server's SSE endpoint"
                raise _Refused(f'type {declared!r} needs a "url"; {fix}')
            return "sse"
        if kind == "stdio":
            if not has_command:
                raise _Refused(
                    f'type "stdio" needs a "command" to run; {misspelling_of("command", others) or "add it"}'
                )
            return "stdio"
        if kind in _HTTP_TYPES:
            if url_key is None:
                fix = _url_misspelling(others) or "add the server's streamable HTTP endpoint"
                raise _Refused(f'type {declared!r} needs a "url"; {fix}')
            return "http"
        raise _Refused(
            f'type {declared!r} is not supported; use "stdio" (with "command") or "http" (with "url")'
        )
    if has_command and url_key is not None:
        raise _Refused('the entry has both "command" and a URL; add "type": "stdio" or "type": "http"')
    if has_command:
        return "stdio"
    if url_key is not None:
        url = entry[url_key]
        return "sse" if isinstance(url, str) and _sse_path(url) else "http"
    raise _Refused(neither_command_nor_url(entry, _URL_KEYS))


def _url_misspelling(keys: list[str]) -> str | None:
    """The rename of one of ``keys`` that looks like a misspelt URL key, if one does."""
    return next((fix for wanted in _URL_KEYS if (fix := misspelling_of(wanted, keys))), None)


def _sse_path(url: str) -> bool:
    """True for a URL whose path ends in ``/sse``: the usual HTTP+SSE endpoint."""
    return url.split("?", 1)[0].rstrip("/").endswith("/sse")


def _sse_note(url: str) -> str:
    guess = url.split("?", 1)[0].rstrip("/")[: -len("/sse")] + "/mcp" if _sse_path(url) else ""
    guess = redact_url(guess) if guess else ""  # a note is printed and logged: no user:password
    newer = f" (often at {guess})" if guess else ""
    return (
        "uses the HTTP+SSE transport of MCP 2024-11-05, deprecated since 2025-03-26: it works, but if "
        f"the server offers streamable HTTP{newer}, use that instead"
    )


def _stdio(entry: dict[str, Any], notes: list[str]) -> dict[str, Any]:
    command = entry.get("command")
    if not isinstance(command, str) or not command.strip():
        raise _Refused('"command" must be a non-empty string')
    out: dict[str, Any] = {"transport": "stdio", "command": command}
    args = entry.get("args", [])
    if not isinstance(args, list) or not all(isinstance(arg, str | int | float) for arg in args):
        raise _Refused('"args" must be a list of strings')
    if args:
        out["args"] = [arg if isinstance(arg, str) else json.dumps(arg) for arg in args]
    elif " " in command.strip():
        notes.append(
            '"command" contains spaces and there are no "args"; if it is a whole command line, '
            'move the arguments into "args"'
        )
    env = entry.get("env", {})
    if not isinstance(env, dict) or not all(isinstance(v, str | int | float | bool) for v in env.values()):
        raise _Refused('"env" must map variable names to strings')
    if env:
        out["env"] = {str(k): v if isinstance(v, str) else json.dumps(v) for k, v in env.items()}
    if "envFile" in entry:
        raise _Refused(
            '"envFile" is not read by Keen; copy the variables you need into "env" (use "${VAR}" '
            "to keep secrets out of the file) and drop envFile"
        )
    cwd = entry.get("cwd")
    if cwd is not None:
        if not isinstance(cwd, str):
            raise _Refused('"cwd" must be a string path')
        out["cwd"] = cwd
    if "headers" in entry:
        notes.append('dropped "headers": a stdio server takes no HTTP headers; pass credentials in "env"')
    return out


def _http(entry: dict[str, Any], notes: list[str], *, sse: bool = False) -> dict[str, Any]:
    url = next(entry[key] for key in _URL_KEYS if key in entry)
    if not isinstance(url, str):
        raise _Refused('"url" must be a string')
    out: dict[str, Any] = {"transport": "sse" if sse else "streamable_http", "url": url}
    if sse:
        notes.append(_sse_note(url))
    elif _sse_path(url):
        notes.append(
            "the URL ends in /sse, which usually names the deprecated HTTP+SSE endpoint; if connecting "
            'fails, add it with "type": "sse", or use the server\'s streamable HTTP endpoint (often /mcp)'
        )
    headers = entry.get("headers", {})
    if not isinstance(headers, dict) or not all(isinstance(v, str) for v in headers.values()):
        raise _Refused('"headers" must map header names to strings')
    for name in headers:
        try:
            header_name(name)
        except ValueError as exc:
            # Before any message names the header: "Name: value" pasted as a name holds a key.
            raise _Refused(f'"headers": {exc}') from None
    auth, rest = _auth_from_headers(headers)
    oauth = entry.get("oauth")
    if oauth is not None and oauth is not False:
        if auth is not None:
            raise _Refused('the entry has both an API-key header and "oauth"; keep one of them')
        auth = _oauth(oauth)
    if auth is not None:
        out["auth"] = auth
    if rest:
        out["headers"] = rest
        secretish = sorted(name for name in rest if _KEYISH_HEADER.search(name))
        if secretish:
            notes.append(
                f"kept {', '.join(secretish)} as plain headers (only one header becomes the API key); "
                "Keen redacts only the api_key value"
            )
    for key in ("command", "args", "env", "cwd"):
        if key in entry:
            notes.append(f"dropped {key!r}: it has no meaning for a remote server")
    return out


_AUTH_SCHEMES = frozenset({"bearer", "basic", "token", "digest", "dpop", "bot"})
"""HTTP authentication schemes (RFC 9110 section 11.1; IANA "HTTP Authentication Scheme
Registry", with ``DPoP`` of RFC 9449; plus GitHub's ``token`` and Discord's ``Bot``): an
Authorization value that is one of them alone has lost its key."""


def _auth_from_headers(headers: dict[str, str]) -> tuple[dict[str, Any] | None, dict[str, str]]:
    rest = dict(headers)
    auth_name = next((name for name in rest if name.lower() == "authorization"), None)
    if auth_name is not None:
        value = rest.pop(auth_name).strip()
        scheme, _, key = value.partition(" ")
        if not key.strip():
            scheme, key = "", value
        if not key:
            raise _Refused(f"the {auth_name} header is empty; set it or remove it")
        if not scheme and key.lower() in _AUTH_SCHEMES:
            raise _SchemeOnly(auth_name, key)
        return {"type": "api_key", "header": "Authorization", "scheme": scheme, "key": key.strip()}, rest
    keyish = [name for name in rest if _KEYISH_HEADER.search(name)]
    if keyish:
        name = keyish[0]
        value = rest.pop(name)
        if not value.strip():
            raise _Refused(f"the {name} header is empty; set it or remove it")
        return {"type": "api_key", "header": name, "scheme": "", "key": value}, rest
    return None, rest


def _oauth(oauth: Any) -> dict[str, Any]:
    if oauth is True:
        return {"type": "oauth"}
    if not isinstance(oauth, dict):
        raise _Refused('"oauth" must be an object (clientId, clientSecret, scopes, callbackPort)')
    out: dict[str, Any] = {"type": "oauth"}
    scopes = oauth.get("scopes")
    if isinstance(scopes, str):
        scopes = scopes.split()
    if scopes:
        if not isinstance(scopes, list) or not all(isinstance(s, str) for s in scopes):
            raise _Refused('"oauth.scopes" must be a list of strings')
        out["scopes"] = scopes
    for source_keys, target in (
        (("clientId", "client_id"), "client_id"),
        (("clientSecret", "client_secret"), "client_secret"),
        (("callbackPort", "callback_port"), "callback_port"),
    ):
        value = next((oauth[k] for k in source_keys if k in oauth), None)
        if value is not None:
            out[target] = value
    return out


def _rewrite_variables(value: Any) -> Any:
    """Map Cursor/VS Code variables to Keen's ``${VAR}``; refuse ones Keen cannot fill."""
    if isinstance(value, str):
        unfillable = _UNFILLABLE.search(value)
        if unfillable:
            raise _Refused(
                f"it uses ${{{unfillable.group(1)}}}, which only the editor can fill; replace it with an "
                "absolute path or a value (or ${ENV_VAR}) and import again"
            )
        value = _CURSOR_ENV.sub(lambda m: "${" + m.group(1) + "}", value)
        return value.replace("${userHome}", "${HOME}").replace("${/}", "/")
    if isinstance(value, dict):
        return {key: _rewrite_variables(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_rewrite_variables(item) for item in value]
    return value


class _Placeholders(dict[str, str]):
    """An environment in which every variable is set, to check an entry's structure only."""

    def get(self, key: str, default: Any = None) -> str:  # type: ignore[override]
        return "http://keen.invalid"


def _validate(name: str, entry: dict[str, Any]) -> None:
    text = json.dumps({"version": 1, "servers": {name: entry}})
    try:
        validate_config(read_json(text, source="import"), source="import", environ=_Placeholders())
    except ConfigError as exc:
        # pydantic may echo a value; none of the entry's secrets may reach the reason.
        scrub = Redactor()
        for secret in _secret_values(entry):
            scrub.add(secret)
        message = scrub.redact(exc.message.removeprefix("import: "))
        raise _Refused(f"the converted entry is not valid for Keen: {message}") from None


def _secret_values(entry: dict[str, Any]) -> list[str]:
    auth = entry.get("auth") or {}
    found = [*entry.get("env", {}).values(), *entry.get("headers", {}).values()]
    found += [auth[key] for key in ("key", "client_secret") if isinstance(auth.get(key), str)]
    url = entry.get("url")
    if isinstance(url, str) and "?" in url:
        found.append(url.partition("?")[2])  # query strings often carry keys (?api_key=...)
    return [value for value in found if isinstance(value, str)]
