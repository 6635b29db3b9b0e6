"""Small CLI habits (README "Commands"), through the CLI from a temporary ``KEEN_HOME``:
``-v`` after the subcommand, ``--json`` on ``skills show`` and ``prompt``, a failed
server's reason in ``mcp sync --json``, and the newest stderr lines in ``last_error``."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from helpers import stdio_entry
from helpers.cli import Home, make_home

# Writes 30 long lines, then the one that says why, then exits before the handshake.
_NOISY_EXIT = (
    "import sys\n"
    "for i in range(30): print(f'noise line {i} ' + 'x' * 200, file=sys.stderr)\n"
    "print('NEWEST: cannot open the database', file=sys.stderr)\n"
    "sys.exit(3)\n"
)


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Home:
    home = make_home(tmp_path_factory.mktemp("habits"))
    home.write(
        {
            "basic": stdio_entry("basic_stdio"),
            "noisy": {"command": sys.executable, "args": ["-c", _NOISY_EXIT]},
        }
    )
    return home


def test_sync_json_carries_the_reason_and_the_newest_stderr(home: Home) -> None:
    run = home.keen("mcp", "sync", "--json", "--timeout", "30")
    assert run.code == 1, str(run)  # noisy did not connect; the others are synced
    by = {e["server"]: e for e in run.json()["servers"]}
    assert by["basic"]["action"] == "generated"
    noisy = by["noisy"]
    assert noisy["action"] == "disabled" and noisy["error"], noisy
    assert "NEWEST: cannot open the database" in noisy["error"]  # the newest line survives the cut
    listed = {s["name"]: s for s in home.keen("mcp", "list", "--json").json()}
    assert "NEWEST" in listed["noisy"]["last_error"]
    assert "keen mcp connect noisy" in listed["noisy"]["last_error"]


def test_verbose_after_the_subcommand(home: Home) -> None:
    before = home.keen("-v", "skills", "list")
    after = home.keen("skills", "list", "-v")
    assert before.code == after.code == 0, str(after)
    assert after.stdout == before.stdout


def test_json_on_skills_show_and_prompt(home: Home) -> None:
    home.keen("mcp", "sync", "--json", "--timeout", "30")
    shown = home.keen("skills", "show", "mcp:basic", "--json")
    assert shown.code == 0, str(shown)
    data = shown.json()
    assert data["name"] == "mcp:basic" and data["managed"] is True and data["enabled"] is True
    assert data["text"].startswith("---\nname: mcp:basic\n")
    assert Path(data["path"]).name == "mcp:basic"
    prompt = home.keen("prompt", "--json")
    assert prompt.code == 0, str(prompt)
    body = prompt.json()
    assert "mcp:basic" in body["text"] and body["chars"] == len(body["text"])
    assert home.keen("prompt").stdout == body["text"] + "\n"


@pytest.mark.parametrize(
    "args", [("skills", "enable", "x"), ("skills", "disable", "x"), ("mcp", "remove", "x"), ("demo",)]
)
def test_json_where_a_command_prints_no_data_is_a_clear_error(home: Home, args: tuple[str, ...]) -> None:
    run = home.keen(*args, "--json")
    assert run.code == 2
    assert f"`keen {' '.join(a for a in args if a != 'x')}` has no --json" in run.stderr, str(run)


def test_help_has_no_bool_noise(home: Home) -> None:
    for args in (
        ("mcp", "call"),
        ("mcp", "list"),
        ("mcp", "add"),
        ("prompt",),
        ("skills", "list"),
        ("serve",),
    ):
        shown = home.keen(*args, "--help")
        assert shown.code == 0, str(shown)
        assert "<bool>" not in shown.stdout and "BOOLEAN" not in shown.stdout, str(shown)


def test_a_disconnected_server_names_the_reconnect_command(home: Home) -> None:
    run = home.keen("mcp", "call", "noisy", "anything", "--yes", "--timeout", "30")
    assert run.code == 2
    assert "keen mcp connect noisy" in run.stderr and "SKILL.md" not in run.stderr, str(run)


def test_errors_for_a_person_carry_no_text_for_the_model(home: Home) -> None:
    unknown = home.keen("mcp", "call", "basic", "nosuch", "--yes", "--timeout", "30")
    assert unknown.code == 2 and "run `keen mcp tools basic` to see its tools" in unknown.stderr, str(unknown)
    invalid = home.keen("mcp", "call", "basic", "add", "--args", '{"a": "x"}', "--yes", "--timeout", "30")
    assert invalid.code == 2 and "keen mcp tools basic --json" in invalid.stderr, str(invalid)
    for run in (unknown, invalid):
        assert "SKILL.md" not in run.stderr and "Read the" not in run.stderr and "tell them" not in run.stderr


def test_a_keen_home_that_is_a_file_is_named_not_an_internal_error(tmp_path: Path) -> None:
    """KEEN_HOME set to a file (e.g. the configs.json path by mistake): exit 2 naming it."""
    (tmp_path / "user-home").mkdir()
    not_a_folder = tmp_path / "configs.json"
    not_a_folder.write_text("{}")
    home = Home(not_a_folder, tmp_path / "user-home")
    for args in (["mcp", "add", "x", "--", "echo"], ["prompt"], ["skills", "list"]):
        run = home.keen(*args)
        assert run.code == 2, str(run)
        assert "internal error" not in run.stderr, str(run)
        assert f"KEEN_HOME ({not_a_folder}) must be a folder you can write" in run.stderr, str(run)
    assert not_a_folder.read_text() == "{}"


def test_a_file_where_keen_keeps_a_folder_is_named_by_keen_chat_not_an_internal_error(tmp_path: Path) -> None:
    """``$KEEN_HOME/sessions`` a file: the session log's folder is made inside the chat's task
    group, and the error came out of it as "internal error: ExceptionGroup ...", exit 2."""
    home = make_home(tmp_path)
    (home.keen_home / "sessions").write_text("not a folder")
    script = tmp_path / "script.jsonl"
    script.write_text('{"content": "hi"}\n')
    run = home.keen_process("chat", "-p", "hi", "--model", f"scripted:{script}")
    assert run.code == 2, str(run)
    assert f"cannot use {home.keen_home / 'sessions'}: a file where Keen keeps a folder" in run.stderr, str(
        run
    )
    assert f"KEEN_HOME ({home.keen_home}) must be a folder you can write" in run.stderr, str(run)
    assert (home.keen_home / "sessions").read_text() == "not a folder"


def test_one_unreadable_file_under_keen_home_keeps_its_own_words(tmp_path: Path) -> None:
    """A skills config.json or a pin file Keen may not read was reworded as "KEEN_HOME must
    be a folder you can write": the fix is that one file's permissions (or deleting it)."""
    # Linux's drop_caches may be written, never read, by every user (root too, where a
    # chmod 000 file stays readable): a real "Permission denied" at each read.
    unreadable = Path("/proc/sys/vm/drop_caches")
    home = make_home(tmp_path)
    home.write({"basic": stdio_entry("basic_stdio")})
    (home.keen_home / "skills").mkdir()
    (home.keen_home / "skills" / "config.json").symlink_to(unreadable)
    (home.keen_home / "mcp" / "pins").mkdir(parents=True)
    (home.keen_home / "mcp" / "pins" / "basic.json").symlink_to(unreadable)
    for args, said in (
        (
            ["skills", "list"],
            f"{home.keen_home / 'skills' / 'config.json'}: cannot be read (Permission denied)",
        ),
        (["mcp", "diff", "basic"], f"cannot read pin file {home.keen_home / 'mcp' / 'pins' / 'basic.json'}"),
    ):
        run = home.keen(*args)
        assert run.code == 2, str(run)
        assert said in run.stderr and "must be a folder you can write" not in run.stderr, str(run)
    # The skills root itself no folder (the sync's lock makes it): still KEEN_HOME's words.
    (home.keen_home / "skills" / "config.json").unlink()
    (home.keen_home / "skills").rmdir()
    (home.keen_home / "skills").write_text("not a folder")
    run = home.keen("mcp", "sync", "--timeout", "30")
    assert run.code == 2, str(run)
    assert (
        f"cannot use {home.keen_home / 'skills'}: a file where Keen keeps a folder; "
        f"KEEN_HOME ({home.keen_home}) must be a folder you can write"
    ) in run.stderr, str(run)


