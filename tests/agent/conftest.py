"""The ``world`` fixture: a private KEEN_HOME, a work dir and the real servers' entries."""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers.agent_world import World


@pytest.fixture
def world(keen_home: Path, tmp_path: Path) -> World:
    work = tmp_path / "work"
    work.mkdir()
    return World(keen_home, work, tmp_path / "demo.pid")
