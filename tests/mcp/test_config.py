"""configs.json validation (docs/architecture.md "Configuration"): every rule, through
``parse_config`` / ``load_config`` / ``save_config``.

Each rejection asserts the ``ConfigError`` attributes (server, field, line/column for
broken JSON) and that the message tells the user what to write instead.
"""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from keen.errors import ConfigError
from keen.mcp import Manager
from keen.mcp.config import (
    ApiKeyAuth,
    HttpServerConfig,
    NoAuth,
    OAuthAuth,
    StdioServerConfig,
    Timeouts,
    load_config,
    parse_config,
    remember_valid,
    save_config,
    with_entry_of,
)
from keen.mcp.config.validated import known_servers, trust_settings

HTTP = {"transport": "streamable_http", "url": "https://mcp.example.com/mcp"}
STDIO = {"transport": "stdio", "command": "local-files-mcp"}


def _text(servers: dict[str, Any], **top: Any) -> str:
    return json.dumps({"version": 1, "servers": servers, **top})


def _reject(servers: dict[str, Any], *, match: str, environ: dict[str, str] | None = None) -> ConfigError:
    # match is a regex over the message the user reads: each caller pins its own words.
    with pytest.raises(ConfigError, match=match) as info:
        parse_config(_text(servers), environ=environ or {})
    return info.value


# -- the file -------------------------------------------------------------------------------------


def test_missing_file_is_an_empty_config(tmp_path: Path) -> None:
    config = load_config(tmp_path / "mcp" / "configs.json")
    assert config.version == 1
    assert config.servers == {}


@pytest.mark.parametrize("linked", ["configs.json", "mcp"])
def test_a_symlink_to_nothing_is_no_missing_file(tmp_path: Path, linked: str) -> None:
    # Each read took it for no file: no servers, where the user's are in the file (or the
    # folder: KEEN_HOME/mcp kept with one's dotfiles) the link lost.
    path = tmp_path / "mcp" / "configs.json"
    if linked == "mcp":
        path.parent.symlink_to(tmp_path / "dotfiles" / "keen-mcp")
    else:
        path.parent.mkdir()
        path.symlink_to(tmp_path / "dotfiles" / "configs.json")
    link = path if linked == "configs.json" else path.parent
    with pytest.raises(
        ConfigError, match=rf"^{re.escape(str(link))} links to .*dotfiles/.*, which does not exist; create it"
    ):
        load_config(path, strict=False)
    assert known_servers(path) is None  # not [] (no servers): load_config must say it
    assert Manager(path, trust=None).no_config_file() is False  # keen chat then loads it


@pytest.mark.parametrize("text", ["", "\n  \n"])
def test_empty_file_is_an_empty_config(tmp_path: Path, text: str) -> None:
    path = tmp_path / "configs.json"
    path.write_text(text)
    assert load_config(path).servers == {}


def test_seed_example_loads_with_every_auth_mode(tmp_path: Path) -> None:
    path = tmp_path / "configs.json"
    path.write_text(
        json.dumps(
            {
                "version": 1,
                "servers": {
                    "deepwiki": {**HTTP, "auth": {"type": "none"}},
                    "internal": {
                        **HTTP,
                        "auth": {
                            "type": "api_key",
                            "header": "Authorization",
                            "scheme": "Bearer",
                            "key": "k1",
                        },
                    },
                    "github": {**HTTP, "auth": {"type": "oauth", "scopes": ["repo", "issues"]}},
                    "local-files": {
                        **STDIO,
                        "args": ["--workspace", "/Users/me/project"],
                        "env": {"LOG_LEVEL": "info"},
                    },
                },
            }
        )
    )
    servers = load_config(path).servers
    assert list(servers) == ["deepwiki", "internal", "github", "local-files"]
    deepwiki, internal, github, files = servers.values()
    assert isinstance(deepwiki, HttpServerConfig) and isinstance(deepwiki.auth, NoAuth)
    assert isinstance(internal, HttpServerConfig) and isinstance(internal.auth, ApiKeyAuth)
    assert internal.auth.header_value() == "Bearer k1"
    assert isinstance(github, HttpServerConfig) and isinstance(github.auth, OAuthAuth)
    assert github.auth.scopes == ["repo", "issues"]
    assert isinstance(files, StdioServerConfig)
    assert files.args == ["--workspace", "/Users/me/project"]
    assert files.env == {"LOG_LEVEL": "info"}
    assert files.auth_type == "none"


