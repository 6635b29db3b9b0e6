"""``keen mcp import`` reads every host's format (README "Configure servers"), through the
CLI from a temporary ``KEEN_HOME``: a fixture file per host (Claude Desktop JSON, Cursor
JSONC with comments and trailing commas, VS Code's mcp.json and user settings.json),
standard input, and a re-import of what is already configured is a no-op with exit 0."""

from __future__ import annotations

import json
import shlex
import subprocess
from pathlib import Path

import pytest

from helpers.cli import KEEN, Home, make_home

FILES = {
    "claude_desktop_config.json": json.dumps(
        {"mcpServers": {"files": {"command": "npx", "args": ["-y", "server-filesystem", "/tmp"]}}}
    ),
    "cursor-mcp.json": """{
  // Cursor writes JSONC: comments and trailing commas
  "mcpServers": {
    "files": {"command": "npx", "args": ["-y", "server-filesystem", "/tmp",],},
    /* a remote one */
    "docs": {"url": "https://mcp.example.com/mcp"},
  },
}
""",
    "vscode-mcp.json": json.dumps(
        {"servers": {"files": {"type": "stdio", "command": "npx", "args": ["-y"]}}}
    ),
    "vscode-settings.json": """{
  "editor.fontSize": 14, // the rest of a user's settings stays untouched
  "mcp": {"servers": {"files": {"type": "stdio", "command": "npx", "args": ["-y"],},},},
}
""",
}


@pytest.mark.parametrize("name", sorted(FILES))
def test_each_host_format_imports_and_reimports_as_a_no_op(name: str, tmp_path: Path) -> None:
    home = make_home(tmp_path)
    source = tmp_path / name
    source.write_text(FILES[name])
    first = home.keen("mcp", "import", str(source))
    assert first.code == 0, str(first)
    assert "imported files" in first.stdout
    written = home.config_path.read_text()
    assert json.loads(written)["servers"]["files"]["command"] == "npx"
    again = home.keen("mcp", "import", str(source))
    assert again.code == 0, str(again)
    assert "unchanged files" in again.stdout and "imported files" not in again.stdout
    assert home.config_path.read_text() == written  # nothing rewritten


def test_jsonc_keeps_every_server(tmp_path: Path) -> None:
    home = make_home(tmp_path)
    source = tmp_path / "mcp.json"
    source.write_text(FILES["cursor-mcp.json"])
    assert home.keen("mcp", "import", str(source)).code == 0
    servers = json.loads(home.config_path.read_text())["servers"]
    assert set(servers) == {"files", "docs"}
    assert servers["docs"]["url"] == "https://mcp.example.com/mcp"


def test_broken_jsonc_names_line_and_column(tmp_path: Path) -> None:
    home = make_home(tmp_path)
    source = tmp_path / "mcp.json"
    source.write_text('{\n  "mcpServers": {"a": {"command": "x"} "b": 1}\n}\n')
    run = home.keen("mcp", "import", str(source))
    assert run.code == 2, str(run)
    assert "line 2" in run.stderr and not home.config_path.exists()


def test_import_from_standard_input(tmp_path: Path) -> None:
    home: Home = make_home(tmp_path)
    proc = subprocess.run(
        [*KEEN, "mcp", "import", "-"],
        input=FILES["cursor-mcp.json"],
        env=home.env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert "imported files" in proc.stdout and "imported docs" in proc.stdout
    assert set(json.loads(home.config_path.read_text())["servers"]) == {"files", "docs"}


def test_broken_jsonc_with_comments_names_the_real_line_and_column(tmp_path: Path) -> None:
    # A file with comments is not plain JSON, so plain JSON's position (line 1, column 1:
    # the comment) was reported for a syntax error four lines further down.
    home = make_home(tmp_path)
    source = tmp_path / "mcp.json"
    source.write_text('// my servers\n{"mcpServers": {\n  "a": {"command": "x",},\n  "b" {}\n}}\n')
    run = home.keen("mcp", "import", str(source))
    assert run.code == 2, str(run)
    assert "line 4, column 7" in run.stderr, str(run)
    assert "line 1" not in run.stderr, str(run)
    assert not home.config_path.exists()


def test_a_refused_name_suggests_a_rename_command_that_works(tmp_path: Path) -> None:
    # The remedy read `keen mcp import --rename 'my files=my-files'`: without the FILE, that
    # command fails ("give the FILE to import").
    home = make_home(tmp_path)
    source = tmp_path / "claude config.json"
    source.write_text(json.dumps({"mcpServers": {"my files": {"command": "x"}, "ok": {"command": "y"}}}))
    first = home.keen("mcp", "import", str(source))
    assert first.code == 1, str(first)  # "my files" refused, "ok" imported
    line = next(line for line in first.stderr.splitlines() if "my files" in line)
    command = line.split("import it as 'my-files' (", 1)[1].rsplit(")", 1)[0]
    argv = shlex.split(command)
    assert argv[:3] == ["keen", "mcp", "import"], command
    again = home.keen(*argv[1:])
    assert again.code == 0, str(again)
    assert "imported my-files" in again.stdout, str(again)
    assert set(json.loads(home.config_path.read_text())["servers"]) == {"ok", "my-files"}


def test_a_file_with_no_servers_says_so(tmp_path: Path) -> None:
    # It printed nothing at all and exited 0, as if something had happened.
    home = make_home(tmp_path)
    source = tmp_path / "mcp.json"
    source.write_text('{"mcpServers": {}}')
    run = home.keen("mcp", "import", str(source))
    assert run.code == 0, str(run)
    assert "lists no servers; nothing to import" in run.stdout, str(run)
    assert not home.config_path.exists()