def test_prompt_with_no_skills_says_how_to_get_some(tmp_path: Path) -> None:
    """A fresh KEEN_HOME: ``keen prompt`` printed one empty line and ``--stats`` a "reduction:
    0.0%"; each now says on stderr that there is nothing yet and how to make it (stdout stays
    the section, empty, for a script)."""
    home = make_home(tmp_path)
    text, stats = home.keen_many(("prompt",), ("prompt", "--stats"))
    assert text.code == 0 and text.stdout.strip() == "", str(text)
    assert stats.code == 0 and "reduction" not in stats.stdout, str(stats)
    for run in (text, stats):
        assert (
            "no MCP skills" in run.stderr and "keen mcp add" in run.stderr and "keen mcp sync" in run.stderr
        ), run


def test_prompt_and_search_with_servers_added_but_not_synced_say_sync_not_add(tmp_path: Path) -> None:
    """``keen mcp add`` then ``keen prompt`` (the sync skipped): it said "add a server
    (keen mcp add ...)" of a home that has one, and ``keen tools search`` the same."""
    home = make_home(tmp_path)
    home.write({"basic": stdio_entry("basic_stdio"), "other": stdio_entry("basic_stdio")})
    text, stats, search = home.keen_many(("prompt",), ("prompt", "--stats"), ("tools", "search", "add"))
    for run in (text, stats):
        assert run.code == 0 and run.stdout.strip() == "", run
        assert (
            f"{home.config_path} configures basic, other; generate the skills with keen mcp sync"
            in run.stderr
        )
        assert "keen mcp add" not in run.stderr, run
    assert (
        search.code == 2 and "generate the configured servers' skills with `keen mcp sync`" in search.stderr
    )
    assert "keen mcp add" not in search.stderr, search