def test_broken_json_reports_line_and_column(tmp_path: Path) -> None:
    path = tmp_path / "configs.json"
    path.write_text('{"version": 1,\n "servers": {\n  "a": {,}}}')
    with pytest.raises(
        ConfigError, match=r"invalid JSON at line 3, column 9: .*; fix the syntax there"
    ) as info:
        load_config(path)
    err = info.value
    assert (err.line, err.column) == (3, 9)
    assert err.path == str(path)
    assert str(path) in err.message
    assert "line 3, column 9" in err.message
    assert "fix" in err.message


@pytest.mark.parametrize("version", [2, 0, "1", None])
def test_unsupported_version(version: Any) -> None:
    raw = {"servers": {}} if version is None else {"version": version, "servers": {}}
    with pytest.raises(
        ConfigError,
        match=re.escape(f'unsupported version {version!r}; this Keen reads version 1: set "version": 1'),
    ) as info:
        parse_config(json.dumps(raw))
    assert info.value.field == "version"
    assert info.value.server is None
    assert 'set "version": 1' in info.value.message


@pytest.mark.parametrize(
    ("text", "field", "says"),
    [
        ("[]", None, 'the top level must be an object like {"version": 1, "servers": {}}'),
        (
            '{"version": 1, "servers": []}',
            "servers",
            '"servers" must be an object mapping names to server entries',
        ),
        (
            '{"version": 1, "servers": {}, "extra": true}',
            "extra",
            'unknown top-level field \'extra\'; only "version" and "servers"',
        ),
    ],
)
def test_bad_top_level_shape(text: str, field: str | None, says: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(says)) as info:
        parse_config(text)
    assert info.value.field == field
    assert '"servers"' in info.value.message


def test_a_file_that_is_not_utf8_says_where_and_to_save_it_as_utf8(tmp_path: Path) -> None:
    path = tmp_path / "configs.json"
    path.write_bytes(b'{"version": 1, "servers": {"\xff": {}}}')
    with pytest.raises(
        ConfigError,
        match=r"cannot read .*configs\.json: it is not UTF-8 text, byte 0xff at offset 28; save it as UTF-8",
    ) as info:
        load_config(path)
    assert info.value.path == str(path)


def test_a_utf16_file_is_named_so(tmp_path: Path) -> None:
    # What PowerShell's `>` writes.
    path = tmp_path / "configs.json"
    path.write_bytes('{"version": 1, "servers": {}}'.encode("utf-16"))
    with pytest.raises(ConfigError, match=r"not UTF-8 text \(it looks like UTF-16\).*; save it as UTF-8"):
        load_config(path)


def test_a_utf8_byte_order_mark_is_skipped(tmp_path: Path) -> None:
    # What Windows Notepad writes first; json.loads refused it ("Unexpected UTF-8 BOM").
    path = tmp_path / "configs.json"
    path.write_bytes(b'\xef\xbb\xbf{"version": 1, "servers": {"a": {"command": "true"}}}')
    assert list(load_config(path).servers) == ["a"]


def test_a_file_where_a_folder_of_the_path_belongs_says_so(tmp_path: Path) -> None:
    # KEEN_HOME=/etc/passwd: "Not a directory; it must be a file you can read" named no fix.
    (tmp_path / "home").write_text("")
    with pytest.raises(ConfigError, match=r"a folder on its path is a file; fix the path"):
        load_config(tmp_path / "home" / "mcp" / "configs.json")


def test_a_folder_where_the_file_belongs_says_it_must_be_a_file(tmp_path: Path) -> None:
    path = tmp_path / "configs.json"
    path.mkdir()
    with pytest.raises(
        ConfigError, match=r"cannot read .*configs\.json: Is a directory; it must be a file you can read"
    ):
        load_config(path)


# -- server names ---------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["a" * 65, "two words", "mcp:x", "", "dots.in.name", "ünï"])
def test_invalid_server_names(name: str) -> None:
    err = _reject({name: STDIO}, match=re.escape("is invalid; use 1-64 letters, digits, '_' or '-'"))
    assert err.server == name
    assert err.field == "name"
    assert "1-64 letters, digits, '_' or '-'" in err.message


@pytest.mark.parametrize("name", ["a" * 64, "A_b-9", "x"])
def test_valid_server_names(name: str) -> None:
    assert list(parse_config(_text({name: STDIO})).servers) == [name]


