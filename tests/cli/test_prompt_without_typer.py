"""``keen prompt`` with only its own options runs without typer (keen.cli._prompt), and says
exactly what the typer command says: the same output, errors and exit codes; any other
command line (help, -v, ``--budget=N``, a repeated or unknown option) is typer's."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path

import pytest

from helpers.cli import FreshRun, Home, fresh_keen, make_home
from keen.cli._prompt import plain_options
from keen.mcp.types import ServerInfo, ServerState, ServerStatus, Tool
from keen.mcpskills import generate_skill

NOW = datetime(2026, 1, 2, tzinfo=UTC)


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Home:
    """Twelve generated skills (1..12 tools each) and one a person wrote; one home for the
    module, which only reads it. A new interpreter's first ``keen prompt`` in a home builds
    the token counter from the bundled vocabulary and leaves its caches there (about 0.6 s of
    CPU, ``tests/test_tokens.py`` tests them); the later ones here read them, as a user's
    later starts do: what these tests show (the output, the modules imported) is the same."""
    made = make_home(tmp_path_factory.mktemp("prompt"))
    root = made.keen_home / "skills"
    for i in range(1, 13):
        server = f"server{i:02d}"
        tools = [
            Tool(server, f"tool{j}", f"Does thing {j} of {server} with care, in detail, at length.", {})
            for j in range(i)
        ]
        status = ServerStatus(server, "stdio", "none", ServerState.CONNECTED, last_refresh_at=NOW)
        info = ServerInfo(server, "1", None, f"{server} reads and writes the records of a shop.")
        generate_skill(root, status, tools, info=info, now=NOW, fsync=False)
    notes = root / "notes"
    notes.mkdir()
    (notes / "SKILL.md").write_text("---\nname: notes\ndescription: Keep short notes.\n---\nWrite notes.\n")
    return made


# Each command line beside what it shows: the whole catalog, a folded one, the JSON
# record, the stats, and the errors a too-small budget or character cap gets.
LINES = [
    ("prompt",),
    ("prompt", "--json"),
    ("prompt", "--stats"),
    ("prompt", "--stats", "--json"),
    ("prompt", "--max-chars", "400"),
    ("prompt", "--max-chars", "5"),
    ("prompt", "--budget", "4000"),
    ("prompt", "--budget", "620"),
    ("prompt", "--json", "--budget", "620"),
    ("prompt", "--budget", "620", "--stats"),
    ("prompt", "--budget", "520"),
    ("prompt", "--budget", "10"),
    ("prompt", "--budget", "0"),
    ("prompt", "--budget", "00620"),
]


def test_a_plain_prompt_prints_what_the_typer_command_prints(home: Home) -> None:
    steps = set()
    for args in LINES:
        typer_run, alone = home.keen(*args), home.keen_process(*args)
        assert (alone.code, alone.stdout, alone.stderr) == (
            typer_run.code,
            typer_run.stdout,
            typer_run.stderr,
        ), f"{typer_run}\n=== without typer:\n{alone}"
        if "--json" in args and "--budget" in args:
            steps.add(alone.json()["step"])
    assert steps == {"folded"}, steps  # 620 tokens fold servers: that path is covered
    assert [home.keen_process("prompt", "--budget", b).code for b in ("520", "10")] == [2, 2]


@pytest.mark.parametrize(
    "args",
    [
        ("prompt", "--help"),
        ("prompt", "-v", "--budget", "620"),
        ("prompt", "--budget=620"),
        ("prompt", "--budget", "620", "--budget", "4000"),
        ("prompt", "--budget", "-1"),
        ("prompt", "--budget", "+620"),
        ("prompt", "--budget"),
        ("prompt", "--nope"),
        ("prompt", "extra"),
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


def test_plain_options_reads_only_its_own_options() -> None:
    assert plain_options(["prompt", "--json", "--budget", "4000", "--stats", "--max-chars", "07"]) == {
        "stats": True,
        "as_json": True,
        "max_chars": 7,
        "budget_tokens": 4000,
    }
    assert plain_options(["prompt"]) == {"stats": False, "as_json": False, "max_chars": 0, "budget_tokens": 0}
    for other in (
        ["skills", "list"],
        [],
        ["--version"],
        ["prompt", "--budget", "٥"],
        ["prompt", "--budget", "5_0"],
    ):
        assert plain_options(other) is None, other


@pytest.mark.parametrize(
    ("args", "typer", "own"),
    [
        # A plain `keen prompt` runs without typer (keen.cli._prompt), so without its typer
        # command module or any other command's (keen.cli.COMMANDS are built when looked up).
        (("prompt", "--budget", "4000"), False, []),
        (("prompt", "--budget", "10"), False, []),
        (("prompt", "--budget=4000"), True, ["keen.cli.prompt_cmd"]),
        (("--version",), True, None),
    ],
)
def test_keen_prompt_starts_without_typer(
    home: Home, args: tuple[str, ...], typer: bool, own: list[str] | None
) -> None:
    done = fresh_keen(home.env(), *args)
    assert ("typer" in done.loaded) is typer, (args, done.stderr)
    assert done.code == (2 if args[-1] == "10" else 0), done.stderr
    if own is not None:
        loaded = done.cli
        assert [m for m in loaded if m.endswith("_cmd")] == own, loaded
        assert "keen.cli._prompt" in loaded, loaded


def test_completion_goes_through_typer(home: Home) -> None:
    env = {
        **home.env(),
        "_KEEN_COMPLETE": "bash_complete",
        "COMP_WORDS": "keen prompt --bu",
        "COMP_CWORD": "2",
    }
    done = fresh_keen(env, "prompt", "--budget", "4000")
    assert "typer" in done.loaded, done.stderr


def test_a_warning_on_the_way_is_logged_as_the_root_command_logs_it(tmp_path: Path) -> None:
    """Without typer, logging is set up at the first record (keen._log), not at the start: a
    prompt built without trouble does not import logging, and a warning on the way is
    printed through the CLI's handler, as typer's root command sets it up."""
    made = make_home(tmp_path)
    skill = made.keen_home / "skills" / "notes"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text("---\nname: notes\ndescription: Keep short notes.\n---\nWrite notes.\n")

    def fresh() -> FreshRun:
        # A new interpreter (the console script's forks start warm, with logging imported).
        done = fresh_keen(made.env(), "prompt")
        assert done.code == 0, done.stderr
        return done

    quiet = fresh()
    assert "logging" not in quiet.loaded, quiet.stderr
    (skill / ".keen-generated-mcp.json").write_text("{not json")
    alone, typer_run = fresh(), made.keen("prompt")
    warning = f"WARNING keen.skills.discover: skill dir {skill}: unreadable .keen-generated-mcp.json ("
    assert alone.stderr.startswith(warning), alone.stderr
    assert alone.stdout == typer_run.stdout and "- notes: Keep short notes." in alone.stdout


def test_a_budget_too_small_to_hold_anything_keeps_no_section_of_its_probes(tmp_path: Path) -> None:
    """The error for a budget too small looks for the least budget that would do, building
    the prompt at a few dozen budgets: none of those is kept in the section store, whose
    few places belong to the budgets prompts are built at."""
    made = make_home(tmp_path)
    skill = made.keen_home / "skills" / "notes"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text("---\nname: notes\ndescription: Keep short notes.\n---\nWrite notes.\n")
    sections = made.keen_home / "cache" / "prompt-sections"

    built = made.keen_process("prompt", "--budget", "4000")
    assert built.code == 0, built
    kept = sorted(sections.iterdir())
    assert len(kept) == 1, kept
    refused = made.keen_process("prompt", "--budget", "5")
    assert refused.code != 0 and "raise --budget to at least" in refused.stderr, refused
    after = sorted(sections.iterdir())
    # The 4000 tokens' section is still there, alone: none for 5 tokens (below the tool
    # definitions, so no section is built), nor any probe's.
    assert after == kept, after


def test_json_below_the_tool_definitions_is_a_json_error(home: Home) -> None:
    """``keen prompt --budget 10 --json`` printed only a human error on stderr (exit 2): a
    script reading stdout got no JSON. It gets a JSON error object there now (the code,
    the budget, the minimum that can be met, the message), stderr's error line beside it;
    typer's command prints the same."""
    typer_run, alone = (
        home.keen("prompt", "--budget", "10", "--json"),
        home.keen_process("prompt", "--budget", "10", "--json"),
    )
    assert (alone.code, alone.stdout, alone.stderr) == (typer_run.code, typer_run.stdout, typer_run.stderr), (
        alone
    )
    refused = alone.json()
    assert alone.code == 2 and set(refused) == {"error", "budget", "minimum", "message"}, refused
    assert (refused["error"], refused["budget"]) == ("budget_too_small", 10), refused
    assert refused["message"].startswith(
        f"a budget of 10 tokens cannot hold even the tool definitions ({refused['minimum']} tokens)"
    )
    assert "raise --budget to at least" in refused[
        "message"
    ] and f"error: {refused['message']}" in alone.stderr.replace("\n", " ")
    # The minimum is the least budget that is met: a section within it (no line yet).
    met = home.keen_process("prompt", "--budget", str(refused["minimum"]), "--json")
    assert met.code == 0 and met.json()["step"] == "empty" and met.json()["tokens"] <= refused["minimum"], met


