"""``keen chat`` without a terminal: a clear error, nothing started (the REPL itself: test_repl_tmux.py)."""

from __future__ import annotations

import json
from pathlib import Path

from helpers.cli import make_home


def test_without_a_terminal_the_repl_says_to_use_one_shot_mode(tmp_path: Path) -> None:
    home = make_home(tmp_path)
    script = tmp_path / "script.jsonl"
    script.write_text(json.dumps({"content": "never asked"}) + "\n")
    run = home.keen_process("chat", "--model", f"scripted:{script}")
    assert run.code == 2, run
    assert "needs a terminal" in run.stderr and "keen chat -p PROMPT" in run.stderr, run
    assert not (home.keen_home / "sessions").exists()  # no session was opened
