"""Keen's paths follow ``KEEN_HOME`` (and ``HOME``) as they are when asked, however often asked."""

from __future__ import annotations

from pathlib import Path

import pytest

from keen import paths


def test_paths_follow_the_environment_of_each_call(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("one", "two", "one"):
        monkeypatch.setenv("KEEN_HOME", str(tmp_path / name))
        assert paths.pins_dir() == tmp_path / name / "mcp" / "pins"
        assert paths.skills_config_path() == tmp_path / name / "skills" / "config.json"
    monkeypatch.setenv("KEEN_HOME", "")
    monkeypatch.setenv("HOME", str(tmp_path / "user"))
    assert paths.keen_home() == tmp_path / "user" / ".keen"
    assert paths.logs_dir() == tmp_path / "user" / ".keen" / "logs"
    monkeypatch.setenv("HOME", str(tmp_path / "other"))
    assert paths.mcp_config_path() == tmp_path / "other" / ".keen" / "mcp" / "configs.json"


@pytest.mark.parametrize("name", ["mcp:github", "SKILL.md", "a b", "ünïcode", ".keen-generated-mcp.json"])
def test_child_is_the_joined_path(tmp_path: Path, name: str) -> None:
    # paths.child takes pathlib's own join for listed entries: the same path as `/` gives,
    # as a key, a string, a parent and a file to open.
    (tmp_path / name).write_text("x", encoding="utf-8")
    for parent in (tmp_path, Path("relative"), Path("/")):
        joined = paths.child(parent, name)
        assert joined == parent / name
        assert hash(joined) == hash(parent / name)
        assert str(joined) == str(parent / name)
        assert joined.parts == (parent / name).parts
        assert joined.parent == parent
        assert joined.name == name
        assert type(joined) is type(parent / name)
    assert paths.child(tmp_path, name).read_text(encoding="utf-8") == "x"
    assert paths.child(paths.child(tmp_path, "sub"), name) == tmp_path / "sub" / name
