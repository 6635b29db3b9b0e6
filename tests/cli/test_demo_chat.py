"""``keen demo``'s scripted chat (keen.cli.demo_chat) against the real demo server: each
stretch of model text carries a ``model:`` label, and a step that only calls tools prints
no empty one."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from rich.console import Console

from helpers.agent_world import World
from keen.cli import _common
from keen.cli.demo_chat import scripted_session

pytestmark = pytest.mark.anyio


async def test_scripted_session_labels_only_the_model_text(
    keen_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    buffer = io.StringIO()
    console = Console(file=buffer, width=250, no_color=True, soft_wrap=True)
    monkeypatch.setattr(_common.out, "_console", console)
    work = tmp_path / "work"
    work.mkdir()
    world = World(keen_home, work, tmp_path / "demo.pid")
    async with world.runtime("demo") as rt:
        await scripted_session(rt, work)
    lines = buffer.getvalue().splitlines()
    labelled = [line for line in lines if line.startswith("model:")]
    assert [line.strip() for line in labelled] == [
        "model: Let me read the demo server's skill.",
        "model: A marathon (26.2 mi) is 42.16 km.",
        'model: Saved it as a note titled "marathon".',
    ], buffer.getvalue()
    # The second turn opens with a tool call: its first line after "you:" is that call.
    second = lines.index("you: Save that as a note.")
    assert lines[second + 1].startswith("  tool search_tools"), buffer.getvalue()
