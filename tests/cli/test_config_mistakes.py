"""What a user's own hand does to configs.json and the values typed at ``keen mcp``: each
mistake gets an error that says what to fix, and every edit keeps the entries it was given
(README "Configure servers"). Real files in a temporary ``KEEN_HOME``, ``keen`` run as the
console script's ``app``."""

from __future__ import annotations

import json
import os
import socket
import sys
from pathlib import Path

import filelock
import pytest

from conftest import SERVERS
from helpers.cli import Home, make_home
from helpers.forkserver import script_args
from helpers.http_servers import make_basic_server, serve_http
from keen.cli.serve_cmd import FETCH_LIMIT, MAX_SESSIONS
from keen.mcp.config import edit
from keen.mcp.config.servers import MOST_LEVELS


@pytest.fixture
def home(tmp_path: Path) -> Home:
    return make_home(tmp_path)


def _nested(levels: int) -> str:
    return "[" * levels + "]" * levels


@pytest.mark.parametrize("levels", [MOST_LEVELS + 1, 600, 5000])
def test_json_nested_too_deep_is_refused_with_its_fix_and_kept(home: Home, levels: int) -> None:
    # Just past MOST_LEVELS the entry was only its server's config_error ("args.0" is no
    # string). From about 500 levels, below Python's parser limit (about a thousand), the
    # checks after the parser ran out of recursion; above it the parser itself did: both were
    # "internal error". The file is refused whole at MOST_LEVELS + 1 so one rule covers both.
    text = '{"version": 1, "servers": {"a": {"command": "true", "args": ' + _nested(levels) + "}}}"
    home.config_path.parent.mkdir(parents=True)
    home.config_path.write_text(text)
    for args in (("mcp", "list"), ("mcp", "add", "b", "--", "true"), ("mcp", "disable", "a")):
        run = home.keen(*args)
        assert run.code == 2, str(run)
        assert f"nested more than {MOST_LEVELS} levels deep" in run.stderr, str(run)
        assert "internal error" not in run.stderr
    assert home.config_path.read_text() == text
    imported = home.keen("mcp", "import", str(home.config_path))
    assert imported.code == 2 and f"nested more than {MOST_LEVELS} levels deep" in imported.stderr, str(
        imported
    )


@pytest.mark.parametrize("levels", [MOST_LEVELS + 1, 5000])
def test_add_json_nested_too_deep_says_so(home: Home, levels: int) -> None:
    entry = '{"command": "true", "args": ' + _nested(levels) + "}"
    run = home.keen("mcp", "add-json", "a", entry)
    assert run.code == 2 and "nested" in run.stderr and "internal error" not in run.stderr, str(run)
    assert not home.config_path.exists()


def test_json_nested_as_deep_as_allowed_still_loads(home: Home, tmp_path: Path) -> None:
    # The root, "servers" and the entry are three levels: "args" may nest the rest.
    args = json.loads(_nested(MOST_LEVELS - 3))
    home.write({"a": {"command": "true", "args": args}})
    hosts = tmp_path / "hosts.json"
    hosts.write_text(
        json.dumps({"mcpServers": {"h": {"command": "true", "args": json.loads(_nested(MOST_LEVELS - 4))}}})
    )
    entry = json.dumps({"command": "true", "args": json.loads(_nested(MOST_LEVELS - 3))})
    for args in (
        ("mcp", "get", "a"),
        ("mcp", "list", "--json"),
        ("mcp", "disable", "a"),
        ("mcp", "add", "b", "--", "true"),
        ("mcp", "import", str(hosts)),
        ("mcp", "add-json", "c", entry),
    ):
        run = home.keen(*args)
        assert "internal error" not in run.stderr and "nested more than" not in run.stderr, str(run)
        if args[1] in ("import", "add-json"):  # a new entry is checked whole: its field's error
            assert '"args" must be a list of strings' in run.stderr, str(run)
    assert set(json.loads(home.config_path.read_text())["servers"]) == {"a", "b"}


