"""``keen skills list [--json]`` and ``keen skills show NAME [--json]`` run without typer
(keen.cli._skills) and print exactly what the typer commands print: the same table, JSON,
SKILL.md, warnings, errors and exit codes; any other command line (help, -v, a repeated or
unknown option) is typer's. A
plain listing loads neither typer nor the MCP SDK, pydantic or logging (nor PyYAML, once the
skills store holds what it reads), and the JSON listing and a skill's text not rich either."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers.cli import Home, Run, fresh_keen, make_home
from helpers.skills import settle
from keen.cli._skills import plain_options
from keen.skills import MARKER_FILE


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Home:
    """A generated skill, one a person wrote (its description looks like markup), one
    disabled, and two broken ones: no frontmatter, and a folder whose name holds a
    terminal's colour code (the warning shows it escaped), and a description holding a C1
    control and a bidi mark (escaped in --json)."""
    made = make_home(tmp_path_factory.mktemp("skills"))
    root = made.keen_home / "skills"
    texts = {
        "mcp:github": "---\nname: mcp:github\ndescription: Use the `github` MCP server.\n---\n",
        "notes": "---\ndescription: '[draft] Take notes :office:.'\n---\nWrite $1.\n",
        "old": "---\ndescription: An old skill.\n---\n",
        "broken": "no frontmatter here\n",
        "bad\x1b[31mname": "---\ndescription: Coloured.\n---\n",
        "marks": '---\ndescription: "C1 \\u009b31m and \\u202e reversed"\n---\n',
    }
    for name, text in texts.items():
        (root / name).mkdir(parents=True)
        (root / name / "SKILL.md").write_text(text, encoding="utf-8")
    (root / "mcp:github" / MARKER_FILE).write_text(json.dumps({"managed_by": "keen-mcp", "server": "github"}))
    (root / "config.json").write_text('{"is_enabled": {"old": false}}', encoding="utf-8")
    return made


def _as_typer_prints(home: Home, args: tuple[str, ...]) -> Run:
    """``keen ARGS`` run by the console script (without typer, when it can) after the typer
    command's run of it: the same exit code, stdout and stderr, which it returns."""
    typer_run, alone = home.keen(*args), home.keen_process(*args)
    assert (alone.code, alone.stdout, alone.stderr) == (
        typer_run.code,
        typer_run.stdout,
        typer_run.stderr,
    ), f"{typer_run}\n=== without typer:\n{alone}"
    return alone


@pytest.mark.parametrize("args", [("skills", "list"), ("skills", "list", "--json")])
def test_a_plain_listing_prints_what_the_typer_command_prints(home: Home, args: tuple[str, ...]) -> None:
    alone = _as_typer_prints(home, args)
    assert alone.code == 0 and "warning: skill 'broken' skipped" in alone.stderr, alone
    # A folder's name is escaped wherever the warning shows it, on a terminal or not.
    assert "\x1b" not in alone.stderr and "bad\\x1b[31mname)" in alone.stderr  # its path too
    assert "\u009b" not in alone.stdout and "\u202e" not in alone.stdout


@pytest.mark.parametrize(
    "args",
    [
        ("skills", "show", "notes"),
        ("skills", "show", "notes", "--json"),
        ("skills", "show", "--json", "mcp:github"),
        ("skills", "show", "broken"),
        ("skills", "show", "broken", "--json"),
        ("skills", "show", "note"),
        ("skills", "show", "nothing-like-it"),
        ("skills", "show", ""),
    ],
)
def test_a_plain_show_prints_what_the_typer_command_prints(home: Home, args: tuple[str, ...]) -> None:
    alone = _as_typer_prints(home, args)
    expected = {"notes": 0, "mcp:github": 0, "broken": 0}.get(
        args[-1] if args[-1] != "--json" else args[2], 2
    )
    assert alone.code == expected, alone
    if args[2] == "note":
        assert "did you mean notes?" in alone.stderr, alone


def test_an_unreadable_marker_is_warned_about_at_every_listing(tmp_path: Path) -> None:
    """What a listing reads comes from the skills store when the files are as stored, but a
    skill whose marker cannot be read is read again, and its warning printed, every time."""
    made = make_home(tmp_path)
    skill = made.keen_home / "skills" / "notes"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text("---\ndescription: Keep short notes.\n---\n", encoding="utf-8")
    (skill / MARKER_FILE).write_text("{not json", encoding="utf-8")
    settle()
    runs = [made.keen_process("skills", "list", "--json") for _ in range(3)]
    assert all(
        run.stderr.startswith(f"WARNING keen.skills.discover: skill dir {skill}: unreadable") for run in runs
    )
    assert all(
        (run.code, run.stdout, run.stderr) == (runs[0].code, runs[0].stdout, runs[0].stderr) for run in runs
    )
    assert [row["managed"] for row in runs[-1].json()] == [False]


