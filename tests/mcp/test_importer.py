"""``keen mcp import``: other hosts' ``mcpServers`` files become valid Keen configs.json entries."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from keen.errors import ConfigError
from keen.mcp.config import (
    ApiKeyAuth,
    HttpServerConfig,
    OAuthAuth,
    StdioServerConfig,
    load_config,
    parse_config,
)
from keen.mcp.config.edit import merge_into_config
from keen.mcp.config.importer import (
    ImportResult,
    import_mcp_file,
    import_mcp_servers,
    suggest_name,
)

ENV = {"GITHUB_PAT": "ghp_x", "C7_KEY": "c7", "HOME": "/home/u", "BRAVE_API_KEY": "b", "LINEAR": "l"}

CLAUDE_DESKTOP = {
    "mcpServers": {
        "filesystem": {
            "command": "npx",
            "args": ["-y", "@modelcontextprotocol/server-filesystem", "/Users/me/Desktop"],
        },
        "brave-search": {
            "command": "npx",
            "args": ["-y", "@modelcontextprotocol/server-brave-search"],
            "env": {"BRAVE_API_KEY": "${BRAVE_API_KEY}", "PORT": 8080},
        },
    },
    "globalShortcut": "Ctrl+Space",
}

CLAUDE_CODE = {
    "mcpServers": {
        "github": {
            "type": "http",
            "url": "https://api.githubcopilot.com/mcp/",
            "headers": {"Authorization": "Bearer ${GITHUB_PAT}"},
        },
        "sentry": {"type": "sse", "url": "https://mcp.sentry.dev/sse"},
        "linear": {
            "type": "http",
            "url": "https://mcp.linear.app/mcp",
            "oauth": {"clientId": "abc", "callbackPort": 8123},
        },
        "local": {
            "type": "stdio",
            "command": "${HOME}/bin/server",
            "args": ["--port", "${PORT:-7000}"],
            "env": {},
        },
    }
}

CURSOR = {
    "mcpServers": {
        "context7": {
            "url": "https://mcp.context7.com/mcp",
            "headers": {"CONTEXT7_API_KEY": "${env:C7_KEY}", "X-Client": "cursor"},
        },
        "notes": {
            "command": "python",
            "args": ["${userHome}/notes/server.py"],
            "envFile": "${userHome}/.env",
        },
        "project": {"command": "node", "args": ["${workspaceFolder}/server.js"]},
        "plain": {"command": "uvx", "args": ["mcp-server-time"], "env": {"TZ": "${env:TZ}"}},
    }
}


def validate(servers: dict[str, dict[str, Any]], environ: dict[str, str] | None = None) -> dict[str, Any]:
    """Run Keen's real config parser over the produced entries (with their ${VAR}s set)."""
    env = {**ENV, "TZ": "UTC", **(environ or {})}
    return dict(parse_config(json.dumps({"version": 1, "servers": servers}), environ=env).servers)


def refused_reason(result: ImportResult, name: str) -> str:
    reasons = dict(result.refused)
    assert name in reasons, f"{name} was not refused: {result}"
    return reasons[name]


def test_claude_desktop() -> None:
    result = import_mcp_servers(CLAUDE_DESKTOP)
    assert result.refused == []
    assert result.servers["filesystem"] == {
        "transport": "stdio",
        "command": "npx",
        "args": ["-y", "@modelcontextprotocol/server-filesystem", "/Users/me/Desktop"],
    }
    brave = result.servers["brave-search"]
    assert brave["env"] == {"BRAVE_API_KEY": "${BRAVE_API_KEY}", "PORT": "8080"}  # kept for Keen to expand
    parsed = validate(result.servers)
    assert (
        isinstance(parsed["brave-search"], StdioServerConfig)
        and parsed["brave-search"].env["BRAVE_API_KEY"] == "b"
    )


