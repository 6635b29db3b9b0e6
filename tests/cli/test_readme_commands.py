"""The README's quick start as a person runs it: the demo server added while the virtualenv
is active (``keen mcp add demo -- keen-demo-server``), then used from a shell where it is not
(a new terminal, or an MCP host starting ``keen serve`` by its full path). Recorded as a bare
``python -m keen.demo.server`` it failed there with ModuleNotFoundError."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from helpers.cli import KEEN, make_home

BIN = Path(sys.executable).parent


def keen(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """The console script forked from the worker's warm process (``helpers.cli.KEEN``) with
    ``env``: the commands it records and the demo server it starts are under test, and that
    server starts as a new interpreter from the recorded command; ``keen``'s own start is not
    (tests/cli/test_install.py runs the README's lines with the installed script)."""
    return subprocess.run([*KEEN, *args], env=env, capture_output=True, text=True, timeout=60, check=False)


def test_the_demo_server_added_in_the_venv_answers_from_a_shell_without_it(tmp_path: Path) -> None:
    home = make_home(tmp_path)
    active = {**home.env(), "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', os.defpath)}"}
    added = keen(active, "mcp", "add", "demo", "--", "keen-demo-server")
    assert added.returncode == 0, added.stderr
    # Another shell: no venv on PATH, only the system's folders.
    plain = {**home.env(), "PATH": os.pathsep.join(p for p in ("/usr/local/bin", "/usr/bin", "/bin"))}
    args = json.dumps({"value": 26.2, "from_unit": "mi", "to_unit": "km"})
    called = keen(plain, "mcp", "call", "demo", "convert_units", "--args", args, "--yes")
    assert called.returncode == 0, called.stderr
    assert "42.16" in called.stdout, called.stdout


def test_the_quick_starts_demo_server_keeps_its_notes_in_keen_home(tmp_path: Path) -> None:
    """README: every command honours KEEN_HOME, and the demo server started from the Quick
    start's entry (no ``env`` in it) keeps its notes there, not in ``$HOME/.keen``."""
    home = make_home(tmp_path)
    env = {**home.env(), "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', os.defpath)}"}
    added = keen(env, "mcp", "add", "demo", "--", "keen-demo-server")
    assert added.returncode == 0, added.stderr
    note = json.dumps({"title": "marathon", "body": "26.2 mi = 42.16 km"})
    called = keen(env, "mcp", "call", "demo", "add_note", "--args", note, "--yes")
    assert called.returncode == 0, called.stderr
    notes = json.loads((home.keen_home / "demo-notes.json").read_text(encoding="utf-8"))
    assert [n["title"] for n in notes["notes"]] == ["marathon"]
    assert not (home.home / ".keen").exists()