def test_a_lone_surrogate_escape_is_one_servers_error_and_edits_keep_it(home: Home) -> None:
    # "\ud800" alone reads as a str with no UTF-8 form: writing configs.json back, printing
    # the entry and rendering its skill each stopped with UnicodeEncodeError.
    home.config_path.parent.mkdir(parents=True)
    home.config_path.write_text(
        '{"version": 1, "servers": {"odd": {"command": "true", "description": "\\ud800x"},'
        ' "fine": {"command": "true"}}}'
    )
    added = home.keen("mcp", "add", "more", "--", "true")
    assert added.code == 0, str(added)
    disabled = home.keen("mcp", "disable", "odd")
    assert disabled.code == 0, str(disabled)
    kept = json.loads(home.config_path.read_text(encoding="utf-8"))["servers"]
    assert kept["odd"] == {"command": "true", "description": "\ud800x", "enabled": False}
    assert set(kept) == {"odd", "fine", "more"}
    shown = home.keen("mcp", "get", "odd")
    assert shown.code == 0 and "'description' holds \\ud800" in shown.stdout, str(shown)
    assert home.keen("mcp", "enable", "odd").code == 0
    listed = home.keen("mcp", "list", "--json")
    rows = {row["name"]: row for row in listed.json()}
    assert rows["odd"]["state"] == "config_error"
    assert "'description' holds \\ud800, which is no character" in rows["odd"]["last_error"]
    assert rows["fine"]["state"] != "config_error"


def test_an_argument_that_is_not_utf8_is_refused_by_add(home: Home, tmp_path: Path) -> None:
    # The shell hands Python bytes that are not UTF-8 as lone surrogates (surrogateescape).
    run = home.keen("mcp", "add", "x", "--", "true", "\udcff")
    assert run.code == 2 and "'args' holds \\udcff, which is no character" in run.stderr, str(run)
    assert not home.config_path.exists()


def test_a_lone_surrogate_in_a_field_name_is_shown_as_its_escape(home: Home) -> None:
    home.config_path.parent.mkdir(parents=True)
    home.config_path.write_text('{"version": 1, "servers": {"odd": {"command": "true", "\\udc00": 1}}}')
    for args in (("mcp", "get", "odd"), ("mcp", "get", "odd", "--json")):
        shown = home.keen(*args)
        assert shown.code == 0 and "\\udc00" in shown.stdout, str(shown)


SECRET = "sk-live-7f3e9a1c55"
LISTENING = "http://127.0.0.1:{port}/mcp"


