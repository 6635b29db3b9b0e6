"""configs.json: the MCP servers a user configured (version 1; docs/architecture.md "Configuration").

Shape::

    {"version": 1,
     "servers": {
       "deepwiki": {"transport": "streamable_http", "url": "https://...", "auth": {"type": "none"}},
       "internal": {"transport": "streamable_http", "url": "https://...",
                    "auth": {"type": "api_key", "header": "Authorization", "scheme": "Bearer",
                             "key": "${INTERNAL_KEY}"}},
       "github":   {"transport": "streamable_http", "url": "https://...",
                    "auth": {"type": "oauth", "scopes": ["repo"]}},
       "files":    {"transport": "stdio", "command": "npx", "args": ["..."], "env": {"K": "v"},
                    "cwd": "/tmp", "timeouts": {"connect": 15, "list_tools": 30, "call_tool": 120},
                    "enabled": false}}}

Rules: a supported ``version``; server names ``^[A-Za-z0-9_-]{1,64}$``,
no two differing only in case, none given twice;
``transport`` is ``streamable_http``, ``stdio`` (inferred from ``url``/``command``
when absent) or ``sse`` (the deprecated HTTP+SSE transport of MCP 2024-11-05, for servers
that offer nothing newer); HTTP servers need an http(s) ``url``; ``auth.type`` is ``none``,
``api_key`` (needs ``key``) or ``oauth``; stdio servers need ``command`` and take no
HTTP auth. Strings may use ``${VAR}`` and ``${VAR:-default}``; an unset variable
without a default is an error. What no HTTP header or process can carry is refused by
field, its value never quoted (of a name, only what precedes a value pasted into it): a
``url`` with a control character or tab (a space inside it is sent as ``%20``), header
names that are no token, control characters in header values and keys, ``env`` names with
``=`` (an empty one is skipped with a warning), NUL in a stdio server's strings, a blank
``cwd``, a lone surrogate; and a file nested deeper than :data:`MOST_LEVELS`. A missing file means no servers. Every failure is
a :class:`~keen.errors.ConfigError` naming the server and field (and line/column for
broken JSON). The rules for one field's value are :mod:`keen.mcp.config.values`.
"""

from __future__ import annotations

import difflib
import json
import logging
import os
import re
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal, Self, cast

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    StrictBool,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from keen._fs import LONE_SURROGATE, BrokenLink, atomic_write_json, link_target
from keen._redact import register_value
from keen.errors import ConfigError
from keen.mcp.config import values
from keen.mcp.config.defaults import default_connect_timeout
from keen.mcp.types import SERVER_NAME_RE

if TYPE_CHECKING:
    import httpx2

__all__ = [
    "MOST_LEVELS",
    "SERVER_NAME_PATTERN",
    "SUPPORTED_VERSIONS",
    "VAR_REFERENCE",
    "ApiKeyAuth",
    "AuthFactory",
    "HttpServerConfig",
    "MCPConfig",
    "NoAuth",
    "OAuthAuth",
    "ServerConfig",
    "StdioServerConfig",
    "Timeouts",
    "config_file",
    "declared_kinds",
    "misspelling_of",
    "neither_command_nor_url",
    "nested_too_deep",
    "object_pairs",
    "read_json",
    "repeated_keys",
    "save_config",
    "too_deep",
    "validate_config",
]

SUPPORTED_VERSIONS = (1,)

logger = logging.getLogger(__name__)
_NOTED: set[str] = set()


class _JsonObject(dict[str, Any]):
    """A parsed JSON object that remembers the keys its text gave more than once."""

    repeated: tuple[str, ...] = ()


def object_pairs(pairs: Iterable[tuple[str, Any]]) -> dict[str, Any]:
    """``object_pairs_hook`` for ``json.loads`` (and json5): the object as plain JSON reads
    it (the last of repeated keys wins), remembering the repeated keys for
    :func:`repeated_keys`, so a second server of the same name is not lost unseen."""
    pairs = list(pairs)
    obj = _JsonObject(pairs)
    if len(obj) < len(pairs):
        counts: dict[str, int] = {}
        for key, _ in pairs:
            counts[key] = counts.get(key, 0) + 1
        obj.repeated = tuple(key for key, count in counts.items() if count > 1)
    return obj


