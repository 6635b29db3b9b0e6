"""``keen mcp add|remove`` and ``keen mcp import --detect`` through the CLI from a temporary
``KEEN_HOME`` and a temporary home (README "Configure servers"): an add/remove round trip with a
real stdio server, remote servers with headers and OAuth (secrets never printed), concurrent
adds that all land, a fixture file per host found by ``--detect`` (Claude Desktop, Claude Code
with project-scoped servers, Cursor JSONC, VS Code settings, Windsurf, Gemini CLI), and
Claude Code's project-scoped servers imported or skipped with a note each, never silently."""

from __future__ import annotations

import json
import shlex
import stat
import sys
from pathlib import Path

import pytest

from conftest import SERVERS
from helpers.cli import Home, make_home
from helpers.forkserver import script_args
from keen.mcp.config.hosts import host_file_candidates

SECRET = "sk-test-4f1c9d0b7e"


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Home:
    home = make_home(tmp_path)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home.home / ".config"))
    project = tmp_path / "project"
    project.mkdir()
    monkeypatch.chdir(project)  # no host project files in the current directory but the test's
    return home


def servers(home: Home) -> dict[str, dict[str, object]]:
    return json.loads(home.config_path.read_text())["servers"]


def test_add_remove_round_trip_with_a_real_server(home: Home) -> None:
    script = script_args(str(SERVERS / "basic_stdio.py"))  # forked from the warm process
    added = home.keen(
        "mcp", "add", "basic", "--description", "Echo and add numbers", "--", sys.executable, *script
    )
    assert added.code == 0, str(added)
    assert "added basic (stdio server" in added.stdout and "next: keen mcp tools basic" in added.stdout
    assert servers(home)["basic"] == {
        "transport": "stdio",
        "command": sys.executable,
        "args": script,
        "description": "Echo and add numbers",
    }
    assert stat.S_IMODE(home.config_path.stat().st_mode) == 0o600
    tools = home.keen("mcp", "tools", "basic", "--json")
    assert tools.code == 0, str(tools)
    assert {"echo", "add"} <= {t["name"] for t in tools.json()}
    again = home.keen("mcp", "add", "basic", "--", "other")
    assert again.code == 2 and "keen mcp remove basic" in again.stderr and "--overwrite" in again.stderr
    removed = home.keen("mcp", "remove", "basic")
    assert removed.code == 0, str(removed)
    assert servers(home) == {}
    missing = home.keen("mcp", "remove", "basic")
    assert missing.code == 2 and "no server named 'basic'" in missing.stderr
    leftovers = [p.name for p in home.config_path.parent.iterdir() if p.name.endswith(".tmp")]
    assert leftovers == []


