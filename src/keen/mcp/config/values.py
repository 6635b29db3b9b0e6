"""The rules for one value of a server entry in configs.json: what an HTTP header, a URL, a
process's command, argument, variable or working directory can carry.

:mod:`keen.mcp.config.servers` (the config model) checks each field with these; ``keen mcp
import`` checks header names with :func:`header_name` too. Each refusal is a ``ValueError``
saying what to change, never quoting a value that may be a secret (of a name, only what
precedes a value pasted into it: :func:`name_start`).
"""

from __future__ import annotations

import re
from typing import Any, cast
from urllib.parse import urlparse

from keen._redact import redact_url

__all__ = [
    "arguments",
    "command",
    "directory",
    "header_name",
    "header_value",
    "http_headers",
    "http_url",
    "inherited_names",
    "name_start",
    "variables",
]

# RFC 9110 section 5.1: a field name is a token; section 5.5: a field value holds no CR, LF
# or NUL (and no other control but tab). httpx2 refuses either only when it sends the
# request, and that refusal reads as the server's broken answer, with the value in it.
_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")


# Where a pasted "NAME=value", "Name: value" or "Name value" puts the value: what follows
# the first of these is never printed, and a long start is cut (it may be the key itself).
_VALUE_STARTS = re.compile(r"[=:\s\x00-\x1f\x7f]")
_SHOWN_NAME = 40


def name_start(name: str) -> str:
    """Of a name, only what comes before any value pasted into it, cut when long."""
    found = _VALUE_STARTS.search(name)
    start = name if found is None else name[: found.start()]
    return start if len(start) <= _SHOWN_NAME else start[:_SHOWN_NAME] + "..."


def _name_mistake(name: str, wrong: int, kind: str) -> str:
    """What is wrong with ``name``, such as ``a header name holds ':' after 'X-Api-Key'``: the
    character at ``wrong`` named, and the name only as :func:`name_start` shows it."""
    start, char = name_start(name), ascii(name[wrong])
    if not start or wrong == 0:
        return f"{kind} starts with {char}"
    if name[:wrong] == start:
        return f"{kind} holds {char} after {start!r}"
    return f"{kind} beginning {start!r} holds {char}"


def header_name(value: str) -> str:
    """An HTTP header name as given, checked (RFC 9110 section 5.1: a token).

    Raises:
        ValueError: it is no token; the message shows only what precedes a value pasted
            into the name (``Name: value``), never the value.
    """
    if not _HEADER_NAME.fullmatch(value):
        if not value:
            raise ValueError("a header name is empty; use letters, digits and '-' (such as \"X-Api-Key\")")
        wrong = next(i for i, char in enumerate(value) if not _HEADER_NAME.fullmatch(char))
        raise ValueError(
            f"{_name_mistake(value, wrong, 'a header name')}, which no HTTP header name can; "
            'give the name alone (such as "X-Api-Key") and put the value on the right'
        )
    return value


def header_value(value: str) -> str:
    """An HTTP header value (or an api_key's ``scheme`` or ``key``) as given, checked
    (RFC 9110 section 5.5: no CR, LF, NUL or other control but tab); the message never
    repeats it (it may be a secret)."""
    if _CONTROL.search(value):
        raise ValueError(
            "holds a line break or another control character, which an HTTP header cannot carry; "
            "remove it (a ${VAR} it reads from must hold one line)"
        )
    return value


def _env_name_wrong(name: str) -> int | None:
    """Where an environment variable name holds what the operating system ends it at
    (``=`` or NUL), or None."""
    found = re.search(r"[=\0]", name)
    return None if found is None else found.start()


def _no_nul(value: str) -> str:
    """``value`` as given when it holds no NUL: the operating system ends a program's
    arguments, variables and paths at one."""
    if "\0" in value:
        raise ValueError(
            "holds a NUL character (\\u0000), which no program argument, variable or path can; remove it"
        )
    return value


def http_headers(value: dict[str, str]) -> dict[str, str]:
    """An HTTP server's ``headers``, each name and value checked (:func:`header_name`,
    :func:`header_value`)."""
    for name, text in value.items():
        header_name(name)
        try:
            header_value(text)
        except ValueError as exc:
            raise ValueError(f"the value of {name!r} {exc}") from None
    return value


def http_url(value: str) -> str:
    """An HTTP server's ``url`` as given, checked: an http(s) URL httpx2 can send to."""
    if _CONTROL.search(value) or "\t" in value:
        # httpx2 refuses it only at the first request, as the server failing initialize.
        # A space it sends as %20 ("?team=My Team" connects), so a space is no error.
        raise ValueError("holds a tab, line break or another control character; a URL has none")
    if value != value.strip(" "):
        # httpx2 would take " http://h/mcp" for a relative URL, %20 and all.
        raise ValueError("starts or ends with a space; remove it")
    parsed = urlparse(value)
    if parsed.scheme not in ("http", "https") or not parsed.netloc:
        raise ValueError(f"{redact_url(value)!r} is not an http:// or https:// URL")
    if " " in parsed.netloc:
        raise ValueError("has a space in its host; a host name has none")
    return value


def inherited_names(value: Any) -> Any:
    """A stdio server's ``inherit_env``: ``true``, ``false`` or a list of variable names."""
    if isinstance(value, bool):
        return value
    if not isinstance(value, list):
        raise ValueError('must be true, false or a list of variable names such as ["AWS_PROFILE"]')
    for name in cast("list[Any]", value):
        if not isinstance(name, str) or not name:
            raise ValueError(
                f"{name!r} is not an environment variable name; list names such as "
                '"AWS_PROFILE", or use true to pass every variable'
            )
        if (wrong := _env_name_wrong(name)) is not None:
            raise ValueError(
                f"{_name_mistake(name, wrong, 'a variable name')}; list names alone such as "
                '"AWS_PROFILE", or use true to pass every variable'
            )
    return value


def command(value: str) -> str:
    """A stdio server's ``command``: not blank, no NUL."""
    if not value.strip():
        raise ValueError('is blank; set it to the server\'s executable (put its arguments in "args")')
    return _no_nul(value)


def arguments(value: list[str]) -> list[str]:
    """A stdio server's ``args``: no NUL in any."""
    for arg in value:
        _no_nul(arg)
    return value


def variables(value: dict[str, str]) -> dict[str, str]:
    """A stdio server's ``env``: names without ``=`` or NUL, values without NUL."""
    for name, text in value.items():
        if (wrong := _env_name_wrong(name)) is not None:
            raise ValueError(
                f'{_name_mistake(name, wrong, "an env name")}; put the value on the right ("API_TOKEN": "...")'
            )
        try:
            _no_nul(text)
        except ValueError as exc:
            raise ValueError(f"the value of {name_start(name)!r} {exc}") from None
    return value


def directory(value: str | None) -> str | None:
    """A stdio server's ``cwd``: absent, or not blank and without NUL."""
    if value is not None and not value.strip():
        raise ValueError("is blank; set the server's working directory, or remove the field")
    return value if value is None else _no_nul(value)
