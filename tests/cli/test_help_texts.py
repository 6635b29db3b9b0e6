"""Help and usage text as a person reads it: arguments named as their help names them (typer
wrote ``{server}``), the environment variables Keen reads listed, and no option described
by another command's behaviour."""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers.cli import make_home


@pytest.mark.parametrize(
    ("command", "usage"),
    [
        (["mcp", "call"], "keen mcp call [OPTIONS] SERVER TOOL"),
        (["mcp", "add"], "keen mcp add [OPTIONS] NAME [COMMAND]..."),
        (["mcp", "refresh"], "keen mcp refresh [OPTIONS] [SERVER]"),
        (["mcp", "trust"], "keen mcp trust [OPTIONS] SERVER [TOOLS]..."),
        (["sessions", "show"], "keen sessions show [OPTIONS] SESSION_ID"),
    ],
)
def test_usage_names_arguments_in_capitals(tmp_path: Path, command: list[str], usage: str) -> None:
    run = make_home(tmp_path).keen(*command, "--help")
    assert run.code == 0 and usage in run.stdout, run.stdout
    assert "{" not in run.stdout.split("\n\n", 2)[1], run.stdout


def test_the_root_help_names_the_environment(tmp_path: Path) -> None:
    flat = " ".join(make_home(tmp_path).keen("--help").stdout.split())
    for name in ("KEEN_HOME", "KEEN_MCP_TIMEOUT", "KEEN_DEBUG=1"):
        assert name in flat, flat


def test_refresh_help_does_not_speak_of_watch(tmp_path: Path) -> None:
    run = make_home(tmp_path).keen("mcp", "refresh", "--help")
    assert "watch" not in run.stdout, run.stdout
    assert "one JSON object a line" in make_home(tmp_path / "w").keen("mcp", "watch", "--help").stdout


@pytest.mark.parametrize("command", [[], ["mcp"], ["mcp", "add"], ["chat"], ["tools", "search"], ["serve"]])
def test_dash_h_is_help_too(tmp_path: Path, command: list[str]) -> None:
    """``keen -h`` answered "No such option: -h" (exit 2): -h is what most tools take."""
    home = make_home(tmp_path)
    short, long = home.keen(*command, "-h"), home.keen(*command, "--help")
    assert short.code == 0 and short.stdout == long.stdout, str(short)
    assert "-h" in long.stdout  # the help lists it


def test_dash_h_after_the_double_dash_is_the_servers_argument(tmp_path: Path) -> None:
    home = make_home(tmp_path)
    added = home.keen("mcp", "add", "hx", "--", "some-server", "-h")
    assert added.code == 0, str(added)
    assert home.keen("mcp", "get", "hx", "--json").json()["args"] == ["-h"]


def test_the_console_script_takes_dash_h(tmp_path: Path) -> None:
    run = make_home(tmp_path).keen_process("-h")
    assert run.code == 0 and "Usage: keen" in run.stdout, str(run)


@pytest.mark.parametrize(
    ("group", "command", "across"),
    [
        (["mcp"], "call", "failed the call (an isError result"),
        (["mcp"], "add", "--url URL, or keen mcp add -t"),
        (["tools"], "search", "word vectors and a small transformer model"),
    ],
)
def test_a_groups_command_list_gives_each_summary_as_one_flowing_text(
    tmp_path: Path, group: list[str], command: str, across: str
) -> None:
    """A docstring's first paragraph wrapped in the source was listed with its line break:
    "...failed the call" then "(an isError result, ...)" on a line of its own, even on a
    terminal wide enough for all of it."""
    listing = make_home(tmp_path).keen(*group, "--help", columns=400).stdout
    [row] = [line for line in listing.splitlines() if line.startswith(f"│ {command} ")]
    assert across in row, listing


@pytest.mark.parametrize("command", ["enable", "disable"])
def test_enable_and_disable_name_their_argument_as_their_usage_does(tmp_path: Path, command: str) -> None:
    """Usage said NAME while the text said SERVER, which no argument is called."""
    shown = make_home(tmp_path).keen("mcp", command, "--help").stdout
    assert f"keen mcp {command} [OPTIONS] NAME" in shown and "SERVER" not in shown, shown
