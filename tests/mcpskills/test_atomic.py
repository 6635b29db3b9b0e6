"""The atomic swap under pressure: concurrent readers, a writer killed with SIGKILL, debris.

docs/architecture.md "Generated skills": a reader always opens a whole old or a whole new skill; a
process killed mid-generation leaves the previous complete skill.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

from helpers.mcpskills import NOW, simple_tools, status
from keen.mcpskills import MARKER_FILE, ServerSnapshot, generate_skill, sync_mcp_skills
from keen.skills import SkillsConfig

SWAPS = 200


def read_whole_skill(link: Path) -> int:
    """Read SKILL.md and every schema it lists; raise on anything partial or missing."""
    text = (link / "SKILL.md").read_text(encoding="utf-8")
    if not text.startswith("---\nname: mcp:") or not text.rstrip().endswith("|"):
        raise AssertionError(f"partial SKILL.md: {text[-80:]!r}")
    paths = [
        line.rsplit(" | ", 1)[1].rstrip(" |") for line in text.splitlines() if line.startswith("| tool_")
    ]
    for rel in paths:
        data = json.loads((link / rel).read_text(encoding="utf-8"))
        if data["server"] != "srv" or "inputSchema" not in data:
            raise AssertionError(f"bad schema {rel}: {data}")
    json.loads((link / MARKER_FILE).read_text(encoding="utf-8"))
    return len(paths)


def test_readers_never_see_partial_or_missing_files(tmp_path: Path) -> None:
    root = tmp_path / "skills"
    config = SkillsConfig(root / "config.json")
    generate_skill(root, status("srv"), simple_tools("srv", 40), now=NOW)
    link = root / "mcp:srv"
    stop = threading.Event()
    errors: list[BaseException] = []
    reads = [0]

    def reader() -> None:
        while not stop.is_set():
            try:
                assert read_whole_skill(link) == 40
                reads[0] += 1
            except BaseException as exc:  # any failure is the finding
                errors.append(exc)
                return

    thread = threading.Thread(target=reader)
    thread.start()
    try:
        for i in range(SWAPS):
            snap = ServerSnapshot(status("srv"), simple_tools("srv", 40, tag=f" v{i}"))
            # fsync only adds durability against power loss; the swap readers see is the same.
            report = sync_mcp_skills([snap], skills_root=root, skills_config=config, now=NOW, fsync=False)
            assert report.entries[0].action == "generated"
    finally:
        stop.set()
        thread.join(timeout=30)
    assert errors == []
    assert reads[0] >= 10, f"the reader only completed {reads[0]} reads; the test proved nothing"
    versions = [p.name for p in root.iterdir() if p.name.startswith(".mcp:")]
    assert versions == [link.resolve().name]
    assert "v199." in (link / "schemas" / "tool_0007.json").read_text(encoding="utf-8")


CHILD = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    sys.path.insert(0, sys.argv[2])
    from helpers.mcpskills import NOW, realistic_tools, status
    from keen.mcpskills import generate_skill
    generate_skill(Path(sys.argv[1]), status("srv"), realistic_tools("srv", 5000), now=NOW)
    """
)


def test_sigkill_mid_generation_leaves_previous_skill(tmp_path: Path) -> None:
    root = tmp_path / "skills"
    generate_skill(root, status("srv"), simple_tools("srv", 40), now=NOW)
    link = root / "mcp:srv"
    old_version = link.resolve()
    old_tree = {p: p.read_bytes() for p in old_version.rglob("*") if p.is_file()}
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(root), str(Path(__file__).resolve().parents[1])]
    )
    builds: list[Path] = []
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and child.poll() is None:
            builds = [p for p in root.glob(".mcp:srv.*.tmp") if any((p / "schemas").glob("*.json"))]
            if builds:
                break
        assert builds, "the child never started writing (or finished before it was seen)"
        child.send_signal(signal.SIGSTOP)  # freeze it mid-write, then look
        assert link.resolve() == old_version, "the swap happened before the kill: enlarge the tool list"
        assert read_whole_skill(link) == 40
        child.send_signal(signal.SIGKILL)
        assert child.wait(timeout=30) == -signal.SIGKILL
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert link.resolve() == old_version and read_whole_skill(link) == 40
    assert {p: p.read_bytes() for p in old_version.rglob("*") if p.is_file()} == old_tree
    leftovers = list(root.glob(".mcp:srv.*.tmp"))
    assert leftovers == builds
    written = len(list((leftovers[0] / "schemas").glob("*.json")))
    assert 0 < written < 5000
    # The next run (lock released by the kernel at the kill) cleans the debris up.
    report = generate_skill(root, status("srv"), simple_tools("srv", 40, tag=" next"), now=NOW)
    assert report.action == "generated"
    assert sorted(p.name for p in root.iterdir()) == [".keen-mcp.lock", link.resolve().name, "mcp:srv"]
    assert read_whole_skill(link) == 40


def test_unchanged_run_also_cleans_debris(tmp_path: Path) -> None:
    root = tmp_path / "skills"
    generate_skill(root, status("srv"), simple_tools("srv", 3), now=NOW)
    half = root / ".mcp:srv.0123456789ab.tmp"
    (half / "schemas").mkdir(parents=True)
    (half / "schemas" / "tool_0000.json").write_text('{"trunc', encoding="utf-8")
    link_tmp = root / ".mcp:srv.0123456789ab.link"
    link_tmp.symlink_to(half.name)
    other = root / ".mcp:srvx.0123456789ab.tmp"  # another server's build: not ours to touch
    other.mkdir()
    report = generate_skill(root, status("srv"), simple_tools("srv", 3), now=NOW)
    assert report.action == "unchanged"
    assert not half.exists() and not os.path.lexists(link_tmp) and other.is_dir()
