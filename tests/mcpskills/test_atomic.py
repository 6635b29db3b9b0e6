"""The atomic swap under pressure: concurrent readers, a writer killed with SIGKILL, debris.

docs/architecture.md "Generated skills": a reader always opens a whole old or a whole new skill; a
process killed mid-generation leaves the previous complete skill.
"""

from __future__ import annotations

import errno
import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import threading
import time
from dataclasses import replace
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from helpers.mcpskills import NOW, simple_tools, status
from keen.mcp.types import ServerState
from keen.mcpskills import MARKER_FILE, ServerSnapshot, _swap, generate_skill, sync_mcp_skills
from keen.mcpskills import sync as sync_module
from keen.skills import SkillsConfig

SWAPS = 60
"""Swaps the writer makes while a reader reads: each overlaps the reader's reads (about 1,100
whole-skill reads across all 60 versions on a loaded 2-CPU machine), which is what finds a
partial or mixed read; 200 cost three times the CPU for the same kind of overlap."""


def read_whole_skill(link: Path) -> int:
    """Read SKILL.md and every schema it lists; raise on anything partial or missing."""
    return len(_read_tags(link.resolve(strict=True)))


def read_one_version(link: Path) -> str:
    """Read a whole skill the way a slow agent does: resolve the link once, then read SKILL.md,
    every schema it lists and the marker under that resolved dir. Return the version tag all
    schemas carry; raise on anything partial, missing, or mixed from two versions."""
    tags = set(_read_tags(link.resolve(strict=True)))
    if len(tags) != 1:
        raise AssertionError(f"one read mixed versions {sorted(tags)}")
    return tags.pop()


def _read_tags(version: Path) -> list[str]:
    text = (version / "SKILL.md").read_text(encoding="utf-8")
    if not text.startswith("---\nname: mcp:") or not text.rstrip().endswith("|"):
        raise AssertionError(f"partial SKILL.md: {text[-80:]!r}")
    paths = [
        line.rsplit(" | ", 1)[1].rstrip(" |") for line in text.splitlines() if line.startswith("| tool_")
    ]
    tags: list[str] = []
    for rel in paths:
        data = json.loads((version / rel).read_text(encoding="utf-8"))
        match = TAG.match(data.get("description", ""))
        if data["server"] != "srv" or "inputSchema" not in data or match is None:
            raise AssertionError(f"bad schema {rel}: {data}")
        tags.append(match.group(1))
    json.loads((version / MARKER_FILE).read_text(encoding="utf-8"))
    return tags


TAG = re.compile(r"^Tool number \d+(.*)\. Does thing \d+ with a query\.$")


def test_readers_never_see_partial_or_missing_files(tmp_path: Path) -> None:
    root = tmp_path / "skills"
    config = SkillsConfig(root / "config.json")
    generate_skill(root, status("srv"), simple_tools("srv", 40), now=NOW)
    link = root / "mcp:srv"
    stop = threading.Event()
    errors: list[BaseException] = []
    seen: list[str] = []

    def reader() -> None:
        while not stop.is_set():
            try:
                seen.append(read_one_version(link))
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
    assert len(seen) >= 10, f"the reader only completed {len(seen)} reads; the test proved nothing"
    assert len(set(seen)) >= 2, "the reader never saw a swap; the test proved nothing"
    current = link.resolve().name
    assert f"v{SWAPS - 1}." in (link / "schemas" / "tool_0007.json").read_text(encoding="utf-8")
    # Replaced versions stay for the grace period, whole, for readers that resolved them.
    retired = sorted(p for p in root.iterdir() if p.name.startswith(".mcp:") and p.name != current)
    assert retired and len([read_one_version(p) for p in retired]) == len(retired)
    assert not [p for p in root.iterdir() if p.name.endswith((".tmp", ".link"))]

    # Once the grace has passed, the next run deletes them and keeps only the current version.
    past = time.time() - _swap.RETIRED_GRACE_SECONDS - 1
    for path in retired:
        os.utime(path, (past, past))
    snap = ServerSnapshot(status("srv"), simple_tools("srv", 40, tag=f" v{SWAPS - 1}"))
    report = sync_mcp_skills([snap], skills_root=root, skills_config=config, now=NOW, fsync=False)
    assert report.entries[0].action == "unchanged"
    assert [p.name for p in root.iterdir() if p.name.startswith(".mcp:")] == [current]


