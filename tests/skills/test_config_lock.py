"""skills/config.json has several writers (``SkillsConfig.edit`` as used by ``/skills
enable|disable``, the sync and live refresh, the ``keen skills`` CLI); each holds the skills
directory's lock from load to save, so concurrent writers in different processes lose no
update. Real processes, real files."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import textwrap
import threading
from pathlib import Path

import pytest

from helpers.cli import KEEN
from helpers.forkserver import forked
from helpers.mcpskills import status
from keen.errors import SkillError
from keen.mcp.types import ServerState
from keen.mcpskills.sync import ServerSnapshot, sync_mcp_skills, sync_server
from keen.skills import SkillsConfig
from keen.skills.lock import locked

EDITS = 40

EDITOR = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from keen.skills import SkillsConfig

    path, worker, count = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
    for k in range(count):
        with SkillsConfig.edit(path) as config:
            config.set_enabled(f"{worker}-{k:02d}", k % 2 == 0)
    """
)

SYNCER = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from keen.mcp.types import ServerState, ServerStatus
    from keen.mcpskills.sync import ServerSnapshot, sync_server

    root, worker, count = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
    for k in range(count):
        name = f"{worker}{k:02d}"
        down = ServerStatus(name, "stdio", "none", ServerState.DISCONNECTED, last_error="refused")
        sync_server(ServerSnapshot(down), skills_root=root, fsync=False)  # the live refresh's path
    """
)


def spawn(script: str, *args: str) -> subprocess.Popen[bytes]:
    """``python -c script args`` as its own process, forked from the worker's warm process
    (``tests/helpers/forkserver.py``): the locks between processes are under test, not
    their imports."""
    return subprocess.Popen(forked("-c", script, *args), stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


def test_concurrent_writers_in_several_processes_lose_no_update(keen_home: Path) -> None:
    root = keen_home / "skills"
    root.mkdir()
    for name in ("c0", "c1", "c2"):
        (root / name).mkdir()
        (root / name / "SKILL.md").write_text(f"---\ndescription: Skill {name}.\n---\n", encoding="utf-8")
    path = root / "config.json"
    env = {**os.environ, "KEEN_HOME": str(keen_home)}
    procs = [spawn(EDITOR, str(path), f"w{i}", str(EDITS)) for i in range(3)]
    procs.append(spawn(SYNCER, str(root), "srv", str(EDITS // 2)))
    # The CLI, a process per command, racing the others.
    procs += [
        subprocess.Popen(
            [*KEEN, "skills", "disable", name],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        for name in ("c0", "c1", "c2")
    ]
    for proc in procs:
        out, _ = proc.communicate(timeout=120)
        assert proc.returncode == 0, out.decode(errors="replace")
    saved = json.loads(path.read_text(encoding="utf-8"))["is_enabled"]
    expected = {f"w{i}-{k:02d}": k % 2 == 0 for i in range(3) for k in range(EDITS)}
    expected |= {f"mcp:srv{k:02d}": False for k in range(EDITS // 2)}
    expected |= {"c0": False, "c1": False, "c2": False}
    missing = sorted(set(expected) - set(saved))
    assert not missing, f"{len(missing)} lost updates, e.g. {missing[:5]}"
    assert saved == expected


def test_the_sync_reads_the_config_under_the_lock_not_before(keen_home: Path) -> None:
    """A caller that loaded the config before another writer saved must not undo that save."""
    root = keen_home / "skills"
    stale = SkillsConfig.load(root / "config.json")  # loaded before the user's change
    with SkillsConfig.edit(root / "config.json") as config:
        config.set_enabled("notes", False)
    down = status("srv", ServerState.DISCONNECTED, last_error="refused")
    sync_server(ServerSnapshot(down), skills_root=root, skills_config=stale, fsync=False)
    saved = json.loads((root / "config.json").read_text(encoding="utf-8"))["is_enabled"]
    assert saved == {"mcp:srv": False, "notes": False}


def test_edit_saves_nothing_when_the_block_fails_and_waits_for_the_lock(keen_home: Path) -> None:
    path = keen_home / "skills" / "config.json"
    with SkillsConfig.edit(path) as config:
        config.set_enabled("notes", False)
    with pytest.raises(RuntimeError, match="changed my mind"), SkillsConfig.edit(path) as config:
        config.set_enabled("notes", True)
        raise RuntimeError("changed my mind")
    assert SkillsConfig.load(path).explicit("notes") is False
    # Another process holds the lock: edit gives up after its timeout with a clear error.
    holder = spawn(
        "import sys, time; from pathlib import Path; from keen.skills.lock import locked\n"
        "with locked(Path(sys.argv[1])):\n    print('held', flush=True); time.sleep(30)\n",
        str(path.parent),
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == b"held"
        with pytest.raises(SkillError, match="another Keen process"), SkillsConfig.edit(path, timeout=0.3):
            pass
    finally:
        holder.kill()
        holder.wait(timeout=10)
    with locked(path.parent, timeout=5), SkillsConfig.edit(path) as config:  # re-entrant in one thread
        config.set_enabled("notes", True)
    assert SkillsConfig.load(path).explicit("notes") is True


class _Waits(logging.Handler):
    """Sets ``event`` when a filelock lock is found held and its taker waits: the moment a
    second writer is seen to wait, without a sleep."""

    def __init__(self, event: threading.Event) -> None:
        super().__init__(logging.DEBUG)
        self.event = event

    def emit(self, record: logging.LogRecord) -> None:
        if "not acquired" in record.getMessage():
            self.event.set()


def _linked_homes(tmp_path: Path, name: str = "skills-config.json") -> tuple[Path, Path, Path]:
    """Two skills directories whose config.json links to one file kept with one's dotfiles."""
    kept = tmp_path / "dotfiles" / name
    kept.parent.mkdir()
    kept.write_text('{"is_enabled": {}}', encoding="utf-8")
    links = []
    for home in ("h1", "h2"):
        link = tmp_path / home / "skills" / "config.json"
        link.parent.mkdir(parents=True)
        link.symlink_to(kept)
        links.append(link)
    return links[0], links[1], kept