def test_claude_code_mcp_json() -> None:
    result = import_mcp_servers(CLAUDE_CODE)
    assert result.servers["github"]["auth"] == {
        "type": "api_key",
        "header": "Authorization",
        "scheme": "Bearer",
        "key": "${GITHUB_PAT}",
    }
    assert "headers" not in result.servers["github"]
    assert result.servers["linear"]["auth"] == {"type": "oauth", "client_id": "abc", "callback_port": 8123}
    assert result.servers["local"] == {
        "transport": "stdio",
        "command": "${HOME}/bin/server",
        "args": ["--port", "${PORT:-7000}"],
    }
    # The deprecated HTTP+SSE transport is imported, with a note saying so and where a newer one may be.
    assert result.servers["sentry"] == {"transport": "sse", "url": "https://mcp.sentry.dev/sse"}
    sentry = dict(result.notes)["sentry"]
    assert "HTTP+SSE" in sentry and "deprecated" in sentry and "https://mcp.sentry.dev/mcp" in sentry
    parsed = validate(result.servers)
    github = parsed["github"]
    assert isinstance(github, HttpServerConfig) and isinstance(github.auth, ApiKeyAuth)
    assert github.auth.header_value() == "Bearer ghp_x"
    assert isinstance(parsed["linear"], HttpServerConfig) and isinstance(parsed["linear"].auth, OAuthAuth)
    local = parsed["local"]
    assert (
        isinstance(local, StdioServerConfig)
        and local.command == "/home/u/bin/server"
        and local.args[1] == "7000"
    )


def test_cursor_variables_env_file_and_workspace() -> None:
    result = import_mcp_servers(CURSOR)
    context7 = result.servers["context7"]
    assert context7["transport"] == "streamable_http"
    assert context7["auth"] == {
        "type": "api_key",
        "header": "CONTEXT7_API_KEY",
        "scheme": "",
        "key": "${C7_KEY}",
    }
    assert context7["headers"] == {"X-Client": "cursor"}
    assert result.servers["plain"]["env"] == {"TZ": "${TZ}"}
    assert "envFile" in refused_reason(result, "notes") and '"env"' in refused_reason(result, "notes")
    assert "${workspaceFolder}" in refused_reason(result, "project")
    parsed = validate(result.servers)
    auth = parsed["context7"].auth
    assert isinstance(auth, ApiKeyAuth) and auth.header_value() == "c7"
    assert set(result.servers) | {name for name, _ in result.refused} == set(CURSOR["mcpServers"])


def test_user_home_becomes_home() -> None:
    result = import_mcp_servers({"mcpServers": {"n": {"command": "python", "args": ["${userHome}/s.py"]}}})
    assert result.servers["n"]["args"] == ["${HOME}/s.py"]


def test_vscode_servers_shape_and_inputs() -> None:
    data = {
        "inputs": [{"id": "token", "type": "promptString", "password": True}],
        "servers": {
            "fetch": {"type": "stdio", "command": "uvx", "args": ["mcp-server-fetch"]},
            "gh": {
                "type": "http",
                "url": "https://api.githubcopilot.com/mcp/",
                "headers": {"Authorization": "Bearer ${input:token}"},
            },
        },
    }
    result = import_mcp_servers(data)
    assert set(result.servers) == {"fetch"}
    assert "${input:token}" in refused_reason(result, "gh")
    validate(result.servers)


@pytest.mark.parametrize(
    ("headers", "auth", "rest"),
    [
        ({"X-API-Key": "k1"}, {"type": "api_key", "header": "X-API-Key", "scheme": "", "key": "k1"}, None),
        ({"authorization": "Basic dXNlcjpw"}, {"type": "api_key", "header": "Authorization", "scheme": "Basic", "key": "dXNlcjpw"}, None),
        ({"Authorization": "rawtoken123"}, {"type": "api_key", "header": "Authorization", "scheme": "", "key": "rawtoken123"}, None),
        ({"Authorization": "Bearer a", "X-Auth-Token": "b"}, {"type": "api_key", "header": "Authorization", "scheme": "Bearer", "key": "a"}, {"X-Auth-Token": "b"}),
        ({"X-Tenant": "acme"}, None, {"X-Tenant": "acme"}),
    ],
)  # fmt: skip
def test_headers_to_auth(
    headers: dict[str, str], auth: dict[str, str] | None, rest: dict[str, str] | None
) -> None:
    result = import_mcp_servers({"mcpServers": {"s": {"url": "https://example.com/mcp", "headers": headers}}})
    entry = result.servers["s"]
    assert entry.get("auth") == auth
    assert entry.get("headers") == rest
    validate(result.servers)