def test_entry_must_be_an_object() -> None:
    err = _reject({"s": "https://mcp.example.com/mcp"}, match="server 's' must be an object")
    assert err.server == "s"
    assert "must be an object" in err.message


# -- transports, URLs, commands -------------------------------------------------------------------


def test_transport_inferred_from_url_or_command() -> None:
    servers = parse_config(
        _text({"web": {"url": "http://127.0.0.1:9/mcp"}, "local": {"command": "run-me"}})
    ).servers
    assert isinstance(servers["web"], HttpServerConfig)
    assert servers["web"].transport == "streamable_http"
    assert isinstance(servers["local"], StdioServerConfig)
    assert servers["local"].transport == "stdio"


@pytest.mark.parametrize(
    ("entry", "hint"),
    [
        ({}, 'add "command" (a local stdio server) or "url" (a remote server)'),
        ({"comand": "npx", "args": ["-y", "x"]}, "rename 'comand' to 'command' (a misspelling?)"),
        ({"uri": "https://h/mcp"}, "rename 'uri' to 'url' (a misspelling?)"),
    ],
)
def test_an_entry_with_neither_command_nor_url_says_so(entry: dict[str, Any], hint: str) -> None:
    # With no "transport" to go by, an entry whose "command" was misspelt was refused as
    # "transport None is not supported", naming a field never written and not the misspelling.
    err = _reject({"s": entry}, match=re.escape(f'the entry has neither "command" nor "url"; {hint}'))
    assert (err.server, err.field) == ("s", "command")
    assert "None" not in err.message


@pytest.mark.parametrize(
    "entry",
    [
        {"transport": "websocket", "url": "https://h/ws"},
        {"transport": 1},
        # Written, as null: no misspelling to name ("rename 'url' to 'url'" it said).
        {"transport": None, "url": "https://h/mcp"},
        {"transport": None, "command": "run-me"},
    ],
)
def test_unknown_transport(entry: dict[str, Any]) -> None:
    err = _reject(
        {"s": entry},
        match=re.escape('is not supported; use "streamable_http" (with "url"), "stdio" (with "command")'),
    )
    assert (err.server, err.field) == ("s", "transport")
    assert '"streamable_http" (with "url")' in err.message
    assert '"stdio" (with "command")' in err.message
    assert '"sse" for a server that speaks only the deprecated HTTP+SSE transport' in err.message


def test_the_deprecated_sse_transport_is_a_remote_server() -> None:
    servers = parse_config(_text({"old": {"transport": "sse", "url": "https://h/sse"}})).servers
    assert isinstance(servers["old"], HttpServerConfig) and servers["old"].transport == "sse"


@pytest.mark.parametrize(
    "url", ["/mcp", "ftp://files.example.com/mcp", "localhost:8080/mcp", "https://", "mcp.example.com"]
)
def test_bad_urls(url: str) -> None:
    err = _reject(
        {"s": {"transport": "streamable_http", "url": url}},
        match="is not an http:// or https:// URL; fix that value",
    )
    assert (err.server, err.field) == ("s", "url")
    assert "http:// or https:// URL" in err.message


def test_http_server_needs_url() -> None:
    err = _reject({"s": {"transport": "streamable_http"}}, match="missing required field 'url'; add \"url\"")
    assert (err.server, err.field) == ("s", "url")
    assert 'add "url"' in err.message


def test_stdio_server_needs_command() -> None:
    err = _reject(
        {"s": {"transport": "stdio", "args": ["x"]}},
        match="missing required field 'command'; add \"command\"",
    )
    assert (err.server, err.field) == ("s", "command")
    assert 'add "command"' in err.message


@pytest.mark.parametrize("command", ["", "   "])
def test_blank_stdio_command_is_refused(command: str) -> None:
    err = _reject(
        {"s": {"transport": "stdio", "command": command}},
        match=r"field 'command': is blank; set it to the server's executable",
    )
    assert (err.server, err.field) == ("s", "command")
    assert "command" in err.message


def test_fields_of_the_other_transport_are_refused() -> None:
    err = _reject(
        {"s": {**HTTP, "command": "x"}}, match="unknown field 'command'; remove it or check its spelling"
    )
    assert (err.server, err.field) == ("s", "command")
    assert "remove it" in err.message


# -- auth -----------------------------------------------------------------------------------------


