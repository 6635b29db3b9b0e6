"""Portability (README "Files"): Keen's own modules import nothing POSIX-only at module level
(``import keen`` works on Windows and macOS), and the skills lock is ``filelock``'s, with
its timeout turned into a ``SkillError`` that says what to do."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import keen
from keen.errors import SkillError
from keen.mcpskills import _swap

POSIX_ONLY = {"fcntl", "termios", "tty", "pty", "pwd", "grp", "resource", "posix"}
SRC = Path(keen.__file__).parent


def test_no_module_level_posix_only_import() -> None:
    found: list[str] = []
    for path in sorted(SRC.rglob("*.py")):
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [alias.name.split(".")[0] for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module.split(".")[0]]
            found += [f"{path.relative_to(SRC)}: {name}" for name in names if name in POSIX_ONLY]
    assert found == []


def test_the_skills_lock_times_out_with_what_to_do(tmp_path: Path) -> None:
    root = tmp_path / "skills"
    root.mkdir()
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time, filelock\n"
            f"lock = filelock.FileLock({str(root / _swap.LOCK_FILE)!r}); lock.acquire()\n"
            "print('held', flush=True); time.sleep(30)\n",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        with pytest.raises(SkillError, match="another Keen process"), _swap.locked(root, timeout=0.3):
            pass
    finally:
        holder.kill()
        holder.wait(10)
    with _swap.locked(root, timeout=5):  # the kernel dropped the dead holder's lock
        pass