@pytest.mark.parametrize(
    ("entry", "field", "words"),
    [
        (
            {"url": LISTENING, "headers": {"X-Key": f"{SECRET}\r\nX-Other: y"}},
            "headers",
            "line break",
        ),
        ({"url": LISTENING, "headers": {"X Key": "v"}}, "headers", "a header name holds ' ' after 'X'"),
        (
            {"url": LISTENING, "headers": {f"Authorization: Bearer {SECRET}": "v"}},
            "headers",
            "a header name holds ':' after 'Authorization'",
        ),
        (
            {"url": LISTENING, "headers": {f"X-Api-Key {SECRET}": "v"}},
            "headers",
            "a header name holds ' ' after 'X-Api-Key'",
        ),
        (
            {"url": LISTENING, "auth": {"type": "api_key", "key": f"{SECRET}\n"}},
            "auth.key",
            "line break",
        ),
        (
            {"url": LISTENING, "auth": {"type": "api_key", "header": "X: Y", "key": SECRET}},
            "auth.header",
            "a header name holds ':' after 'X'",
        ),
        (
            {"url": LISTENING, "auth": {"type": "api_key", "header": f"X-Api-Key: {SECRET}", "key": "k"}},
            "auth.header",
            "put the value on the right",
        ),
        ({"command": "true", "env": {"A=B": "x"}}, "env", "an env name holds '=' after 'A'"),
        (
            {"command": "true", "env": {f"GITHUB_PERSONAL_ACCESS_TOKEN={SECRET}": ""}},
            "env",
            "an env name holds '=' after 'GITHUB_PERSONAL_ACCESS_TOKEN'; put the value on the right",
        ),
        ({"command": "true", "env": {f"=TOKEN={SECRET}": ""}}, "env", "an env name starts with '='"),
        (
            {"command": "true", "env": {f"TOKEN {SECRET}": "\0"}},
            "env",
            "the value of 'TOKEN' holds a NUL character",
        ),
        ({"command": "true", "env": {f"TOKEN={SECRET}": 5}}, "env.TOKEN", "valid string"),
        (
            {"command": "true", "env": {f"TOKEN={SECRET}": "${KEEN_TEST_NEVER_SET}"}},
            "env.TOKEN",
            "uses ${KEEN_TEST_NEVER_SET}, which is not set",
        ),
        (
            {"command": "true", "inherit_env": [f"TOKEN={SECRET}"]},
            "inherit_env",
            "a variable name holds '=' after 'TOKEN'",
        ),
        ({"command": "true", "env": {"TOKEN": f"{SECRET}\0"}}, "env", "NUL character"),
        ({"command": "true", "args": ["a\0b"]}, "args", "NUL character"),
        ({"command": "tr\0ue"}, "command", "NUL character"),
        ({"command": "true", "cwd": ""}, "cwd", "is blank"),
        ({"url": "http://127.0.0.1:9/m\tcp"}, "url", "a URL has none"),
        ({"url": "http://127.0.0.1:9/\x1b[2J"}, "url", "a URL has none"),
        ({"url": " http://127.0.0.1:9/mcp"}, "url", "starts or ends with a space"),
        ({"url": "http://my host:9/mcp"}, "url", "a space in its host"),
    ],
)
def test_what_no_header_or_process_can_carry_is_the_entrys_error(
    home: Home, entry: dict[str, object], field: str, words: str
) -> None:
    # These were sent (or spawned) as given, and the refusal read as the server breaking
    # the protocol, or a command not found; a key with a line break was printed in it.
    # A socket that listens: the connection opens, so a request would be written to it.
    with socket.create_server(("127.0.0.1", 0)) as listener:
        if entry.get("url") == LISTENING:
            entry = {**entry, "url": f"http://127.0.0.1:{listener.getsockname()[1]}/mcp"}
        _list_the_odd_entry(home, entry, field, words)


def _list_the_odd_entry(home: Home, entry: dict[str, object], field: str, words: str) -> None:
    home.write({"odd": entry, "fine": {"command": "true"}})
    listed = home.keen("mcp", "list", "--json")
    rows = {row["name"]: row for row in listed.json()}
    assert rows["odd"]["state"] == "config_error", str(listed)
    assert f"field {field!r}" in rows["odd"]["last_error"] and words in rows["odd"]["last_error"]
    assert SECRET not in listed.stdout + listed.stderr
    assert rows["fine"]["state"] != "config_error"


@pytest.mark.parametrize(
    ("entry", "field"),
    [
        ({"command": "true", "env": {f"API_TOKEN={SECRET}": ""}}, "env"),
        ({"url": "http://127.0.0.1:9/mcp", "headers": {f"X-Api-Key: {SECRET}": ""}}, "headers"),
    ],
)
def test_a_value_pasted_into_a_name_is_in_no_error(home: Home, entry: dict[str, object], field: str) -> None:
    # "'API_TOKEN=sk-...' is not an environment variable name" printed the key in each of these.
    home.write({"odd": entry})
    for args in (("mcp", "get", "odd"), ("mcp", "get", "odd", "--json"), ("mcp", "list")):
        run = home.keen(*args)
        shown = run.stdout + run.stderr
        assert f"field {field!r}" in shown and SECRET not in shown, str(run)
    added = home.keen("mcp", "add-json", "pasted", json.dumps(entry))
    assert added.code == 2 and "put the value on the right" in added.stderr, str(added)
    assert SECRET not in added.stdout + added.stderr