@pytest.mark.parametrize("args", [("skills", "list"), ("skills", "list", "--json")])
def test_a_broken_skills_config_is_the_same_error_both_ways(tmp_path: Path, args: tuple[str, ...]) -> None:
    made = make_home(tmp_path)
    (made.keen_home / "skills").mkdir()
    (made.keen_home / "skills" / "config.json").write_text("{not json", encoding="utf-8")
    typer_run, alone = made.keen(*args), made.keen_process(*args)
    assert alone.code == 2 and alone.stderr.startswith("error: "), alone
    assert (alone.code, alone.stdout, alone.stderr) == (typer_run.code, typer_run.stdout, typer_run.stderr)


@pytest.mark.parametrize(
    "args",
    [
        ("skills", "list", "--help"),
        ("skills", "list", "-v"),
        ("skills", "list", "--json", "--json"),
        ("skills", "list", "--nope"),
        ("skills", "list", "extra"),
        ("skills", "--help"),
        ("skills", "show", "--help"),
        ("skills", "show", "notes", "-v"),
        ("skills", "show", "notes", "old"),
        ("skills", "show", "-x"),
        ("skills", "show"),
        ("skills", "show", "notes", "--json", "--json"),
    ],
)
def test_every_other_command_line_is_typers(home: Home, args: tuple[str, ...]) -> None:
    assert plain_options(args) is None
    typer_run, process = home.keen(*args), home.keen_process(*args)
    assert (process.code, process.stdout, process.stderr) == (
        typer_run.code,
        typer_run.stdout,
        typer_run.stderr,
    )


def test_plain_options_reads_only_the_commands_own_options() -> None:
    assert plain_options(["skills", "list"]) == {"command": "list", "as_json": False}
    assert plain_options(["skills", "list", "--json"]) == {"command": "list", "as_json": True}
    assert plain_options(["skills", "show", "--json", "x"]) == {
        "command": "show",
        "name": "x",
        "as_json": True,
    }
    assert plain_options(["skills", "show", "x"]) == {"command": "show", "name": "x", "as_json": False}
    for other in (
        ["skills"],
        ["skills", "enable", "notes"],
        ["prompt"],
        [],
        ["list"],
        ["skills", "list", "--JSON"],
        ["skills", "show", "--", "x"],
    ):
        assert plain_options(other) is None, other


@pytest.mark.parametrize(
    ("args", "kept_off"),
    [
        (("skills", "list"), {"typer", "mcp", "pydantic", "logging", "yaml"}),
        (("skills", "list", "--json"), {"typer", "rich", "mcp", "pydantic", "logging", "yaml"}),
        (("skills", "show", "notes"), {"typer", "rich", "mcp", "pydantic", "logging", "yaml"}),
    ],
)
def test_keen_skills_list_imports_only_what_it_shows(
    tmp_path: Path, args: tuple[str, ...], kept_off: set[str]
) -> None:
    # Skills without trouble: a broken one is logged (at debug level), which sets logging up.
    made = make_home(tmp_path)
    for name in ("notes", "todo"):
        (made.keen_home / "skills" / name).mkdir(parents=True)
        (made.keen_home / "skills" / name / "SKILL.md").write_text(f"---\ndescription: {name}.\n---\n")

    def run() -> tuple[frozenset[str], list[str], str]:
        done = fresh_keen(made.env(), *args)
        assert done.code == 0, done.stderr
        return done.loaded, done.cli, done.stderr

    # A run parses each SKILL.md (PyYAML) and stores what it read (keen.skills.cache) once the
    # files are older than the store's racy window (settled first); the runs after take them
    # from there.
    settle()
    first, _, _ = run()
    assert "yaml" in first, first
    loaded, cli, stderr = run()
    assert not loaded & kept_off, (args, loaded, stderr)
    assert [m for m in cli if m.endswith("_cmd")] == [], cli
    assert "keen.cli._skills" in cli, cli
    if args[1] == "list" and "--json" not in args:
        assert "rich" in loaded, loaded  # the table is rich's


def test_help_still_goes_through_typer(home: Home) -> None:
    done = fresh_keen(home.env(), "skills", "list", "--help")
    assert "typer" in done.loaded and "keen.cli.skills_cmd" in done.cli, done.stderr
    assert "Usage: keen skills list" in done.stdout, done.stdout


def test_the_title_shows_the_skills_folder_as_it_is_named(tmp_path: Path) -> None:
    """A folder's name is text, not markup nor an emoji code: ``[b]`` and ``:office:`` in the
    path are printed as written (rich's console made the rest of the title bold and put an
    office building in it)."""
    made = make_home(tmp_path / "team:office:[b]notes")
    skill = made.keen_home / "skills" / "notes"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text("---\ndescription: Keep short notes.\n---\n", encoding="utf-8")
    done = fresh_keen({**made.env(), "COLUMNS": "250"}, "skills", "list")
    assert done.code == 0, done.stderr
    assert f"Skills in {made.keen_home / 'skills'}" in done.stdout, done.stdout
    assert "\U0001f3e2" not in done.stdout
