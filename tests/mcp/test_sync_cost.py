"""What connecting stdio servers loads: nothing a session of them does not use.

A session that connects only stdio servers imports neither jsonschema (with ``regex`` and
``referencing``: the argument validator, loaded by the first call that is checked) nor the
OAuth sign-in modules and the SDK's OAuth client (loaded by the first OAuth
server). Each is CPU of every start (``bench/idle.py``): 0.1-0.3 s on a small machine.
The environment a stdio server inherits is filtered from Keen's once, not per server,
and filtered again when Keen's changes.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from helpers.hostile import hostile_entry
from keen.mcp.config.servers import StdioServerConfig
from keen.mcp.connection.spawn import server_environment

_SCRIPT = """
import json, sys
from pathlib import Path
import anyio
from keen.errors import InvalidArguments
from keen.mcp import Manager, ServerState
from keen.trust import PinGuard

WATCHED = ("jsonschema", "keen.mcp.listing.validation", "keen.mcp.auth.connect", "keen.mcp.auth.classify")

def loaded():
    return sorted(name for name in WATCHED if name in sys.modules)

async def main():
    async with Manager(Path(sys.argv[1]), trust=PinGuard()) as manager:
        assert await manager.wait_ready(30)
        status = manager.status("s")
        assert status.state is ServerState.CONNECTED, status.last_error
        connected = loaded()
        refused = ""
        try:
            await manager.call_tool("s", "echo", {"text": 5})
        except InvalidArguments as exc:
            refused = str(exc)
        result = await manager.call_tool("s", "echo", {"text": "hi"})
        print(json.dumps({"connected": connected, "called": loaded(), "refused": refused, "text": result.text}))

anyio.run(main)
"""


def test_connecting_stdio_servers_loads_no_validator_and_no_oauth(
    write_config: Callable[..., Path], tmp_path: Path
) -> None:
    spec = {
        "tools": [
            {
                "name": "echo",
                "description": "Echoes.",
                "inputSchema": {
                    "type": "object",
                    "properties": {"text": {"type": "string"}},
                    "required": ["text"],
                },
            }
        ],
        "results": {"echo": {"content": [{"type": "text", "text": "echoed"}]}},
    }
    path = write_config({"s": hostile_entry(tmp_path / "s.json", spec)})
    done = subprocess.run(
        [sys.executable, "-c", _SCRIPT, str(path)], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["connected"] == [], seen
    # The first checked call loads the validator, which refuses what the schema does not allow.
    assert "jsonschema" in seen["called"] and "keen.mcp.listing.validation" in seen["called"], seen
    # A call to a server without OAuth loads no OAuth module either.
    assert "keen.mcp.auth.connect" not in seen["called"] and "keen.mcp.auth.classify" not in seen["called"], (
        seen
    )
    assert "$.text" in seen["refused"] and "is not of type 'string'" in seen["refused"], seen
    assert seen["text"] == "echoed"


def test_the_passed_environment_follows_every_change_of_keen_s_own(monkeypatch: pytest.MonkeyPatch) -> None:
    # What a server inherits is kept between starts while os.environ stays the same: a
    # variable set, changed or removed since must show at the next start all the same.
    cfg = StdioServerConfig(transport="stdio", command="server", env={"GIVEN": "entry"})
    monkeypatch.setenv("LC_TIME", "C")
    monkeypatch.delenv("TZ", raising=False)
    first = server_environment(cfg)
    assert first["LC_TIME"] == "C" and "TZ" not in first and first["GIVEN"] == "entry"
    first["LC_TIME"] = "changed by the caller"  # a caller's copy: the next start gets its own
    assert server_environment(cfg)["LC_TIME"] == "C"
    monkeypatch.setenv("TZ", "UTC")
    monkeypatch.setenv("LC_TIME", "de_DE.UTF-8")
    monkeypatch.setenv("KEEN_NOT_PASSED", "x")
    second = server_environment(cfg)
    assert second["TZ"] == "UTC" and second["LC_TIME"] == "de_DE.UTF-8" and "KEEN_NOT_PASSED" not in second
    monkeypatch.delenv("LC_TIME")
    monkeypatch.setenv("LC_ALL", "() { exported bash function; }")  # never passed
    third = server_environment(cfg)
    assert "LC_TIME" not in third and "LC_ALL" not in third and third["TZ"] == "UTC"
