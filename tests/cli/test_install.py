"""A newcomer's first commands (README "Quick start"): ``python -m keen`` is the CLI, and
after ``make demo`` the README's next lines run exactly as written in a fresh shell."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from helpers.forkserver import forked
from keen import __version__

pytestmark = pytest.mark.slow_file

ROOT = Path(__file__).resolve().parents[2]


def _clean_env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KEEN_", "VIRTUAL_ENV"))}
    # A fresh shell: the venv's bin is not on PATH until the README says how to put it there.
    venv_bin = str(Path(sys.executable).parent)
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if p != venv_bin)
    env.update({"KEEN_HOME": str(tmp_path / "keen-home"), "HOME": str(tmp_path), "NO_COLOR": "1"})
    return env


def test_python_dash_m_keen_is_the_cli(tmp_path: Path) -> None:
    env = _clean_env(tmp_path)
    version = subprocess.run(
        [sys.executable, "-m", "keen", "--version"], env=env, capture_output=True, text=True, timeout=60
    )
    assert version.returncode == 0, version.stderr
    assert __version__ in version.stdout
    usage = subprocess.run(
        [sys.executable, "-m", "keen", "--help"], env=env, capture_output=True, text=True, timeout=60
    )
    assert usage.returncode == 0 and "Usage: keen " in usage.stdout, usage.stdout


def test_the_readme_lines_after_make_demo_run_as_written(tmp_path: Path) -> None:
    readme = (ROOT / "README.md").read_text()
    quick = readme.split("## Quick start", 1)[1]
    block = re.search(r"```\n(.*?)```", quick, re.S)
    assert block is not None
    lines = [line.split("#", 1)[0].strip() for line in block.group(1).splitlines()]
    lines = [line for line in lines if line]
    assert lines[0] == "make demo"
    after = lines[1:]
    assert after and any(line.startswith("keen ") for line in after)
    if not (ROOT / ".venv" / "bin" / "activate").is_file():
        raise AssertionError("no .venv in the clone: run make demo (or make test) first")
    # `keen` is the console script the activated PATH finds (its path is printed and checked
    # below), run in a fork of the worker's warm process (helpers.forkserver): the lines, the
    # shell, its PATH and environment and the demo server keen starts from the command it
    # records are under test, not keen's interpreter start (a new interpreter each: about
    # 1 s of CPU, six times; `python -m keen` above and tests/untrusted start it for real).
    launcher = shlex.join(forked("keen")[:-1])
    wrapper = (
        'keen() { local script; script=$(type -P keen) || { echo "keen is not on PATH" >&2; return 127; }\n'
        f'  echo "keen is $script"; {launcher} "$script" "$@"; }}\n'
    )
    script = "set -e\n" + wrapper + "\n".join(after) + "\n"
    shell = subprocess.run(
        ["bash", "-c", script],
        cwd=ROOT,
        env=_clean_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert shell.returncode == 0, shell.stdout + shell.stderr
    assert f"keen is {ROOT / '.venv' / 'bin' / 'keen'}\n" in shell.stdout  # what activate put on PATH
    assert "No MCP servers configured" in shell.stdout
    assert "keen mcp add NAME" in shell.stdout and "keen mcp import --detect" in shell.stdout
    assert "added demo" in shell.stdout and "- mcp:demo: " in shell.stdout
    assert "prompt size (tiktoken:o200k_base)" in shell.stdout  # exact counts with no file to fetch
    assert "26.2 mi = 42.1648 km" in shell.stdout
