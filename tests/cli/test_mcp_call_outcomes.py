"""``keen mcp call``'s exit codes, words and audit record: 1 when the server or the tool
failed the call (an ``isError`` result, or a JSON-RPC error answering ``tools/call``), 2 when
Keen could not make it; a person who declines the approval is told so in their words; every
call is appended to ``$KEEN_HOME/logs/cli-audit.jsonl`` as the harness's event log records one."""

from __future__ import annotations

import json
import os
import pty
import subprocess
from pathlib import Path
from typing import Any

import pytest

from helpers.cli import KEEN, Home, make_home, read_until
from helpers.hostile import hostile_entry
from keen.harness import approvals

SECRET = "sk-live-audit-5d1f0e9a7c"
TOOLS = [
    {"name": "ok", "inputSchema": {"type": "object"}},
    {"name": "broken", "inputSchema": {"type": "object"}},
    {"name": "sad", "inputSchema": {"type": "object"}},
    {"name": "internal", "inputSchema": {"type": "object"}},
]


@pytest.fixture
def home(tmp_path: Path) -> Home:
    home = make_home(tmp_path)
    spec = {
        "tools": TOOLS,
        # -32000 opens JSON-RPC's "server error" range: read as "the server went away", it exited 2.
        "errors": {
            "broken": {"code": -32000, "message": "the backend is down"},
            "internal": {"code": -32603, "message": "internal failure"},
        },
        "results": {"sad": {"content": [{"type": "text", "text": "no luck"}], "isError": True}},
    }
    home.write({"h": hostile_entry(tmp_path / "spec.json", spec, env={"H_TOKEN": SECRET})})
    return home


def audit(home: Home) -> list[dict[str, Any]]:
    path = home.keen_home / "logs" / "cli-audit.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_a_json_rpc_error_from_the_server_exits_1(home: Home) -> None:
    # It exited 2, "a Keen error", though Keen made the call and the server failed it.
    run = home.keen("mcp", "call", "h", "broken", "--yes")
    assert run.code == 1, str(run)
    assert run.stdout == "" and "the backend is down" in run.stderr, str(run)
    internal = home.keen("mcp", "call", "h", "internal", "--yes")
    assert internal.code == 1 and "JSON-RPC error -32603: internal failure" in internal.stderr, str(internal)
    sad = home.keen("mcp", "call", "h", "sad", "--yes")
    assert sad.code == 1 and "no luck" in sad.stderr, str(sad)
    keen_side = home.keen("mcp", "call", "h", "nope", "--yes")
    assert keen_side.code == 2 and 'has no tool "nope"' in keen_side.stderr, str(keen_side)


def test_every_call_is_audited_like_the_harness_records_one(home: Home) -> None:
    ok = home.keen("mcp", "call", "h", "ok", "--args", json.dumps({"token": SECRET}), "--yes")
    assert ok.code == 0 and ok.stdout.strip() == "ok", str(ok)
    home.keen("mcp", "call", "h", "broken", "--yes")
    home.keen("mcp", "call", "h", "ok")  # stdin is not a terminal: refused, nothing sent
    events = audit(home)
    assert [e["type"] for e in events] == ["session.start", "call", "result"] * 3
    first = events[:3]
    assert first[1]["name"] == "call_mcp_tool" and first[1]["arguments"]["tool"] == "ok"
    assert first[1]["decision"] == "allow" and first[1]["by"] == "--yes"
    assert (first[2]["outcome"], first[2]["text"], first[2]["server"]) == ("ok", "ok", "h")
    assert first[1]["call_id"] == first[2]["call_id"]
    assert (events[5]["outcome"], events[5]["code"]) == ("error", "remote_protocol_error")
    assert (events[7]["decision"], events[8]["outcome"]) == ("deny", "denied")
    assert [a["decision"] for a in approvals(events)] == ["allow", "allow", "deny"]
    assert SECRET not in (home.keen_home / "logs" / "cli-audit.jsonl").read_text()


def test_declining_the_approval_is_said_to_the_person(home: Home) -> None:
    # It printed the model's advice: "ask the user, or try another approach".
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [*KEEN, "mcp", "call", "h", "ok"], env=home.env(), stdin=slave, stdout=subprocess.PIPE, stderr=slave
    )
    os.close(slave)
    try:
        assert b"Approve?" in read_until(master, b"Approve?", 30)
        os.write(master, b"n\n")
        said = read_until(master, b"nothing was sent", 30).decode(errors="replace")
        out, _ = proc.communicate(timeout=30)
    finally:
        proc.kill()
        os.close(master)
    assert 'you declined the call to "h/ok"; nothing was sent' in " ".join(said.split()), said
    assert "ask the user" not in said and out == b""
    assert proc.returncode == 2