def test_two_homes_linking_one_config_wait_for_each_other(tmp_path: Path) -> None:
    # Each took only its own skills folder's lock: an edit from the other home, made while
    # this one held the file, was saved over (or undid this one's change).
    one, two, kept = _linked_homes(tmp_path)
    go = threading.Event()  # the second edit is in its block, or waits for the lock
    filelock_log = logging.getLogger("filelock")
    waits, level = _Waits(go), filelock_log.level
    filelock_log.addHandler(waits)
    filelock_log.setLevel(logging.DEBUG)

    def other_home() -> None:
        with SkillsConfig.edit(two, timeout=60) as config:
            go.set()
            config.set_enabled("from-h2", False)

    other = threading.Thread(target=other_home)
    try:
        with SkillsConfig.edit(one) as config:
            other.start()
            assert go.wait(timeout=60), "the other home's edit neither ran nor waited"
            config.set_enabled("from-h1", False)
        other.join(timeout=60)
    finally:
        filelock_log.removeHandler(waits)
        filelock_log.setLevel(level)
    assert not other.is_alive()
    assert json.loads(kept.read_text(encoding="utf-8")) == {
        "is_enabled": {"from-h1": False, "from-h2": False}
    }
    assert one.is_symlink() and two.is_symlink()
    assert (kept.parent / "skills-config.json.lock").exists()  # the lock both took, beside the file


def test_a_sync_that_cannot_write_a_linked_config_names_the_folder_it_writes(tmp_path: Path) -> None:
    # The hint said to check the skills folder, which was written fine: the failing write is
    # in the folder of the file the link points to. (A name the temporary file cannot have:
    # a failure of that folder alone, which no permission bit makes when the tests run as root.)
    one, _, kept = _linked_homes(tmp_path, "c" * 245 + ".json")
    with pytest.raises(SkillError, match=r"check the permissions of (\S+) and run the sync again") as caught:
        sync_mcp_skills([], skills_root=one.parent, fsync=False)
    assert f"check the permissions of {kept.parent} and run" in str(caught.value)
