"""Every secret a server's config holds goes to the redactor before anything can print it.

A stdio server's ``env`` values (after ``${VAR}`` expansion) and the credentials written
literally in its ``args`` (:func:`arg_secrets`), an HTTP server's URL userinfo and query
values, its ``headers``, its API key (raw and as the header value sent) and its OAuth
``client_secret``. Tokens Keen obtains later are registered where they are stored
(:mod:`keen.mcp.auth.store`). Values that are plainly configuration (``info``, ``true``,
numbers, file paths) are left alone: see :func:`keen._redact.looks_secret`.

:func:`secrets_in_clear` finds, in a configs.json as written, the credentials written in
clear rather than as ``${VAR}`` references (what a file others can read must not hold).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, cast

from keen._redact import REDACTED, Redactor, looks_secret, redactor, register_value, url_secrets
from keen.mcp.config.servers import (
    VAR_REFERENCE,
    ApiKeyAuth,
    HttpServerConfig,
    OAuthAuth,
    StdioServerConfig,
)
from keen.mcp.config.values import name_start

__all__ = [
    "arg_secret_references",
    "arg_secrets",
    "hide_arg_secrets",
    "register_server_secrets",
    "secret_name",
    "secrets_in_clear",
]

# A word of a name (a flag, a header, an environment variable) saying its value is a credential...
_SECRET_WORD = re.compile(
    r"token|secret|passw(?:or)?d|pwd|pass|apikey|auth(?:orization)?|credentials?|cookie|bearer|pat"
)
# ...as "key" does alone (--key) or after one of these (--api-key, ACCESS_KEY; not --sort-key)...
_KEY_KIND = re.compile(r"api|access|secret|private|client|master|license|signing|auth|encryption")
# ...unless the last word names something about the credential rather than the credential itself.
_ABOUT_WORD = re.compile(r"file|path|dir|env|var|name|type|mode|method|scheme|header|url|uri|id")
_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://\S+")
# --flag=VALUE, Header: VALUE, NAME=VALUE (docker's -e NAME=VALUE).
_NAMED_VALUE = re.compile(r"^\s*(-{0,2}[A-Za-z][A-Za-z0-9_.-]*)\s*[:=]\s*(\S.*?)\s*$", re.DOTALL)
# The next word is a flag, not the value of the one before (`-----BEGIN KEY-----` and
# `-abc123` are values).
_FLAG = re.compile(r"--[A-Za-z]|-[A-Za-z]\Z")
# An environment variable's name as a shell writes it: GITHUB_TOKEN=... names its own variable.
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# A value written as a reference (`--api-key ${MYKEY}`, `${KEY:-x}`): configs.json expands it
# when it loads, so it is no credential of its own to hide or to move into a variable.
_REFERENCE = re.compile(r"\$\{[^{}]+\}")
# A number this long after a secret-named flag is a key (`--api-key 84736251908473625190`),
# not a setting such as `--token-limit 8000`.
_LONG_NUMBER = re.compile(r"\d{12,}")
# What a value starts with when the credential is the rest (`Authorization: Bearer <token>`).
_SCHEMES = ("bearer ", "basic ", "token ", "bot ")


def _shown_secret(value: str) -> bool:
    """Whether a value a secret name stands for is shown hidden: :func:`looks_secret`, or a
    long number; never a ``${VAR}`` reference."""
    if _REFERENCE.fullmatch(value.strip()):
        return False
    return looks_secret(value) or _LONG_NUMBER.fullmatch(value.strip()) is not None


def secret_name(name: str) -> bool:
    """Whether a flag or variable name says its value is a credential (``--api-key``,
    ``GITHUB_TOKEN``, ``apiKey``; not ``--key-file``)."""
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", name.strip("-"))  # apiKey: api_Key
    words = [w for w in re.split(r"[-_.]+", spaced.lower()) if w]
    if not words or _ABOUT_WORD.fullmatch(words[-1]):
        return False
    if any(_SECRET_WORD.fullmatch(w) for w in words):
        return True
    return any(w == "key" and (i == 0 or _KEY_KIND.fullmatch(words[i - 1])) for i, w in enumerate(words))


def arg_secrets(args: Sequence[str]) -> list[str]:
    """The values in a command line that its own words say are credentials: the one after
    a flag such as ``--api-key``, ``--token`` or ``--password``; the value of
    ``--password=VALUE``; of a header ``Authorization: Bearer x`` (alone or after ``-H``);
    of ``NAME=VALUE`` when NAME says secret (``GITHUB_TOKEN=...``); a URL's userinfo and
    query values. Every such value, for the redactor (which judges them itself:
    :func:`keen._redact.register_value`)."""
    return [value for _, _, _, values in _credentials(args, shown=False) for value in values]


def _credentials(args: Sequence[str], *, shown: bool) -> Iterator[tuple[int, int, int, list[str]]]:
    """Where a command line's own words say it holds credentials: ``(index, start, end,
    values)``, each of ``values`` a credential within ``args[index][start:end]`` (a URL's
    userinfo and query values within the URL; else the slice is the value itself).

    The one walk :func:`arg_secrets` and :func:`hide_arg_secrets` share. ``shown`` is what
    differs: for display, a value counts only when :func:`keen._redact.looks_secret` (not
    ``--token-limit 8000``, ``--auth none``), and the word after a secret flag is no value
    when it is itself a flag (``--verbose``, ``-v``); for the redactor, every value counts (it
    judges them itself), and only a ``--`` word is taken for a flag (``-v`` is registered,
    which shows it nowhere).
    """
    keep = _shown_secret if shown else _anything
    for i, arg in enumerate(args):
        if url := _URL.search(arg):  # mcp-remote https://h/mcp?key=..., --url=https://u:p@h
            yield i, url.start(), url.end(), url_secrets(url.group())
            continue
        named = _NAMED_VALUE.match(arg)
        if named is not None:
            if secret_name(named.group(1)) and keep(named.group(2)):
                yield i, named.start(2), named.end(2), [named.group(2)]
            elif (
                (inner := _NAMED_VALUE.match(named.group(2))) is not None  # --header=Authorization: Bearer x
                and secret_name(inner.group(1))
                and keep(inner.group(2))
            ):
                at = named.start(2)
                yield i, at + inner.start(2), at + inner.end(2), [inner.group(2)]
            continue
        if arg.startswith("-") and secret_name(arg) and i + 1 < len(args):
            value = args[i + 1]  # the value of `--api-key VALUE`
            flag = _FLAG.match(value) if shown else value.startswith("--")
            if not flag and keep(value):
                yield i + 1, 0, len(value), [value]


def _anything(_value: str) -> bool:
    return True


def register_server_secrets(config: HttpServerConfig | StdioServerConfig) -> None:
    """Register every secret ``config`` carries with the process-wide redactor: a stdio
    server's ``command`` too when it holds spaces (a whole command line in one word, as
    ``keen mcp add NAME -- 'npx srv --api-key KEY'`` writes it: the error that it was not
    found quotes it)."""
    if isinstance(config, StdioServerConfig):
        words = list(config.args)
        if " " in config.command.strip():
            try:
                words += shlex.split(config.command)
            except ValueError:  # unbalanced quotes
                words += config.command.split()
        for value in [*config.env.values(), *arg_secrets(words)]:
            register_value(value)
        for value in arg_secrets(words):
            if _LONG_NUMBER.fullmatch(
                value.strip()
            ):  # a numeric key: register_value takes numbers for settings
                redactor.add(value.strip())
        return
    for secret in url_secrets(config.url):
        redactor.add(secret)
    for value in config.headers.values():
        redactor.add(value)
        register_value(value)
    auth = config.auth
    if isinstance(auth, ApiKeyAuth):
        redactor.add(auth.key)
        redactor.add(auth.header_value())
    elif isinstance(auth, OAuthAuth):
        redactor.add(auth.client_secret)


def hide_arg_secrets(args: Sequence[str], env: Mapping[str, str]) -> list[str]:
    """``args`` for display, each credential replaced by ``[REDACTED]`` where it stands: the
    word after a flag whose name says secret (``--api-key VALUE``), the VALUE of
    ``NAME=VALUE`` or ``Header: VALUE`` when NAME says secret (``GITHUB_TOKEN=...``,
    ``--header=Authorization: Bearer x``), each when :func:`keen._redact.looks_secret` (not
    ``--token-limit 8000``, ``--auth none``), a URL's userinfo and query values; then the
    redactor's pattern rules (``Bearer <token>``, ``https://user:pass@host``) and the values
    of ``env`` variables whose name says secret, where an arg repeats one.

    Only this server's own words count, and by position: a value registered for any server
    (``prod`` of ``NODE_ENV``, ``github`` after ``--auth-provider``) hid itself inside every
    other arg (``@acme/[REDACTED]ucts-mcp``).
    """
    local = Redactor()
    for name, value in env.items():
        if secret_name(name):
            local.add(value)
    found: dict[int, list[tuple[int, int, list[str]]]] = {}
    for i, start, end, values in _credentials(args, shown=True):
        found.setdefault(i, []).append((start, end, values))
    shown: list[str] = []
    for i, arg in enumerate(args):
        spans = found.get(i, [])
        if any(end - start == len(arg) and values == [arg] for start, end, values in spans):
            shown.append(REDACTED)  # the value of `--api-key VALUE`, whole
            continue
        for start, end, values in spans:  # one at most: an arg's own words name one place
            piece = arg[start:end]
            for secret in sorted(values, key=len, reverse=True):
                piece = piece.replace(secret, REDACTED)
            arg = arg[:start] + piece + arg[end:]
        shown.append(local.redact(arg))
    return shown


def arg_secret_references(args: Sequence[str], prefix: str) -> tuple[list[str], list[str], dict[str, str]]:
    """``args`` with each credential :func:`hide_arg_secrets` would hide replaced by a
    ``${VAR}`` reference (expanded when configs.json is loaded: README "Configure servers"),
    the names of those variables, in order, and, for a variable that must hold more than a
    bare key, what (``Bearer <token>``, ``user:password``): what to suggest instead of a
    command line that holds a key. A value already written as ``${VAR}`` stays as it is; a
    word that still shows hidden after that (a ``Bearer <token>`` after a header of any name)
    is replaced whole (a ``Name: value`` keeps its name).

    A ``NAME=VALUE`` word keeps its own name (``GITHUB_TOKEN=${GITHUB_TOKEN}``); the value of
    a flag or header is named after it, under ``prefix`` (``--api-key`` of server ``files``:
    ``${FILES_API_KEY}``); a URL's credentials ``<PREFIX>_URL_SECRET``. A name used twice gets
    ``_2``, ``_3``...
    """
    names: list[str] = []
    holds: dict[str, str] = {}

    def what(secret: str) -> None:
        # Said for the variable just named: the whole value goes in it, not the token alone.
        if secret.strip().lower().startswith(_SCHEMES):
            holds[names[-1]] = f"the whole `{secret.strip().split(' ', 1)[0]} <token>` value"
        elif ":" in secret:
            holds[names[-1]] = "user:password"

    def reference(label: str, *, own: bool = False) -> str:
        base = label if own else re.sub(r"[^A-Za-z0-9]+", "_", f"{prefix}_{label}").strip("_").upper()
        base = base if _ENV_NAME.fullmatch(base) else f"_{base}"  # a name may not start with a digit
        name, n = base, 1
        while name in names:
            n += 1
            name = f"{base}_{n}"
        names.append(name)
        return "${" + name + "}"

    out = list(args)
    for i, start, end, values in _credentials(args, shown=True):
        arg = args[i]
        piece = arg[start:end]
        if _URL.search(arg):
            # In the URL's order; of two at one place, the longer (user:password before password).
            for secret in sorted(values, key=lambda v: (piece.find(v), -len(v))):
                if secret in piece:  # a user:password pair holds the password: one reference
                    piece = piece.replace(secret, reference("url_secret"))
                    what(secret)
        elif (named := _NAMED_VALUE.match(arg)) is not None:
            inner = _NAMED_VALUE.match(named.group(2)) if not secret_name(named.group(1)) else None
            label = (inner or named).group(1)
            piece = reference(label, own=inner is None and _ENV_NAME.fullmatch(label) is not None)
            what(values[0])
        else:  # the value of `--api-key VALUE`
            piece = reference(args[i - 1])
            what(values[0])
        out[i] = arg[:start] + piece + arg[end:]
    for i, arg in enumerate(out):
        probe = _REFERENCE.sub("", arg)  # the references made above hide nothing
        if hide_arg_secrets([probe], {}) == [probe]:
            continue
        # Still hidden by the redactor's own rules (`X-Custom: Bearer <token>`): never pasted back.
        named = _NAMED_VALUE.match(arg)
        if named is not None:
            out[i] = arg[: named.start(2)] + reference(named.group(1)) + arg[named.end(2) :]
            what(named.group(2))
        else:
            out[i] = reference(args[i - 1] if i and args[i - 1].startswith("-") else "arg")
            what(arg)
    return out, names, holds


# What is left of a value once its ${VAR} references are taken out may end in the scheme
# that preceded one ("Bearer ${TOKEN}"): a scheme alone is no credential.
_BARE_SCHEME = re.compile(r"(?i)\b(?:bearer|basic|token|bot)\s*$")
# ...or a URL's user name whose password was the reference (https://me:${PASS}@host).
_BARE_USER = re.compile(r"(?<=://)[^/\s@?#:]*:@")
# Only the pattern rules (no secret registered): a URL's query values are no credentials
# unless their names say so ("?team=acme"), where url_secrets takes every one for a secret.
_PATTERNS_ONLY = Redactor()


def _unreferenced(text: str) -> str:
    """``text`` as the file itself holds it: each ``${VAR}`` reference taken out, but the
    default of a ``${VAR:-default}`` kept as written (``${GITHUB_TOKEN:-ghp_...}`` holds a
    token in clear, used whenever the variable is unset)."""
    if not _REFERENCE.search(text):
        return text
    held = _REFERENCE.sub("", VAR_REFERENCE.sub(lambda found: found.group(2) or "", text))
    return _BARE_USER.sub("", _BARE_SCHEME.sub("", held))


def _in_clear(words: Sequence[str]) -> bool:
    """Whether a command line (or one ``NAME=VALUE`` or ``Header: value`` word) holds a
    credential written in clear: what :func:`hide_arg_secrets` hides once its ``${VAR}``
    references are taken out, a URL only where the pattern rules find one."""
    probe = [_unreferenced(word) for word in words]
    for word, shown in zip(probe, hide_arg_secrets(probe, {}), strict=True):
        if shown != word and (not _URL.search(word) or _PATTERNS_ONLY.redact(word) != word):
            return True
    return False


def secrets_in_clear(raw: Any) -> list[tuple[str, str]]:
    """Where configs.json as written holds a credential in clear rather than as a ``${VAR}``
    reference (README "Configure servers": a key belongs in the environment).

    Judged as everywhere else: an ``auth.key`` or ``client_secret`` written at all; an
    ``env`` value, a header or an ``args`` word as :func:`hide_arg_secrets` hides it (the
    value of a name that says secret, ``Bearer <token>``, a URL's userinfo or a query value
    whose name says secret). The default of a ``${VAR:-default}`` is written in the file,
    so it is judged as the rest of the text.

    Args:
        raw: the parsed JSON of configs.json, ``${VAR}`` not expanded
            (:func:`keen.mcp.config.servers.read_json`); anything else holds nothing.

    Returns:
        ``(server, field)`` pairs such as ``("files", "env.GITHUB_TOKEN")``, in file order,
        never the values; a name (of a variable or header) only as far as
        :func:`keen.mcp.config.values.name_start` shows it.
    """
    servers = raw.get("servers") if isinstance(raw, dict) else None
    if not isinstance(servers, dict):
        return []
    found: list[tuple[str, str]] = []
    for server, entry in cast("dict[str, Any]", servers).items():
        if isinstance(entry, dict):
            found += [(server, field) for field in _fields_in_clear(cast("dict[str, Any]", entry))]
    return found


def _fields_in_clear(entry: dict[str, Any]) -> list[str]:
    fields: list[str] = []
    command, args, url = entry.get("command"), entry.get("args"), entry.get("url")
    if isinstance(command, str) and " " in command.strip():  # a whole command line in one word
        try:
            words = shlex.split(command)
        except ValueError:  # unbalanced quotes
            words = command.split()
        if _in_clear(words):
            fields.append("command")
    if isinstance(args, list) and _in_clear([arg for arg in cast("list[Any]", args) if isinstance(arg, str)]):
        fields.append("args")
    if isinstance(url, str) and _in_clear([url]):
        fields.append("url")
    for table, join in (("env", "="), ("headers", ": ")):
        values = entry.get(table)
        if isinstance(values, dict):
            fields += [
                f"{table}.{name_start(name)}"
                for name, value in cast("dict[str, Any]", values).items()
                if isinstance(value, str) and _in_clear([f"{name}{join}{value}"])
            ]
    auth = entry.get("auth")
    if isinstance(auth, dict):
        for key in ("key", "client_secret"):
            value = cast("dict[str, Any]", auth).get(key)
            if isinstance(value, str) and _unreferenced(value).strip():
                fields.append(f"auth.{key}")
    return fields