def test_add_remote_servers_with_headers_and_oauth(home: Home) -> None:
    keyed = home.keen(
        "mcp", "add", "docs", "--url", "https://mcp.example.com/mcp", "-H", f"Authorization: Bearer {SECRET}",
        "--header", "X-Team=blue",
    )  # fmt: skip
    assert keyed.code == 0, str(keyed)
    oauth = home.keen("mcp", "add", "gh", "--url", "https://api.example.com/mcp", "--oauth")
    assert oauth.code == 0 and "next: keen mcp connect gh" in oauth.stdout
    env = home.keen("mcp", "add", "local", "-e", f"TOKEN={SECRET}", "--", "npx", "-y", "some-server")
    assert env.code == 0, str(env)
    got = servers(home)
    assert got["docs"] == {
        "transport": "streamable_http",
        "url": "https://mcp.example.com/mcp",
        "auth": {"type": "api_key", "header": "Authorization", "scheme": "Bearer", "key": SECRET},
        "headers": {"X-Team": "blue"},
    }
    assert got["gh"]["auth"] == {"type": "oauth"}
    assert got["local"]["env"] == {"TOKEN": SECRET} and got["local"]["args"] == ["-y", "some-server"]
    for run in (keyed, oauth, env):
        assert SECRET not in run.stdout + run.stderr


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["x"], "one of the two"),
        (["x", "--url", "https://e.com/mcp", "--", "cmd"], "one of the two"),
        (["x", "--url", "https://e.com/mcp", "-e", "A=1"], "--env is for a stdio server"),
        (["x", "--oauth", "--", "cmd"], "are for a remote server"),
        (["x", "--url", "https://e.com/mcp", "-H", SECRET], "--header takes K=V"),
        (["bad name", "--", "cmd"], "e.g. 'bad-name'"),
        (["x", "--url", "ftp://e.com/mcp"], "http:// or https://"),
        (["x", "npx", "-y", "server"], "put the server's command after --"),
        (["x", "-e", f"KEY={SECRET}", "-e", "KEY=other", "--", "cmd"], "--env gives KEY twice"),
        (["x", "--url", "https://e.com/mcp", "-H", "X-A: 1", "-H", "x-a=2"], "--header gives x-a twice"),
    ],
)
def test_add_refuses_what_it_cannot_use(home: Home, args: list[str], needle: str) -> None:
    run = home.keen("mcp", "add", *args)
    assert run.code == 2, str(run)
    assert needle in run.stderr and SECRET not in run.stderr
    assert not home.config_path.exists()


def test_add_to_an_empty_configs_json(home: Home) -> None:
    """A configs.json created empty (`touch`) is an empty config: add writes the first server."""
    home.config_path.parent.mkdir(parents=True, exist_ok=True)
    home.config_path.write_text("")
    listed = home.keen("mcp", "list")
    assert listed.code == 0 and "No MCP servers configured" in listed.stdout, str(listed)
    added = home.keen("mcp", "add", "first", "--", "some-mcp-server")
    assert added.code == 0, str(added)
    assert json.loads(home.config_path.read_text())["servers"]["first"]["command"] == "some-mcp-server"


def test_concurrent_adds_all_land(home: Home) -> None:
    names = [f"s{i}" for i in range(5)]
    runs = home.keen_processes(*[("mcp", "add", name, "--", "cmd", name) for name in names])
    assert all(run.code == 0 for run in runs), [str(r) for r in runs if r.code]
    assert sorted(servers(home)) == names  # the lock kept every edit


def test_add_keeps_a_broken_neighbour_and_refuses_an_unparseable_file(home: Home) -> None:
    home.write({"broken": {"command": "${KEEN_TEST_NEVER_SET}"}})
    assert home.keen("mcp", "add", "ok", "--", "cmd").code == 0
    assert set(servers(home)) == {"broken", "ok"}
    home.config_path.write_text("{not json")
    run = home.keen("mcp", "add", "other", "--", "cmd")
    assert run.code == 2 and "invalid JSON" in run.stderr
    assert home.config_path.read_text() == "{not json"  # nothing lost


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