def test_second_key_header_is_kept_with_a_note() -> None:
    data = {
        "mcpServers": {
            "s": {"url": "https://e.com/mcp", "headers": {"Authorization": "Bearer a", "X-Api-Key": "b"}}
        }
    }
    result = import_mcp_servers(data)
    assert result.servers["s"]["headers"] == {"X-Api-Key": "b"}
    assert any(name == "s" and "X-Api-Key" in note for name, note in result.notes)


def test_sse_without_sse_path_and_undeclared_sse_url() -> None:
    data = {
        "mcpServers": {
            "old": {"type": "sse", "url": "https://example.com/events"},
            "maybe": {"url": "https://example.com/sse"},
            "http": {"type": "http", "url": "https://example.com/sse"},
            "nourl": {"type": "sse", "command": "x"},
        }
    }
    result = import_mcp_servers(data)
    assert result.servers["old"] == {"transport": "sse", "url": "https://example.com/events"}
    # Without a declared type, a URL ending in /sse is the HTTP+SSE endpoint, as Cursor infers it.
    assert result.servers["maybe"]["transport"] == "sse"
    assert all("deprecated" in note for name, note in result.notes if name in ("old", "maybe"))
    # A declared http type is taken at its word, with a note on the /sse path.
    assert result.servers["http"]["transport"] == "streamable_http"
    assert any(name == "http" and '"type": "sse"' in note for name, note in result.notes)
    assert 'needs a "url"' in refused_reason(result, "nourl")


def test_invalid_names_are_refused_with_a_suggestion_and_rename_works() -> None:
    data = {
        "mcpServers": {
            "My Server.v2": {"command": "x"},
            "My-Server-v2": {"command": "y"},
            "ok_name": {"command": "z"},
        }
    }
    result = import_mcp_servers(data)
    reason = refused_reason(result, "My Server.v2")
    assert "'My-Server-v2-2'" in reason  # the plain suggestion is taken by another entry
    assert set(result.servers) == {"My-Server-v2", "ok_name"}
    renamed = import_mcp_servers(data, rename={"My Server.v2": "my-server-legacy", "ghost": "g"})
    assert renamed.servers["my-server-legacy"] == {"transport": "stdio", "command": "x"}
    assert renamed.refused == []
    assert any(name == "ghost" for name, _ in renamed.notes)
    clash = import_mcp_servers(data, rename={"My Server.v2": "ok_name"})
    assert "already imported as 'ok_name'" in refused_reason(clash, "ok_name")


def test_suggest_name() -> None:
    assert suggest_name("@scope/server github") == "scope-server-github"
    assert suggest_name("...") == "server"
    assert suggest_name("café crème") == "cafe-creme"  # was "caf-cr-me": accents took their letters
    assert suggest_name("Zürich/prod") == "Zurich-prod"
    assert suggest_name("日本語") == "server"
    assert len(suggest_name("x" * 100)) == 64
    assert suggest_name("a b", {"a-b", "a-b-2"}) == "a-b-3"


@pytest.mark.parametrize(
    ("entry", "needle"),
    [
        ({"foo": 1}, "neither"),
        ({"command": "x", "url": "https://e.com/mcp"}, "both"),
        ({"type": "stdio", "url": "https://e.com/mcp"}, 'needs a "command"'),
        ({"type": "http", "command": "x"}, 'needs a "url"'),
        ({"type": "websocket", "url": "ws://e.com"}, "not supported"),
        ({"command": "x", "args": "--flag"}, "list of strings"),
        ({"command": "x", "env": {"A": ["b"]}}, '"env"'),
        ({"url": "ftp://e.com/mcp"}, "not an http"),
        ("npx server", "not an object"),
    ],
)
def test_refusals_have_reasons(entry: Any, needle: str) -> None:
    result = import_mcp_servers({"mcpServers": {"bad": entry}})
    assert result.servers == {}
    assert needle in refused_reason(result, "bad")


def test_disabled_and_dropped_fields() -> None:
    data = {
        "mcpServers": {
            "time": {
                "command": "uvx",
                "args": ["mcp-server-time"],
                "disabled": True,
                "alwaysAllow": ["x"],
                "timeout": 60,
            },
            "kept": {"command": "uvx", "timeouts": {"call_tool": 5}, "description": "Time tools"},
        }
    }
    result = import_mcp_servers(data)
    assert result.servers["time"]["enabled"] is False
    notes = [note for name, note in result.notes if name == "time"]
    assert any("alwaysAllow" in note and "approval" in note for note in notes)
    assert any("timeout" in note and "timeouts" in note for note in notes)
    assert result.servers["kept"]["timeouts"] == {"call_tool": 5}
    parsed = validate(result.servers)
    assert parsed["time"].enabled is False and parsed["kept"].timeouts.call_tool == 5