def test_an_empty_env_name_is_skipped_and_the_server_starts(home: Home) -> None:
    # The operating system takes it and the server started before; then it was a config error.
    script = script_args(str(SERVERS / "basic_stdio.py"))
    home.write({"basic": {"command": sys.executable, "args": script, "env": {"": "", "KEPT": "yes"}}})
    listed = home.keen("mcp", "list", "--json")
    assert listed.json()[0]["state"] == "connected", str(listed)
    assert listed.stderr.count('an "env" entry with an empty name is skipped; remove it') == 1, str(listed)
    called = home.keen("mcp", "call", "basic", "env", "--args", '{"name": "KEPT"}', "--yes")
    assert called.code == 0 and "yes" in called.stdout, str(called)


@pytest.mark.parametrize(
    ("cwd", "words"),
    [
        (
            "no/such/dir",
            "'no/such/dir' does not exist (a relative cwd is taken from the directory keen runs in)",
        ),
        ("~/no-such-dir", "(~ is not expanded there: write the whole path)"),
        ("{missing}", "does not exist;"),
        ("{file}", "is not a directory;"),
    ],
)
def test_a_cwd_that_is_no_directory_is_named_not_the_command(
    home: Home, tmp_path: Path, cwd: str, words: str
) -> None:
    # The spawn's chdir failed, and the error said "command 'true' was not found".
    file = tmp_path / "a-file"
    file.write_text("")
    cwd = cwd.format(missing=tmp_path / "gone", file=file)
    home.write({"odd": {"command": "true", "cwd": cwd}})
    listed = home.keen("mcp", "list", "--json")
    error = listed.json()[0]["last_error"]
    assert f"its working directory {cwd!r}" in error and words in error, error
    assert 'fix "cwd" in configs.json' in error and "was not found" not in error


def test_edits_of_a_file_with_a_byte_order_mark_keep_its_entries(home: Home) -> None:
    home.config_path.parent.mkdir(parents=True)
    home.config_path.write_bytes(b'\xef\xbb\xbf{"version": 1, "servers": {"a": {"command": "true"}}}')
    run = home.keen("mcp", "add", "b", "--", "true")
    assert run.code == 0, str(run)
    # add-json given a file's text ($(cat entry.json)) said "Unexpected UTF-8 BOM".
    added = home.keen("mcp", "add-json", "c", '\ufeff{"command": "true"}')
    assert added.code == 0, str(added)
    assert set(json.loads(home.config_path.read_text(encoding="utf-8"))["servers"]) == {"a", "b", "c"}


@pytest.mark.parametrize("number", ["1e400", "-1e400", "NaN", "Infinity"])
def test_a_number_json_cannot_write_back_is_the_entrys_error_and_no_edit_rewrites_it(
    home: Home, number: str
) -> None:
    # 1e400 read as infinity: a timeout that never came, and the next edit wrote the file back
    # with "Infinity", which no other JSON reader takes.
    text = '{"version": 1, "servers": {"a": {"command": "true", "timeouts": {"connect": ' + number + "}}}}"
    home.config_path.parent.mkdir(parents=True)
    home.config_path.write_text(text)
    run = home.keen("mcp", "add", "b", "--", "true")
    assert run.code == 2 and "at servers.a.timeouts.connect" in run.stderr, str(run)
    assert "write a plain number there first" in run.stderr
    assert home.config_path.read_text() == text
    listed = home.keen("mcp", "list", "--json")
    error = listed.json()[0]["last_error"]
    assert "field 'timeouts.connect'" in error and "finite number" in error, error


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (("--port", "99999"), "--port 99999 is no TCP port; use 1-65535"),
        (("--port", "-1"), "--port -1 is no TCP port; use 1-65535"),
        (("--ready-wait", "nan"), "--ready-wait must be a number of seconds >= 0, got nan"),
        (("--auth-ttl", "inf"), "--auth-ttl must be a positive number of seconds, got inf"),
        # The error named both limits whichever was wrong, and neither the value nor a default.
        (
            ("--fetch-limit", "0"),
            f"--fetch-limit must be a whole number >= 1, got 0; {FETCH_LIMIT} (the default) lets one "
            f"caller read {FETCH_LIMIT} descriptions a minute",
        ),
        (
            ("--max-sessions", "-3"),
            f"--max-sessions must be a whole number >= 1, got -3; {MAX_SESSIONS} (the default) lets one "
            f"caller hold {MAX_SESSIONS} open sessions",
        ),
    ],
)
def test_serve_refuses_a_port_or_a_time_it_cannot_use(home: Home, args: tuple[str, ...], says: str) -> None:
    # A port past 65535 was an internal error; "nan" passed every check and "inf" never ends.
    run = home.keen("serve", "--transport", "http", *args)
    assert run.code == 2 and says in run.stderr and "internal error" not in run.stderr, str(run)


