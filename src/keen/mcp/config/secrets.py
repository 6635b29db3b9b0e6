"""Every secret a server's config holds goes to the redactor before anything can print it.

A stdio server's ``env`` values (after ``${VAR}`` expansion) and the credentials written
literally in its ``args`` (:func:`arg_secrets`), an HTTP server's URL userinfo and query
values, its ``headers``, its API key (raw and as the header value sent) and its OAuth
``client_secret``. Tokens Keen obtains later are registered where they are stored
(:mod:`keen.mcp.auth.store`). Values that are plainly configuration (``info``, ``true``,
numbers, file paths) are left alone: see :func:`keen._redact.looks_secret`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from keen._redact import redactor, register_value, url_secrets
from keen.mcp.config.servers import ApiKeyAuth, HttpServerConfig, OAuthAuth, StdioServerConfig

__all__ = ["arg_secrets", "register_server_secrets", "secret_name"]

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
    query values."""
    found: list[str] = []
    for i, arg in enumerate(args):
        named = _NAMED_VALUE.match(arg)
        if named is not None and not secret_name(named.group(1)):
            named = _NAMED_VALUE.match(named.group(2)) or named  # --header=Authorization: Bearer x
        if url := _URL.search(arg):  # mcp-remote https://h/mcp?key=..., --url=https://u:p@h
            found.extend(url_secrets(url.group()))
        elif named is not None:
            if secret_name(named.group(1)):
                found.append(named.group(2))
        elif (
            arg.startswith("-")
            and secret_name(arg)
            and i + 1 < len(args)
            and not args[i + 1].startswith("--")
        ):
            found.append(args[i + 1])
    return found


def register_server_secrets(config: HttpServerConfig | StdioServerConfig) -> None:
    """Register every secret ``config`` carries with the process-wide redactor."""
    if isinstance(config, StdioServerConfig):
        for value in [*config.env.values(), *arg_secrets(config.args)]:
            register_value(value)
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
