"""The local read-only tools stay inside the workspace and $KEEN_HOME/skills: ``..``,
absolute paths and symlinks out are refused, directly and through the harness."""

from __future__ import annotations

import re
import threading
from pathlib import Path

import pytest

from keen.capabilities import Catalog
from keen.harness import Harness, LocalToolError, Workspace, local

pytestmark = pytest.mark.anyio


@pytest.fixture
def tree(tmp_path: Path, keen_home: Path) -> tuple[Workspace, Path]:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("TOP SECRET\n")
    ws = tmp_path / "ws"
    (ws / "src").mkdir(parents=True)
    (ws / "src" / "app.py").write_text("print('hi')\n")
    (ws / "link_file").symlink_to(outside / "secret.txt")
    (ws / "link_dir").symlink_to(outside)
    (ws / "inner_link").symlink_to(ws / "src" / "app.py")
    skills = keen_home / "skills" / "demo"
    skills.mkdir(parents=True)
    (skills / "SKILL.md").write_text("---\nname: demo\ndescription: d\n---\nbody\n")
    return Workspace(ws, [keen_home / "skills"]), outside


@pytest.mark.parametrize(
    "path",
    [
        "../outside/secret.txt",
        "src/../../outside/secret.txt",
        "/etc/passwd",
        "link_file",
        "link_dir/secret.txt",
        "~",
    ],
)
def test_escapes_are_refused(tree: tuple[Workspace, Path], path: str) -> None:
    ws, _ = tree
    with pytest.raises(LocalToolError, match="outside the workspace"):
        ws.run("read_file", {"path": path})


def test_walks_do_not_follow_links_out(tree: tuple[Workspace, Path]) -> None:
    ws, outside = tree
    assert "TOP SECRET" not in ws.run("grep", {"pattern": "SECRET"}).text
    found = ws.run("glob", {"pattern": "*"}).text.splitlines()
    assert "src/app.py" in found and not any("secret" in f for f in found)
    with pytest.raises(
        LocalToolError, match=r"'link_dir' is outside the workspace: .*; use a path inside it"
    ):
        ws.run("list_dir", {"path": "link_dir"})
    with pytest.raises(LocalToolError, match=re.escape(f"'{outside}' is outside the workspace")):
        ws.run("grep", {"pattern": "x", "path": str(outside)})


def test_inside_paths_and_the_skills_dir_are_readable(tree: tuple[Workspace, Path], keen_home: Path) -> None:
    ws, _ = tree
    assert "print('hi')" in ws.run("read_file", {"path": "inner_link"}).text
    assert "body" in ws.run("read_file", {"path": str(keen_home / "skills" / "demo" / "SKILL.md")}).text
    assert ws.run("list_dir", {"path": "."}).text.splitlines() == [
        "inner_link",
        "link_dir/",
        "link_file",
        "src/",
    ]
    assert "src/app.py:1: print('hi')" in ws.run("grep", {"pattern": "hi", "include": "*.py"}).text
    # A link inside the workspace is searched (its target is opened, never through the link).
    assert "src/app.py:1: print('hi')" in ws.run("grep", {"pattern": "hi", "include": "inner*"}).text


async def test_escape_through_the_harness_is_an_observation(
    tree: tuple[Workspace, Path], keen_home: Path
) -> None:
    ws, _ = tree
    h = Harness(lambda: Catalog([], cache=False), None, workspace=ws.workspace)
    h.begin_step()
    for path in ("../outside/secret.txt", "/etc/passwd", "link_file"):
        obs = await h.call("read_file", {"path": path})
        assert obs.is_error and "outside the workspace" in obs.text and "TOP SECRET" not in obs.text
    bad = await h.call("read_file", {"path": "src/app.py", "offset": 0})
    assert bad.denied == "validate"
    unknown = await h.call("write_file", {"path": "x"})
    assert unknown.denied == "visibility"
    h.close()


async def test_a_saved_sign_in_token_copied_into_the_workspace_is_redacted(
    tree: tuple[Workspace, Path], keen_home: Path
) -> None:
    import json

    from keen import paths

    # Saved by an earlier run (written here as the store writes it: this process never saw it).
    token = "saved-access-token-3f9c1e7a5b"
    record = {"version": 1, "server": "signed-in", "tokens": {"access_token": token, "token_type": "Bearer"}}
    paths.auth_dir().mkdir(parents=True, mode=0o700)
    (paths.auth_dir() / "signed-in.json").write_text(json.dumps(record), encoding="utf-8")
    ws, _ = tree
    (ws.workspace / "notes.txt").write_text(f"token={token}\n", encoding="utf-8")
    h = Harness(lambda: Catalog([], cache=False), None, workspace=ws.workspace)  # reads the saved sign-ins
    h.begin_step()
    obs = await h.call("read_file", {"path": "notes.txt"})
    assert not obs.is_error, obs.text
    assert "token=" in obs.text and token not in obs.text
    h.close()


