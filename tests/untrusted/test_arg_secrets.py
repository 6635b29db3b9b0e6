"""Credentials written in a stdio server's ``args``, and the server's stderr log.

Users paste ``--api-key VALUE``, ``--token VALUE``, ``--password=VALUE`` and
``-H 'Authorization: Bearer x'`` into ``args``. Hostile raw JSON-RPC servers echo their
command line on stderr, in a JSON-RPC error and before dying, with terminal escapes. No
front end (``keen mcp list|call``, ``keen chat -p``, ``keen serve``) shows those values,
nor does any file Keen writes; the stderr log is 0600 in a 0700 folder, escapes control
characters, and a symlink planted at its path is never written through.
"""

from __future__ import annotations

import json
import stat
from pathlib import Path
from typing import Any

import pytest

from helpers.hostile import CliRun, files_containing, hostile_entry, keen_cli
from helpers.serve import KeenServeProcess, connect

API_KEY = "ak-9f2c7e1b5d"
TOKEN = "tk-3a8d6f0e4c"
PASSWORD = "pw-71b9c2e5a0"
BEARER = "br-5e0a9d3c8f"
SECRETS = (API_KEY, TOKEN, PASSWORD, BEARER)
ARGS = [
    "--api-key",
    API_KEY,
    "--token",
    TOKEN,
    f"--password={PASSWORD}",
    "-H",
    f"Authorization: Bearer {BEARER}",
]
OSC52 = "\x1b]52;c;SGVsbG8=\x07"


def _entry(tmp: Path, name: str, spec: dict[str, Any]) -> dict[str, Any]:
    entry = hostile_entry(tmp / f"{name}.json", spec)
    entry["args"] = [*entry["args"], *ARGS]
    return entry


@pytest.fixture
def home(tmp_path: Path) -> Path:
    keen_home = tmp_path / "keen-home"
    (keen_home / "mcp").mkdir(parents=True)
    servers = {
        "early": _entry(
            tmp_path, "early", {"stderr_at_start": f"fatal: started as {{argv}} {OSC52}", "exit_at_start": 3}
        ),
        "chatty": _entry(
            tmp_path,
            "chatty",
            {
                "tools": [{"name": "leak", "description": "Leaks.", "inputSchema": {"type": "object"}}],
                "stderr_on_call": f"calling with {{argv}} {OSC52}",
                "errors": {"leak": {"code": -32603, "message": "upstream refused {argv}"}},
            },
        ),
    }
    (keen_home / "mcp" / "configs.json").write_text(json.dumps({"version": 1, "servers": servers}))
    # Planted before Keen's first run: the log path is a symlink to a file of the user's.
    (keen_home / "logs").mkdir(mode=0o755)
    (tmp_path / "outside.txt").write_text("the user's file\n")
    (keen_home / "logs" / "early.stderr.log").symlink_to(tmp_path / "outside.txt")
    return keen_home


def _clean(run: CliRun | str) -> None:
    text = run if isinstance(run, str) else run.output
    for secret in SECRETS:
        assert secret not in text, f"{secret} leaked\n{run}"


def test_args_credentials_never_show_and_the_log_is_keens(home: Path, tmp_path: Path) -> None:
    listed = keen_cli("mcp", "list", "--json", keen_home=home)
    _clean(listed)
    early = {s["name"]: s for s in json.loads(listed.stdout)}["early"]
    assert "fatal: started as --api-key [REDACTED]" in early["last_error"], early
    called = keen_cli("mcp", "call", "chatty", "leak", "--yes", keen_home=home)
    assert called.code != 0 and "upstream refused" in called.stderr, called
    _clean(called)
    script = tmp_path / "script.jsonl"
    schema = home / "skills" / "mcp:chatty" / "schemas" / "leak.json"
    steps = [
        {"content": "", "tool_calls": [{"name": "read_file", "arguments": {"path": str(schema)}}]},
        {
            "content": "",
            "tool_calls": [
                {"name": "call_mcp_tool", "arguments": {"server": "chatty", "tool": "leak", "arguments": {}}}
            ],
        },
        {"content": "done"},
    ]
    script.write_text("".join(json.dumps(s) + "\n" for s in steps))
    chat = keen_cli("chat", "-p", "go", "--model", f"scripted:{script}", "--yes", "--json", keen_home=home)
    calls = json.loads(chat.stdout)["tool_calls"]
    assert "upstream refused" in calls[1]["text"], chat
    _clean(chat)
    # Every file Keen wrote (logs, sessions, skills): configs.json holds them on purpose.
    for secret in SECRETS:
        assert files_containing(home, secret) == [home / "mcp" / "configs.json"], secret
    logs = home / "logs"
    assert stat.S_IMODE(logs.stat().st_mode) == 0o700
    assert (tmp_path / "outside.txt").read_text() == "the user's file\n"
    for name in ("early", "chatty"):
        log = logs / f"{name}.stderr.log"
        assert not log.is_symlink() and stat.S_IMODE(log.stat().st_mode) == 0o600
        text = log.read_text(encoding="utf-8")
        assert "\x1b" not in text and "\x07" not in text
        assert "\\x1b]52;c;SGVsbG8=\\x07" in text and "--api-key [REDACTED]" in text, text


@pytest.mark.anyio
async def test_keen_serve_hides_args_credentials(home: Path) -> None:
    with KeenServeProcess(home, ["--mode", "search"]) as proc:
        async with connect(proc, "session") as client:
            result = await client.call_tool(
                "call_mcp_tool", {"server": "chatty", "tool": "leak", "arguments": {}}
            )
    text = json.dumps(result.model_dump(mode="json"))
    assert result.is_error and "upstream refused" in text, text
    _clean(text)
    _clean(proc.log())


