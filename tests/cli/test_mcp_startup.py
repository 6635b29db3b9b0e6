"""`keen mcp list` while servers start: one line per server done when stderr is not a
terminal, the advice to give a slow server more time kept whole in a narrow table, and the
connect limit set for every server (``KEEN_MCP_TIMEOUT``) or for one (``keen mcp add --timeout``)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from helpers import stdio_entry
from helpers.cli import KEEN, Home, make_home


@pytest.fixture
def home(tmp_path: Path) -> Home:
    home = make_home(tmp_path)
    home.write(
        {"basic": stdio_entry("basic_stdio"), "hang": stdio_entry("hang_init", timeouts={"connect": 1})}
    )
    return home


def test_list_writes_a_line_per_server_done_and_keeps_the_advice_whole(home: Home) -> None:
    run = home.keen("mcp", "list", columns=80)
    assert run.code == 0, str(run)
    progress = [line for line in run.stderr.splitlines() if line.strip()]
    assert sorted(line.split(":")[0] for line in progress) == ["basic", "hang"], run.stderr
    assert any(line.startswith("basic: 8 tools (") for line in progress), progress
    assert any(line.startswith("hang: disconnected (") for line in progress), progress
    flat = " ".join(run.stdout.split())
    # Cut to two lines in an 80-column table, the error still ends in how to give it more time.
    advice = 'to give it more time, raise "timeouts.connect" in configs.json or KEEN_MCP_TIMEOUT'
    assert f"…; {advice}; then run: keen mcp connect hang" in flat, run.stdout
    # --json prints no progress lines: stderr stays empty for scripts.
    as_json = home.keen("mcp", "list", "--json")
    assert as_json.code == 0 and as_json.stderr == "", str(as_json)


def test_the_environment_sets_every_servers_connect_limit(home: Home) -> None:
    home.write({"hang": stdio_entry("hang_init")})
    env = {**home.env(), "KEEN_MCP_TIMEOUT": "0.5"}
    proc = subprocess.run(
        [*KEEN, "mcp", "list", "--json"], env=env, capture_output=True, text=True, timeout=60, check=False
    )
    (row,) = json.loads(proc.stdout)
    assert "did not answer initialize within 0.5 s" in row["last_error"], proc.stderr


def test_config_toml_sets_it_too(home: Home) -> None:
    home.write({"hang": stdio_entry("hang_init")})
    (home.keen_home / "config.toml").write_text("[mcp]\ntimeout = 0.5\n")
    (row,) = home.keen("mcp", "list", "--json").json()
    assert "did not answer initialize within 0.5 s" in row["last_error"]