def test_prompt_and_search_hints_escape_server_names_and_turn_disabled_servers_on(tmp_path: Path) -> None:
    """configs.json's names are anyone's text: a name with an OSC sequence reached the terminal
    raw in ``keen prompt``'s "configures ..." hint. And with every server disabled the hints
    said to run ``keen mcp sync``, which writes no skill for a disabled server."""
    home = make_home(tmp_path)
    hostile = "a\u001b]0;pwned\u0007b"
    home.write({hostile: stdio_entry("basic_stdio"), "off": {**stdio_entry("basic_stdio"), "enabled": False}})
    (text,) = home.keen_many(("prompt",))
    assert "\x1b" not in text.stderr and "\x07" not in text.stderr, text
    assert "configures a\\x1b]0;pwned\\x07b; generate the skills with keen mcp sync" in text.stderr, text
    assert "off" not in text.stderr.split("configures", 1)[1].split(";")[0], text
    home.write({"off": {**stdio_entry("basic_stdio"), "enabled": False}})
    text, search = home.keen_many(("prompt",), ("tools", "search", "add"))
    assert "configures off, each disabled; turn one on with keen mcp enable NAME" in text.stderr, text
    assert search.code == 2 and "`keen mcp enable NAME`" in search.stderr, search
    assert "skills with `keen mcp sync` (it says" not in search.stderr, search


def test_prompt_with_every_skill_disabled_says_so_not_to_add_a_server(tmp_path: Path) -> None:
    """A server whose skill the sync disabled (its server went away): ``keen prompt`` has no
    section, and says which skill is disabled and where to see why, not "add a server"."""
    home = make_home(tmp_path)
    home.write({"basic": stdio_entry("basic_stdio")})
    assert home.keen("mcp", "sync").code == 0
    home.write({"basic": {**stdio_entry("basic_stdio"), "command": str(home.home / "gone")}})
    assert home.keen("mcp", "sync").code == 1  # the server no longer starts: its skill is disabled
    text, stats = home.keen_many(("prompt",), ("prompt", "--stats"))
    for run in (text, stats):
        assert run.code == 0 and "reduction" not in run.stdout, run
        assert "mcp:basic is disabled" in run.stderr and "keen mcp sync says why" in run.stderr, run
        assert "keen mcp add" not in run.stderr, run
