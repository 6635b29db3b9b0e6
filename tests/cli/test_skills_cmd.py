"""`keen skills list|enable|disable|show` on a temporary KEEN_HOME (docs/architecture.md "Enabling and disabling")."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

from helpers.forkserver import forked
from keen import paths
from keen.cli.skills_cmd import app
from keen.skills import MARKER_FILE

runner = CliRunner()
WIDE = {"COLUMNS": "250"}


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("KEEN_HOME", str(tmp_path / "home"))
    skills = paths.skills_dir()
    skills.mkdir(parents=True)
    gh = skills / "mcp:github"
    gh.mkdir()
    (gh / "SKILL.md").write_text(
        "---\nname: mcp:github\ndescription: Use this skill to interact with the `github` MCP server.\n---\n"
        "## Available tools\n| Tool | Description |\n",
        encoding="utf-8",
    )
    (gh / MARKER_FILE).write_text(
        json.dumps({"managed_by": "keen-mcp", "server": "github"}), encoding="utf-8"
    )
    notes = skills / "notes"
    notes.mkdir()
    (notes / "SKILL.md").write_text(
        "---\ndescription: '[draft] Take notes.'\n---\nWrite $1.\n", encoding="utf-8"
    )
    broken = skills / "broken"
    broken.mkdir()
    (broken / "SKILL.md").write_text("no frontmatter here\n", encoding="utf-8")
    return skills


def test_list_json_has_exactly_the_keys(root: Path) -> None:
    paths.skills_config_path().write_text('{"is_enabled": {"notes": false}}', encoding="utf-8")
    result = runner.invoke(app, ["list", "--json"])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)
    assert rows == [
        {
            "name": "mcp:github",
            "description": "Use this skill to interact with the `github` MCP server.",
            "enabled": True,
            "path": str(root / "mcp:github"),
            "managed": True,
        },
        {
            "name": "notes",
            "description": "[draft] Take notes.",
            "enabled": False,
            "path": str(root / "notes"),
            "managed": False,
        },
    ]
    assert all(list(row) == ["name", "description", "enabled", "path", "managed"] for row in rows)
    assert "broken" not in result.stdout
    assert "warning: skill 'broken' skipped" in result.stderr
    assert "must start with YAML frontmatter" in result.stderr


def test_list_table(root: Path) -> None:
    result = runner.invoke(app, ["list"], env=WIDE)
    assert result.exit_code == 0, result.output
    assert "mcp:github" in result.stdout and "notes" in result.stdout
    assert "[draft] Take notes." in result.stdout  # not eaten as rich markup
    assert str(root / "mcp:github") in result.stdout
    assert "broken" not in result.stdout and "broken" in result.stderr


def test_list_empty(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KEEN_HOME", str(tmp_path / "empty"))
    result = runner.invoke(app, ["list", "--json"])
    assert result.exit_code == 0 and json.loads(result.stdout) == []
    result = runner.invoke(app, ["list"], env=WIDE)
    assert result.exit_code == 0 and "No skills in" in result.stdout


def test_disable_then_enable(root: Path) -> None:
    config = paths.skills_config_path()
    result = runner.invoke(app, ["disable", "mcp:github"])
    assert result.exit_code == 0, result.output
    assert "Disabled skill mcp:github." in result.stdout
    assert json.loads(config.read_text(encoding="utf-8")) == {"is_enabled": {"mcp:github": False}}
    listed = json.loads(runner.invoke(app, ["list", "--json"]).stdout)
    assert [r["enabled"] for r in listed] == [False, True]

    result = runner.invoke(app, ["enable", "mcp:github"])
    assert result.exit_code == 0, result.output
    assert json.loads(config.read_text(encoding="utf-8")) == {"is_enabled": {"mcp:github": True}}


def test_disable_broken_skill_warns_but_works(root: Path) -> None:
    result = runner.invoke(app, ["disable", "broken"])
    assert result.exit_code == 0, result.output
    assert "stays out of the catalog" in result.stderr
    assert json.loads(paths.skills_config_path().read_text(encoding="utf-8"))["is_enabled"] == {
        "broken": False
    }


@pytest.mark.parametrize("command", ["enable", "disable", "show"])
def test_unknown_name_exits_2(root: Path, command: str) -> None:
    result = runner.invoke(app, [command, "nope"])
    assert result.exit_code == 2
    assert "no skill named 'nope'" in result.stderr and "keen skills list" in result.stderr
    assert result.stdout == ""
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert not paths.skills_config_path().exists()


@pytest.mark.parametrize(
    ("typed", "meant"), [("github", "mcp:github"), ("mcp:gihtub", "mcp:github"), ("note", "notes")]
)
def test_a_server_name_or_a_typo_names_the_skill_meant(root: Path, typed: str, meant: str) -> None:
    # `keen skills disable github` (the server, not its skill mcp:github) only said "no skill
    # named 'github'; run keen skills list".
    result = runner.invoke(app, ["disable", typed])
    assert result.exit_code == 2
    assert f"no skill named {typed!r}" in result.stderr and f"did you mean {meant}?" in result.stderr
    assert not paths.skills_config_path().exists()


def test_broken_config_exits_2_and_is_kept(root: Path) -> None:
    config = paths.skills_config_path()
    config.write_text('{"is_enabled": ', encoding="utf-8")
    for args in (["list"], ["list", "--json"], ["disable", "notes"]):
        result = runner.invoke(app, args)
        assert result.exit_code == 2, args
        assert "invalid JSON" in result.stderr and str(config) in result.stderr
        assert "Traceback" not in result.output
    assert config.read_text(encoding="utf-8") == '{"is_enabled": '


def test_show_prints_skill_md(root: Path) -> None:
    result = runner.invoke(app, ["show", "mcp:github"])
    assert result.exit_code == 0, result.output
    assert result.stdout == (root / "mcp:github" / "SKILL.md").read_text(encoding="utf-8")
    result = runner.invoke(app, ["show", "broken"])
    assert result.exit_code == 0
    assert result.stdout == "no frontmatter here\n"
    assert "warning: skill 'broken' skipped" in result.stderr


def test_real_process_honours_keen_home(root: Path) -> None:
    env = {**os.environ, "KEEN_HOME": str(root.parent)}
    code = "from keen.cli.skills_cmd import app; app()"
    # Forked from the worker's warm process (tests/helpers/forkserver.py): a process of its
    # own with this environment, without a new interpreter's imports.
    ok = subprocess.run(
        forked("-c", code, "list", "--json"), env=env, capture_output=True, text=True, check=False
    )
    assert ok.returncode == 0, ok.stderr
    assert [r["name"] for r in json.loads(ok.stdout)] == ["mcp:github", "notes"]
    bad = subprocess.run(
        forked("-c", code, "enable", "nope"), env=env, capture_output=True, text=True, check=False
    )
    assert bad.returncode == 2
    assert bad.stderr.startswith("error: no skill named 'nope'") and "Traceback" not in bad.stderr