CLAUDE_JSON = {
    "numStartups": 3,
    "mcpServers": {"memory": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-memory"]}},
    "projects": {
        "/home/u/src/webapp": {
            "mcpServers": {"files": {"command": "npx", "args": ["server-filesystem", "."]}}
        },
        "/home/u/src/api": {
            "mcpServers": {"files": {"command": "npx", "args": ["server-filesystem", "/srv"]}}
        },
        "/home/u/src/empty": {"allowedTools": []},
    },
}


def _every_host(home: Home) -> dict[str, Path]:
    h, config = home.home, home.home / ".config"
    return {
        "Claude Desktop": _write(
            config / "Claude" / "claude_desktop_config.json",
            json.dumps({"mcpServers": {"time": {"command": "uvx", "args": ["mcp-server-time"]}}}),
        ),
        "Claude Code": _write(h / ".claude.json", json.dumps(CLAUDE_JSON)),
        "Cursor": _write(
            h / ".cursor" / "mcp.json",
            '{\n  // JSONC\n  "mcpServers": {"docs": {"url": "https://mcp.example.com/mcp",},},\n}\n',
        ),
        "VS Code": _write(
            config / "Code" / "User" / "settings.json",
            '{"editor.tabSize": 2, "mcp": {"servers": {"git": {"type": "stdio", "command": "uvx"}}},}',
        ),
        "Windsurf": _write(
            h / ".codeium" / "windsurf" / "mcp_config.json",
            json.dumps({"mcpServers": {"search": {"serverUrl": "https://search.example.com/mcp"}}}),
        ),
        "Gemini CLI": _write(
            h / ".gemini" / "settings.json",
            json.dumps(
                {"theme": "dark", "mcpServers": {"wiki": {"httpUrl": "https://wiki.example.com/mcp"}}}
            ),
        ),
        "Claude Code (project)": _write(
            Path.cwd() / ".mcp.json",
            json.dumps({"mcpServers": {"proj": {"command": "node", "args": ["s.js"]}}}),
        ),
    }


def test_detect_lists_every_host_file_and_what_it_holds(home: Home) -> None:
    files = _every_host(home)
    _write(home.home / ".cursor" / "broken" / "x", "")  # not a host file: ignored
    found = home.keen("mcp", "import", "--detect", "--json")
    assert found.code == 0, str(found)
    by_host = {entry["host"]: entry for entry in found.json()}
    assert set(by_host) == set(files)
    assert {host: entry["path"] for host, entry in by_host.items()} == {h: str(p) for h, p in files.items()}
    assert by_host["Claude Code"]["servers"] == ["memory"]
    assert by_host["Claude Code"]["projects"] == {
        "/home/u/src/webapp": ["files"],
        "/home/u/src/api": ["files"],
    }
    assert by_host["Cursor"]["servers"] == ["docs"] and by_host["VS Code"]["servers"] == ["git"]
    assert by_host["Windsurf"]["servers"] == ["search"] and by_host["Gemini CLI"]["servers"] == ["wiki"]
    human = home.keen("mcp", "import", "--detect")
    assert human.code == 0 and "keen mcp import FILE" in human.stdout
    assert "project /home/u/src/api: files (--include-projects)" in human.stdout
    # every detected file imports as it is
    for path in files.values():
        run = home.keen("mcp", "import", str(path))
        assert run.code == 0, str(run)
    assert set(servers(home)) == {"time", "memory", "docs", "git", "search", "wiki", "proj"}


def test_detect_with_nothing_says_where_it_looked(home: Home) -> None:
    run = home.keen("mcp", "import", "--detect")
    assert run.code == 0 and "No MCP host files found" in run.stdout
    assert str(home.home / ".claude.json") in run.stdout
    both = home.keen("mcp", "import", "x.json", "--detect")
    assert both.code == 2 and "not both" in both.stderr
    neither = home.keen("mcp", "import")
    assert neither.code == 2 and "--detect" in neither.stderr
    for args in (("mcp", "list"), ("mcp", "sync")):
        empty = home.keen(*args)
        assert empty.code == 0 and "No MCP servers configured" in empty.stdout, str(empty)
        assert "keen mcp add NAME -- COMMAND" in empty.stdout


def test_claude_code_project_servers_are_skipped_with_a_note_or_imported(home: Home) -> None:
    path = _write(home.home / ".claude.json", json.dumps(CLAUDE_JSON))
    plain = home.keen("mcp", "import", str(path))
    assert plain.code == 0, str(plain)
    assert set(servers(home)) == {"memory"}
    notes = [line for line in plain.stderr.splitlines() if line.startswith("note files:")]
    assert len(notes) == 2  # one note per project-scoped server, never silent
    assert "/home/u/src/webapp" in plain.stderr and "'files-webapp'" in plain.stderr
    full = home.keen("mcp", "import", str(path), "--include-projects")
    assert full.code == 0, str(full)
    got = servers(home)
    assert set(got) == {"memory", "files-webapp", "files-api"}
    assert got["files-api"]["args"] == ["server-filesystem", "/srv"]
    assert "imported from the project /home/u/src/api" in full.stderr


def test_host_file_places_per_platform(tmp_path: Path) -> None:
    windows = dict(
        host_file_candidates(
            {"USERPROFILE": r"C:\Users\u", "APPDATA": r"C:\Users\u\AppData\Roaming"},
            platform="win32",
            cwd=tmp_path,
        )
    )
    assert (
        windows["Claude Desktop"]
        == Path(r"C:\Users\u\AppData\Roaming") / "Claude" / "claude_desktop_config.json"
    )
    assert windows["Claude Code"] == Path(r"C:\Users\u") / ".claude.json"
    mac = host_file_candidates({"HOME": "/Users/u"}, platform="darwin", cwd=tmp_path)
    assert ("VS Code", Path("/Users/u/Library/Application Support/Code/User/settings.json")) in mac
    linux = dict(host_file_candidates({"HOME": "/home/u"}, platform="linux", cwd=tmp_path))
    assert linux["Claude Desktop"] == Path("/home/u/.config/Claude/claude_desktop_config.json")
    assert linux["Windsurf"] == Path("/home/u/.codeium/windsurf/mcp_config.json")


def test_a_pasted_mcpservers_file_says_how_to_convert_it_and_that_works(home: Home) -> None:
    home.config_path.parent.mkdir(parents=True)
    home.config_path.write_text(
        json.dumps({"mcpServers": {"memory": {"command": "npx", "args": ["-y", "m"]}}})
    )
    broken = home.keen("mcp", "list")
    assert broken.code == 2 and "keen mcp import" in broken.stderr, str(broken)
    fix = " ".join(broken.stderr.split()).split("convert it: ", 1)[1]
    moved, imported = (part.strip() for part in fix.split("&&"))
    _, source, target = moved.split()
    Path(source).rename(target)
    run = home.keen(*imported.split()[1:])
    assert run.code == 0, str(run)
    assert servers(home) == {"memory": {"transport": "stdio", "command": "npx", "args": ["-y", "m"]}}


def test_a_key_kept_as_a_variable_stays_one_and_an_unset_one_breaks_only_its_server(home: Home) -> None:
    literal = "Authorization: Bearer ${KEEN_TEST_UNSET_KEY}"
    assert home.keen("mcp", "add", "docs", "--url", "https://mcp.example.com/mcp", "-H", literal).code == 0
    assert servers(home)["docs"]["auth"]["key"] == "${KEEN_TEST_UNSET_KEY}"  # never expanded into the file
    basic = script_args(str(SERVERS / "basic_stdio.py"))
    assert home.keen("mcp", "add", "basic", "--", sys.executable, *basic).code == 0
    listed = {s["name"]: s for s in home.keen("mcp", "list", "--json", "--timeout", "30").json()}
    assert (
        listed["docs"]["state"] == "config_error"
        and "export KEEN_TEST_UNSET_KEY" in listed["docs"]["last_error"]
    )
    assert listed["basic"]["state"] == "connected"


def test_a_disabled_or_broken_server_is_pointed_at_the_command_that_fixes_it(home: Home) -> None:
    """``keen mcp get`` ended every entry with "connect and list its tools: keen mcp tools
    NAME", which fails for a disabled or broken entry; and ``keen mcp tools`` of a disabled
    server said to edit configs.json while ``keen mcp enable`` exists."""
    literal = "Authorization: Bearer ${KEEN_TEST_UNSET_KEY}"
    assert home.keen("mcp", "add", "docs", "--url", "https://mcp.example.com/mcp", "-H", literal).code == 0
    basic = script_args(str(SERVERS / "basic_stdio.py"))
    assert home.keen("mcp", "add", "basic", "--", sys.executable, *basic).code == 0
    assert home.keen("mcp", "disable", "basic").code == 0
    broken, disabled, tools = home.keen_many(
        ("mcp", "get", "docs"), ("mcp", "get", "basic"), ("mcp", "tools", "basic")
    )
    assert broken.code == 0 and "export KEEN_TEST_UNSET_KEY" in broken.stdout, str(broken)
    assert "keen mcp tools docs" not in broken.stdout and "keen mcp connect docs" in broken.stdout, str(
        broken
    )
    assert disabled.code == 0 and "enabled: no" in disabled.stdout, str(disabled)
    assert "keen mcp tools basic" not in disabled.stdout and "keen mcp enable basic" in disabled.stdout
    assert tools.code == 2 and "disabled" in tools.stderr and "keen mcp enable basic" in tools.stderr, str(
        tools
    )


def test_an_entry_that_cannot_start_as_added_says_what_to_fix_before_its_next_step(home: Home) -> None:
    """README's ``keen mcp add docs --url ... -H 'Authorization: Bearer ${DOCS_KEY}'`` with
    DOCS_KEY unset was added with "next: keen mcp tools docs", which then failed; the add
    now says what to fix first. A usable entry keeps its plain next step."""
    literal = "Authorization: Bearer ${KEEN_TEST_UNSET_KEY}"
    unset = home.keen("mcp", "add", "docs", "--url", "https://mcp.example.com/mcp", "-H", literal)
    assert unset.code == 0, str(unset)
    assert "export KEEN_TEST_UNSET_KEY" in unset.stderr and "next, once that is fixed" in unset.stdout, str(
        unset
    )
    as_json = home.keen("mcp", "add-json", "envy", '{"command": "x", "env": {"A": "${KEEN_TEST_UNSET_KEY}"}}')
    assert "export KEEN_TEST_UNSET_KEY" in as_json.stderr, str(as_json)
    fine = home.keen("mcp", "add", "fine", "--", "some-server")
    assert "next: keen mcp tools fine" in fine.stdout and "cannot start" not in fine.stderr, str(fine)


def test_add_json_keeps_keens_own_settings_and_import_says_why_it_does_not(
    home: Home, tmp_path: Path
) -> None:
    """``keen mcp add-json`` dropped README's own per-server fields ("dropped
    'trust_annotations': Keen does not use it"), and add-json is the one command that could
    set them. Typed by the user, they are kept; from another host's file (a project's
    .mcp.json may come from anyone) they are still not taken, saying why and how to set them."""
    entry = '{"command": "some-server", "trust_annotations": true, "inherit_env": ["AWS_PROFILE"], "pinning": "off"}'
    added = home.keen("mcp", "add-json", "mine", entry)
    assert added.code == 0 and "dropped" not in added.stderr, str(added)
    kept = servers(home)["mine"]
    assert (
        kept["trust_annotations"] is True
        and kept["inherit_env"] == ["AWS_PROFILE"]
        and kept["pinning"] == "off"
    )
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"mcpServers": {"theirs": json.loads(entry)}}))
    imported = home.keen("mcp", "import", str(other))
    assert "theirs" in servers(home) and "trust_annotations" not in servers(home)["theirs"], str(imported)
    assert "dropped 'trust_annotations'" in imported.stderr + imported.stdout, str(imported)
    assert "Keen does not use it" not in imported.stderr + imported.stdout, str(imported)
    assert "keen mcp add-json" in imported.stderr + imported.stdout, str(imported)