def repeated_keys(obj: Any) -> tuple[str, ...]:
    """The keys a JSON object parsed with :func:`object_pairs` had more than once (else ``()``)."""
    return obj.repeated if isinstance(obj, _JsonObject) else ()


SERVER_NAME_PATTERN = SERVER_NAME_RE  # the one definition, in keen.mcp.types
VAR_REFERENCE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")
"""A ``${VAR}`` or ``${VAR:-default}`` reference in a configs.json string: the variable's
name, and the default as written (``None`` when there is none)."""


class _Model(BaseModel):
    # defer_build: pydantic builds a model's validator at its first validation, not when the
    # class is defined (about 50 ms of CPU for these models): a session with no configs.json
    # (EMPTY) never validates one.
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)


class Timeouts(_Model):
    """Per-server timeouts in seconds: connect+initialize, the whole tools/list, one tools/call.

    ``connect`` defaults to ``KEEN_MCP_TIMEOUT``, else config.toml's ``[mcp] timeout``, else 15
    (:mod:`keen.mcp.config.defaults`), read when the entry is loaded."""

    # Finite: 1e400 reads as infinity, which no timer takes and JSON cannot write back.
    connect: float = Field(default_factory=default_connect_timeout, gt=0, allow_inf_nan=False)
    list_tools: float = Field(default=30.0, gt=0, allow_inf_nan=False)
    call_tool: float = Field(default=120.0, gt=0, allow_inf_nan=False)


class NoAuth(_Model):
    """No credentials (``{"type": "none"}``, an HTTP server's default ``auth``)."""

    type: Literal["none"] = "none"


class ApiKeyAuth(_Model):
    """Custom header auth (not MCP OAuth): sends ``<header>: <scheme> <key>``, or the raw key
    when ``scheme`` is empty."""

    type: Literal["api_key"]
    header: str = Field(default="Authorization", min_length=1)
    scheme: str = "Bearer"
    key: str = Field(min_length=1, repr=False)
    _key_from: tuple[str, ...] = PrivateAttr(default=())

    @field_validator("header")
    @classmethod
    def _name(cls, value: str) -> str:
        return values.header_name(value)

    @field_validator("scheme", "key")
    @classmethod
    def _one_line(cls, value: str) -> str:
        return values.header_value(value)

    def header_value(self) -> str:
        return f"{self.scheme} {self.key}" if self.scheme else self.key

    @property
    def key_from(self) -> tuple[str, ...]:
        """The environment variables ``key`` was expanded from (``"${KEEN_DOCS_TOKEN}"`` in
        configs.json: ``("KEEN_DOCS_TOKEN",)``), their names only, never their values: what a
        refused key's hint names. ``()`` for a key written literally or given in code."""
        return self._key_from


class OAuthAuth(_Model):
    """MCP-standard OAuth (2025-11-25 authorization spec); tokens live in ``mcp/auth/``."""

    type: Literal["oauth"]
    scopes: list[str] = Field(default_factory=list)
    client_id: str | None = None
    client_secret: str | None = Field(default=None, repr=False)
    callback_port: int = Field(default=1456, ge=1, le=65535)
    client_metadata_url: str | None = None
    """An https URL (not the root path) of a client ID metadata document, used as the client_id
    where the authorization server supports it instead of dynamic registration."""


AuthConfig = Annotated[NoAuth | ApiKeyAuth | OAuthAuth, Field(discriminator="type")]


class _ServerBase(_Model):
    enabled: bool = True
    timeouts: Timeouts = Field(default_factory=Timeouts)
    description: str | None = None
    pinning: Literal["quarantine", "warn", "off"] | None = None  # None: see keen.trust.pins.pinning_policy
    trust_annotations: bool = False
    """Take the server's tool annotations (``readOnlyHint``...) as true: see keen.trust.pins.pinned_view."""


