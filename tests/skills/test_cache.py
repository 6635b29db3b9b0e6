"""keen.skills.cache: the skills directory is scanned again exactly when something discovery
reads changed (real files: SKILL.md edits, symlink swaps, config.json, added and removed
folders), including writes that land within one filesystem timestamp tick."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from helpers.skills import settle, write_skill
from keen.skills import MARKER_FILE, SkillsConfig, discover
from keen.skills import cache as cache_module
from keen.skills.cache import DiscoveryCache, skills_dir_state, store_file


def test_an_unchanged_directory_is_scanned_once(tmp_path: Path) -> None:
    root = tmp_path / "skills"
    write_skill(root / "notes", "House rules.")
    write_skill(root / "review", "Review steps.")
    cache = DiscoveryCache(root)
    settle()
    first = cache.discover()
    assert [s.name for s in first.skills] == ["notes", "review"]
    assert all(cache.discover() is first for _ in range(5))
    assert (cache.scans, cache.hits) == (1, 5)
    # Writing nothing but reading files changes nothing either.
    (root / "notes" / "SKILL.md").read_text(encoding="utf-8")
    assert cache.discover() is first


def test_fresh_files_are_never_trusted_until_they_are_older_than_the_racy_window(tmp_path: Path) -> None:
    root = tmp_path / "skills"
    path = write_skill(root / "notes", "version 00")
    cache = DiscoveryCache(root)
    # Same size, rewritten far faster than a timestamp tick: stat data alone could repeat.
    for i in range(1, 40):
        path.write_text(
            path.read_text(encoding="utf-8").replace(f"{i - 1:02d}", f"{i:02d}"), encoding="utf-8"
        )
        skill = cache.discover().get("notes")
        assert skill is not None and skill.description == f"version {i:02d}"
    assert not skills_dir_state(root).settled
    settle()
    assert skills_dir_state(root).settled
    first = cache.discover()
    assert cache.discover() is first


def test_each_change_discovery_reads_is_seen(tmp_path: Path) -> None:
    root = tmp_path / "skills"
    notes = write_skill(root / "notes", "House rules.")
    cache = DiscoveryCache(root)

    def step() -> dict[str, tuple[str, bool]]:
        settle()  # each change is made to a settled, cached state
        return {s.name: (s.description, s.enabled) for s in cache.discover().skills}

    assert step() == {"notes": ("House rules.", True)}
    assert step() == {"notes": ("House rules.", True)} and cache.hits == 1

    notes.write_text(notes.read_text(encoding="utf-8").replace("House", "Cabin"), encoding="utf-8")
    assert step() == {"notes": ("Cabin rules.", True)}

    with SkillsConfig.edit(root / "config.json") as config:
        config.set_enabled("notes", False)
    assert step() == {"notes": ("Cabin rules.", False)}

    # A generated-style skill: a symlink swapped (os.replace) to a new versioned folder.
    write_skill(root / ".gen.aaaa", "Version A.", name="gen")
    os.symlink(".gen.aaaa", root / "gen")
    assert step()["gen"] == ("Version A.", True)
    write_skill(root / ".gen.bbbb", "Version B.", name="gen")
    os.symlink(".gen.bbbb", root / ".gen.link")
    os.replace(root / ".gen.link", root / "gen")
    assert step()["gen"] == ("Version B.", True)

    # The marker file that makes a skill managed is read too.
    (root / ".gen.bbbb" / ".keen-generated-mcp.json").write_text(
        '{"managed_by": "keen-mcp"}', encoding="utf-8"
    )
    settle()
    gen = cache.discover().get("gen")
    assert gen is not None and gen.managed

    write_skill(root / "review", "Review steps.")
    assert set(step()) == {"notes", "gen", "review"}
    shutil.rmtree(root / "notes")
    assert set(step()) == {"gen", "review"}
    (root / "config.json").unlink()
    assert step()["gen"] == ("Version B.", True)
    # A SKILL.md made unreadable is a problem at the next scan, not a stale skill.
    (root / "review" / "SKILL.md").write_bytes(b"---\ndescription: \xff\xfe\n---\n")
    settle()
    found = cache.discover()
    assert found.get("review") is None and found.problem("review") is not None


def test_a_change_reads_again_only_the_entries_that_changed(tmp_path: Path) -> None:
    root = tmp_path / "skills"
    paths = [write_skill(root / f"s{i}", f"Skill number {i}.") for i in range(6)]
    cache = DiscoveryCache(root)
    settle()
    first = cache.discover()
    paths[2].write_text(paths[2].read_text(encoding="utf-8").replace("number", "NUMBER"), encoding="utf-8")
    with SkillsConfig.edit(root / "config.json") as config:
        config.set_enabled("s4", False)
    settle()
    second = cache.discover()
    assert cache.reused == 5  # s2 read again; s4 kept, with its new enabled flag
    assert [(s.description, s.enabled) for s in second.skills] == [
        (f"Skill {'NUMBER' if i == 2 else 'number'} {i}.", i != 4) for i in range(6)
    ]
    assert second.get("s0") is first.get("s0") and second.get("s2") is not first.get("s2")


def test_a_new_process_takes_unchanged_skills_from_the_store(tmp_path: Path, keen_home: Path) -> None:
    root = tmp_path / "skills"
    notes = write_skill(root / "notes", "House rules.")
    write_skill(root / "review", "Review steps.")
    settle()
    first = DiscoveryCache(root)
    assert [s.name for s in first.discover().skills] == ["notes", "review"] and first.stored == 0
    assert store_file(root.absolute()).parent == keen_home / "cache"

    # A new cache (as in a new process) takes both from the store, reading no SKILL.md...
    again = DiscoveryCache(root)
    assert again.discover().skills == first.discover().skills and (again.stored, again.scans) == (2, 1)
    # ...while one that changed is read again, and the enabled flags come from the config now.
    notes.write_text(notes.read_text(encoding="utf-8").replace("House", "Cabin"), encoding="utf-8")
    with SkillsConfig.edit(root / "config.json") as config:
        config.set_enabled("review", False)
    settle()
    changed = DiscoveryCache(root)
    found = {s.name: (s.description, s.enabled) for s in changed.discover().skills}
    assert found == {"notes": ("Cabin rules.", True), "review": ("Review steps.", False)}
    assert changed.stored == 1

    # Without the store (store=False) every file is read.
    plain = DiscoveryCache(root, store=False)
    assert plain.discover().skills == changed.discover().skills and plain.stored == 0


def test_a_link_whose_target_is_not_utf8_is_stored_and_taken_back(tmp_path: Path, keen_home: Path) -> None:
    # A target path of bytes that are not UTF-8 reads as lone surrogates, which the store's
    # UTF-8 cannot hold as they are.
    target = Path(os.fsdecode(bytes(tmp_path) + b"/real\xff")) / "notes"
    write_skill(target, "Notes kept elsewhere.")
    root = tmp_path / "skills"
    root.mkdir()
    (root / "notes").symlink_to(target, target_is_directory=True)
    settle()
    first = DiscoveryCache(root)
    assert [s.description for s in first.discover().skills] == ["Notes kept elsewhere."]
    again = DiscoveryCache(root)
    assert again.discover().skills == first.discover().skills and again.stored == 1


def test_a_broken_store_or_another_directorys_is_ignored(tmp_path: Path, keen_home: Path) -> None:
    root, other = tmp_path / "skills", tmp_path / "other"
    for folder in (root, other):
        write_skill(folder / "notes", f"Notes of {folder.name}.")
    settle()
    DiscoveryCache(root).discover()
    store = store_file(root.absolute())
    # The store of `root` under `other`'s name: same entry names, another directory.
    shutil.copyfile(store, store_file(other.absolute()))
    cache = DiscoveryCache(other)
    notes = cache.discover().get("notes")
    assert notes is not None and notes.description == "Notes of other." and cache.stored == 0
    for broken in (b"", b"{", b'{"format": "keen-skills/3", "root": 1}', b"[]"):
        store.write_bytes(broken)
        cache = DiscoveryCache(root)
        notes = cache.discover().get("notes")
        assert notes is not None and notes.description == "Notes of skills." and cache.stored == 0


def test_a_skills_paths_are_read_once_and_kept_in_the_store(tmp_path: Path, keen_home: Path) -> None:
    root = tmp_path / "skills"
    (root / "style").mkdir(parents=True)
    (root / "style" / "SKILL.md").write_text(
        "---\nname: style\ndescription: House style.\npaths: [src/**/*.py, 7]\n---\nBody.\n", encoding="utf-8"
    )
    write_skill(root / "notes", "No paths.")
    settle()
    first = {s.name: s.paths for s in DiscoveryCache(root).discover().skills}
    assert first == {"notes": (), "style": ("src/**/*.py", "7")}
    again = DiscoveryCache(root)
    assert {s.name: s.paths for s in again.discover().skills} == first and again.stored == 2


def test_skills_whose_stat_changed_but_not_their_text_are_read_but_not_parsed_again(
    tmp_path: Path, keen_home: Path
) -> None:
    """The store keeps a digest of each skill's frontmatter text: a skills folder copied back
    in place (every inode and ctime new, as a restore does; the sync rewrites a generated
    skill's marker on every refresh) is read again but not parsed again, while a changed
    frontmatter or marker is still seen."""
    root = tmp_path / "skills"
    notes = write_skill(root / "notes", "House rules.")
    write_skill(root / "gen", "Generated.")
    marker = root / "gen" / MARKER_FILE
    marker.write_text('{"managed_by": "keen-mcp", "tool_count": 3}', encoding="utf-8")
    settle()
    first = DiscoveryCache(root).discover()
    assert {s.name: (s.managed, s.tool_count) for s in first.skills} == {
        "gen": (True, 3),
        "notes": (False, 0),
    }

    def copied_back() -> DiscoveryCache:
        shutil.copytree(root, tmp_path / "copy", symlinks=True)
        shutil.rmtree(root)
        (tmp_path / "copy").rename(root)
        settle()
        return DiscoveryCache(root)  # a new process's

    again = copied_back()
    assert again.discover().skills == first.skills
    assert (again.stored, again.unparsed) == (0, 2)

    notes.write_text(notes.read_text(encoding="utf-8").replace("House", "Cabin"), encoding="utf-8")
    marker.write_text('{"managed_by": "keen-mcp", "tool_count": 5}', encoding="utf-8")
    changed = copied_back()
    found = {s.name: (s.description, s.tool_count) for s in changed.discover().skills}
    assert found == {"gen": ("Generated.", 5), "notes": ("Cabin rules.", 0)}
    assert (changed.stored, changed.unparsed) == (0, 1)  # notes' new text was parsed

    # The same within one process: a file saved again unchanged is read, not parsed.
    cache = DiscoveryCache(root, store=False)
    cache.discover()
    notes.write_text(notes.read_text(encoding="utf-8"), encoding="utf-8")
    settle()
    assert cache.discover().get("notes") == changed.discover().get("notes")
    assert (cache.reused, cache.unparsed) == (1, 1)


def test_a_copied_folder_reads_each_frontmatter_as_a_full_scan_does(tmp_path: Path, keen_home: Path) -> None:
    """A skill whose stat data changed is read by name in the open skills directory, its
    frontmatter from one read of the file's head; whatever the layout (a BOM and CRLF lines,
    a frontmatter longer than that read, a fence as the file's last line without a newline,
    a line that is a fence only once its Unicode whitespace is stripped), a new process
    finds what a full scan finds, and parses nothing again."""
    root = tmp_path / "skills"
    texts = {
        "crlf": "\ufeff---\r\nname: crlf\r\ndescription: Windows lines.\r\n---\r\nBody.\r\n",
        "long": f"---\nname: long\ndescription: {'word ' * 3000}end.\n---\nBody.\n",
        "eof": "---\nname: eof\ndescription: Fence at the end.\n---",
        "nbsp": "---\nname: nbsp\ndescription: Closed early.\n---\u00a0\ndescription: not this\n---\nBody.\n",
    }
    for name, text in texts.items():
        (root / name).mkdir(parents=True)
        (root / name / "SKILL.md").write_bytes(text.encode("utf-8"))
    (root / "eof" / MARKER_FILE).write_text('{"managed_by": "keen-mcp", "tool_count": 2}', encoding="utf-8")
    settle()
    full = discover(root)
    assert sorted(s.name for s in full.skills) == sorted(texts) and not full.problems
    assert DiscoveryCache(root).discover().skills == full.skills
    shutil.copytree(root, tmp_path / "copy", symlinks=True)
    shutil.rmtree(root)
    (tmp_path / "copy").rename(root)
    settle()
    again = DiscoveryCache(root)
    assert again.discover().skills == discover(root).skills
    assert [(s.description[:14], s.managed, s.tool_count) for s in again.discover().skills] == [
        ("Windows lines.", False, 0),
        ("Fence at the e", True, 2),
        ("word word word", False, 0),
        ("Closed early.", False, 0),
    ]
    assert (again.stored, again.unparsed) == (0, 4)


def test_a_cache_that_does_not_save_reads_the_store_and_leaves_it_to_the_next(
    tmp_path: Path, keen_home: Path
) -> None:
    root = tmp_path / "skills"
    write_skill(root / "notes", "House rules.")
    settle()
    found = DiscoveryCache(root, save=False).discover()
    assert [s.name for s in found.skills] == ["notes"] and not store_file(root.absolute()).exists()
    DiscoveryCache(root).discover()
    assert store_file(root.absolute()).is_file()
    reader = DiscoveryCache(root, save=False)
    assert reader.discover().skills == found.skills and reader.stored == 1


def test_a_rewritten_marker_alone_is_read_again_from_a_new_process(tmp_path: Path, keen_home: Path) -> None:
    """The sync rewrites a generated skill's marker at each refresh (its status and time):
    a new process reads that marker again, and takes the rest from the store."""
    root = tmp_path / "skills"
    write_skill(root / "gen", "Generated.")
    marker = root / "gen" / MARKER_FILE
    marker.write_text('{"managed_by": "keen-mcp", "tool_count": 3}', encoding="utf-8")
    settle()
    DiscoveryCache(root).discover()
    marker.write_text('{"managed_by": "keen-mcp", "tool_count": 4}', encoding="utf-8")
    settle()
    again = DiscoveryCache(root)
    gen = again.discover().get("gen")
    assert gen is not None and (gen.description, gen.managed, gen.tool_count) == ("Generated.", True, 4)
    assert (again.stored, again.markers, again.unparsed) == (1, 1, 0)
    marker.write_text('{"managed_by": "someone else"}', encoding="utf-8")  # no longer Keen's
    settle()
    gen = DiscoveryCache(root).discover().get("gen")
    assert gen is not None and (gen.managed, gen.tool_count) == (False, 0)


def test_a_marker_that_is_not_keens_is_read_again_by_every_new_process(
    tmp_path: Path, keen_home: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A skill whose marker cannot be read is not stored: each new process reads it again
    and logs its warning again, as reading every file does, while the others come from the
    store."""
    root = tmp_path / "skills"
    write_skill(root / "gen", "Generated.")
    write_skill(root / "notes", "House rules.")
    (root / "gen" / MARKER_FILE).write_text("{not json", encoding="utf-8")
    settle()
    stored = []
    for _ in range(2):
        caplog.clear()
        cache = DiscoveryCache(root)
        gen = cache.discover().get("gen")
        assert gen is not None and not gen.managed
        assert [r.getMessage() for r in caplog.records if "unreadable" in r.getMessage()] == [
            f"skill dir {root.absolute() / 'gen'}: unreadable {MARKER_FILE} (Expecting property name "
            "enclosed in double quotes: line 1 column 2 (char 1)); treating it as user-owned"
        ], caplog.records
        stored.append(cache.stored)
    assert stored == [0, 1]  # notes, from the store the first process wrote