def test_a_misspelt_field_is_named_with_the_one_it_resembles(home: Home) -> None:
    """``"argz"`` was dropped with "Keen does not use it", as if by design; the server then
    started without its arguments."""
    added = home.keen("mcp", "add-json", "typo", '{"command": "some-server", "argz": ["--port", "1"]}')
    assert added.code == 0 and "dropped 'argz'" in added.stderr and "did you mean 'args'?" in added.stderr, (
        str(added)
    )
    plain = home.keen("mcp", "add-json", "odd", '{"command": "some-server", "colour": "blue"}')
    assert "dropped 'colour': Keen does not use it" in plain.stderr and "did you mean" not in plain.stderr


@pytest.mark.parametrize(
    ("field", "value"),
    [("pinning", "bogus"), ("trust_annotations", "yes please"), ("inherit_env", "ALL")],
)
def test_add_json_refuses_a_bad_value_of_keens_own_settings(home: Home, field: str, value: str) -> None:
    """Keen's own settings are validated with the rest of the entry: a bad value is refused
    (exit 2, nothing written), not written to make an entry ``keen mcp get`` calls invalid."""
    added = home.keen("mcp", "add-json", "mine", json.dumps({"command": "some-server", field: value}))
    assert added.code == 2 and "cannot add 'mine'" in added.stderr and field in added.stderr, str(added)
    assert not home.config_path.exists() or "mine" not in servers(home), str(added)