class HttpServerConfig(_ServerBase):
    """A remote server: Streamable HTTP, or with ``transport: "sse"`` the HTTP+SSE transport
    of MCP 2024-11-05 (deprecated since 2025-03-26; still the only one some hosted servers speak)."""

    transport: Literal["streamable_http", "sse"]
    url: str
    auth: AuthConfig = Field(default_factory=NoAuth)
    headers: dict[str, str] = Field(default_factory=dict)

    @field_validator("headers")
    @classmethod
    def _http_headers(cls, value: dict[str, str]) -> dict[str, str]:
        return values.http_headers(value)

    @field_validator("url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        return values.http_url(value)

    @property
    def auth_type(self) -> str:
        return self.auth.type


class StdioServerConfig(_ServerBase):
    """A local server Keen starts and talks to over its stdin and stdout (MCP 2025-11-25
    "Transports > stdio"): ``command`` with ``args``, in ``cwd``, given ``env`` and the
    variables ``inherit_env`` names (README "Configure servers")."""

    transport: Literal["stdio"]
    command: str  # blank or empty: values.command says what to set
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    cwd: str | None = None
    inherit_env: StrictBool | list[str] = False
    """Variables of Keen's environment the server gets beyond the minimal set
    (:func:`keen.mcp.connection.spawn.server_environment`): a list of names, or ``true`` for all."""

    @field_validator("inherit_env", mode="before")
    @classmethod
    def _variable_names(cls, value: Any) -> Any:
        return values.inherited_names(value)

    @field_validator("command")
    @classmethod
    def _non_blank(cls, value: str) -> str:
        return values.command(value)

    @field_validator("args")
    @classmethod
    def _arguments(cls, value: list[str]) -> list[str]:
        return values.arguments(value)

    @field_validator("env")
    @classmethod
    def _variables(cls, value: dict[str, str]) -> dict[str, str]:
        return values.variables(value)

    @field_validator("cwd")
    @classmethod
    def _directory(cls, value: str | None) -> str | None:
        return values.directory(value)

    @property
    def auth_type(self) -> str:
        return "none"


ServerConfig = Annotated[HttpServerConfig | StdioServerConfig, Field(discriminator="transport")]

AuthFactory = Callable[[str, HttpServerConfig, OAuthAuth, bool], "tuple[httpx2.Auth, bool]"]
"""``(server, config, oauth, interactive) -> (auth, has_token)``: builds the OAuth ``httpx2.Auth``
for an ``oauth`` server, as :class:`keen.mcp.Manager` takes it. A factory that also has a
parameter named ``config_name`` (a keyword can fill it) is given the Manager's (where its
server entries are, as a sign-in's fixes name them); any other, a ``**kwargs`` alone
included, is called with the four arguments."""


class MCPConfig(_Model):
    """A whole, validated configs.json. ``servers`` keeps file order.

    Validated from a file's JSON with ``context={"source": ..., "environ": ...}``
    (:func:`keen.mcp.config.parse_config`), the model first applies the file-level rules with their own
    messages, expands ``${VAR}`` and infers each server's ``transport``; without that
    context (``MCPConfig(...)`` in code) it is a plain model.
    """

    version: int = 1
    servers: dict[str, ServerConfig] = Field(default_factory=dict)
    invalid: dict[str, str] = Field(default_factory=dict)
    """Server entries that failed validation, by name: the message says what is wrong and the
    fix. Only filled by ``strict=False`` loading; those servers are not in ``servers``."""
    invalid_kinds: dict[str, tuple[str, str]] = Field(default_factory=dict)
    """``(transport, auth type)`` of each :attr:`invalid` entry as far as its fields still say
    (:func:`declared_kinds`), for status displays."""
    _text: str | None = PrivateAttr(default=None)

    @property
    def source_text(self) -> str | None:
        """The configs.json text this whole config was validated from
        (:func:`keen.mcp.config.load_config`, or :func:`keen.mcp.config.parse_config` given
        text); None when it was built in code, from an object, or changed since (a copy, an
        entry reloaded). What :func:`keen.mcp.config.remember_valid` records, rather than
        the file's text read again, which may have changed since."""
        return self._text

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> Self:
        """A copy (pydantic's), with no :attr:`source_text`: it may no longer say what the text says."""
        copy = super().model_copy(update=update, deep=deep)
        copy._text = None
        return copy

    def from_text(self, text: str) -> MCPConfig:
        """This config, recorded as validated from ``text`` (:attr:`source_text`): for the
        parser that just read it from that very text, and no one else."""
        self._text = text
        return self

    @model_validator(mode="before")
    @classmethod
    def _from_file(cls, raw: Any, info: ValidationInfo) -> Any:
        # ConfigError is not a ValueError: pydantic lets it through unchanged, so these
        # rules keep their file-level messages and attributes.
        context = info.context or {}
        if "source" not in context:
            return raw
        source: str = context["source"]
        environ: Any = context.get("environ", os.environ)
        if not isinstance(raw, dict):
            raise ConfigError(
                f'{source}: the top level must be an object like {{"version": 1, "servers": {{}}}}',
                path=source,
            )
        version = raw.get("version")
        if version not in SUPPORTED_VERSIONS:
            raise ConfigError(
                f"{source}: unsupported version {version!r}; this Keen reads version "
                f'{", ".join(map(str, SUPPORTED_VERSIONS))}: set "version": 1',
                path=source,
                field="version",
            )
        unknown = sorted(set(raw) - {"version", "servers"})
        if unknown:
            raise ConfigError(
                f'{source}: unknown top-level field {unknown[0]!r}; only "version" and "servers" are allowed',
                path=source,
                field=unknown[0],
            )
        servers_raw = raw.get("servers", {})
        if not isinstance(servers_raw, dict):
            raise ConfigError(
                f'{source}: "servers" must be an object mapping names to server entries',
                path=source,
                field="servers",
            )
        strict: bool = context.get("strict", True)
        # Which ${VAR}s each api_key's "key" reads: expansion keeps only their values, and a
        # refused key's hint names the variable (_key_sources sets it on the model).
        context["key_from"] = key_from = dict[str, tuple[str, ...]]()
        twice = set(repeated_keys(servers_raw))
        servers: dict[str, Any] = {}
        invalid: dict[str, str] = {}
        kinds: dict[str, tuple[str, str]] = {}
        folded: dict[str, str] = {}
        for name, entry in servers_raw.items():
            try:
                other = folded.setdefault(name.lower(), name)
                if other != name:
                    # Their skill dirs mcp:<name> would be one dir on a case-insensitive file system.
                    raise ConfigError(
                        f"{source}: server names {other!r} and {name!r} differ only in case; rename one "
                        "(each server's skill is the directory mcp:<name>, and on macOS and Windows those "
                        "two would be the same directory)",
                        path=source,
                        server=name,
                        field="name",
                    )
                if name in twice:
                    # Plain JSON keeps the last entry: the first would be dropped without a word.
                    raise ConfigError(
                        f"{source}: server {name!r} is defined twice; keep one of the two entries "
                        "(only the last would be used)",
                        path=source,
                        server=name,
                        field="name",
                    )
                prepared = _prepare_server(name, entry, source=source, environ=environ)
                key_from[name] = _key_variables(entry)
                if strict:
                    servers[name] = prepared
                    continue
                # One entry at a time, so its error stays its own (plain model: no file context).
                try:
                    servers[name] = MCPConfig.model_validate({"servers": {name: prepared}}).servers[name]
                except ValidationError as exc:
                    raise _config_error_from(exc, source=source) from None
            except ConfigError as exc:
                if strict:
                    raise
                invalid[name] = exc.message
                kinds[name] = declared_kinds(entry)
        return {"version": version, "servers": servers, "invalid": invalid, "invalid_kinds": kinds}

    @model_validator(mode="after")
    def _key_sources(self, info: ValidationInfo) -> Self:
        # Set on the validated models: a private attribute, so configs.json cannot write it.
        for name, names in ((info.context or {}).get("key_from") or {}).items():
            entry = self.servers.get(name)
            if names and isinstance(entry, HttpServerConfig) and isinstance(entry.auth, ApiKeyAuth):
                entry.auth._key_from = names  # pyright: ignore[reportPrivateUsage]
        return self

    def raise_for_invalid(self) -> MCPConfig:
        """Raise the first server's configuration error, if any server is :attr:`invalid`.

        Returns:
            ``self`` when every server entry is valid.

        Raises:
            ConfigError: naming the first invalid server and what to fix.
        """
        for name, message in self.invalid.items():
            raise ConfigError(message, server=name)
        return self


def read_json(text: str, *, source: str) -> Any:
    """configs.json's text as data (keys kept in order, repeats noted for the validator).

    Raises:
        ConfigError: invalid JSON, with the line and column to fix, or JSON nested too
            deep to read.
    """
    try:
        data = json.loads(text, object_pairs_hook=object_pairs)
    except json.JSONDecodeError as exc:
        raise ConfigError(
            f"{source}: invalid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}; fix the syntax there",
            path=source,
            line=exc.lineno,
            column=exc.colno,
        ) from exc
    except RecursionError:
        raise ConfigError(too_deep(source), path=source) from None
    if nested_too_deep(data):
        raise ConfigError(too_deep(source), path=source)
    return data


MOST_LEVELS = 300
"""How deep configs.json or a host's file may nest: a server entry needs five levels, and
Python's parser stops near a thousand. From about 490 levels (two frames a level of
``${VAR}`` expansion under the default recursion limit of 1000, less what the caller's stack
holds) the checks after the parser run out of recursion, a traceback instead of a fix; 300
leaves the deepest caller (``keen serve``'s event loop) room. Below it a file that is too
deep for its fields is only its server's error."""


def nested_too_deep(value: Any) -> bool:
    """Whether parsed JSON nests more than :data:`MOST_LEVELS` arrays and objects deep
    (walked without recursion, so any depth the parser gave can be measured)."""
    level = [value]
    for _ in range(MOST_LEVELS):
        level = [
            inner
            for outer in level
            if isinstance(outer, dict | list)
            for inner in (outer.values() if isinstance(outer, dict) else outer)  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
        ]
        if not level:
            return False
    return any(isinstance(outer, dict | list) for outer in level)


def too_deep(source: str) -> str:
    """Why JSON nested deeper than :data:`MOST_LEVELS` is refused, and the fix."""
    return (
        f"{source}: the JSON is nested more than {MOST_LEVELS} levels deep (brackets inside brackets); "
        "a server entry needs a few: look for a run of [ or { and remove it"
    )


def validate_config(
    raw: Any, *, source: str = "configs.json", environ: Mapping[str, str] | None = None, strict: bool = True
) -> MCPConfig:
    """Validate data in configs.json's own shape (the rules are in the module docstring);
    :func:`keen.mcp.config.parse_config` also takes other hosts' ``{"mcpServers": ...}``.

    Raises:
        ConfigError: (``strict``) an invalid entry, or data that is no configs.json at all.
    """
    env = os.environ if environ is None else environ
    try:
        return MCPConfig.model_validate(raw, context={"source": source, "environ": env, "strict": strict})
    except ValidationError as exc:
        raise _config_error_from(exc, source=source) from None


def declared_kinds(entry: Any) -> tuple[str, str]:
    """``(transport, auth type)`` that a server entry declares, valid or not: the transport as
    written or inferred from ``url``/``command`` (as :func:`keen.mcp.config.parse_config` infers it), the auth
    ``type`` (``none`` when absent). ``-`` where the entry says nothing, ``invalid`` where what
    it says is no known value."""
    if not isinstance(entry, dict):
        return "invalid", "invalid"
    fields = cast("dict[str, Any]", entry)
    transport: Any = fields.get("transport") or (
        "streamable_http" if "url" in fields else "stdio" if "command" in fields else "-"
    )
    if transport not in ("streamable_http", "stdio", "sse", "-"):
        transport = "invalid"
    auth: Any = fields.get("auth", {"type": "none"})
    kind: Any = auth.get("type", "none") if isinstance(auth, dict) else None
    if kind not in ("none", "api_key", "oauth") or (transport == "stdio" and kind != "none"):
        kind = "invalid"
    return transport, kind


_ADD_COMMAND_OR_URL = 'add "command" (a local stdio server) or "url" (a remote server)'


def neither_command_nor_url(entry: Mapping[str, Any], url_keys: Iterable[str] = ("url",)) -> str:
    """Why an entry with neither ``"command"`` nor a URL (under any of ``url_keys``: another
    host's files name it ``serverUrl`` or ``httpUrl`` too) is refused, and the fix: renaming a
    key that looks like a misspelling of one (``"comand"``, ``"urll"``), else adding one.
    configs.json's own rules and ``keen mcp import``'s word it this one way."""
    wanted = ("command", *url_keys)
    # A key that is one of them is not its own misspelling ("rename 'url' to 'url'").
    others = [str(key) for key in entry if key not in wanted]
    renames = (misspelling_of(key, others) for key in wanted)
    fix = next((rename for rename in renames if rename), None)
    return f'the entry has neither "command" nor "url"; {fix or _ADD_COMMAND_OR_URL}'


def misspelling_of(field: str, keys: Iterable[str]) -> str | None:
    """The fix ``"rename 'comand' to 'command' (a misspelling?)"`` when one of ``keys`` (an
    entry's fields the rules do not know) looks like a misspelling of the missing ``field``;
    ``None`` when none does. configs.json's rules and ``keen mcp import``'s refusals name a
    misspelling with these words."""
    close = difflib.get_close_matches(field, list(keys), n=1)
    return f"rename {close[0]!r} to {field!r} (a misspelling?)" if close else None


def _prepare_server(name: str, entry: Any, *, source: str, environ: Any) -> dict[str, Any]:
    """One entry before field validation: name rule, ``${VAR}`` expansion, transport inference."""
    if not SERVER_NAME_PATTERN.fullmatch(name):
        raise ConfigError(
            f"{source}: server name {name!r} is invalid; use 1-64 letters, digits, '_' or '-' "
            "(it becomes the server id in call_mcp_tool and the skill mcp:<name>)",
            path=source,
            server=name,
            field="name",
        )
    if not isinstance(entry, dict):
        raise ConfigError(f"{source}: server {name!r} must be an object", path=source, server=name)
    entry = _expand(entry, name=name, field="", source=source, environ=environ)
    if isinstance(entry.get("env"), dict) and "" in entry["env"]:
        # The operating system takes an empty name, and such a server started before names
        # were checked: it still does, without the nameless variable.
        del entry["env"][""]  # _expand's copy
        note = f'{source}: server {name!r}: an "env" entry with an empty name is skipped; remove it'
        if note not in _NOTED:  # once: a command may load the file several times
            _NOTED.add(note)
            logger.warning("%s", note)
    if "transport" not in entry:
        if "url" in entry:
            entry["transport"] = "streamable_http"
        elif "command" in entry:
            entry["transport"] = "stdio"
    transport = entry.get("transport")
    if "transport" not in entry:
        # Nothing to infer the transport from: say what is missing (and a misspelling of it),
        # not "transport None is not supported" for a transport never written.
        raise ConfigError(
            f"{source}: server {name!r}: {neither_command_nor_url(entry)}",
            path=source,
            server=name,
            field="command",
        )
    if transport not in ("streamable_http", "stdio", "sse"):
        raise ConfigError(
            f"{source}: server {name!r}: transport {transport!r} is not supported; "
            'use "streamable_http" (with "url"), "stdio" (with "command"), or "sse" for a server that '
            "speaks only the deprecated HTTP+SSE transport",
            path=source,
            server=name,
            field="transport",
        )
    if transport == "stdio" and "auth" in entry:
        auth_type = entry["auth"].get("type") if isinstance(entry["auth"], dict) else None
        if auth_type not in (None, "none"):
            raise ConfigError(
                f"{source}: server {name!r}: stdio servers take no HTTP auth; pass credentials "
                'through "env" or "args" instead',
                path=source,
                server=name,
                field="auth",
            )
        entry.pop("auth")
    return entry


def _key_variables(entry: Any) -> tuple[str, ...]:
    """The ``${VAR}`` names an entry's ``auth.key`` is written with, as written (not expanded)."""
    auth = entry.get("auth") if isinstance(entry, dict) else None
    key = auth.get("key") if isinstance(auth, dict) else None  # pyright: ignore[reportUnknownMemberType]
    return (
        tuple(dict.fromkeys(m.group(1) for m in VAR_REFERENCE.finditer(key))) if isinstance(key, str) else ()
    )


def _field(parts: list[Any]) -> str:
    """A validation error's field path without the server name and the union tags pydantic
    adds (the transport after the name, the auth type after ``auth``), e.g. ``auth.key``."""
    # A key of "env" or "headers" is part of the path: "TOKEN=ghp_..." shows as "TOKEN".
    rest = [values.name_start(str(part)) for part in parts[2:]]
    if rest and rest[0] in ("streamable_http", "stdio", "sse"):
        rest = rest[1:]
    if len(rest) > 1 and rest[0] == "auth" and rest[1] in ("none", "api_key", "oauth"):
        del rest[1]
    return ".".join(rest) or "(entry)"


_TAGGED: dict[str, type[BaseModel]] = {}
"""A union tag in a validation error's path -> the model it chose (filled at first use)."""


def _known_fields(loc: list[Any], field: str) -> str:
    """What an unknown ``field`` (at ``loc``, a validation error's path) might have been:
    ``" (perhaps 'call_tool')"`` for a near spelling, and, inside ``timeouts`` or ``auth``,
    the names that object takes ("check its spelling" alone named no right one); ``""`` when
    the path leads to no model."""
    from keen._text import near_names

    if not _TAGGED:
        _TAGGED.update(
            stdio=StdioServerConfig, streamable_http=HttpServerConfig, sse=HttpServerConfig,
            none=NoAuth, api_key=ApiKeyAuth, oauth=OAuthAuth,
        )  # fmt: skip
    model: type[BaseModel] | None = None
    for part in loc[2:-1]:
        if isinstance(part, str) and part in _TAGGED and (model is None or part not in model.model_fields):
            model = _TAGGED[part]
        elif model is not None and isinstance(part, str) and part in model.model_fields:
            annotation = model.model_fields[part].annotation
            model = annotation if isinstance(annotation, type) and issubclass(annotation, BaseModel) else None
        else:
            model = None
    if model is None:
        return ""
    names = list(model.model_fields)
    near = near_names(field.rpartition(".")[2], names, limit=1)
    words = [f"perhaps {near[0]!r}"] if near else []
    if "." in field:
        words.append(f"{field.rpartition('.')[0]} takes {', '.join(names)}")
    return f" ({'; '.join(words)})" if words else ""


def _config_error_from(exc: ValidationError, *, source: str) -> ConfigError:
    errors = exc.errors()
    err = errors[0]
    parts = list(err["loc"])
    # ("servers", <name>, <transport tag>, field...): name the server, drop the union tags.
    name = str(parts[1]) if len(parts) > 1 and parts[0] == "servers" else "(config)"
    field = _field(parts)
    kind = err["type"]
    if kind == "missing":
        hint = f'add "{field}"'
        if field == "auth.key":
            hint = 'add "key" to the api_key auth (use "${ENV_VAR}" to keep it out of the file)'
        # A misspelt required field is reported missing first: name the misspelling too.
        unknown = [_field(list(e["loc"])) for e in errors if e["type"] == "extra_forbidden"]
        hint = misspelling_of(field, unknown) or hint
        message = f"{source}: server {name!r}: missing required field {field!r}; {hint}"
    elif kind == "extra_forbidden":
        message = f"{source}: server {name!r}: unknown field {field!r}; remove it or check its spelling"
        message += _known_fields(parts, field)
    elif kind == "string_too_short":
        # pydantic's "String should have at least 1 character" names no fix.
        fix = (
            'set the key (use "${ENV_VAR}" to keep it out of the file)'
            if field == "auth.key"
            else "set a value, or remove the field"
        )
        message = f"{source}: server {name!r}: field {field!r} is empty; {fix}"
    elif kind in ("union_tag_invalid", "union_tag_not_found") and field.startswith("auth"):
        message = f'{source}: server {name!r}: auth.type must be "none", "api_key" or "oauth"'
        field = "auth.type"
    else:
        msg = err["msg"].removeprefix("Value error, ")
        message = f"{source}: server {name!r}: field {field!r}: {msg}; fix that value"
    return ConfigError(message, path=source, server=name, field=field)


def _no_lone_surrogate(text: str, *, name: str, field: str, source: str) -> None:
    """Refuse half of a surrogate pair (JSON's ``"\\ud800"`` escape alone): it has no UTF-8
    form, so no skill file, terminal or server environment could take the text."""
    if (lone := LONE_SURROGATE.search(text)) is not None:
        raise ConfigError(
            f"{source}: server {name!r}: field {field or '(entry)'!r} holds \\u{ord(lone.group()):04x}, "
            "which is no character (half of a UTF-16 surrogate pair, or a byte of a command line that "
            "is not UTF-8); write the character itself, or both halves of its escape",
            path=source,
            server=name,
            field=field or None,
        )


def _expand(value: Any, *, name: str, field: str, source: str, environ: Any) -> Any:
    """Expand ``${VAR}`` / ``${VAR:-default}`` in every string, recursively (copies containers)."""
    if isinstance(value, str):
        _no_lone_surrogate(value, name=name, field=field, source=source)

        def sub(match: re.Match[str]) -> str:
            var, default = match.group(1), match.group(2)
            found = environ.get(var)
            if found is not None and (found != "" or default is None):
                # ${VAR} is how a key is kept out of the file: whatever it holds may be one.
                register_value(found)
                return found
            if default is not None:
                return default
            raise ConfigError(
                f"{source}: server {name!r}: field {field or '(entry)'!r} uses ${{{var}}}, which is not set; "
                f"export {var} or write ${{{var}:-default}}",
                path=source,
                server=name,
                field=field or None,
            )

        return VAR_REFERENCE.sub(sub, value)
    if isinstance(value, dict):
        # A key is named in the field path only as far as name_start shows it (a value pasted
        # into an env or header name is no part of the path).
        for key in value:
            _no_lone_surrogate(
                key, name=name, field=f"{field}.{values.name_start(key)}".lstrip("."), source=source
            )
        return {
            k: _expand(
                v,
                name=name,
                field=f"{field}.{values.name_start(k)}".lstrip("."),
                source=source,
                environ=environ,
            )
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [_expand(v, name=name, field=field, source=source, environ=environ) for v in value]
    return value


def save_config(data: dict[str, Any], path: Path) -> None:
    """Write raw configs.json data atomically with mode 0600 (it may hold API keys).

    Args:
        data: the JSON object, written as given (``${VAR}`` references stay unexpanded);
            validate it first with :func:`validate_config`.
        path: the file; its directory is created when missing. A symlink (configs.json kept
            with one's dotfiles) stays one: the file it points to is replaced
            (:func:`config_file`).

    Raises:
        ConfigError: ``path`` is a symlink to nothing, or a loop of them.
        OSError: the file cannot be written.
    """
    atomic_write_json(config_file(path), data, mode=0o600)


def config_file(path: Path) -> Path:
    """The file configs.json at ``path`` is: ``path``, or the file a symlink there points
    to (configs.json kept with one's dotfiles), which an edit rewrites and locks.

    Raises:
        ConfigError: ``path`` is a symlink to nothing (which an edit would create, folders
            and all, somewhere the user never meant) or a loop of symlinks.
    """
    try:
        return link_target(path)
    except BrokenLink as exc:
        raise ConfigError(str(exc), path=str(path)) from None