def test_api_key_auth_defaults_and_raw_scheme() -> None:
    servers = parse_config(
        _text(
            {
                "a": {**HTTP, "auth": {"type": "api_key", "key": "k"}},
                "b": {**HTTP, "auth": {"type": "api_key", "key": "k", "header": "X-Api-Key", "scheme": ""}},
            }
        )
    ).servers
    a, b = servers["a"], servers["b"]
    assert isinstance(a, HttpServerConfig) and isinstance(a.auth, ApiKeyAuth)
    assert (a.auth.header, a.auth.scheme, a.auth.header_value()) == ("Authorization", "Bearer", "Bearer k")
    assert isinstance(b, HttpServerConfig) and isinstance(b.auth, ApiKeyAuth)
    assert (b.auth.header, b.auth.header_value()) == ("X-Api-Key", "k")


def test_api_key_auth_needs_key() -> None:
    err = _reject(
        {"s": {**HTTP, "auth": {"type": "api_key", "header": "Authorization"}}},
        match=re.escape(
            'missing required field \'auth.key\'; add "key" to the api_key auth (use "${ENV_VAR}"'
        ),
    )
    assert (err.server, err.field) == ("s", "auth.key")
    assert 'add "key"' in err.message
    assert "${ENV_VAR}" in err.message


@pytest.mark.parametrize("auth", [{"type": "basic"}, {"type": "OAuth"}, {}])
def test_unknown_auth_type(auth: dict[str, Any]) -> None:
    err = _reject({"s": {**HTTP, "auth": auth}}, match='auth.type must be "none", "api_key" or "oauth"')
    assert (err.server, err.field) == ("s", "auth.type")
    assert '"none", "api_key" or "oauth"' in err.message


@pytest.mark.parametrize("auth_type", ["api_key", "oauth"])
def test_stdio_server_refuses_http_auth(auth_type: str) -> None:
    err = _reject(
        {"s": {**STDIO, "auth": {"type": auth_type, "key": "k"}}},
        match='stdio servers take no HTTP auth; pass credentials through "env" or "args" instead',
    )
    assert (err.server, err.field) == ("s", "auth")
    assert '"env" or "args"' in err.message


def test_stdio_server_accepts_auth_none() -> None:
    server = parse_config(_text({"s": {**STDIO, "auth": {"type": "none"}}})).servers["s"]
    assert isinstance(server, StdioServerConfig)


def test_error_messages_never_echo_the_api_key() -> None:
    secret = "sk-live-0123456789abcdef"
    err = _reject(
        {"s": {**HTTP, "auth": {"type": "api_key", "key": secret, "header": ""}}},
        match="field 'auth.header' is empty; set a value, or remove the field",
    )
    assert err.field == "auth.header"
    assert secret not in err.message
    assert secret not in repr(err)


def test_an_empty_api_key_says_to_set_it() -> None:
    _reject(
        {"s": {**HTTP, "auth": {"type": "api_key", "key": ""}}},
        match=r'field \'auth.key\' is empty; set the key \(use "\$\{ENV_VAR\}" to keep it out of the file\)',
    )


# -- unknown fields, timeouts, enabled ------------------------------------------------------------


@pytest.mark.parametrize(
    ("entry", "field"),
    [
        ({**STDIO, "colour": "red"}, "colour"),
        ({**HTTP, "auth": {"type": "none", "key": "k"}}, "auth.key"),
        ({**STDIO, "timeouts": {"connect": 1, "bogus": 2}}, "timeouts.bogus"),
        # Field names that are also union tags (auth types, transports) are named, not dropped.
        ({**HTTP, "oauth": True}, "oauth"),
        ({**HTTP, "auth": {"type": "api_key", "key": "k", "stdio": 1}}, "auth.stdio"),
    ],
)
def test_unknown_fields_are_refused(entry: dict[str, Any], field: str) -> None:
    err = _reject({"s": entry}, match=re.escape(f"unknown field {field!r}; remove it or check its spelling"))
    assert (err.server, err.field) == ("s", field)
    assert "remove it or check its spelling" in err.message


