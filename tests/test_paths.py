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


def test_a_home_that_is_not_utf8_reads_as_os_environ_decodes_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A byte that is not UTF-8 in the variable: os.environ keeps it as a lone surrogate.
    monkeypatch.setenv("KEEN_HOME", f"{tmp_path}/caf\udce9")
    assert paths.keen_home() == Path(f"{tmp_path}/caf\udce9")
    assert paths.pins_dir() == Path(f"{tmp_path}/caf\udce9/mcp/pins")
    monkeypatch.delenv("KEEN_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "user"))
    assert paths.keen_home() == tmp_path / "user" / ".keen"
