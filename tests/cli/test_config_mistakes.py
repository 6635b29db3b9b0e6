"""What a user's own hand does to configs.json and the values typed at ``keen mcp``: each
mistake gets an error that says what to fix, and every edit keeps the entries it was given
(README "Configure servers"). Real files in a temporary ``KEEN_HOME``, ``keen`` run as the
console script's ``app``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers.cli import Home, make_home
from keen.mcp.config.servers import MOST_LEVELS


@pytest.fixture
def home(tmp_path: Path) -> Home:
    return make_home(tmp_path)


def _nested(levels: int) -> str:
    return "[" * levels + "]" * levels


@pytest.mark.parametrize("levels", [MOST_LEVELS + 1, 5000])
def test_json_nested_too_deep_is_refused_with_its_fix_and_kept(home: Home, levels: int) -> None:
    # Below Python's parser limit (about a thousand) the checks after it ran out of recursion;
    # above it the parser itself did: both were "internal error".
    text = '{"version": 1, "servers": {"a": {"command": "true", "args": ' + _nested(levels) + "}}}"
    home.config_path.parent.mkdir(parents=True)
    home.config_path.write_text(text)
    for args in (("mcp", "list"), ("mcp", "add", "b", "--", "true"), ("mcp", "disable", "a")):
        run = home.keen(*args)
        assert run.code == 2, str(run)
        assert f"nested more than {MOST_LEVELS} levels deep" in run.stderr, str(run)
        assert "internal error" not in run.stderr
    assert home.config_path.read_text() == text
    imported = home.keen("mcp", "import", str(home.config_path))
    assert imported.code == 2 and f"nested more than {MOST_LEVELS} levels deep" in imported.stderr, str(
        imported
    )


@pytest.mark.parametrize("levels", [MOST_LEVELS + 1, 5000])
def test_add_json_nested_too_deep_says_so(home: Home, levels: int) -> None:
    entry = '{"command": "true", "args": ' + _nested(levels) + "}"
    run = home.keen("mcp", "add-json", "a", entry)
    assert run.code == 2 and "nested" in run.stderr and "internal error" not in run.stderr, str(run)
    assert not home.config_path.exists()


def test_json_nested_as_deep_as_allowed_still_loads(home: Home) -> None:
    # The root, "servers" and the entry are three levels: "args" may nest the rest.
    args = json.loads(_nested(MOST_LEVELS - 3))
    home.write({"a": {"command": "true", "args": args}})
    run = home.keen("mcp", "get", "a")
    assert run.code == 0, str(run)
