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


# Imports every keen module in a fresh interpreter where a POSIX-only module imported by
# Keen's own code (not by a dependency, which guards its own by platform) is missing.
_IMPORT_ALL = r"""
import builtins, importlib, pkgutil, sys
BLOCKED = set(sys.argv[1].split(","))
real_import = builtins.__import__

def guarded_import(name, globals=None, locals=None, fromlist=(), level=0):
    # Every import statement comes here, also for a module already in sys.modules.
    importer = (globals or {}).get("__name__", "")
    if level == 0 and name.split(".")[0] in BLOCKED and (importer == "keen" or importer.startswith("keen.")):
        raise ModuleNotFoundError(f"keen-blocked: {importer} imports {name}")
    return real_import(name, globals, locals, fromlist, level)

builtins.__import__ = guarded_import
import keen
blocked, other, walked = [], [], 0
for info in pkgutil.walk_packages(keen.__path__, "keen."):
    walked += 1
    try:
        importlib.import_module(info.name)
    except Exception as exc:
        (blocked if "keen-blocked" in str(exc) else other).append(f"{info.name}: {exc}")
print("\n".join(blocked))
print(f"walked {walked}; other import failures (not about POSIX): {other}", file=sys.stderr)
"""


def test_every_keen_module_imports_without_posix_only_modules() -> None:
    proc = subprocess.run(
        [sys.executable, "-c", _IMPORT_ALL, ",".join(sorted(POSIX_ONLY - {"posix"}))],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert proc.stdout.strip() == "", proc.stdout
    walked = int(proc.stderr.split("walked ", 1)[1].split(";", 1)[0])
    assert walked > 80, proc.stderr  # every module of every package, not an empty walk


def test_skill_dir_names_per_platform() -> None:
    from keen import paths
    from keen.mcpskills import skill_dir

    assert paths.skill_dir_name("mcp:github", "linux") == "mcp:github"
    assert paths.skill_dir_name("mcp:github", "darwin") == "mcp:github"
    assert paths.skill_dir_name("mcp:github", "win32") == "mcp_github"
    assert paths.skill_dir_name("notes", "win32") == "notes"
    assert (
        skill_dir("my-srv_1", "win32") == "mcp_my-srv_1" and skill_dir("my-srv_1", "linux") == "mcp:my-srv_1"
    )
    forbidden_on_windows = set('<>:"/\\|?*')
    assert not forbidden_on_windows & set(skill_dir("a_b-c", "win32"))


def test_a_skill_in_its_windows_folder_is_found_by_its_name(tmp_path: Path) -> None:
    from helpers.cli import make_home

    home = make_home(tmp_path)
    folder = home.keen_home / "skills" / "mcp_notes"  # as Keen writes mcp:notes on Windows
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text("---\nname: mcp:notes\ndescription: Keep short notes.\n---\nBody.\n")
    listed = home.keen("skills", "list", "--json")
    assert listed.code == 0, str(listed)
    assert [s["name"] for s in listed.json()] == ["mcp:notes"]
    shown = home.keen("skills", "show", "mcp:notes")
    assert shown.code == 0 and "Body." in shown.stdout, str(shown)
    assert "- mcp:notes: Keep short notes." in home.keen("prompt").stdout
    twin = home.keen_home / "skills" / "mcp:notes"  # both spellings: one skill, one problem
    twin.mkdir()
    (twin / "SKILL.md").write_text("---\nname: mcp:notes\ndescription: Other.\n---\n")
    both = home.keen("skills", "list", "--json")
    assert [s["name"] for s in both.json()] == ["mcp:notes"], str(both)
