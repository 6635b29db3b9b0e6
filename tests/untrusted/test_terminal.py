"""Nothing raw on the terminal.

A hostile raw JSON-RPC server puts terminal control sequences (OSC 52 clipboard write,
screen clear, colours, NUL, a one-byte CSI, a bidi override) and ``:emoji:`` codes into
tool names, descriptions, results, errors and stderr. The CLI shows them escaped and
literal; ``--json`` stays exact JSON; a 2 MB result prints capped with a note, and
``--json`` / ``--output`` give all of it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from helpers.hostile import CliRun, hostile_entry, keen_cli

OSC52 = "\x1b]52;c;SGVsbG8=\x07"
CLEAR = "\x1b[2J\x1b[H"
RED = "\x1b[31m"
HOSTILE = f"{OSC52}{CLEAR}{RED}nul\x00csi\x9b1mbidi\u202eevil"
RAW = ("\x1b", "\x00", "\x07", "\x9b", "\u202e")
NAMESPACE = "urn:schemas-microsoft-com:office:office"
BIG = "0123456789abcdef" * (2 * 1024 * 1024 // 16)


def _assert_clean(run: CliRun) -> None:
    for ch in RAW:
        assert ch not in run.stdout and ch not in run.stderr, f"raw {ch!r} reached the terminal\n{run!r}"


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("terminal")
    keen_home = tmp / "keen-home"
    (keen_home / "mcp").mkdir(parents=True)
    text = f"before {HOSTILE} after :office: {NAMESPACE}"
    spec: dict[str, Any] = {
        "tools": [
            {
                "name": "ctl",
                "description": f"Describes :office: {HOSTILE}",
                "inputSchema": {"type": "object"},
            },
            {"name": f"na{RED}me", "description": "odd name", "inputSchema": {"type": "object"}},
            {"name": "big", "description": "A 2 MB result.", "inputSchema": {"type": "object"}},
            {"name": "err", "description": "A JSON-RPC error.", "inputSchema": {"type": "object"}},
            {"name": "iserr", "description": "An isError result.", "inputSchema": {"type": "object"}},
        ],
        "results": {
            "ctl": {"content": [{"type": "text", "text": text}]},
            "big": {"content": [{"type": "text", "text": BIG}]},
            "iserr": {"content": [{"type": "text", "text": f"failed {HOSTILE}"}], "isError": True},
        },
        "errors": {"err": {"code": -32050, "message": f"boom {HOSTILE} :office:"}},
        "stderr_at_start": f"stderr says {HOSTILE}",
    }
    servers = {
        "h": hostile_entry(tmp / "h.json", spec),
        "dead": hostile_entry(tmp / "dead.json", {"stderr_at_start": f"dying {HOSTILE}", "exit_at_start": 2}),
    }
    (keen_home / "mcp" / "configs.json").write_text(json.dumps({"version": 1, "servers": servers}))
    return keen_home


def test_tool_table_escapes_names_and_descriptions(home: Path) -> None:
    run = keen_cli("mcp", "tools", "h", keen_home=home)
    assert run.code == 0, run
    _assert_clean(run)
    assert "\\x1b]52;c;SGVsbG8=\\x07" in run.stdout
    assert "na\\x1b[31mme" in run.stdout
    assert ":office:" in run.stdout and "\N{OFFICE BUILDING}" not in run.stdout


def test_tools_json_is_exact_and_terminal_safe(home: Path) -> None:
    run = keen_cli("mcp", "tools", "h", "--json", keen_home=home)
    assert run.code == 0, run
    _assert_clean(run)
    tools = {t["name"]: t for t in json.loads(run.stdout)}
    assert tools["ctl"]["description"] == f"Describes :office: {HOSTILE}"
    assert f"na{RED}me" in tools


def test_call_result_is_escaped_and_literal(home: Path) -> None:
    run = keen_cli("mcp", "call", "h", "ctl", "--yes", keen_home=home)
    assert run.code == 0, run
    _assert_clean(run)
    assert NAMESPACE in run.stdout and "\N{OFFICE BUILDING}" not in run.stdout
    assert ":office: " in run.stdout and "\\x00csi\\x9b1m" in run.stdout
    exact = keen_cli("mcp", "call", "h", "ctl", "--yes", "--json", keen_home=home)
    _assert_clean(exact)
    assert json.loads(exact.stdout)["content"][0]["text"].startswith(f"before {HOSTILE}")


def test_errors_and_tool_errors_are_escaped(home: Path) -> None:
    err = keen_cli("mcp", "call", "h", "err", "--yes", keen_home=home)
    assert err.code == 1, err  # the server failed the call (a JSON-RPC error): 1, as for isError
    _assert_clean(err)
    assert "boom \\x1b]52" in err.stderr and ":office:" in err.stderr
    tool_error = keen_cli("mcp", "call", "h", "iserr", "--yes", keen_home=home)
    assert tool_error.code == 1, tool_error
    _assert_clean(tool_error)
    assert "failed \\x1b]52" in tool_error.stderr


def test_status_and_logs_are_escaped(home: Path) -> None:
    for args in (("mcp", "list"), ("-v", "mcp", "list"), ("mcp", "list", "--json"), ("mcp", "sync")):
        run = keen_cli(*args, keen_home=home)
        _assert_clean(run)
    listed = {s["name"]: s for s in json.loads(keen_cli("mcp", "list", "--json", keen_home=home).stdout)}
    assert f"dying {HOSTILE}" in listed["dead"]["last_error"]  # exact in JSON, escaped on screen


def test_big_result_is_capped_with_a_way_to_get_it_all(home: Path, tmp_path: Path) -> None:
    run = keen_cli("mcp", "call", "h", "big", "--yes", keen_home=home)
    assert run.code == 0
    assert len(run.stdout) < 70_000
    assert "more characters not shown" in run.stdout and "--output FILE" in run.stdout
    whole = keen_cli("mcp", "call", "h", "big", "--yes", "--json", keen_home=home)
    assert json.loads(whole.stdout)["content"][0]["text"] == BIG
    target = tmp_path / "result.txt"
    saved = keen_cli("mcp", "call", "h", "big", "--yes", "--output", str(target), keen_home=home)
    assert saved.code == 0 and len(saved.stdout) == 0, saved
    assert target.read_text() == BIG
    assert f"{len(BIG):,} characters" in saved.stderr
