"""README's "As a library" snippets, copied as they are and run against the real
mcp-server-time peer: a team that starts from them must not meet a SyntaxError, a missing
argument or an undocumented step. Only the server's command is changed (``uvx`` -> the
installed peer), as a reader changes it to wherever the server lives on their machine."""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from conftest import ROOT, peer
from helpers.cli import KEEN
from helpers.forkserver import forked

pytestmark = pytest.mark.slow_file


def _section() -> str:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    return readme.split("\n## As a library\n", 1)[1].split("\n## ", 1)[0]


def _snippets() -> list[str]:
    return re.findall(r"```python\n(.*?)```", _section(), flags=re.S)


def _commands() -> list[list[str]]:
    """The section's shell steps (``keen ...`` commands joined by ``&&``), comments dropped."""
    blocks = re.findall(r"```sh\n(.*?)```", _section(), flags=re.S)
    lines = [line.split("#", 1)[0].strip() for block in blocks for line in block.splitlines()]
    return [step.split() for line in lines if line for step in line.split("&&")]


def test_every_library_snippet_runs_as_written(
    write_config: Callable[[dict[str, Any]], Path], tmp_path: Path
) -> None:
    time_server = peer("py", "mcp-server-time")
    write_config({"time": {"transport": "stdio", "command": time_server, "args": []}})
    # The steps the section gives before its snippets, run as a reader runs them.
    for step in _commands():
        assert step[0] == "keen", step
        ran = subprocess.run([*KEEN, *step[1:]], capture_output=True, text=True, timeout=120, cwd=tmp_path)
        assert ran.returncode == 0, f"{' '.join(step)}:\n{ran.stdout}\n{ran.stderr}"
    snippets = _snippets()
    assert len(snippets) >= 3
    for number, code in enumerate(snippets, 1):
        code = code.replace(
            '"command": "uvx", "args": ["mcp-server-time"]', f'"command": {json.dumps(time_server)}'
        )
        assert "uvx" not in code, "a snippet starts a server the test cannot run"
        script = tmp_path / f"snippet{number}.py"
        script.write_text(code, encoding="utf-8")
        # Run as a script in a fork of the worker's warm process (tests/helpers/forkserver.py):
        # what a snippet does is under test here, not the interpreter's start.
        done = subprocess.run(forked(str(script)), capture_output=True, text=True, timeout=120, cwd=tmp_path)
        assert done.returncode == 0, f"snippet {number}:\n{code}\n{done.stderr}"
        assert done.stdout.strip(), f"snippet {number} printed nothing"
        # A refused or failed call prints its "Error: ..." and exits 0: not a snippet that works.
        assert "Error:" not in done.stdout, f"snippet {number}:\n{done.stdout}"