def test_add_json_overwrite_to_a_url_drops_the_stdio_entrys_inherit_env(home: Home) -> None:
    """An --overwrite that makes a stdio server a remote one drops the stdio fields,
    ``inherit_env`` among them (a url entry with it is invalid)."""
    stdio = home.keen("mcp", "add-json", "mine", '{"command": "some-server", "inherit_env": ["AWS_PROFILE"]}')
    assert stdio.code == 0, str(stdio)
    remote = home.keen("mcp", "add-json", "mine", '{"url": "https://example.com/mcp"}', "--overwrite")
    assert remote.code == 0, str(remote)
    assert "inherit_env" not in servers(home)["mine"], servers(home)
    shown = home.keen("mcp", "get", "mine")
    assert shown.code == 0 and "invalid" not in shown.stdout + shown.stderr, str(shown)


def test_detect_lists_an_unreadable_host_file_with_its_problem(home: Home) -> None:
    _write(home.home / ".cursor" / "mcp.json", '{"mcpServers": {"a": {"command": "x"} "b": 1}}')
    found = home.keen("mcp", "import", "--detect", "--json")
    assert found.code == 0, str(found)
    (cursor,) = found.json()
    assert cursor["host"] == "Cursor" and cursor["servers"] == [] and "line 1" in cursor["error"]
    human = home.keen("mcp", "import", "--detect")
    assert "unreadable:" in human.stdout and "fix the syntax there" in " ".join(human.stdout.split())