def test_a_backtracking_pattern_is_refused_and_a_walk_out_of_time_stops(
    tree: tuple[Workspace, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The pattern's own limit refuses it; the walk's deadline ending during the same search
    stops the walk with what it found. Which of the two is decided by the limit the search
    was given, not by the clock after it (on a loaded machine both had passed)."""
    ws, _outside = tree
    (ws.workspace / "evil.txt").write_text("a" * 40 + "!\n", encoding="utf-8")
    with pytest.raises(LocalToolError, match=r"backtracks without end"):
        ws.run("grep", {"pattern": "^(a|a)+$", "path": "evil.txt"})
    monkeypatch.setattr(local, "WALK_SECONDS", 0.3)
    stopped = ws.run("grep", {"pattern": "^(a|a)+$", "path": "evil.txt"})
    assert stopped.text.startswith("(no match)") and "[stopped after 0.3 s;" in stopped.text


def _big_file(path: Path, tail: bytes = b"") -> int:
    """A text file just over the whole-file cap: lines ``row N`` (CRLF endings), then
    ``tail``; returns its line count before the tail."""
    rows = local.MAX_FILE_BYTES // 10 + 1000
    path.write_bytes(b"".join(f"row {n}\r\n".encode() for n in range(1, rows + 1)) + tail)
    assert path.stat().st_size > local.MAX_FILE_BYTES
    return rows


def test_a_file_over_the_cap_is_read_as_a_slice_never_whole(tmp_path: Path) -> None:
    ws = Workspace(tmp_path)
    # After the rows, bytes that are not UTF-8: a slice before them never decodes them,
    # which a whole-file read would have to.
    rows = _big_file(tmp_path / "big.log", tail=b"\xff\xfe not text\n")
    with pytest.raises(LocalToolError, match=r"read a slice of it: call read_file with offset .* and limit"):
        ws.run("read_file", {"path": "big.log"})
    text = ws.run("read_file", {"path": "big.log", "offset": 5, "limit": 3}).text
    assert text.splitlines()[:3] == ["     5\trow 5", "     6\trow 6", "     7\trow 7"]
    assert "call read_file with offset=8 to read on" in text
    # Only a limit: from the first line; the last rows, up to the tail that is not text.
    assert ws.run("read_file", {"path": "big.log", "limit": 1}).text.startswith("     1\trow 1\n")
    last = ws.run("read_file", {"path": "big.log", "offset": rows - 1, "limit": 2}).text
    assert last.splitlines()[:2] == [f"{rows - 1:>6}\trow {rows - 1}", f"{rows:>6}\trow {rows}"]
    with pytest.raises(LocalToolError, match=rf"not UTF-8 text \(line {rows + 1}\)"):
        ws.run("read_file", {"path": "big.log", "offset": rows + 1, "limit": 1})


def test_a_slice_past_the_end_or_through_a_huge_line_says_so(tmp_path: Path) -> None:
    ws = Workspace(tmp_path)
    rows = _big_file(tmp_path / "big.log", tail=b"last line without newline")
    past = ws.run("read_file", {"path": "big.log", "offset": rows + 5}).text
    assert past.startswith(f"[the file has {rows + 1:,} lines, fewer than offset={rows + 5}"), past
    end = ws.run("read_file", {"path": "big.log", "offset": rows + 1, "limit": 9}).text
    assert end == f"{rows + 1:>6}\tlast line without newline"
    # One line longer than the cap: shown up to it, and the note says the slice stopped.
    (tmp_path / "one.txt").write_bytes(b"short\n" + "é".encode() * local.MAX_FILE_BYTES + b"\n")
    cut = ws.run("read_file", {"path": "one.txt", "offset": 2, "limit": 1}).text
    first, note = cut.rsplit("\n", 1)
    assert first.startswith("     2\téé") and set(first.split("\t", 1)[1]) == {"é"}
    assert note.startswith("[the slice stopped in line 2: a slice reads at most"), note


def test_a_slice_stops_when_its_caller_stopped_it_even_inside_one_huge_line(tmp_path: Path) -> None:
    # A sparse file of zeros, no newline in it: skipping to line 2 reads it all unless the
    # stop event (set when the user pressed Ctrl-C) is checked per chunk, not per line.
    with (tmp_path / "sparse.bin").open("wb") as f:
        f.truncate(local.MAX_FILE_BYTES * 16)
    stop = threading.Event()
    stop.set()
    ws = Workspace(tmp_path)
    with pytest.raises(LocalToolError, match=r"^stopped$"):
        ws.run("read_file", {"path": "sparse.bin", "offset": 2, "limit": 1}, stop)
    with pytest.raises(LocalToolError, match=r"^stopped$"):
        ws.run("read_file", {"path": "sparse.bin", "offset": 1, "limit": 1}, stop)


def test_a_slice_past_its_deadline_stops_with_a_note(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rows = _big_file(tmp_path / "big.log")
    monkeypatch.setattr(local, "WALK_SECONDS", 0.0)  # the deadline is over before the first line
    ws = Workspace(tmp_path)
    skipping = ws.run("read_file", {"path": "big.log", "offset": rows, "limit": 1}).text
    assert (
        skipping
        == f"[stopped after 0 s at line 1, before offset={rows}: that far into the file is too far to reach in time]"
    )
    reading = ws.run("read_file", {"path": "big.log", "offset": 1, "limit": 5}).text
    assert reading == "[stopped after 0 s at line 1, before reading it: read a smaller slice]"