def test_secrets_never_reach_reasons_or_notes() -> None:
    secret = "sk-live-0123456789abcdef"
    data = {
        "mcpServers": {
            "query": {"url": f"ftp://e.com/mcp?token={secret}"},
            "bad-url": {
                "url": f"e.com/mcp?api_key={secret}",
                "headers": {"Authorization": f"Bearer {secret}"},
            },
            "ftp": {"url": "ftp://e.com", "headers": {"X-API-Key": secret, "X-Other-Token": secret}},
            "sse": {
                "type": "sse",
                "url": "https://e.com/sse",
                "headers": {"Authorization": f"Bearer {secret}"},
            },
            "stdio": {
                "command": "x",
                "env": {"TOKEN": secret},
                "headers": {"X-Api-Key": secret},
                "envFile": ".env",
            },
            "both": {
                "url": "https://e.com/mcp",
                "headers": {"X-API-Key": secret},
                "oauth": {"clientSecret": secret},
            },
        }
    }
    result = import_mcp_servers(data)
    assert len(result.refused) == 5
    reasons = dict(result.refused)
    assert all("not an http" in reasons[name] for name in ("query", "bad-url", "ftp")), reasons
    text = json.dumps([result.refused, result.notes])
    assert secret not in text


def test_merge_into_config() -> None:
    existing = {
        "version": 1,
        "servers": {"github": {"url": "https://old.example/mcp"}, "mine": {"command": "m"}},
    }
    before = copy.deepcopy(existing)
    result = import_mcp_servers(CLAUDE_CODE)
    merged, conflicts = merge_into_config(existing, result)
    assert existing == before  # the input is not modified
    assert conflicts == ["github"]
    assert merged["servers"]["github"] == {"url": "https://old.example/mcp"}
    assert list(merged["servers"]) == ["github", "mine", "sentry", "linear", "local"]
    replaced, conflicts = merge_into_config(existing, result, overwrite=True)
    assert conflicts == [] and replaced["servers"]["github"] == result.servers["github"]
    assert list(replaced["servers"]) == ["github", "mine", "sentry", "linear", "local"]  # replaced in place
    fresh, conflicts = merge_into_config(None, result)
    assert conflicts == [] and fresh == {"version": 1, "servers": result.servers}
    validate(replaced["servers"])
    with pytest.raises(ConfigError, match='"servers" must be an object'):
        merge_into_config({"version": 1, "servers": []}, result)


def test_files_round_trip_through_keen_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in ENV.items():
        monkeypatch.setenv(name, value)
    source = tmp_path / "claude_desktop_config.json"
    source.write_text(json.dumps(CLAUDE_DESKTOP), encoding="utf-8")
    merged, _ = merge_into_config(None, import_mcp_file(source))
    target = tmp_path / "configs.json"
    target.write_text(json.dumps(merged), encoding="utf-8")
    assert set(load_config(target).servers) == {"filesystem", "brave-search"}


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        ('{"mcpServers": {"a": {}},\n  oops}', "line 2"),
        ('{"version": 1, "servers": {}}', "Keen's own configs.json"),
        ('{"projects": {}}', 'no "mcpServers"'),
        ("[1, 2]", "expected a JSON object"),
        ('{"mcpServers": []}', "must be an object"),
    ],
)
def test_bad_files(tmp_path: Path, content: str, needle: str) -> None:
    path = tmp_path / "mcp.json"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(ConfigError, match=needle):
        import_mcp_file(path)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        import_mcp_file(tmp_path / "nope.json")


@pytest.mark.parametrize("key", ["httpUrl", "serverUrl"])
def test_gemini_and_windsurf_url_keys(key: str) -> None:
    result = import_mcp_servers({"mcpServers": {"remote": {key: "https://e.com/mcp"}}})
    assert result.servers["remote"] == {"transport": "streamable_http", "url": "https://e.com/mcp"}
    validate(result.servers)