def test_a_name_differing_only_in_case_says_what_helps_not_overwrite(home: Home, tmp_path: Path) -> None:
    # `keen mcp add TIME --overwrite` answered "'time' is already configured ... add it again
    # with --overwrite", and an import skipped such a name with "use --overwrite to replace
    # it", which changed nothing when followed: --overwrite replaces a server of the same name.
    assert home.keen("mcp", "add", "time", "--", "cmd-a").code == 0
    for args in (["TIME", "--", "cmd-b"], ["TIME", "--overwrite", "--", "cmd-b"]):
        run = home.keen("mcp", "add", *args)
        assert run.code == 2, str(run)
        assert "differs from the configured server 'time' only in letter case" in run.stderr, str(run)
        assert "add it again with --overwrite" not in run.stderr
    assert servers(home) == {"time": {"transport": "stdio", "command": "cmd-a"}}
    source = tmp_path / "hosts.json"
    source.write_text(
        json.dumps({"mcpServers": {"Time": {"command": "cmd-c"}, "TIME": {"command": "cmd-d"}}})
    )
    for extra in ([], ["--overwrite"]):
        run = home.keen("mcp", "import", str(source), *extra)
        assert run.code == 1, str(run)
        assert "use --overwrite" not in run.stderr, str(run)
        # The second entry of the file is refused too: it would clash with the first.
        assert "TIME: another entry is already imported as 'Time'" in run.stderr, str(run)
        skipped = next(line for line in run.stderr.splitlines() if line.startswith("skipped Time"))
        assert "differs from the configured server 'time' only in letter case" in skipped, skipped
    # The command the skip names works.
    command = skipped.split("another name (", 1)[1].rsplit(")", 1)[0]
    argv = shlex.split(command)
    assert argv[:3] == ["keen", "mcp", "import"], command
    again = home.keen(*argv[1:])
    assert again.code == 1 and "imported Time-2" in again.stdout, str(again)  # TIME: still skipped
    assert servers(home)["Time-2"]["command"] == "cmd-c" and servers(home)["time"]["command"] == "cmd-a"