def test_the_state_is_the_same_looked_up_by_name_in_the_open_directory_or_by_whole_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # On POSIX each entry is looked up relative to the open skills directory (dir_fd); the
    # whole-path lookups (Windows) must see exactly the same: folders, a generated skill's
    # link and its version, a dangling link, a link to a folder without SKILL.md, files.
    root = tmp_path / "skills"
    write_skill(root / "notes", "House rules.")
    version = write_skill(root / ".mcp:gh.1", "GitHub.").parent
    (version / MARKER_FILE).write_text("{}", encoding="utf-8")
    (root / "mcp:gh").symlink_to(version.name)
    (root / "dangling").symlink_to("nowhere")
    (root / "empty").mkdir()
    (root / "bare").symlink_to("empty")
    (root / "stray.txt").write_text("not a skill", encoding="utf-8")
    SkillsConfig(root / "config.json", {"is_enabled": {"notes": False}}).save()
    by_name = skills_dir_state(root)
    monkeypatch.setattr(cache_module, "_AT_DIR", False)
    by_path = skills_dir_state(root)
    assert (by_path.config, by_path.entries) == (by_name.config, by_name.entries)
    assert by_name.config is not None  # config.json is the state's config, no entry of it
    kinds = {
        name: (target, md is not None, marker is not None) for name, _, target, md, marker in by_name.entries
    }
    assert kinds == {
        "bare": ("empty", False, False),
        "dangling": ("nowhere", False, False),
        "empty": ("", False, False),
        "mcp:gh": (".mcp:gh.1", True, True),
        "notes": ("", True, False),
        "stray.txt": ("", False, False),
    }