def test_keen_serves_limits_default_to_keen_serves_own() -> None:
    """The CLI writes keen.serve's defaults rather than import keen.serve at every start;
    its options' defaults, and so the errors quoting them, are the server's."""
    import inspect

    from typer.models import OptionInfo

    from keen.cli.serve_cmd import serve
    from keen.serve.store import DEFAULT_FETCH_LIMIT, DEFAULT_MAX_SESSIONS

    options = {name: p.default for name, p in inspect.signature(serve).parameters.items()}
    fetch, sessions = options["fetch_limit"], options["max_sessions"]
    assert isinstance(fetch, OptionInfo) and isinstance(sessions, OptionInfo)
    assert (fetch.default, sessions.default) == (DEFAULT_FETCH_LIMIT, DEFAULT_MAX_SESSIONS)


def test_a_url_with_a_space_in_its_query_connects_as_httpx2_sends_it(home: Home, tmp_path: Path) -> None:
    # httpx2 sends the space as %20; the check refused it, a server that connected before.
    with serve_http(make_basic_server()) as server:
        url = f"{server.url}?team=My Team"
        home.write({"written": {"url": url}})
        vscode = tmp_path / "mcp.json"
        vscode.write_text(json.dumps({"servers": {"imported": {"type": "http", "url": url}}}))
        assert home.keen("mcp", "import", str(vscode)).code == 0
        added = home.keen("mcp", "add", "added", "--url", url)
        assert added.code == 0, str(added)
        listed = home.keen("mcp", "list", "--json")
        rows = {row["name"]: row for row in listed.json()}
        assert set(rows) == {"written", "imported", "added"}, str(listed)
        for row in rows.values():
            assert row["state"] == "connected" and row["tool_count"] > 0, str(listed)
        assert "team=My%20Team" in {request.query for request in server.requests}


def test_add_refuses_a_url_with_a_control_character_before_printing_it(home: Home) -> None:
    run = home.keen("mcp", "add", "y", "--url", "http://h/\x1b[2J")
    assert run.code == 2 and "field 'url'" in run.stderr and "\x1b" not in run.stdout + run.stderr, str(run)
    assert not home.config_path.exists()


def test_a_cache_file_nested_past_the_parser_is_rebuilt_not_an_internal_error(home: Home) -> None:
    # Each cache reader took a half-written or garbled file for "no cache", but a file nested
    # deeper than json's parser goes raised RecursionError through it.
    script = script_args(str(SERVERS / "basic_stdio.py"))
    home.write({"basic": {"command": sys.executable, "args": script}})
    synced = home.keen("mcp", "sync")
    assert synced.code == 0, str(synced)
    assert home.keen_process("tools", "search", "echo").code == 0  # its exit saves the search index
    assert home.keen_process("skills", "list").code == 0  # and this one the skills store
    cache = home.keen_home / "cache"
    damaged = [
        next(cache.glob("skills-*.json")),
        cache / "configs-valid.json",
        next(cache.glob("toolsearch/*/meta.json")),
    ]
    for file in damaged:
        kept = file.read_bytes()
        file.write_text(_nested(100_000))
        for args in (("prompt",), ("skills", "list"), ("tools", "search", "echo")):
            run = home.keen(*args)
            assert run.code == 0 and "internal error" not in run.stderr, f"{file.name}: {run}"
        assert "mcp:basic" in home.keen("prompt").stdout
        file.write_bytes(kept)


