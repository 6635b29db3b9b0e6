"""Skill discovery and the skills config on real files in a temporary KEEN_HOME."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from helpers.cli import make_home
from keen import paths
from keen.cli._wording import describe
from keen.errors import Remedy, SkillError
from keen.skills import MARKER_FILE, SkillsConfig, discover, load_skill, split_frontmatter
from keen.skills.cache import DiscoveryCache


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("KEEN_HOME", str(tmp_path / "home"))
    skills = paths.skills_dir()
    skills.mkdir(parents=True)
    return skills


def write_skill(root: Path, dirname: str, text: str) -> Path:
    skill_dir = root / dirname
    skill_dir.mkdir(parents=True, exist_ok=True)
    (skill_dir / "SKILL.md").write_text(text, encoding="utf-8")
    return skill_dir


def good(name: str, description: str = "Does things.", body: str = "Body.\n") -> str:
    return f"---\nname: {name}\ndescription: {description}\n---\n{body}"


def test_missing_skills_dir_is_empty(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KEEN_HOME", str(tmp_path / "nowhere"))
    found = discover()
    assert found.skills == [] and found.problems == []


def test_good_skills_sorted_with_absolute_paths(root: Path) -> None:
    write_skill(root, "zeta", good("zeta", "Last one."))
    write_skill(root, "alpha", good("alpha", "First one."))
    write_skill(
        root, "mcp:github", good("mcp:github", "Use this skill to interact with the `github` MCP server.")
    )
    (root / "config.json").write_text('{"is_enabled": {}}', encoding="utf-8")  # a file, not a skill
    found = discover()
    assert [s.name for s in found.skills] == ["alpha", "mcp:github", "zeta"]
    assert found.problems == []
    gh = found.get("mcp:github")
    assert gh is not None
    assert gh.description == "Use this skill to interact with the `github` MCP server."
    assert gh.path == root / "mcp:github" and gh.path.is_absolute()
    assert gh.skill_md == gh.path / "SKILL.md"
    assert gh.enabled and not gh.managed


def test_relative_keen_home_gives_absolute_paths(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("KEEN_HOME", "rel-home")
    write_skill(tmp_path / "rel-home" / "skills", "notes", good("notes"))
    (skill,) = discover().skills
    assert skill.path == tmp_path / "rel-home" / "skills" / "notes"


def test_name_defaults_to_dir_and_description_is_one_line(root: Path) -> None:
    write_skill(root, "plain", "---\ndescription: >\n  Folded\n  over   lines.\n---\nbody\n")
    (skill,) = discover().skills
    assert skill.name == "plain"
    assert skill.description == "Folded over lines."


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("# no frontmatter\n", "must start with YAML frontmatter"),
        ("---\nname: bad\ndescription: x\n", "not closed"),
        ("---\nname: bad\ndescription: [unclosed\n---\n", "invalid YAML in frontmatter at line"),
        ("---\n- a list\n---\n", "must be a YAML mapping"),
        ("---\nname: bad\n---\n", "non-empty 'description'"),
        ("---\nname: bad\ndescription: ''\n---\n", "non-empty 'description'"),
        ("---\nname: bad\ndescription: 42\n---\n", "'description' must be a string; put it in quotes"),
        ("---\nname: off\ndescription: x\n---\n", 'name must be a string; quote it: name: "bad"'),
        ("---\nname: other\ndescription: x\n---\n", "does not match the directory name 'bad'"),
    ],
)
def test_broken_skill_is_reported_and_skipped(root: Path, text: str, fragment: str) -> None:
    write_skill(root, "bad", text)
    write_skill(root, "fine", good("fine"))
    found = discover()
    assert [s.name for s in found.skills] == ["fine"]
    (problem,) = found.problems
    assert problem.name == "bad" and problem.path == root / "bad"
    assert fragment in problem.message
    assert "skill 'bad' skipped" in str(problem)


def test_unreadable_and_odd_entries_are_problems(root: Path) -> None:
    (root / "no-skill-md").mkdir()
    (root / "dir-as-file" / "SKILL.md").mkdir(parents=True)  # unreadable: a directory, even for root
    bad_utf8 = root / "latin1"
    bad_utf8.mkdir()
    (bad_utf8 / "SKILL.md").write_bytes(b"---\nname: latin1\ndescription: caf\xe9\n---\n")
    (root / "dangling").symlink_to(root / "gone")
    (root / "bad name").mkdir()
    write_skill(root, "fine", good("fine"))
    found = discover()
    assert [s.name for s in found.skills] == ["fine"]
    messages = {p.name: p.message for p in found.problems}
    assert list(messages) == sorted(messages)
    assert "no SKILL.md" in messages["no-skill-md"]
    assert "cannot read SKILL.md" in messages["dir-as-file"]
    assert "not UTF-8" in messages["latin1"]
    assert "missing directory" in messages["dangling"]
    assert "rename it" in messages["bad name"]


def test_hidden_entries_are_ignored(root: Path) -> None:
    write_skill(root, ".mcp:github.tmp-123", good(".mcp:github.tmp-123"))
    write_skill(root, ".broken", "garbage")
    found = discover()
    assert found.skills == [] and found.problems == []


def test_symlinked_skill_dir_is_followed_but_path_keeps_the_link(root: Path) -> None:
    versions = root / ".versions"
    target = write_skill(versions, "mcp:fs.v1", good("mcp:fs", "Filesystem v1."))
    (root / "mcp:fs").symlink_to(target, target_is_directory=True)
    (target / MARKER_FILE).write_text(
        json.dumps({"managed_by": "keen-mcp", "server": "fs"}), encoding="utf-8"
    )
    (skill,) = discover().skills
    assert skill.name == "mcp:fs" and skill.description == "Filesystem v1."
    assert skill.path == root / "mcp:fs" and skill.path.is_symlink()
    assert skill.managed
    # Swap the link to a new version: the same Skill.path now reads the new body.
    target2 = write_skill(versions, "mcp:fs.v2", good("mcp:fs", "Filesystem v2.", body="New body.\n"))
    tmp_link = root / ".mcp:fs.link"
    tmp_link.symlink_to(target2, target_is_directory=True)
    os.replace(tmp_link, root / "mcp:fs")
    assert skill.read_body() == "New body.\n"
    assert discover().skills[0].description == "Filesystem v2."


@pytest.mark.parametrize(
    ("marker", "managed"),
    [
        ({"managed_by": "keen-mcp", "server": "x"}, True),
        ({"managed_by": "someone-else"}, False),
        (["keen-mcp"], False),
        ("{not json", False),
    ],
)
def test_managed_flag_comes_from_the_marker(root: Path, marker: object, managed: bool) -> None:
    skill_dir = write_skill(root, "mcp:x", good("mcp:x"))
    text = marker if isinstance(marker, str) else json.dumps(marker)
    (skill_dir / MARKER_FILE).write_text(text, encoding="utf-8")
    (skill,) = discover().skills
    assert skill.managed is managed


def test_discovery_reads_only_the_frontmatter(root: Path) -> None:
    # A body that is not UTF-8 cannot be decoded; discovery succeeds because it stops at the fence.
    skill_dir = root / "big"
    skill_dir.mkdir()
    (skill_dir / "SKILL.md").write_bytes(b"---\nname: big\ndescription: Big.\n---\n" + b"\xff" * 10_000)
    (skill,) = discover().skills
    assert skill.description == "Big."
    with pytest.raises(SkillError, match="cannot read"):
        skill.read_body()


def test_split_frontmatter() -> None:
    assert split_frontmatter("\ufeff---\r\na: 1\r\n---\r\n\r\nbody\r\n") == ("a: 1\r\n", "body\r\n")
    assert split_frontmatter("no fence\n") == (None, "no fence\n")
    assert split_frontmatter("---\nunclosed\n") == (None, "---\nunclosed\n")


def test_config_absent_explicit_and_broken(root: Path) -> None:
    write_skill(root, "a", good("a"))
    write_skill(root, "b", good("b"))
    write_skill(root, "c", good("c"))
    assert [s.enabled for s in discover().skills] == [True, True, True]

    config = paths.skills_config_path()
    config.write_text(json.dumps({"is_enabled": {"a": False, "b": True}, "other": 1}), encoding="utf-8")
    found = discover()
    assert {s.name: s.enabled for s in found.skills} == {"a": False, "b": True, "c": True}
    assert [s.name for s in found.enabled] == ["b", "c"]

    for broken, says in (
        ("{nope", "invalid JSON at line 1, column 2"),
        ("[]", 'expected an object like {"is_enabled": {}}; fix or delete the file'),
        ('{"is_enabled": []}', '"is_enabled" must be an object of name -> true/false'),
        (
            '{"is_enabled": {"a": "false"}}',
            '"is_enabled" values must be true or false (JSON booleans); fix "a": "false"',
        ),
    ):
        config.write_text(broken, encoding="utf-8")
        with pytest.raises(SkillError, match=re.escape(says)) as info:
            discover()
        assert str(config) in str(info.value)
        assert config.read_text(encoding="utf-8") == broken  # nothing lost

    # Nested past json's parser, not UTF-8, a folder in its place: each was a traceback.
    for raw, says in (
        (b"[" * 100_000 + b"]" * 100_000, "the JSON is nested too deep to read; fix it or delete the file"),
        (b'{"is_enabled": {"caf\xe9": true}}', "it is not UTF-8 text; it must be a UTF-8 file you can read"),
    ):
        config.write_bytes(raw)
        with pytest.raises(SkillError, match=re.escape(says)):
            discover()
        assert config.read_bytes() == raw
    config.unlink()
    config.mkdir()
    with pytest.raises(
        SkillError, match=r"cannot read .*config\.json: Is a directory; it must be a UTF-8 file"
    ):
        discover()
    config.rmdir()
    # The byte order mark some editors write first is no part of the JSON.
    config.write_bytes(b'\xef\xbb\xbf{"is_enabled": {"a": false}}')
    assert {s.name: s.enabled for s in discover().skills} == {"a": False, "b": True, "c": True}


def test_a_skills_root_or_config_that_cannot_be_read_is_a_skill_error(tmp_path: Path) -> None:
    # A file given as the skills root, or a config.json that is a folder or not UTF-8: a bare
    # NotADirectoryError, IsADirectoryError or UnicodeDecodeError reached the caller.
    a_file = tmp_path / "notes.md"
    a_file.write_text("not a folder", encoding="utf-8")
    with pytest.raises(
        SkillError, match=rf"^{re.escape(str(a_file))} is not a directory; the skills root is"
    ):
        discover(a_file)
    under = a_file / "skills"  # a KEEN_HOME set to a file's path: the file is named
    with pytest.raises(
        SkillError, match=rf"^{re.escape(str(under))} cannot be a folder: {re.escape(str(a_file))} is a file"
    ):
        discover(under)
    folder = tmp_path / "skills"
    (folder / "config.json").mkdir(parents=True)
    with pytest.raises(
        SkillError, match=r"cannot read .*config\.json: Is a directory; it must be a UTF-8 file you can read"
    ):
        discover(folder)
    (folder / "config.json").rmdir()
    (folder / "config.json").write_bytes(b'{"is_enabled": {"\xff": true}}')
    with pytest.raises(SkillError, match=r"config\.json: it is not UTF-8 text; it must be a UTF-8 file"):
        discover(folder)


def test_config_save_is_atomic_and_keeps_unknown_keys(root: Path) -> None:
    path = paths.skills_config_path()
    path.write_text(json.dumps({"is_enabled": {"x": False}, "note": "keep me"}), encoding="utf-8")
    config = SkillsConfig.load(path)
    config.set_enabled("y", False)
    config.forget("x")
    config.save()
    assert json.loads(path.read_text(encoding="utf-8")) == {"is_enabled": {"y": False}, "note": "keep me"}
    assert [p.name for p in path.parent.iterdir() if p.name.startswith(".")] == []  # no temp file left


def test_a_symlinked_config_stays_a_link_and_its_file_keeps_its_mode(root: Path, tmp_path: Path) -> None:
    # The save's os.replace put a plain file where the link was: the dotfiles copy kept the
    # old settings without a word, and the new file was 0644 whatever the old one's mode.
    kept = tmp_path / "dotfiles" / "skills-config.json"
    kept.parent.mkdir()
    kept.write_text('{"is_enabled": {"x": false}}', encoding="utf-8")
    kept.chmod(0o600)
    path = paths.skills_config_path()
    path.symlink_to(os.path.relpath(kept, path.parent))
    with SkillsConfig.edit(path) as config:
        config.set_enabled("y", False)
    assert path.is_symlink() and os.readlink(path) == os.path.relpath(kept, path.parent)
    assert json.loads(kept.read_text(encoding="utf-8")) == {"is_enabled": {"x": False, "y": False}}
    assert kept.stat().st_mode & 0o777 == 0o600
    # No temp file left beside it; the lock is the one every home linking it takes.
    assert sorted(p.name for p in kept.parent.iterdir()) == [kept.name, f"{kept.name}.lock"]


def test_a_symlinked_config_is_the_config_and_no_broken_skill(tmp_path: Path) -> None:
    # Every listing warned "skill 'config.json' skipped: not a directory": the folder's
    # symlinks were all taken for skills, and the dotfiles link is one.
    home = make_home(tmp_path)
    root = home.keen_home / "skills"
    write_skill(root, "notes", good("notes"))
    kept = tmp_path / "dotfiles" / "skills-config.json"
    kept.parent.mkdir()
    kept.write_text('{"is_enabled": {"notes": false}}', encoding="utf-8")
    (root / "config.json").symlink_to(kept)
    found = discover(root)
    assert found.problems == [] and [(s.name, s.enabled) for s in found.skills] == [("notes", False)]
    cached = DiscoveryCache(root).discover()  # what a chat and `keen prompt` list from
    assert cached.problems == [] and [(s.name, s.enabled) for s in cached.skills] == [("notes", False)]
    for run in (home.keen("skills", "list"), home.keen_process("skills", "list")):
        assert run.code == 0 and run.stderr == "" and "notes" in run.stdout, str(run)


def test_a_config_linked_to_nothing_or_to_itself_is_refused_and_left_a_link(
    root: Path, tmp_path: Path
) -> None:
    # A link to nothing read as no settings (every skill enabled) and its save made a plain
    # file in its place; a loop was written over the same way.
    path = paths.skills_config_path()
    path.symlink_to("../../moved/config.json")
    target = tmp_path / "moved" / "config.json"
    said = f"{path} links to {target}, which does not exist; create it or remove the link"
    with pytest.raises(SkillError, match=re.escape(said)):
        SkillsConfig.load(path)
    with pytest.raises(SkillError, match=re.escape(said)):
        SkillsConfig(path, {"is_enabled": {}}).save()
    assert path.is_symlink() and not target.parent.exists()
    path.unlink()
    path.symlink_to(path.name)
    loop = (
        r"config\.json: Too many levels of symbolic links; it must be a file you can read, or a link to one"
    )
    for act in (lambda: SkillsConfig.load(path), SkillsConfig(path, {"is_enabled": {}}).save):
        with pytest.raises(SkillError, match=loop):
            act()
    assert path.is_symlink() and os.readlink(path) == path.name


def test_load_skill(root: Path) -> None:
    write_skill(root, "one", good("one"))
    write_skill(root, "broken", "nothing\n")
    paths.skills_config_path().write_text('{"is_enabled": {"one": false}}', encoding="utf-8")
    skill = load_skill("one")
    assert skill.name == "one" and not skill.enabled
    with pytest.raises(SkillError, match="no skill named 'missing'") as info:
        load_skill("missing")
    assert info.value.name == "missing" and info.value.remedy is Remedy.LIST_SKILLS
    assert "keen skills list" in describe(info.value)  # the CLI's wording of the remedy
    with pytest.raises(SkillError, match=r"is broken: SKILL\.md must start with YAML frontmatter"):
        load_skill("broken")
    with pytest.raises(SkillError, match="not a skill name"):
        load_skill("../one")
