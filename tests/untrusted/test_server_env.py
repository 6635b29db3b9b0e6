"""A stdio server gets a minimal environment, not Keen's: no model keys, cloud keys or
``KEEN_SERVE_TOKEN``.

The hostile server writes its whole environment to a file as it starts. Keen runs with
secrets in its own environment; every front end that starts servers (``keen mcp call``,
``keen chat``, ``keen serve``) must start them with only the safe variables (PATH, HOME,
the locale, the proxies), what the entry's ``env`` gives (kept as ``keen mcp import``
brought it over) and what ``inherit_env`` names.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from helpers.hostile import hostile_entry, keen_cli
from helpers.loopback import wait_until
from helpers.serve import KeenServeProcess

SECRETS = {
    "OPENAI_API_KEY": "sk-proj-envleak0penai0Zq8vX2mN4bL6kJ9hG3fD1sA7",
    "ANTHROPIC_API_KEY": "sk-ant-api03-envleak0anthropic0Q1w2E3r4T5y6U7i8",
    "AWS_SECRET_ACCESS_KEY": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYenvleakKEY",
    "KEEN_SERVE_TOKEN": "serve-token-envleak-abcdefghijklmnop",
}
SAFE = {"LANG": "C.UTF-8", "LC_TIME": "C", "HTTPS_PROXY": "http://127.0.0.1:9", "NO_PROXY": "localhost"}


def _setup(tmp_path: Path) -> tuple[Path, dict[str, Path], dict[str, str]]:
    """A KEEN_HOME whose servers dump their environment: ``imported`` comes through ``keen
    mcp import`` with an ``env`` block; ``named`` passes one more variable by name;
    ``everything`` opts into Keen's whole environment."""
    home = tmp_path / "keen-home"
    (home / "mcp").mkdir(parents=True)
    dumps = {name: tmp_path / f"{name}.env.json" for name in ("imported", "named", "everything")}
    tool = {"tools": [{"name": "ok", "inputSchema": {"type": "object"}}]}
    env = {**SECRETS, **SAFE, "AWS_PROFILE": "staging", "GIVEN_SOURCE": "given-by-entry"}
    hosts = tmp_path / "claude_desktop_config.json"
    imported = hostile_entry(tmp_path / "imported.json", {**tool, "env_dump": str(dumps["imported"])})
    imported.pop("transport")
    imported["env"] = {"GIVEN": "given-by-entry"}
    hosts.write_text(json.dumps({"mcpServers": {"imported": imported}}))
    run = keen_cli("mcp", "import", str(hosts), keen_home=home, env=env)
    assert run.code == 0, str(run)
    config = json.loads((home / "mcp" / "configs.json").read_text())
    assert config["servers"]["imported"]["env"] == {"GIVEN": "given-by-entry"}
    config["servers"]["named"] = hostile_entry(
        tmp_path / "named.json", {**tool, "env_dump": str(dumps["named"])}, inherit_env=["AWS_PROFILE"]
    )
    config["servers"]["everything"] = hostile_entry(
        tmp_path / "everything.json", {**tool, "env_dump": str(dumps["everything"])}, inherit_env=True
    )
    (home / "mcp" / "configs.json").write_text(json.dumps(config))
    return home, dumps, env


def _read(path: Path, timeout: float = 30) -> dict[str, str]:
    assert wait_until(path.exists, timeout), f"the server never started: no {path.name}"
    data: dict[str, str] = json.loads(path.read_text())
    return data


def _check(dumps: dict[str, Path], env: dict[str, str], home: Path) -> None:
    seen = _read(dumps["imported"])
    leaked = sorted(set(SECRETS) & set(seen))
    assert not leaked, f"a stdio server was given Keen's {leaked}"
    assert "AWS_PROFILE" not in seen and "GIVEN_SOURCE" not in seen
    assert seen["GIVEN"] == "given-by-entry"  # the entry's env, as the other host gave it
    assert seen["HOME"] == str(home.parent) and seen["PATH"]
    for name, value in SAFE.items():
        assert seen[name] == value, name
    named = _read(dumps["named"])
    assert named["AWS_PROFILE"] == "staging" and not set(SECRETS) & set(named)
    everything = _read(dumps["everything"])
    assert all(everything[name] == value for name, value in env.items())


@pytest.mark.skipif(sys.platform == "win32", reason="the POSIX variable set")
@pytest.mark.parametrize("front", ["call", "chat"])
def test_cli_front_ends_start_servers_with_a_minimal_environment(tmp_path: Path, front: str) -> None:
    home, dumps, env = _setup(tmp_path)
    if front == "call":
        for name in dumps:
            run = keen_cli("mcp", "call", name, "ok", "--yes", keen_home=home, env=env)
            assert run.code == 0, str(run)
    else:  # one turn starts every server
        script = tmp_path / "answers.jsonl"
        script.write_text(json.dumps({"content": "nothing to do"}) + "\n")
        run = keen_cli("chat", "-p", "hi", "--model", f"scripted:{script}", "--yes", keen_home=home, env=env)
        assert run.code == 0, str(run)
    _check(dumps, env, home)


@pytest.mark.skipif(sys.platform == "win32", reason="the POSIX variable set")
def test_keen_serve_starts_upstream_servers_with_a_minimal_environment(tmp_path: Path) -> None:
    home, dumps, env = _setup(tmp_path)
    served: dict[str, Any] = {**env, "HOME": str(home.parent)}
    with KeenServeProcess(home, env=served):
        _check(dumps, env, home)