def test_a_symlinked_configs_json_stays_a_link_and_its_file_gets_every_edit(
    home: Home, tmp_path: Path
) -> None:
    # configs.json kept with one's dotfiles: an edit replaced the link with a plain file, and
    # the dotfiles copy kept the old servers without a word.
    kept = tmp_path / "dotfiles" / "configs.json"
    kept.parent.mkdir()
    kept.write_text('{"version": 1, "servers": {"a": {"command": "true"}}}')
    home.config_path.parent.mkdir(parents=True)
    home.config_path.symlink_to(kept)
    for args in (("mcp", "add", "b", "--", "true"), ("mcp", "disable", "a"), ("mcp", "remove", "b")):
        run = home.keen(*args)
        assert run.code == 0, str(run)
        assert home.config_path.is_symlink()
    assert json.loads(kept.read_text())["servers"] == {"a": {"command": "true", "enabled": False}}


def test_two_homes_linking_one_configs_json_edit_it_under_one_lock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Each home locked beside its own link and both wrote the one file: one entry was lost.
    kept = tmp_path / "dotfiles" / "configs.json"
    kept.parent.mkdir()
    kept.write_text('{"version": 1, "servers": {}}')
    homes = [make_home(tmp_path / name) for name in ("work", "play")]
    for home in homes:
        home.config_path.parent.mkdir(parents=True)
        home.config_path.symlink_to(os.path.relpath(kept, home.config_path.parent))  # as dotfiles tools link
    monkeypatch.setattr(edit, "_LOCK_TIMEOUT_SECONDS", 0.1)  # the wait refused below, not slept through
    with filelock.FileLock(kept.with_name("configs.json.lock")):  # an edit of the file under way
        for home in homes:
            run = home.keen("mcp", "add", home.keen_home.parent.name, "--", "true")
            assert run.code == 2 and "is being edited by another keen command" in run.stderr, str(run)
    for home in homes:
        assert home.keen("mcp", "add", home.keen_home.parent.name, "--", "true").code == 0
        assert home.config_path.is_symlink() and not home.config_path.with_name("configs.json.lock").exists()
    assert set(json.loads(kept.read_text())["servers"]) == {"work", "play"}


def test_a_symlink_loop_is_refused_and_stays_a_link(home: Home) -> None:
    # It read as no file, and the edit's os.replace put a plain file where the link was.
    home.config_path.parent.mkdir(parents=True)
    home.config_path.symlink_to(home.config_path.name)
    run = home.keen("mcp", "add", "b", "--", "true")
    assert run.code == 2 and "Too many levels of symbolic links" in run.stderr, str(run)
    assert home.config_path.is_symlink() and os.readlink(home.config_path) == "configs.json"


def test_a_dangling_symlink_is_refused_and_no_folder_is_made(home: Home, tmp_path: Path) -> None:
    # The edit wrote the file it pointed to, making every missing folder on the way.
    home.config_path.parent.mkdir(parents=True)
    home.config_path.symlink_to("../../nowhere/sub/configs.json")
    gone = tmp_path / "nowhere"
    assert os.path.realpath(home.config_path).startswith(str(gone))
    for args in (("mcp", "add", "b", "--", "true"), ("mcp", "add-json", "c", '{"command": "true"}')):
        run = home.keen(*args)
        assert run.code == 2, str(run)
        target = gone / "sub" / "configs.json"
        assert f"links to {target}, which does not exist; create it or remove the link" in run.stderr
    assert not gone.exists() and home.config_path.is_symlink()


def test_a_hand_written_configs_json_others_can_read_is_warned_of_with_the_fix(home: Home) -> None:
    # 0644 with an API key in it: every command read it without a word.
    home.write(
        {
            "docs": {
                "url": "https://mcp.example.com/mcp",
                "auth": {"type": "api_key", "key": "sk-live-abcdef123456"},
            },
            "time": {"command": "true", "env": {"TZ": "UTC"}},
        }
    )
    home.config_path.chmod(0o644)
    run = home.keen("mcp", "get", "docs")
    assert run.code == 0, str(run)
    warning = (
        f"{home.config_path} can be read by other users (mode 0644) and holds credentials written in clear "
        f"(server 'docs' auth.key); run chmod 600 {home.config_path}, or put each value in an environment "
        "variable and write ${VAR} in its place"
    )
    assert run.stderr.count(warning) == 1 and "sk-live" not in run.stderr + run.stdout, str(run)