@pytest.mark.parametrize(
    ("entry", "hint"),
    [
        (
            {**STDIO, "timeouts": {"call": 1}},
            "(perhaps 'call_tool'; timeouts takes connect, list_tools, call_tool)",
        ),
        (
            {**HTTP, "auth": {"type": "api_key", "key": "k", "headr": "X"}},
            "(perhaps 'header'; auth takes type, ",
        ),
        ({**STDIO, "enviroment": {}}, "(perhaps 'env')"),
    ],
)
def test_an_unknown_field_is_told_the_names_it_might_have_meant(entry: dict[str, Any], hint: str) -> None:
    # "check its spelling" alone: a reader of "unknown field 'timeouts.call'" was not told
    # that the timeout of a call is "call_tool".
    err = _reject({"s": entry}, match="remove it or check its spelling")
    assert hint in err.message, err.message


@pytest.mark.parametrize(
    ("entry", "field", "typo"),
    [
        ({"transport": "stdio", "comand": "x"}, "command", "comand"),
        ({**HTTP, "auth": {"type": "api_key", "kee": "k"}}, "auth.key", "auth.kee"),
    ],
)
def test_a_misspelt_required_field_is_named(entry: dict[str, Any], field: str, typo: str) -> None:
    err = _reject(
        {"s": entry}, match=re.escape(f"missing required field {field!r}; rename {typo!r} to {field!r}")
    )
    assert (err.server, err.field) == ("s", field)
    assert f"missing required field {field!r}; rename {typo!r} to {field!r}" in err.message


def test_timeouts_default_and_custom() -> None:
    servers = parse_config(
        _text({"d": STDIO, "c": {**STDIO, "timeouts": {"connect": 2.5, "call_tool": 600}}})
    ).servers
    assert servers["d"].timeouts == Timeouts(connect=15.0, list_tools=30.0, call_tool=120.0)
    assert servers["c"].timeouts == Timeouts(connect=2.5, list_tools=30.0, call_tool=600.0)


@pytest.mark.parametrize("key", ["connect", "list_tools", "call_tool"])
@pytest.mark.parametrize("value", [0, -1])
def test_non_positive_timeouts_are_refused(key: str, value: int) -> None:
    err = _reject(
        {"s": {**STDIO, "timeouts": {key: value}}},
        match=f"field 'timeouts.{key}': Input should be greater than 0",
    )
    assert (err.server, err.field) == ("s", f"timeouts.{key}")
    assert "greater than 0" in err.message


def test_enabled_false_is_kept_and_default_is_true() -> None:
    servers = parse_config(_text({"on": STDIO, "off": {**STDIO, "enabled": False}})).servers
    assert servers["on"].enabled is True
    assert servers["off"].enabled is False


def test_enabled_must_be_a_boolean() -> None:
    err = _reject(
        {"s": {**STDIO, "enabled": "maybe"}}, match="field 'enabled': Input should be a valid boolean"
    )
    assert (err.server, err.field) == ("s", "enabled")
    assert "boolean" in err.message


# -- ${VAR} expansion -----------------------------------------------------------------------------


def test_variables_expand_everywhere() -> None:
    env = {"KEY": "sk-1", "WORKDIR": "/srv/w", "HOST": "127.0.0.1:8080"}
    servers = parse_config(
        _text(
            {
                "web": {**HTTP, "url": "http://${HOST}/mcp", "auth": {"type": "api_key", "key": "${KEY}"}},
                "local": {
                    **STDIO,
                    "args": ["--root", "${WORKDIR}/x"],
                    "env": {"K": "${KEY}"},
                    "cwd": "${WORKDIR}",
                },
            }
        ),
        environ=env,
    ).servers
    web, local = servers["web"], servers["local"]
    assert isinstance(web, HttpServerConfig) and isinstance(web.auth, ApiKeyAuth)
    assert web.url == "http://127.0.0.1:8080/mcp"
    assert web.auth.key == "sk-1"
    assert isinstance(local, StdioServerConfig)
    assert local.args == ["--root", "/srv/w/x"]
    assert local.env == {"K": "sk-1"}
    assert local.cwd == "/srv/w"


@pytest.mark.parametrize(
    ("environ", "expected"),
    [({}, "fallback"), ({"LEVEL": ""}, "fallback"), ({"LEVEL": "debug"}, "debug")],
)
def test_variable_default(environ: dict[str, str], expected: str) -> None:
    server = parse_config(
        _text({"s": {**STDIO, "env": {"L": "${LEVEL:-fallback}"}}}), environ=environ
    ).servers["s"]
    assert isinstance(server, StdioServerConfig)
    assert server.env == {"L": expected}


