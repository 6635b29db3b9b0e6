"""``keen sessions list|show`` over real session logs written by the harness: the ids a
narrow terminal shows are whole, and ``show`` takes the start of an id."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from helpers.cli import KEEN
from keen.capabilities import Catalog
from keen.harness import Harness

IDS = ("20261123T230352Z-bbe928", "20261123T230352Z-c0ffee", "20261124T101500Z-5a5a5a")


def _sessions(workspace: Path) -> None:
    for session_id in IDS:
        harness = Harness(
            lambda: Catalog.from_skills_dir(cache=False), None, workspace=workspace, session_id=session_id
        )
        harness.begin_step()
        harness.end_step()
        harness.close()


def _keen(keen_home: Path, *args: str, columns: int = 60) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KEEN_")}
    env.update({"KEEN_HOME": str(keen_home), "COLUMNS": str(columns), "NO_COLOR": "1"})
    return subprocess.run(
        [*KEEN, *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
        check=False,
    )


def test_list_shows_whole_ids_and_show_takes_a_unique_prefix(keen_home: Path, tmp_path: Path) -> None:
    # On an 80-column terminal the id column read '20261123T230352Z-bbe9…', which
    # `keen sessions show` then refused as 'no session'.
    _sessions(tmp_path)
    listed = _keen(keen_home, "sessions", "list")
    assert listed.returncode == 0, listed.stderr
    for session_id in IDS:
        assert session_id in listed.stdout, listed.stdout
    shown = _keen(keen_home, "sessions", "show", "20261124")
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.startswith(f"session {IDS[2]} "), shown.stdout
    several = _keen(keen_home, "sessions", "show", "20261123T230352Z")
    assert several.returncode == 2 and "starts 2 session ids" in several.stderr, several.stderr
    assert IDS[0] in several.stderr and IDS[1] in several.stderr
    none = _keen(keen_home, "sessions", "show", "1999")
    assert none.returncode == 2 and "no session '1999'" in none.stderr, none.stderr


def test_list_counts_what_the_person_said_as_turns_and_model_requests_as_steps(
    keen_home: Path, tmp_path: Path
) -> None:
    # Two things said, three model requests: `keen sessions list` said 3 turns.
    harness = Harness(
        lambda: Catalog.from_skills_dir(cache=False), None, workspace=tmp_path, session_id=IDS[0]
    )
    for turn, (said, steps) in enumerate((("first question", 2), ("second question", 1)), 1):
        harness.log.emit("agent.user", turn=turn, step=harness.step + 1, text=said)
        for _ in range(steps):
            harness.begin_step()
            harness.end_step()
    harness.close()
    listed = _keen(keen_home, "sessions", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    (row,) = json.loads(listed.stdout)
    assert (row["turns"], row["steps"], row["calls"]) == (2, 3, 0), row


def test_a_log_written_before_steps_were_named_so_still_replays(keen_home: Path) -> None:
    """Logs from before the rename say turn.start/turn.end and "turn" for a model step."""
    log = keen_home / "sessions" / f"{IDS[0]}.jsonl"
    log.parent.mkdir(parents=True, exist_ok=True)
    events = [
        {"type": "session.start", "session": IDS[0], "mode": "ask", "ts": "2026-01-01T00:00:00Z"},
        {"type": "agent.user", "turn": 1, "text": "hello there"},
        {"type": "turn.start", "turn": 1, "offered": [], "skill_index": [], "handles": []},
        {"type": "turn.end", "turn": 1},
        {"type": "agent.turn", "turn": 1, "ok": True, "answer": "hi"},
    ]
    log.write_text("".join(json.dumps(e) + "\n" for e in events), encoding="utf-8")
    shown = _keen(keen_home, "sessions", "show", IDS[0])
    assert shown.returncode == 0, shown.stderr
    assert "user: hello there" in shown.stdout and "step 1: visible set matches offered" in shown.stdout
    (row,) = json.loads(_keen(keen_home, "sessions", "list", "--json").stdout)
    assert (row["turns"], row["steps"], row["replay_ok"]) == (1, 1, True), row


def test_a_log_with_a_torn_first_line_shows_dashes_not_none(keen_home: Path, tmp_path: Path) -> None:
    # A log cut at its first line (a crash mid-write, a copy cut short) was listed with
    # "None" as its start and mode, and shown as "mode None  workspace None".
    _sessions(tmp_path)
    log = keen_home / "sessions" / f"{IDS[0]}.jsonl"
    log.write_text(log.read_text(encoding="utf-8").partition("\n")[2], encoding="utf-8")
    torn = keen_home / "sessions" / "20261125T000000Z-70b1e5.jsonl"
    torn.write_text('{"seq": 1, "type": "session.st', encoding="utf-8")
    listed = _keen(keen_home, "sessions", "list", columns=120)
    assert listed.returncode == 0, listed.stderr
    rows = {line.split()[0]: line.split()[1:] for line in listed.stdout.splitlines()[2:] if line.strip()}
    assert rows["20261125T000000Z-70b1e5"][:2] == ["-", "-"], listed.stdout
    assert rows[IDS[0]][:2] == ["-", "-"] and rows[IDS[1]][1] != "-", listed.stdout
    assert "None" not in listed.stdout, listed.stdout
    shown = _keen(keen_home, "sessions", "show", "20261125")
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.startswith("session 20261125T000000Z-70b1e5  mode -  workspace -  replay ok"), (
        shown.stdout
    )