def test_a_server_defined_twice_is_never_dropped_unseen(home: Home, tmp_path: Path) -> None:
    # Plain JSON keeps the last of two equal keys. In configs.json an edit (add, remove,
    # import) rewrote the file with the first entry gone; an imported host file lost it
    # without a word.
    home.config_path.parent.mkdir(parents=True, exist_ok=True)
    doubled = '{"version": 1, "servers": {"a": {"command": "first"}, "a": {"command": "second"}}}'
    home.config_path.write_text(doubled)
    for args in (["add", "b", "--", "cmd"], ["remove", "a"]):
        run = home.keen("mcp", *args)
        assert run.code == 2 and "defines server 'a' twice; remove one" in run.stderr, str(run)
    assert home.config_path.read_text() == doubled
    listed = home.keen("mcp", "list", "--json", env={"MYKEY": "set-for-the-list"})
    [entry] = listed.json()
    assert entry["state"] == "config_error" and "defined twice" in entry["last_error"], entry
    home.config_path.unlink()
    source = tmp_path / "claude_desktop_config.json"
    source.write_text('{"mcpServers": {"a": {"command": "first"}, "a": {"command": "second"}}}')
    imported = home.keen("mcp", "import", str(source))
    assert imported.code == 0, str(imported)
    assert "defines 'a' more than once; imported its last entry" in imported.stderr, str(imported)
    assert servers(home)["a"]["command"] == "second"


def test_a_quoted_whole_command_line_gets_the_add_command_that_splits_it(home: Home) -> None:
    # The note said to 'move the arguments into "args"', the words of a JSON file; on the
    # command line the fix is to give the command unquoted after --.
    run = home.keen("mcp", "add", "files", "--", "npx -y @modelcontextprotocol/server-filesystem /tmp")
    assert run.code == 0, str(run)
    assert '"args"' not in run.stderr, str(run)
    again = run.stderr.split("add it again without the quotes: ", 1)[1].strip()
    argv = shlex.split(again)
    assert argv[:5] == ["keen", "mcp", "add", "files", "--overwrite"], again
    fixed = home.keen(*argv[1:])
    assert fixed.code == 0 and "note" not in fixed.stderr, str(fixed)
    assert servers(home)["files"] == {
        "transport": "stdio",
        "command": "npx",
        "args": ["-y", "@modelcontextprotocol/server-filesystem", "/tmp"],
    }


def test_a_quoted_command_line_with_a_key_is_not_echoed_and_the_fix_reads_it_from_a_variable(
    home: Home,
) -> None:
    # The note quoted the whole line back, and suggested a command holding the key itself.
    line = f"npx -y @acme/files-mcp --api-key {SECRET} /tmp"
    run = home.keen("mcp", "add", "files", "--", line)
    assert run.code == 0, str(run)
    assert SECRET not in run.stdout and SECRET not in run.stderr, str(run)
    assert "set FILES_API_KEY to the credential it holds" in run.stderr, str(run)
    again = run.stderr.split("reading it from the environment: ", 1)[1].strip()
    argv = shlex.split(again)
    assert argv[5:] == ["--", "npx", "-y", "@acme/files-mcp", "--api-key", "${FILES_API_KEY}", "/tmp"], again
    fixed = home.keen(*argv[1:], env={"FILES_API_KEY": SECRET})
    assert fixed.code == 0 and "note" not in fixed.stderr, str(fixed)
    assert SECRET not in fixed.stdout + fixed.stderr, str(fixed)
    assert servers(home)["files"]["args"] == [
        "-y",
        "@acme/files-mcp",
        "--api-key",
        "${FILES_API_KEY}",
        "/tmp",
    ]