def test_unset_variable_is_named() -> None:
    err = _reject(
        {"s": {**HTTP, "auth": {"type": "api_key", "key": "${KEEN_TEST_UNSET_KEY}"}}},
        environ={},
        match=re.escape("uses ${KEEN_TEST_UNSET_KEY}, which is not set; export KEEN_TEST_UNSET_KEY"),
    )
    assert (err.server, err.field) == ("s", "auth.key")
    assert "KEEN_TEST_UNSET_KEY" in err.message
    assert "export KEEN_TEST_UNSET_KEY" in err.message


def test_process_environment_is_the_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KEEN_TEST_CMD", "from-env")
    server = parse_config(_text({"s": {"command": "${KEEN_TEST_CMD}"}})).servers["s"]
    assert isinstance(server, StdioServerConfig)
    assert server.command == "from-env"


# -- a file others can read -----------------------------------------------------------------------

# Each value below is a credential written in clear; the same entries with ${VAR} are not.
IN_CLEAR = {
    "docs": {
        "url": "https://reader:pa55w0rd-xyz@mcp.example.com/mcp?team=acme",
        "headers": {"X-Trace": "on", "Authorization": "Bearer tok-abcdef123456"},
        "auth": {"type": "api_key", "key": "sk-live-abcdef123456"},
    },
    "files": {
        "command": "npx",
        "args": ["-y", "files-mcp", "--api-key", "ak-0987654321zyx"],
        "env": {"LOG_LEVEL": "info", "GITHUB_TOKEN": "ghp_abcdefghijklmnop"},
    },
    "gh": {"url": "https://mcp.example.com/gh", "auth": {"type": "oauth", "client_secret": "cs-1234abcd"}},
    # A default is written in the file: used whenever the variable is unset.
    "ci": {"command": "ci-mcp", "env": {"GITHUB_TOKEN": "${GITHUB_TOKEN:-ghp_fallback0123456789}"}},
    "keyed": {
        "url": "https://mcp.example.com/k",
        "auth": {"type": "api_key", "key": "${K:-sk-live-fallback987}"},
    },
}
SECRET_VALUES = (
    "pa55w0rd-xyz",
    "tok-abcdef123456",
    "sk-live-abcdef123456",
    "ak-0987654321zyx",
    "ghp_abc",
    "cs-1234",
    "ghp_fallback",
    "sk-live-fallback",
)
BY_REFERENCE = {
    "docs": {
        "url": "https://reader:${DOCS_PASSWORD}@mcp.example.com/mcp?team=acme&key=${DOCS_KEY}",
        "headers": {"X-Trace": "on", "Authorization": "Bearer ${DOCS_TOKEN}"},
        "auth": {"type": "api_key", "key": "${DOCS_KEY}"},
    },
    "files": {
        "command": "npx",
        "args": ["-y", "files-mcp", "--api-key", "${FILES_KEY}", "--token=${FILES_TOKEN}"],
        "env": {"LOG_LEVEL": "${LOG_LEVEL:-info}", "LOG_FORMAT": "json", "GITHUB_TOKEN": "${GITHUB_TOKEN:-}"},
    },
    "gh": {"url": "https://mcp.example.com/gh", "auth": {"type": "oauth", "client_secret": "${GH_SECRET}"}},
}
ENVIRON = {
    name: "value-" + name.lower()
    for name in (
        "DOCS_PASSWORD",
        "DOCS_KEY",
        "DOCS_TOKEN",
        "FILES_KEY",
        "FILES_TOKEN",
        "GITHUB_TOKEN",
        "GH_SECRET",
    )
}


def _warnings(caplog: pytest.LogCaptureFixture, path: Path, servers: dict[str, Any], mode: int) -> list[str]:
    path.write_text(_text(servers))
    path.chmod(mode)
    with caplog.at_level("WARNING", logger="keen.mcp.config.load"):
        for _ in range(2):  # a command may load it more than once: one warning
            load_config(path, environ=ENVIRON)
    return [r.getMessage() for r in caplog.records if r.name == "keen.mcp.config.load"]


def test_a_file_others_can_read_that_holds_keys_in_clear_is_warned_of_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # Keen writes configs.json 0600; a hand-written one was 0644, keys and all, without a word.
    path = tmp_path / "configs.json"
    (warning,) = _warnings(caplog, path, IN_CLEAR, 0o644)
    assert warning.startswith(f"{path} can be read by other users (mode 0644) and holds credentials")
    fields = (
        "server 'docs' url; server 'docs' headers.Authorization; server 'docs' auth.key; "
        "server 'files' args; server 'files' env.GITHUB_TOKEN; server 'gh' auth.client_secret; "
        "server 'ci' env.GITHUB_TOKEN; server 'keyed' auth.key"
    )
    assert (
        f"written in clear ({fields}); run chmod 600 {path}, or put each value in an environment" in warning
    )
    assert not any(secret in warning for secret in SECRET_VALUES), warning


