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
from helpers.forkserver import forked

pytestmark = pytest.mark.slow_file


def _snippets() -> list[str]:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("\n## As a library\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```python\n(.*?)```", section, flags=re.S)


def test_every_library_snippet_runs_as_written(
    write_config: Callable[[dict[str, Any]], Path], tmp_path: Path
) -> None:
    time_server = peer("py", "mcp-server-time")
    write_config({"time": {"transport": "stdio", "command": time_server, "args": []}})
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
