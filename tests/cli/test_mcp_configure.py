"""Configuring servers as other MCP hosts do (``claude mcp add|add-json|get``): ``-t/--transport``,
``--timeout``, ``--overwrite`` that changes only what it is given, ``keen mcp get``,
``keen mcp add-json`` and ``keen mcp enable|disable``, through the CLI with a private home."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from conftest import SERVERS
from helpers.cli import Home, make_home
from helpers.forkserver import script_args

SECRET = "sk-test-77c1e0a9f3"


@pytest.fixture
def home(tmp_path: Path) -> Home:
    return make_home(tmp_path)


def servers(home: Home) -> dict[str, dict[str, object]]:
    return json.loads(home.config_path.read_text())["servers"]


def test_transport_flag_takes_the_url_as_claude_mcp_add_does(home: Home) -> None:
    # `keen mcp add -t http x URL` said to put a command after --.
    runs = {
        "web": home.keen("mcp", "add", "-t", "http", "web", "https://mcp.example.com/mcp"),
        "old": home.keen("mcp", "add", "--transport", "sse", "old", "https://old.example.com/events"),
        "bare": home.keen("mcp", "add", "bare", "https://bare.example.com/mcp"),
        "guess": home.keen("mcp", "add", "guess", "https://guess.example.com/sse"),
    }
    for run in runs.values():
        assert run.code == 0, str(run)
    got = servers(home)
    assert got["web"] == {"transport": "streamable_http", "url": "https://mcp.example.com/mcp"}
    assert got["old"] == {"transport": "sse", "url": "https://old.example.com/events"}
    assert got["bare"]["transport"] == "streamable_http"
    assert got["guess"]["transport"] == "sse"
    assert "deprecated" in runs["old"].stderr and "deprecated" in runs["guess"].stderr


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (
            ["-t", "websocket", "x", "https://h/mcp"],
            "-t/--transport takes stdio, http or sse, not 'websocket'",
        ),
        (["-t", "http", "x"], "-t http takes the server's URL: keen mcp add -t http x URL"),
        (["-t", "stdio", "x", "--url", "https://h/mcp"], "-t stdio takes a command after --"),
        (["-t", "sse", "x", "--", "npx", "srv"], "-t sse takes the server's URL"),
    ],
)
def test_a_transport_that_does_not_fit_says_what_to_write(home: Home, args: list[str], words: str) -> None:
    run = home.keen("mcp", "add", *args)
    assert run.code == 2 and words in " ".join(run.stderr.split()), str(run)
    assert not home.config_path.exists()


def test_an_authorization_header_left_with_its_scheme_alone_is_refused(home: Home, tmp_path: Path) -> None:
    """``-H "Authorization: Bearer $KEY"`` in double quotes with KEY unset reaches Keen as
    ``Authorization: Bearer``: it was stored as the raw key "Bearer", and the server's 401
    came later. It is refused, saying how to write the key (on a command line: the shell's
    quoting; in a file: the file); a raw key alone still works."""
    home.write({})
    for args in (
        ("mcp", "add", "docs", "--url", "https://d.example.com/mcp", "-H", "Authorization: Bearer "),
        (
            "mcp",
            "add-json",
            "docs",
            '{"url": "https://d.example.com/mcp", "headers": {"Authorization": "token"}}',
        ),
    ):
        run = home.keen(*args)
        assert run.code == 2, run
        assert "the Authorization header is the scheme" in run.stderr and "no key after it" in run.stderr, run
        assert "in single quotes" in run.stderr, run
        assert servers(home) == {}
    # From a file no shell took part: the advice is about the file. DPoP (RFC 9449) and
    # Discord's Bot are schemes too.
    document = tmp_path / "mcp.json"
    entries = {
        name: {"url": "https://d.example.com/mcp", "headers": {"Authorization": scheme}}
        for name, scheme in (("bearer", "Bearer"), ("dpop", "DPoP"), ("bot", "Bot"))
    }
    document.write_text(json.dumps({"mcpServers": entries}), encoding="utf-8")
    imported = home.keen("mcp", "import", str(document))
    assert imported.code == 1, imported
    said = " ".join(imported.stderr.split())
    for scheme in ("Bearer", "DPoP", "Bot"):
        assert f"the Authorization header is the scheme {scheme!r} with no key after it" in said, imported
        assert f"or write '{scheme} ${{VAR}}' there and Keen takes the key from the environment" in said, (
            imported
        )
    assert "single quotes" not in said, imported
    assert servers(home) == {}
    raw = home.keen("mcp", "add", "docs", "--url", "https://d.example.com/mcp", "-H", "Authorization: k-123")
    assert raw.code == 0, raw
    assert servers(home)["docs"]["auth"] == {
        "type": "api_key",
        "header": "Authorization",
        "scheme": "",
        "key": "k-123",
    }


def test_timeout_sets_the_servers_connect_limit(home: Home) -> None:
    run = home.keen("mcp", "add", "slow", "--timeout", "45", "--", "uvx", "slow-server")
    assert run.code == 0, str(run)
    assert servers(home)["slow"]["timeouts"] == {"connect": 45.0}
    bad = home.keen("mcp", "add", "worse", "--timeout", "0", "--", "x")
    assert bad.code == 2 and "--timeout" in bad.stderr, str(bad)


def test_overwrite_changes_only_what_it_is_given(home: Home) -> None:
    # `--overwrite` dropped the entry's timeouts, description and env.
    home.write(
        {
            "files": {
                "command": "npx",
                "args": ["-y", "old-files", "/tmp"],
                "env": {"TOKEN": "${FILES_TOKEN}"},
                "timeouts": {"connect": 60, "call_tool": 300},
                "description": "My files",
                "enabled": False,
            }
        }
    )
    run = home.keen("mcp", "add", "files", "--overwrite", "--timeout", "90", "--", "npx", "-y", "new-files")
    assert run.code == 0, str(run)
    assert servers(home)["files"] == {
        "transport": "stdio",
        "command": "npx",
        "args": ["-y", "new-files"],  # a new command comes with its own arguments
        "env": {"TOKEN": "${FILES_TOKEN}"},
        "timeouts": {"connect": 90.0, "call_tool": 300},
        "description": "My files",
        "enabled": False,
    }
    assert "kept" in run.stderr and "description" in run.stderr
    # Given, a field is replaced; another transport drops the old one's fields.
    again = home.keen("mcp", "add", "files", "--overwrite", "-e", "OTHER=1", "--", "files-server")
    assert again.code == 0, str(again)
    assert servers(home)["files"]["env"] == {"OTHER": "1"}
    assert "args" not in servers(home)["files"]
    remote = home.keen("mcp", "add", "files", "--overwrite", "-t", "http", "https://f.example.com/mcp")
    assert remote.code == 0, str(remote)
    entry = servers(home)["files"]
    assert entry["transport"] == "streamable_http" and not {"command", "env", "args"} & set(entry)
    assert entry["description"] == "My files" and entry["timeouts"] == {"connect": 90.0, "call_tool": 300}


def test_get_shows_the_entry_without_its_secrets(home: Home) -> None:
    home.write(
        {
            "local": {"command": "uvx", "args": ["srv", "--root", "/data"], "env": {"API_TOKEN": SECRET}},
            "remote": {
                "transport": "sse",
                "url": "https://h.example.com/sse",
                "auth": {"type": "api_key", "header": "X-Api-Key", "scheme": "", "key": SECRET},
                "headers": {"X-Team": "blue"},
            },
        }
    )
    local = home.keen("mcp", "get", "local")
    assert local.code == 0, str(local)
    assert "command: uvx" in local.stdout and "args: srv --root /data" in local.stdout
    assert "env: API_TOKEN" in local.stdout and "connect 15.0" in local.stdout
    remote = home.keen("mcp", "get", "remote", "--json")
    assert remote.code == 0, str(remote)
    shown = remote.json()
    assert shown["transport"] == "sse" and "deprecated" in shown["note"]
    assert shown["auth"] == {"type": "api_key", "header": "X-Api-Key"} and shown["headers"] == ["X-Team"]
    assert SECRET not in local.stdout + local.stderr + remote.stdout + remote.stderr
    missing = home.keen("mcp", "get", "nope")
    assert (
        missing.code == 2 and "no server named 'nope'" in missing.stderr and "local, remote" in missing.stderr
    )


def test_get_shows_what_the_trust_and_the_sign_in_use(home: Home) -> None:
    """``keen mcp get`` shows the entry "as Keen uses it" (README "Commands"): its pinning
    policy (the transport's default when unset), ``trust_annotations``, a stdio entry's
    ``inherit_env`` and an OAuth entry's scopes and callback port; never the client secret."""
    home.write(
        {
            "local": {
                "command": "uvx",
                "args": ["srv"],
                "inherit_env": ["AWS_PROFILE"],
                "trust_annotations": True,
            },
            "remote": {
                "url": "https://h.example.com/mcp",
                "auth": {
                    "type": "oauth",
                    "scopes": ["repo", "read:org"],
                    "callback_port": 1999,
                    "client_secret": SECRET,
                },
            },
            "open": {"url": "https://o.example.com/mcp", "pinning": "off"},
        }
    )
    local, remote, remote_text, opened = home.keen_many(
        ("mcp", "get", "local", "--json"),
        ("mcp", "get", "remote", "--json"),
        ("mcp", "get", "remote"),
        ("mcp", "get", "open", "--json"),
    )
    assert local.json()["pinning"] == "warn" and local.json()["trust_annotations"] is True, local
    assert local.json()["inherit_env"] == ["AWS_PROFILE"], local
    shown = remote.json()
    assert shown["pinning"] == "quarantine" and shown["trust_annotations"] is False, remote
    assert shown["auth"] == {"type": "oauth", "scopes": ["repo", "read:org"], "callback_port": 1999}, remote
    assert "auth: type oauth, scopes repo read:org, callback_port 1999" in remote_text.stdout, remote_text
    assert "pinning: quarantine" in remote_text.stdout and "trust_annotations: no" in remote_text.stdout
    assert opened.json()["pinning"] == "off", opened
    assert SECRET not in remote.stdout + remote.stderr + remote_text.stdout + remote_text.stderr


def test_get_hides_credentials_written_in_args(home: Home) -> None:
    """``keen mcp get`` of a stdio entry whose args carry credentials (README "Credentials in
    ``args`` are secrets"): the values after ``--api-key`` and ``--password``, of
    ``--token=VALUE`` and ``NAME_TOKEN=VALUE``, and an env value repeated in the args, are
    hidden in text and ``--json``, while the rest of the command line stays."""
    values = ("ak-get-51c0e9", "tk-get-8d27af", "pw-get-3be640", "gh-get-f01a7c", "env-get-6e93d2")
    args = ["srv", "--api-key", values[0], f"--token={values[1]}", "--password", values[2]]
    args += [f"GITHUB_TOKEN={values[3]}", "--dsn", values[4], "--root", "/data"]
    home.write({"local": {"command": "uvx", "args": args, "env": {"DB_PASSWORD": values[4]}}})
    text, as_json = home.keen_many(("mcp", "get", "local"), ("mcp", "get", "local", "--json"))
    assert text.code == 0 and as_json.code == 0, (text, as_json)
    for value in values:
        assert value not in text.stdout + text.stderr + as_json.stdout + as_json.stderr, value
    assert "--api-key [REDACTED] --token=[REDACTED] --password [REDACTED]" in text.stdout, text
    assert as_json.json()["args"][-2:] == ["--root", "/data"], as_json
    assert "GITHUB_TOKEN=[REDACTED]" in as_json.json()["args"], as_json


def test_get_hides_credentials_where_they_stand_not_inside_ordinary_args(home: Home) -> None:
    """An env value counts only under a name that says secret, and a credential hides where
    it stands: ``NODE_ENV=prod`` made ``@acme/products-mcp`` show as
    ``@acme/[REDACTED]ucts-mcp``, ``LOG_FORMAT=pretty`` hid ``--format pretty``'s value, and
    the ``github`` after ``--auth-provider`` hid itself inside ``github-tools``. A value
    that starts with dashes (a PEM key) is still the secret flag's value."""
    args = ["-y", "@acme/products-mcp", "--format", "pretty", "--auth-provider", "github"]
    args += ["--with", "github-tools", "--private-key", "-----BEGIN KEY-----abc", "--echo", "x-tok-pos-77aa"]
    env = {"NODE_ENV": "prod", "LOG_FORMAT": "pretty", "API_TOKEN": "tok-pos-77aa"}
    home.write({"one": {"command": "npx", "args": args, "env": env}})
    shown = home.keen("mcp", "get", "one", "--json")
    assert shown.code == 0, shown
    assert shown.json()["args"] == [
        *["-y", "@acme/products-mcp", "--format", "pretty", "--auth-provider", "[REDACTED]"],
        *["--with", "github-tools", "--private-key", "[REDACTED]", "--echo", "x-[REDACTED]"],
    ], shown


def test_add_json_takes_an_mcp_servers_entry(home: Home) -> None:
    script = script_args(str(SERVERS / "basic_stdio.py"))  # forked from the warm process
    entry = {"command": sys.executable, "args": script, "env": {"A": "1"}, "alwaysAllow": ["x"]}
    run = home.keen("mcp", "add-json", "basic", json.dumps(entry))
    assert run.code == 0, str(run)
    assert servers(home)["basic"] == {
        "transport": "stdio",
        "command": sys.executable,
        "args": script,
        "env": {"A": "1"},
    }
    assert "alwaysAllow" in run.stderr  # dropped, and said so
    tools = home.keen("mcp", "tools", "basic", "--json")
    assert tools.code == 0 and "add" in {t["name"] for t in tools.json()}, str(tools)
    taken = home.keen("mcp", "add-json", "basic", '{"command": "other"}')
    assert taken.code == 2 and "--overwrite" in taken.stderr
    replaced = home.keen(
        "mcp", "add-json", "basic", '{"type": "http", "url": "https://b.example.com/mcp"}', "--overwrite"
    )
    assert replaced.code == 0 and servers(home)["basic"]["transport"] == "streamable_http", str(replaced)
    for text, words in (
        ("{nope", "JSON is not valid JSON (line 1, column 2"),
        ("[1]", "JSON must be a JSON object"),
    ):
        bad = home.keen("mcp", "add-json", "x", text)
        assert bad.code == 2 and words in bad.stderr, str(bad)


def test_disable_and_enable(home: Home) -> None:
    home.write({"basic": {"command": sys.executable, "args": script_args(str(SERVERS / "basic_stdio.py"))}})
    off = home.keen("mcp", "disable", "basic")
    assert off.code == 0 and "disabled basic" in off.stdout, str(off)
    assert servers(home)["basic"]["enabled"] is False
    (row,) = home.keen("mcp", "list", "--json").json()
    assert row["state"] == "configured" and '"enabled": false' in row["last_error"]
    assert "already disabled" in home.keen("mcp", "disable", "basic").stdout
    on = home.keen("mcp", "enable", "basic")
    assert on.code == 0 and "next: keen mcp connect basic" in on.stdout, str(on)
    assert "enabled" not in servers(home)["basic"]
    (row,) = home.keen("mcp", "list", "--json").json()
    assert row["state"] == "connected"
    assert home.keen("mcp", "enable", "nope").code == 2
