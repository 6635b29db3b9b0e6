"""``keen``'s subcommands are built when they are looked up (``keen.cli.COMMANDS``): running
one command imports only its own module (``keen prompt``'s new interpreters, which check
that, are in tests/cli/test_prompt_without_typer.py), while ``keen --help`` still lists
every command with its help line and each command's own ``--help`` works."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from helpers.cli import make_home
from keen.cli import COMMANDS

# Runs the CLI in a new interpreter as the console script does, then reports which of
# Keen's CLI modules it imported.
_RUN = """
import json, sys
from keen.cli import main
sys.argv = ["keen", *sys.argv[1:]]
try:
    main()
except SystemExit:
    pass
print(json.dumps(sorted(m for m in sys.modules if m.startswith("keen.cli."))), file=sys.stderr)
"""


def _modules(tmp_path: Path, *args: str) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-c", _RUN, *args],
        capture_output=True,
        text=True,
        env={"KEEN_HOME": str(tmp_path / "home"), "HOME": str(tmp_path), "PATH": "/usr/bin:/bin"},
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stderr.strip().splitlines()[-1])


def test_keen_help_lists_every_command_with_its_help_line(tmp_path: Path) -> None:
    home = make_home(tmp_path)
    listed = home.keen("--help").stdout
    for name in COMMANDS:
        own = home.keen(name, "--help")
        assert own.code == 0 and f"Usage: keen {name} " in own.stdout, own
        # The command's first help line (its summary) is the root help's line for it.
        summary = own.stdout.split("\n\n")[1].strip().split("\n")[0]
        assert f"│ {name} " in listed and summary[:40] in listed, (name, summary, listed)


def test_the_command_modules_load_only_for_the_root_help(tmp_path: Path) -> None:
    loaded = _modules(tmp_path, "--help")
    assert {m for m in loaded if m.endswith("_cmd")} >= {
        "keen.cli.chat_cmd",
        "keen.cli.demo_cmd",
        "keen.cli.serve_cmd",
        "keen.cli.mcp_cmd",
        "keen.cli.pins_cmd",
        "keen.cli.skills_cmd",
    }, loaded


@pytest.mark.parametrize(("typo", "meant"), [("promt", "prompt"), ("skils", "skills")])
def test_a_mistyped_command_is_still_suggested(tmp_path: Path, typo: str, meant: str) -> None:
    run = make_home(tmp_path).keen(typo)
    assert run.code == 2 and f"Did you mean '{meant}'" in run.stdout + run.stderr, run