def test_a_replaced_version_is_kept_for_a_reader_that_resolved_it(tmp_path: Path) -> None:
    """The slow reader of the contract, step by step: it resolves the skill, two newer
    versions are published, and it still reads every file of the version it started with."""
    root = tmp_path / "skills"
    generate_skill(root, status("srv"), simple_tools("srv", 40, tag=" v0"), now=NOW)
    link = root / "mcp:srv"
    resolved = link.resolve()
    skill_md = (resolved / "SKILL.md").read_text(encoding="utf-8")
    for i in (1, 2):
        report = generate_skill(root, status("srv"), simple_tools("srv", 40, tag=f" v{i}"), now=NOW)
        assert report.action == "generated"
    assert link.resolve() != resolved
    assert (resolved / "SKILL.md").read_text(encoding="utf-8") == skill_md
    assert read_one_version(resolved) == " v0" and read_one_version(link) == " v2"


# The writer loads tests/helpers/mcpskills.py as a module of its own, not through the
# helpers package, whose __init__ imports the MCP SDK (about 0.9 s of CPU in a new
# interpreter) that neither the builders nor generate_skill use.
CHILD = textwrap.dedent(
    """
    import importlib.util
    import sys
    from pathlib import Path
    spec = importlib.util.spec_from_file_location("mcpskills_builders", sys.argv[2])
    builders = sys.modules["mcpskills_builders"] = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(builders)
    import os
    import signal
    from keen.mcpskills import generate_skill
    real_write, writes = os.write, 0
    def write(fd, data):
        # The 100th write: half of it lands, then this process stops itself, to be killed
        # there by the test (killed inside a file's write, with others written before it).
        global writes
        writes += 1
        if writes == 100:
            real_write(fd, bytes(data[: len(data) // 2]))
            os.kill(os.getpid(), signal.SIGSTOP)
        return real_write(fd, data)
    os.write = write
    generate_skill(Path(sys.argv[1]), builders.status("srv"), builders.realistic_tools("srv", 5000), now=builders.NOW)
    """
)


@pytest.mark.e2e
def test_sigkill_mid_generation_leaves_previous_skill(tmp_path: Path) -> None:
    root = tmp_path / "skills"
    generate_skill(root, status("srv"), simple_tools("srv", 40), now=NOW)
    link = root / "mcp:srv"
    old_version = link.resolve()
    old_tree = {p: p.read_bytes() for p in old_version.rglob("*") if p.is_file()}
    child = subprocess.Popen(
        [
            sys.executable,
            "-c",
            CHILD,
            str(root),
            str(Path(__file__).resolve().parents[1] / "helpers" / "mcpskills.py"),
        ]
    )
    try:
        # The child stops itself mid-write (CHILD): waited for as an event, not polled for, so
        # a loaded machine cannot let it finish unseen between two looks.
        _pid, stopped = os.waitpid(child.pid, os.WUNTRACED)
        assert os.WIFSTOPPED(stopped), f"the child ended before its 100th write: status {stopped}"
        builds = [p for p in root.glob(".mcp:srv.*.tmp") if any((p / "schemas").glob("*.json"))]
        assert builds, "the child stopped before writing a schema"
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
    # The debris is gone; the replaced version stays for its grace period (readers may be in it).
    expected = [".keen-mcp.lock", link.resolve().name, old_version.name, "mcp:srv"]
    assert sorted(p.name for p in root.iterdir()) == sorted(expected)
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
    # Server "srv.x"'s build starts with this one's prefix (".mcp:srv."): not ours either.
    dotted = root / ".mcp:srv.x.0123456789ab.tmp"
    dotted.mkdir()
    report = generate_skill(root, status("srv"), simple_tools("srv", 3), now=NOW)
    assert report.action == "unchanged"
    assert not half.exists() and not os.path.lexists(link_tmp) and other.is_dir() and dotted.is_dir()


@pytest.mark.parametrize(
    ("name", "server", "suffix"),
    [
        (".mcp:srv.0123456789ab", "srv", None),
        (".mcp:srv.0123456789ab.tmp", "srv", ".tmp"),
        (".mcp:srv.x.0123456789ab.old", "srv.x", ".old"),
        (".mcp:srv.x.0123456789ab.old", "srv", "no match"),  # server "srv.x"'s, not "srv"'s
        (".mcp:srv.0123456789ab.link", "srv.0123456789ab", "no match"),
        (".mcp:srv.0123456789AB", "srv", "no match"),  # Keen writes lowercase hex
        (".mcp:srv.0123456789ab.tmp.old", "srv", "no match"),
        ("mcp:srv.0123456789ab", "srv", "no match"),
        (".mcp:srvx.0123456789ab", "srv", "no match"),
    ],
)
def test_version_names_belong_to_one_server(name: str, server: str, suffix: str | None) -> None:
    match = _swap._versioned(server, name)  # pyright: ignore[reportPrivateUsage]
    if suffix == "no match":
        assert match is None
    else:
        assert match is not None and match.group("suffix") == suffix