def test_a_file_others_can_read_with_only_references_or_one_only_its_owner_can_is_not_warned_of(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    assert _warnings(caplog, tmp_path / "shared.json", BY_REFERENCE, 0o644) == []
    assert _warnings(caplog, tmp_path / "own.json", IN_CLEAR, 0o600) == []
    # The same judgement as the warning above: the two differ only by ${VAR}.
    assert _warnings(caplog, tmp_path / "group.json", IN_CLEAR, 0o640) != []


# -- writing --------------------------------------------------------------------------------------


def test_save_config_writes_0600_atomically(tmp_path: Path) -> None:
    path = tmp_path / "mcp" / "configs.json"
    path.parent.mkdir()
    path.write_text('{"version": 1, "servers": {}}')
    os.chmod(path, 0o644)
    old_view = tmp_path / "old-view"
    os.link(path, old_view)  # a reader holding the old inode must keep seeing the whole old file
    data = {"version": 1, "servers": {"internal": {**HTTP, "auth": {"type": "api_key", "key": "${K}"}}}}

    save_config(data, path)

    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert json.loads(path.read_text()) == data  # ${K} stays unexpanded
    assert old_view.read_text() == '{"version": 1, "servers": {}}'
    assert path.stat().st_ino != old_view.stat().st_ino
    assert sorted(p.name for p in path.parent.iterdir()) == ["configs.json"]
    loaded = load_config(path, environ={"K": "v"}).servers["internal"]
    assert isinstance(loaded, HttpServerConfig) and isinstance(loaded.auth, ApiKeyAuth)
    assert loaded.auth.key == "v"


def test_save_config_creates_missing_directories(tmp_path: Path) -> None:
    path = tmp_path / "new-home" / "mcp" / "configs.json"
    save_config({"version": 1, "servers": {"s": STDIO}}, path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert list(load_config(path).servers) == ["s"]


@pytest.mark.parametrize(
    ("entry", "kinds"),
    [
        ({"comand": "x", "url": "http://127.0.0.1:9/mcp"}, ("streamable_http", "none")),
        ({"command": "${NEVER_SET}"}, ("stdio", "none")),
        ({"transport": "stdio", "command": "x", "auth": {"type": "oauth"}}, ("stdio", "invalid")),
        ({"url": "ftp://h/mcp", "auth": {"type": "oauth", "scopes": 3}}, ("streamable_http", "oauth")),
        ({"url": "http://h/mcp", "auth": {"type": "basic"}}, ("streamable_http", "invalid")),
        ({"transport": "websocket", "url": "http://h/mcp"}, ("invalid", "none")),
        ({"transport": "sse", "url": "ftp://h/sse"}, ("sse", "none")),
        ({"comand": "x"}, ("-", "none")),
        ("npx server", ("invalid", "invalid")),
    ],
)
def test_an_invalid_entry_still_shows_the_transport_and_auth_it_declares(
    entry: Any, kinds: tuple[str, str]
) -> None:
    config = parse_config(json.dumps({"version": 1, "servers": {"s": entry}}), environ={}, strict=False)
    assert "s" in config.invalid and config.invalid_kinds["s"] == kinds


def test_a_server_defined_twice_is_an_error_of_that_server_only(tmp_path: Path) -> None:
    # Plain JSON keeps the last of two equal keys: the first server entry vanished unseen.
    path = tmp_path / "configs.json"
    path.write_text(
        '{"version": 1, "servers": {"a": {"command": "first"}, "b": {"command": "other"},'
        ' "a": {"command": "second"}}}'
    )
    with pytest.raises(ConfigError, match="server 'a' is defined twice; keep one") as info:
        load_config(path)
    assert info.value.server == "a"
    loose = load_config(path, strict=False)
    assert list(loose.servers) == ["b"]
    assert "defined twice" in loose.invalid["a"]
    # Repeated keys elsewhere (inside an entry) are plain JSON's business, not a server's.
    path.write_text('{"version": 1, "servers": {"a": {"command": "x", "command": "y"}}}')
    assert isinstance(load_config(path).servers["a"], StdioServerConfig)


def test_no_configs_json_validates_nothing(tmp_path: Path) -> None:
    """A missing or empty configs.json is an empty config made without validation, so a
    session with no servers never builds the models' validators (pydantic's defer_build)."""
    (tmp_path / "empty.json").write_text("")
    code = (
        "import sys\nfrom pathlib import Path\nfrom keen.mcp.config import MCPConfig, load_config\n"
        "configs = [load_config(Path(sys.argv[1]) / name) for name in ('missing.json', 'empty.json')]\n"
        "built = MCPConfig.__pydantic_complete__\n"
        "print(built, configs == [MCPConfig(), MCPConfig()])\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.split() == ["False", "True"], done.stdout + done.stderr


@pytest.mark.parametrize("command", ["${CMD}", "\\u0024{CMD}", "$\\u007bCMD}", "\\u0024\\u007BCMD}"])
def test_configs_whose_validity_is_the_environments_are_never_recorded_as_valid(
    keen_home: Path, monkeypatch: pytest.MonkeyPatch, command: str
) -> None:
    """A ${VAR} spelt with JSON escapes is expanded by the validation all the same: recorded,
    the plain-JSON fast path (``validated.trust_settings``) would vouch for text that fails
    once the variable is unset."""
    monkeypatch.setenv("CMD", "echo")
    path = keen_home / "mcp" / "configs.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        '{"version": 1, "servers": {"x": {"command": "' + command + '", "trust_annotations": true}}}'
    )
    config = load_config(path, strict=False)
    assert list(config.servers) == ["x"] and not config.invalid
    assert remember_valid(path, config) is False
    assert trust_settings(path) is None


def test_only_a_config_validated_whole_from_its_text_is_recorded_valid(keen_home: Path) -> None:
    """A config whose entries came from two texts (an entry reloaded) or from data was
    validated from no one text: recorded, the plain-JSON fast path would vouch for the text
    on disk, whose own validation found a broken entry."""
    path = keen_home / "mcp" / "configs.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    broken = _text({"x": {"command": "   "}, "y": STDIO})
    path.write_text(broken)
    started = load_config(path, strict=False)
    assert started.source_text == broken and "x" in started.invalid
    path.write_text(_text({"x": STDIO, "y": STDIO}))
    mixed = with_entry_of(started, "x", load_config(path, strict=False))
    assert not mixed.invalid and mixed.source_text is None
    path.write_text(broken)
    assert remember_valid(path, mixed) is False
    assert known_servers(path) is None
    assert remember_valid(path, parse_config(json.loads(_text({"y": STDIO})))) is False
    fine = _text({"y": STDIO})
    path.write_text(fine)
    assert remember_valid(path, parse_config(fine, source=str(path))) is True
    assert known_servers(path) == [("y", True)]


def test_what_the_mcp_servers_conversion_drops_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    # Manager(config={"mcpServers": ...}) with "trust_annotations": true dropped it without a
    # word: the server's readOnlyHint then granted nothing, and nothing said why.
    entry = {"command": "run-me", "trust_annotations": True, "autoApprove": ["x"]}
    with caplog.at_level("WARNING", logger="keen.mcp.config.load"):
        config = parse_config({"mcpServers": {"s": entry}}, strict=False)
    assert config.servers["s"].trust_annotations is False
    logged = [r.getMessage() for r in caplog.records]
    assert any("server 's': dropped 'trust_annotations'" in line for line in logged), logged
    assert any("server 's': dropped 'autoApprove'" in line for line in logged), logged
    # That config is no file keen mcp add-json edits: its author gives the setting in it.
    assert not any("add-json" in line or "set it yourself in configs.json" in line for line in logged), logged
    assert any(
        'give it in configs.json\'s shape, {"version": 1, "servers": {...}}' in line for line in logged
    )


def test_a_logged_conversion_note_shows_no_credentials_of_a_url(caplog: pytest.LogCaptureFixture) -> None:
    entry = {"type": "sse", "url": "https://alice:hunter2@h.example/sse"}
    with caplog.at_level("WARNING", logger="keen.mcp.config.load"):
        parse_config({"mcpServers": {"s": entry}}, strict=False)
    logged = " ".join(r.getMessage() for r in caplog.records)
    assert "often at https://" in logged and "hunter2" not in logged and "alice" not in logged, logged
