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