def test_a_sync_flushes_once_and_swaps_only_after_the_flush(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Many servers' skills, one ``syncfs``: every new version and every rewritten marker is
    complete on disk at the flush, and no link or marker has moved yet (a power cut before
    it leaves the old skills; after it, the new ones are whole)."""
    root = tmp_path / "skills"
    servers = [f"srv{i}" for i in range(6)]
    flushes: list[tuple[list[str], dict[str, str], dict[str, str]]] = []  # builds, links, markers
    real_flush = _swap._sync_filesystem  # pyright: ignore[reportPrivateUsage]

    def flush_and_look(path: Path) -> None:
        builds = sorted(p.name for p in root.glob(".mcp:*.tmp") if (p / "SKILL.md").is_file())
        links = {s: os.readlink(root / f"mcp:{s}") for s in servers if os.path.lexists(root / f"mcp:{s}")}
        markers = {
            s: json.loads((root / f"mcp:{s}" / MARKER_FILE).read_bytes())["last_successful_refresh"]
            for s in links
        }
        flushes.append((builds, links, markers))
        real_flush(path)

    monkeypatch.setattr(_swap, "_sync_filesystem", flush_and_look)

    def sync(tag: str, refreshed: datetime) -> list[str]:
        snaps = [
            ServerSnapshot(replace(status(s), last_refresh_at=refreshed), simple_tools(s, 3, tag=tag))
            for s in servers
        ]
        return [e.action for e in sync_mcp_skills(snaps, skills_root=root, now=NOW).entries]

    assert sync(" v0", NOW) == ["generated"] * 6
    assert len(flushes) == 1 and len(flushes[0][0]) == 6 and flushes[0][1] == {}
    first = {s: os.readlink(root / f"mcp:{s}") for s in servers}

    assert sync(" v1", NOW) == ["generated"] * 6
    assert len(flushes) == 2 and len(flushes[1][0]) == 6 and flushes[1][1] == first
    assert all(os.readlink(root / f"mcp:{s}") != first[s] for s in servers)

    later = NOW + timedelta(hours=1)
    assert sync(" v1", later) == ["unchanged"] * 6  # only the markers' refresh time changes
    assert len(flushes) == 3 and set(flushes[2][2].values()) == {"2026-05-21T12:00:00Z"}
    for s in servers:
        marker = json.loads((root / f"mcp:{s}" / MARKER_FILE).read_bytes())
        assert marker["last_successful_refresh"] == "2026-05-21T13:00:00Z"
    assert not list(root.glob("*/.*.tmp")), "a marker's temporary file was left behind"


def test_a_name_taken_before_a_new_skill_is_linked_is_left_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A new skill's link is made in place, never put over what took its name since the
    sync looked (a user's own file there): that server's skill is kept as the user's, with
    the fix (as when the sync finds the name taken at its start), the file stays as it was,
    nothing of the version it never linked is left, and the other servers' skills are
    written."""
    root = tmp_path / "skills"
    real_flush = _swap._sync_filesystem  # pyright: ignore[reportPrivateUsage]
    planted = root / "mcp:srv1"

    def plant_then_flush(path: Path) -> None:
        planted.write_text("the user's own\n", encoding="utf-8")
        real_flush(path)

    monkeypatch.setattr(_swap, "_sync_filesystem", plant_then_flush)
    snaps = [ServerSnapshot(status(s), simple_tools(s, 2)) for s in ("srv0", "srv1", "srv2")]
    report = sync_mcp_skills(snaps, skills_root=root, now=NOW)

    assert [e.action for e in report.entries] == ["generated", "kept_unmanaged", "generated"]
    assert "exists" in report.entries[1].error
    assert "rename" in report.entries[1].hint and "not generated by Keen" in report.entries[1].hint
    assert not planted.is_symlink() and planted.read_text(encoding="utf-8") == "the user's own\n"
    # Nothing of srv1's build: no reader can have resolved a version that was never linked,
    # and no later sync would come back to it while the name is the user's.
    assert not list(root.glob(".mcp:srv1.*"))
    assert all((root / f"mcp:{s}" / "SKILL.md").is_file() for s in ("srv0", "srv2"))


def _fsync_dir_fails_once(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """Make the next fsync of a directory fail with EIO (a dying disk), after the swap."""
    real = _swap._fsync_dir  # pyright: ignore[reportPrivateUsage]
    failed: list[Path] = []

    def fail_once(path: Path) -> None:
        if not failed:
            failed.append(path)
            raise OSError(errno.EIO, "Input/output error")
        real(path)

    monkeypatch.setattr(_swap, "_fsync_dir", fail_once)
    return failed


def _age(path: Path) -> None:
    """Make ``path`` look retired long ago (past the grace), as a version replaced last week is."""
    past = time.time() - _swap.RETIRED_GRACE_SECONDS - 3600
    os.utime(path, (past, past))


def test_a_failed_folder_fsync_after_the_swap_keeps_the_replaced_version(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The startup sync's batch: the links are swapped, then the skills dir's fsync fails. The
    link on disk may still name the old version, and a reader may be inside it: it stays (and
    gets its grace), only build debris goes, and the entry says the new skill is live but not
    confirmed on disk."""
    root = tmp_path / "skills"
    link = root / "mcp:srv"
    first = sync_mcp_skills(
        [ServerSnapshot(status("srv"), simple_tools("srv", 3, tag=" v0"))], skills_root=root, now=NOW
    )
    assert first.entries[0].action == "generated"
    old = link.resolve()
    _age(old)
    failed = _fsync_dir_fails_once(monkeypatch)
    snap = ServerSnapshot(status("srv"), simple_tools("srv", 3, tag=" v1"))
    entry = sync_mcp_skills([snap], skills_root=root, now=NOW).entries[0]
    assert failed == [root]
    assert read_one_version(link) == " v1"
    assert read_one_version(old) == " v0", "the replaced version was deleted before the link was durable"
    assert entry.action == "error" and "published but not confirmed on disk" in entry.error
    assert entry.skill_path == str(link)
    assert old.stat().st_mtime > time.time() - _swap.RETIRED_GRACE_SECONDS, "its grace was not started"
    assert not [p for p in root.iterdir() if p.name.endswith((".tmp", ".link"))]


def test_a_failed_folder_fsync_after_publish_keeps_the_replaced_version(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same fault on the one-skill path (``generate_skill`` -> ``publish``)."""
    root = tmp_path / "skills"
    link = root / "mcp:srv"
    generate_skill(root, status("srv"), simple_tools("srv", 3, tag=" v0"), now=NOW)
    old = link.resolve()
    _age(old)
    _fsync_dir_fails_once(monkeypatch)
    with pytest.raises(OSError, match="Input/output error") as raised:
        generate_skill(root, status("srv"), simple_tools("srv", 3, tag=" v1"), now=NOW)
    assert read_one_version(link) == " v1"
    assert read_one_version(old) == " v0", "the replaced version was deleted before the link was durable"
    assert raised.value.errno == errno.EIO and "published but not confirmed on disk" in str(raised.value)
    assert str(raised.value).count("Errno") == 1, raised.value  # the cause's text, not its errno again
    assert not [p for p in root.iterdir() if p.name.endswith((".tmp", ".link"))]


def _tmp_files(root: Path) -> list[str]:
    return sorted(
        os.path.relpath(os.path.join(folder, name), root)
        for folder, _, names in os.walk(root)
        for name in names
        if name.endswith(".tmp")
    )


@pytest.mark.parametrize("where", ["entry", "flush"])
def test_an_interrupted_sync_leaves_no_marker_temp_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    """A Ctrl-C after the batch wrote the markers' temporary files (inside the live version
    dirs, where no cleanup looks) and before they were swapped in: ``entry``, while the sync
    goes on to the next server; ``flush``, in the flush that precedes the swap."""
    root = tmp_path / "skills"
    servers = ["srv0", "srv1", "srv2"]
    snaps = [ServerSnapshot(status(s), simple_tools(s, 3)) for s in servers]
    assert [e.action for e in sync_mcp_skills(snaps, skills_root=root, now=NOW).entries] == ["generated"] * 3
    markers = {s: (root / f"mcp:{s}" / MARKER_FILE).read_bytes() for s in servers}
    if where == "entry":
        real_mark = sync_module._mark  # pyright: ignore[reportPrivateUsage]

        def mark_then_interrupt(server: str, *args: object) -> None:
            real_mark(server, *args)  # pyright: ignore[reportArgumentType]
            if server == "srv1":
                raise KeyboardInterrupt("interrupted after srv1's marker")

        monkeypatch.setattr(sync_module, "_mark", mark_then_interrupt)
    else:

        def interrupt(path: Path) -> None:
            raise KeyboardInterrupt("interrupted in the flush")

        monkeypatch.setattr(_swap, "_sync_filesystem", interrupt)
    down = [ServerSnapshot(status(s, ServerState.DISCONNECTED, last_error="gone")) for s in servers]
    with pytest.raises(KeyboardInterrupt, match="interrupted"):
        sync_mcp_skills(down, skills_root=root, now=NOW)
    assert _tmp_files(root) == []
    # Nothing was committed: every marker is the one the first sync wrote.
    assert {s: (root / f"mcp:{s}" / MARKER_FILE).read_bytes() for s in servers} == markers
