"""The ``world`` fixture: a private KEEN_HOME, a work dir and the real servers' entries; the
``tmux_chat`` fixture: ``keen chat`` sessions in a real terminal (``helpers.chat_tmux``)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from helpers.agent_world import World

if TYPE_CHECKING:
    from helpers.chat_tmux import Chat


@pytest.fixture
def world(keen_home: Path, tmp_path: Path) -> World:
    work = tmp_path / "work"
    work.mkdir()
    return World(keen_home, work, tmp_path / "demo.pid")


@pytest.fixture
def tmux_chat(tmp_path: Path) -> Iterator[Callable[..., Chat]]:
    """Starts ``keen chat`` sessions under tmux in the test's tmp dir (``helpers.chat_tmux``)."""
    # Imported here: importing it starts the fork server (helpers.cli), which an xdist
    # controller loading this conftest for `pytest -n N tests/agent` never uses.
    from helpers.chat_tmux import chat_sessions

    with chat_sessions(tmp_path) as make:
        yield make