def test_with_no_skills_a_small_budget_names_one_figure(tmp_path: Path) -> None:
    """With no skill, ``keen prompt --budget 10`` advised 'at least 432 (every server behind
    search_tools), or 433 for the whole catalog': two figures for a catalog that is not
    there, the second one token past a budget that already held it all. It names the one
    least budget now, and says there is nothing to list."""
    made = make_home(tmp_path)
    refused = made.keen_process("prompt", "--budget", "10")
    message = " ".join(refused.stderr.split())
    said = re.fullmatch(
        r"error: a budget of 10 tokens cannot hold even the tool definitions \((\d+) tokens\); raise "
        r"--budget to at least (\d+) \(no skill is enabled, so there is no catalog to list\)",
        message,
    )
    assert refused.code == 2 and said and said.group(1) == said.group(2), message
    minimum = int(said.group(1))
    assert [made.keen_process("prompt", "--budget", str(b)).code for b in (minimum - 1, minimum)] == [2, 0]
    # One skill whose whole catalog fits the least budget that lists it: one figure too.
    skill = made.keen_home / "skills" / "notes"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text("---\nname: notes\ndescription: Keep short notes.\n---\nWrite notes.\n")
    one = made.keen_process("prompt", "--budget", "10")
    advised = re.search(r"raise --budget to at least (\d+) for the whole catalog$", one.stderr.strip())
    assert one.code == 2 and advised and "search_tools" not in one.stderr, one
    least = int(advised.group(1))
    steps = [
        made.keen_process("prompt", "--budget", str(b), "--json").json()["step"] for b in (least - 1, least)
    ]
    assert steps == ["empty", "full"], steps