_KEYED = {
    "docs": {
        "url": "https://mcp.example.com/mcp",
        "auth": {"type": "api_key", "key": "sk-live-abcdef123456"},
    },
    "time": {"command": "true"},
}


@pytest.mark.parametrize(
    "args", [("mcp", "add", "more", "--", "true"), ("mcp", "remove", "time"), ("mcp", "disable", "time")]
)
def test_an_edit_that_saves_a_file_others_could_read_gives_no_advice_it_made_stale(
    home: Home, args: tuple[str, ...]
) -> None:
    # The edit warned "run chmod 600" on its load, then saved the file 0600 itself.
    home.write(_KEYED)
    home.config_path.chmod(0o644)
    run = home.keen(*args)
    assert run.code == 0 and "can be read by other users" not in run.stderr, str(run)
    assert home.config_path.stat().st_mode & 0o777 == 0o600


def test_an_edit_that_saves_nothing_still_warns_of_a_file_others_can_read(home: Home) -> None:
    home.write(_KEYED)
    home.config_path.chmod(0o644)
    run = home.keen("mcp", "enable", "time")  # enabled already: nothing written
    assert run.code == 0 and run.stderr.count("can be read by other users (mode 0644)") == 1, str(run)
    assert home.config_path.stat().st_mode & 0o777 == 0o644


def test_a_dangling_symlink_is_named_by_a_read_too(home: Home, tmp_path: Path) -> None:
    # `keen mcp list` read it as a missing file and said "No MCP servers configured": the
    # servers were in the file the link lost, and only an edit said so.
    home.config_path.parent.mkdir(parents=True)
    home.config_path.symlink_to("../../moved/configs.json")
    target = tmp_path / "moved" / "configs.json"
    for args in (("mcp", "list"), ("mcp", "list", "--json")):
        run = home.keen(*args)
        assert run.code == 2, str(run)
        said = f"{home.config_path} links to {target}, which does not exist; create it or remove the link"
        assert said in run.stderr and "No MCP servers configured" not in run.stdout, str(run)
    assert home.config_path.is_symlink() and not target.parent.exists()


def test_a_mcp_folder_linked_to_nothing_is_named_by_reads_and_edits(home: Home, tmp_path: Path) -> None:
    # KEEN_HOME/mcp -> a dotfiles folder moved away: `keen mcp list` said "No MCP servers
    # configured" and `keen mcp add` blamed "a file where Keen keeps a folder".
    folder = home.keen_home / "mcp"
    folder.symlink_to("../moved/keen-mcp")
    target = tmp_path / "moved" / "keen-mcp"
    said = f"{folder} links to {target}, which does not exist; create it or remove the link"
    for args in (("mcp", "list"), ("mcp", "list", "--json"), ("mcp", "add", "time", "--", "true")):
        run = home.keen(*args)
        assert run.code == 2 and said in run.stderr, str(run)
        assert "No MCP servers configured" not in run.stdout and "keeps a folder" not in run.stderr, str(run)
    assert folder.is_symlink() and not target.parent.exists()


@pytest.mark.parametrize("session_id", ["a" * 5000, "2026\x1b[2J"])
def test_sessions_show_refuses_an_id_no_session_can_have(home: Home, session_id: str) -> None:
    # 5,000 characters reached open() and its ENAMETOOLONG was an internal error.
    run = home.keen("sessions", "show", session_id)
    assert (
        run.code == 2
        and "invalid session id" in run.stderr
        and "use an id from `keen sessions list`" in run.stderr
    )
    assert "internal error" not in run.stderr and session_id not in run.stderr, str(run)
