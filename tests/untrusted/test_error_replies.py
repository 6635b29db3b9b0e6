"""A server's JSON-RPC error reply with code -32000 ends that call, not the session.

-32000 is where JSON-RPC 2.0's "Server error" range starts, and servers use it for their own
failures ("database is busy"). The MCP SDK raises the same code when a transport ends under
a request, so Keen took every such reply for a server that went away: it dropped a healthy
session, showed "went away" instead of the server's words, and started the server again.
The hostile server here answers ``busy`` with -32000 and logs each start; every front end
must show the server's reason and keep the one server process for the next call.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from helpers.hostile import hostile_entry, keen_cli
from helpers.serve import in_process, read_json

REASON = "database is busy, try again in a minute"
TOOLS = [{"name": name, "inputSchema": {"type": "object"}} for name in ("busy", "ok")]


def _home(tmp_path: Path) -> tuple[Path, Path]:
    home = tmp_path / "keen-home"
    (home / "mcp").mkdir(parents=True)
    starts = tmp_path / "starts.log"
    spec = {
        "tools": TOOLS,
        "errors": {"busy": {"code": -32000, "message": REASON}},
        "start_log": str(starts),
    }
    config = {"version": 1, "servers": {"h": hostile_entry(tmp_path / "spec.json", spec)}}
    (home / "mcp" / "configs.json").write_text(json.dumps(config))
    return home, starts


def _starts(path: Path) -> int:
    return len(path.read_text().split())


def test_keen_mcp_call_shows_the_servers_reason(tmp_path: Path) -> None:
    home, _starts_log = _home(tmp_path)
    run = keen_cli("mcp", "call", "h", "busy", "--yes", keen_home=home)
    assert run.code == 1, str(run)  # the server failed the call: 1, not Keen's own 2
    assert REASON in run.stderr and "-32000" in run.stderr, str(run)
    assert "went away" not in run.output and "keen mcp connect" not in run.output, str(run)


def test_keen_chat_keeps_the_session_after_a_32000_reply(tmp_path: Path) -> None:
    home, starts = _home(tmp_path)
    schemas = home / "skills" / "mcp:h" / "schemas"

    def mcp(tool: str) -> dict[str, Any]:
        return {"name": "call_mcp_tool", "arguments": {"server": "h", "tool": tool, "arguments": {}}}

    answers = [
        {
            "content": "",
            "tool_calls": [
                {"name": "read_file", "arguments": {"path": str(schemas / f"{t}.json")}}
                for t in ("busy", "ok")
            ],
        },
        {"content": "", "tool_calls": [mcp("busy")]},
        {"content": "", "tool_calls": [mcp("ok")]},
        {"content": "done"},
    ]
    script = tmp_path / "answers.jsonl"
    script.write_text("".join(json.dumps(a) + "\n" for a in answers))
    run = keen_cli("chat", "-p", "go", "--model", f"scripted:{script}", "--json", "--yes", keen_home=home)
    assert run.code == 0, str(run)
    busy, ok = json.loads(run.stdout)["tool_calls"][2:]
    assert busy["outcome"] == "error" and REASON in busy["text"], busy
    assert "went away" not in busy["text"], busy
    assert ok["outcome"] == "ok" and ok["text"] == "ok", ok
    assert "reconnected" not in run.stderr, run.stderr
    assert _starts(starts) == 1, "the server was started again: Keen dropped a live session"


@pytest.mark.anyio
async def test_keen_serve_keeps_the_upstream_session_after_a_32000_reply(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home, starts = _home(tmp_path)
    monkeypatch.setenv("KEEN_HOME", str(home))
    # keen serve's server in this process, the host over memory streams: how it treats the
    # upstream's reply is under test, not its transport.
    async with in_process(home, "session", mode="extension") as (_, client):
        await client.read_resource("resource:///tool_descriptions?tools=mcp__h__busy,mcp__h__ok")
        busy = await client.call_tool("mcp__h__busy", {})
        ok = await client.call_tool("mcp__h__ok", {})
    assert busy.is_error and REASON in json.dumps(read_json(busy)), busy
    assert not ok.is_error, ok
    assert _starts(starts) == 1, "the upstream server was started again: Keen dropped a live session"