def test_import_names_a_misspelt_command_or_url_as_configs_json_does(home: Home, tmp_path: Path) -> None:
    # `keen mcp import` refused {"comand": ...} as having neither "command" nor "url", "add
    # one", not naming the misspelling configs.json's own rules name.
    from keen.errors import ConfigError
    from keen.mcp.config import parse_config

    entries: dict[str, dict[str, str]] = {
        "a": {"comand": "npx"},
        "b": {"urll": "https://example.com/mcp"},
        "c": {"type": "stdio", "comand": "npx"},
        "d": {"type": "http", "ulr": "https://example.com/mcp"},
    }
    source = tmp_path / "hosts.json"
    source.write_text(json.dumps({"mcpServers": entries}))
    run = home.keen("mcp", "import", str(source))
    assert run.code == 1, str(run)
    refused = {
        line.split()[1].rstrip(":"): line for line in run.stderr.splitlines() if line.startswith("refused")
    }
    assert refused["a"].endswith(
        "neither \"command\" nor \"url\"; rename 'comand' to 'command' (a misspelling?)"
    )
    assert refused["b"].endswith("neither \"command\" nor \"url\"; rename 'urll' to 'url' (a misspelling?)")
    assert refused["c"].endswith("needs a \"command\" to run; rename 'comand' to 'command' (a misspelling?)")
    assert refused["d"].endswith("needs a \"url\"; rename 'ulr' to 'url' (a misspelling?)")
    assert not home.config_path.exists() or servers(home) == {}
    # configs.json's own rules word the same entry the same way.
    with pytest.raises(ConfigError, match='neither "command" nor "url"') as own:
        parse_config({"version": 1, "servers": {"a": entries["a"]}})
    assert own.value.message.endswith(refused["a"].split(": ", 1)[1])


def test_a_quoted_command_line_never_echoes_a_numeric_key_nor_a_bearer_under_any_header(home: Home) -> None:
    """A quoted line whose credentials the display hid only by the redactor's rules, or not
    at all (a numeric key), was printed raw in the note, the `added` line and the command to
    paste; a value already written as ``${MYKEY}`` got a variable of its own. And `keen mcp
    list --json` quoted the line, key and all, in its `last_error` (command not found):
    the redactor was given only the args, which a one-word command line has none of."""
    number, bearer = "84736251908473625190", "abcdefgh12345"
    line = f"keen-no-such-srv-9 --api-key {number} --token ${{MYKEY}} --header 'X-Custom: Bearer {bearer}'"
    run = home.keen("mcp", "add", "t2", "--", line)
    assert run.code == 0, str(run)
    assert number not in run.stdout + run.stderr and bearer not in run.stdout + run.stderr, str(run)
    text = " ".join(run.stderr.split())
    assert "set T2_API_KEY, T2_X_CUSTOM (the whole `Bearer <token>` value) to the credentials" in text, text
    again = text.split("reading them from the environment: ", 1)[1].split(" note ")[0].strip()
    argv = shlex.split(again)
    assert argv[5:] == [
        *["--", "keen-no-such-srv-9", "--api-key", "${T2_API_KEY}", "--token", "${MYKEY}"],
        *["--header", "X-Custom: ${T2_X_CUSTOM}"],
    ], again
    assert "T2_TOKEN" not in text, text
    listed = home.keen("mcp", "list", "--json", env={"MYKEY": "set-for-the-list"})
    assert "keen-no-such-srv-9" in listed.stdout, str(listed)  # its error quotes the command
    assert number not in listed.stdout + listed.stderr and bearer not in listed.stdout + listed.stderr, str(
        listed
    )