def test_a_log_an_older_keen_left_0644_is_tightened(home: Path) -> None:
    (home / "logs" / "early.stderr.log").unlink()
    old = home / "logs" / "early.stderr.log"
    old.write_text("--- an old run\n")
    old.chmod(0o644)
    keen_cli("mcp", "list", keen_home=home)
    assert stat.S_IMODE(old.stat().st_mode) == 0o600 and old.read_text().startswith("--- an old run\n")


def test_which_args_are_credentials() -> None:
    """What a flag, header or variable name says decides; words about a credential (a key
    *file*, an auth *type*) and keys that are not credentials (``--sort-key``) are not."""
    from keen.mcp.config.secrets import arg_secrets

    args = [
        *ARGS,
        "-e",
        "GITHUB_TOKEN=gh-0c1d2e3f",
        "--apiKey",
        "camel-9a8b7c",
        "https://user:pw-url-55@host/mcp?sig=sig-66aa77",
        "--key-file",
        "keys/server.pem",
        "--auth-type",
        "basic",
        "--sort-key",
        "name",
        "--port",
        "8080",
        "--header=X-Api-Key: hdr-4d5e6f",
        "--header=Accept: application/json",
        "--session-token",
        "--verbose",
    ]
    assert arg_secrets(args) == [
        API_KEY,
        TOKEN,
        PASSWORD,
        f"Bearer {BEARER}",
        "gh-0c1d2e3f",
        "camel-9a8b7c",
        "user:pw-url-55",
        "pw-url-55",
        "sig-66aa77",
        "hdr-4d5e6f",
    ]


def test_the_redactor_takes_every_credential_value_and_the_display_hides_those_that_look_secret() -> None:
    """One walk of the args finds the credentials for both (``_credentials``); what differs
    is deliberate: the redactor is given every value its words name (it judges them itself),
    the display hides a value only where it looks secret (``--token-limit 8000`` and ``--auth
    none`` stay readable) and never takes a ``-v`` after a secret flag for its value."""
    from keen.mcp.config.secrets import arg_secrets, hide_arg_secrets

    args = ["--token-limit", "8000", "--auth", "none", "--token", "-v", "--api-key", API_KEY]
    args += [f"--header=Authorization: Bearer {BEARER}", "https://u:pw-url-55@h/mcp?sig=sig-66aa77"]
    found = ["8000", "none", "-v", API_KEY, f"Bearer {BEARER}", "u:pw-url-55", "pw-url-55", "sig-66aa77"]
    assert arg_secrets(args) == found
    assert hide_arg_secrets(args, {}) == [
        *["--token-limit", "8000", "--auth", "none", "--token", "-v", "--api-key", "[REDACTED]"],
        "--header=Authorization: [REDACTED]",
        "https://[REDACTED]@h/mcp?sig=[REDACTED]",
    ]


def test_the_credentials_a_command_line_holds_become_variable_references() -> None:
    """What ``keen mcp add`` suggests for a quoted command line that holds a key: each value
    the display would hide read from a variable, named by its flag, header or own name (a
    ``NAME=VALUE`` keeps NAME), once per value, and the values that only look like flags or
    settings left as they are."""
    from keen.mcp.config.secrets import arg_secret_references

    args = ["--token-limit", "8000", "--api-key", API_KEY, "-e", "GITHUB_TOKEN=gh-0c1d2e3f"]
    args += [f"--header=Authorization: Bearer {BEARER}", "https://u:pw-url-55@h/mcp?sig=sig-66aa77"]
    referenced, names, holds = arg_secret_references(args, "my-files")
    assert referenced == [
        *["--token-limit", "8000", "--api-key", "${MY_FILES_API_KEY}", "-e", "GITHUB_TOKEN=${GITHUB_TOKEN}"],
        "--header=Authorization: ${MY_FILES_AUTHORIZATION}",
        "https://${MY_FILES_URL_SECRET}@h/mcp?sig=${MY_FILES_URL_SECRET_2}",
    ]
    assert names == [
        "MY_FILES_API_KEY",
        "GITHUB_TOKEN",
        "MY_FILES_AUTHORIZATION",
        "MY_FILES_URL_SECRET",
        "MY_FILES_URL_SECRET_2",
    ]
    assert holds == {
        "MY_FILES_AUTHORIZATION": "the whole `Bearer <token>` value",
        "MY_FILES_URL_SECRET": "user:password",
    }


def test_a_numeric_key_a_reference_and_a_bearer_under_any_header_in_a_command_line() -> None:
    """A long number after ``--api-key`` is a key (it was shown, and pasted back, as written);
    a value already written as ``${VAR}`` is left as it is (it got a variable of its own); a
    ``Bearer <token>`` after a header whose name says nothing is hidden by the redactor's
    rules, and was put into the command to paste."""
    from keen.mcp.config.secrets import arg_secret_references, hide_arg_secrets

    number = "84736251908473625190"
    args = ["--api-key", number, "--token", "${MYKEY}", "--header", "X-Custom: Bearer abcdefgh12345"]
    assert hide_arg_secrets(args, {}) == [
        *["--api-key", "[REDACTED]", "--token", "${MYKEY}", "--header", "X-Custom: Bearer [REDACTED]"]
    ]
    referenced, names, holds = arg_secret_references(args, "t2")
    assert referenced == [
        *["--api-key", "${T2_API_KEY}", "--token", "${MYKEY}", "--header", "X-Custom: ${T2_X_CUSTOM}"]
    ]
    assert names == ["T2_API_KEY", "T2_X_CUSTOM"]
    assert holds == {"T2_X_CUSTOM": "the whole `Bearer <token>` value"}
