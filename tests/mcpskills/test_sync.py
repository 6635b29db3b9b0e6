"""Startup sync: every row of docs/architecture.md "Startup sync" (including what happens
when MCP fails), on real files in a temporary KEEN_HOME."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from helpers.mcpskills import NOW, simple_tools, status
from keen import paths
from keen._redact import redactor
from keen.cli._wording import with_remedy
from keen.errors import Remedy
from keen.mcp.types import ServerInfo, ServerState
from keen.mcpskills import (
    MARKER_FILE,
    SYNC_STATE_FILE,
    ServerSnapshot,
    SyncReport,
    sync_mcp_skills,
    sync_server,
)
from keen.skills import SkillsConfig, discover


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("KEEN_HOME", str(tmp_path / "home"))
    return paths.skills_dir()


def config_file(root: Path) -> dict[str, bool]:
    path = root / "config.json"
    return json.loads(path.read_text(encoding="utf-8"))["is_enabled"] if path.exists() else {}


def run(root: Path, *snapshots: ServerSnapshot, force: set[str] | None = None) -> SyncReport:
    """One startup: load the config from disk, sync, (the sync saves it)."""
    config = SkillsConfig.load(paths.skills_config_path())
    return sync_mcp_skills(
        list(snapshots), skills_root=root, skills_config=config, force_enable=force or set(), now=NOW
    )


def connected(name: str, n: int = 3, tag: str = "") -> ServerSnapshot:
    return ServerSnapshot(status(name), simple_tools(name, n, tag=tag), ServerInfo(name=name, version="1"))


def failed(name: str, state: ServerState, error: str = "connection refused") -> ServerSnapshot:
    return ServerSnapshot(status(name, state, last_error=error))


def marker(root: Path, server: str) -> dict[str, object]:
    return json.loads((root / f"mcp:{server}" / MARKER_FILE).read_text(encoding="utf-8"))


def test_connected_generates_and_leaves_absent_as_enabled(root: Path) -> None:
    report = run(root, connected("github"))
    entry = report.get("github")
    assert entry is not None
    assert (entry.action, entry.enabled, entry.state, entry.hint) == ("generated", True, "connected", "")
    assert entry.skill_path == str(root / "mcp:github")
    assert (root / "mcp:github" / "SKILL.md").is_file()
    assert "mcp:github" not in config_file(root)
    again = run(root, connected("github")).get("github")
    assert again is not None and again.action == "unchanged"
    assert [s.name for s in discover(root).enabled] == ["mcp:github"]


def test_explicit_disable_is_kept_across_syncs(root: Path) -> None:
    root.mkdir(parents=True)
    (root / "config.json").write_text(json.dumps({"is_enabled": {"mcp:github": False}}), encoding="utf-8")
    for tag in ("", " v2", " v2"):
        entry = run(root, connected("github", tag=tag)).get("github")
        assert entry is not None and entry.enabled is False
        assert entry.hint == "you disabled this skill" and entry.remedy is Remedy.ENABLE_SKILL
        assert "keen skills enable mcp:github" in with_remedy(entry.hint, entry.remedy, server="github")
        assert config_file(root) == {"mcp:github": False}
    assert (root / "mcp:github" / "SKILL.md").is_file()
    assert discover(root).enabled == []


@pytest.mark.parametrize(
    ("state", "remedy"),
    [
        (ServerState.DISCONNECTED, Remedy.RECONNECT),
        (ServerState.AUTH_REQUIRED, Remedy.SIGN_IN),
        (ServerState.AUTH_FAILED, Remedy.SIGN_IN),
        (ServerState.CONFIGURED, Remedy.RECONNECT),
    ],
)
def test_failure_states_disable_keep_files_and_come_back(
    root: Path, state: ServerState, remedy: Remedy
) -> None:
    run(root, connected("github"))
    skill_md = (root / "mcp:github" / "SKILL.md").read_bytes()
    entry = run(root, failed("github", state, "tools/list failed: boom")).get("github")
    assert entry is not None
    assert (entry.action, entry.enabled, entry.state) == ("disabled", False, state.value)
    assert entry.remedy is remedy
    assert "keen mcp connect github" in with_remedy(entry.hint, entry.remedy, server="github")
    assert config_file(root) == {"mcp:github": False}
    assert (root / "mcp:github" / "SKILL.md").read_bytes() == skill_md  # files kept
    meta = marker(root, "github")
    assert meta["status"] == state.value and meta["last_error"] == "tools/list failed: boom"
    assert discover(root).enabled == []
    back = run(root, connected("github")).get("github")
    assert back is not None and back.enabled and back.action == "unchanged"
    assert config_file(root) == {}  # the sync-made disable is undone, absent stays absent
    assert marker(root, "github")["status"] == "connected"


def test_tool_listing_failure_keeps_existing_files_disabled(root: Path) -> None:
    # The Manager reports a failed tools/list as a disconnected server with its error.
    run(root, connected("files", 4))
    entry = run(root, failed("files", ServerState.DISCONNECTED, "tools/list timed out after 30s")).get(
        "files"
    )
    assert entry is not None and entry.action == "disabled" and not entry.enabled
    assert sorted(p.name for p in (root / "mcp:files" / "schemas").iterdir()) == [
        f"tool_{i:04d}.json" for i in range(4)
    ]
    assert marker(root, "files")["last_error"] == "tools/list timed out after 30s"


def test_never_connected_server_gets_no_files(root: Path) -> None:
    entry = run(root, failed("new", ServerState.DISCONNECTED)).get("new")
    assert entry is not None and entry.skill_path is None and entry.action == "disabled"
    assert not (root / "mcp:new").exists()
    assert config_file(root) == {"mcp:new": False}
    assert run(root, connected("new")).get("new") == replace(
        entry,
        state="connected",
        action="generated",
        enabled=True,
        hint="",
        skill_path=str(root / "mcp:new"),
        remedy=None,
        error="",
    )
    assert config_file(root) == {}


def test_previous_explicit_true_is_restored(root: Path) -> None:
    root.mkdir(parents=True)
    (root / "config.json").write_text(json.dumps({"is_enabled": {"mcp:srv": True}}), encoding="utf-8")
    run(root, failed("srv", ServerState.AUTH_REQUIRED))
    assert config_file(root) == {"mcp:srv": False}
    state = json.loads((root / SYNC_STATE_FILE).read_text(encoding="utf-8"))
    assert state["auto_disabled"]["mcp:srv"]["previous"] is True
    run(root, connected("srv"))
    assert config_file(root) == {"mcp:srv": True}
    assert json.loads((root / SYNC_STATE_FILE).read_text(encoding="utf-8"))["auto_disabled"] == {}


@pytest.mark.parametrize(
    "content",
    ['{"format": 1, "auto_disabled": {"mcp:srv": {"previous": "yes"}}}', "{not json", '{"format": 9}'],
)
def test_an_unreadable_sync_state_is_ignored_with_a_warning(
    root: Path, content: str, caplog: pytest.LogCaptureFixture
) -> None:
    root.mkdir(parents=True)
    (root / SYNC_STATE_FILE).write_text(content, encoding="utf-8")
    with caplog.at_level("WARNING", logger="keen.mcpskills"):
        run(root, failed("srv", ServerState.AUTH_REQUIRED))
    assert any("ignoring unreadable" in r.getMessage() for r in caplog.records)
    assert config_file(root) == {"mcp:srv": False}
    state = json.loads((root / SYNC_STATE_FILE).read_text(encoding="utf-8"))  # rewritten whole
    assert state == {"format": 1, "auto_disabled": {"mcp:srv": {"previous": None, "reason": "auth_required"}}}
    run(root, connected("srv"))
    assert config_file(root) == {}


def test_a_marker_with_only_its_identity_is_still_keens(root: Path) -> None:
    run(root, connected("srv"))
    target = (root / "mcp:srv").resolve()
    (target / MARKER_FILE).write_text(
        json.dumps({"managed_by": "keen-mcp", "server": "srv"}), encoding="utf-8"
    )
    entry = run(root, connected("srv")).get("srv")
    assert entry is not None and entry.action == "generated"  # regenerated, not kept as unmanaged
    assert marker(root, "srv")["tool_count"] == 3


def test_server_disabled_in_configs_json(root: Path) -> None:
    run(root, connected("srv"))
    off = ServerSnapshot(status("srv", ServerState.CONFIGURED, enabled=False))
    entry = run(root, off).get("srv")
    assert entry is not None and entry.action == "disabled" and not entry.enabled
    assert "configs.json" in entry.hint and entry.remedy is Remedy.ENABLE_SERVER
    # One wording with keen mcp get / tools: the command that enables it.
    assert with_remedy(entry.hint, entry.remedy, server="srv").endswith("run: keen mcp enable srv")
    assert marker(root, "srv")["status"] == "disabled" and (root / "mcp:srv" / "SKILL.md").is_file()
    assert run(root, connected("srv")).get("srv") is not None and config_file(root) == {}


def test_force_enable_overrides_user_disable_when_connected(root: Path) -> None:
    root.mkdir(parents=True)
    (root / "config.json").write_text(
        json.dumps({"is_enabled": {"mcp:a": False, "mcp:b": False}}), encoding="utf-8"
    )
    report = run(root, connected("a"), failed("b", ServerState.AUTH_FAILED), force={"a", "b"})
    a, b = report.get("a"), report.get("b")
    assert a is not None and a.enabled and a.action == "generated"
    assert b is not None and not b.enabled and b.action == "disabled"  # `keen mcp connect` failed: stays off
    assert config_file(root) == {"mcp:a": True, "mcp:b": False}


def test_removed_server_is_forgotten_and_its_dir_deleted(root: Path) -> None:
    run(root, connected("gone"), connected("stays"), failed("old", ServerState.DISCONNECTED))
    root.joinpath("config.json").write_text(
        json.dumps(
            {"is_enabled": {"mcp:gone": True, "mcp:old": False, "mcp:cfgonly": False, "notes": False}}
        ),
        encoding="utf-8",
    )
    debris = root / ".mcp:crashed.0123456789ab.tmp"
    debris.mkdir()
    report = run(root, connected("stays"))
    actions = {e.server: (e.state, e.action, e.enabled) for e in report.entries}
    assert actions == {
        "cfgonly": ("removed", "removed", False),
        "crashed": ("removed", "removed", False),
        "gone": ("removed", "removed", False),
        "old": ("removed", "removed", False),
        "stays": ("connected", "unchanged", True),
    }
    assert sorted(p.name for p in root.iterdir() if "gone" in p.name or "crashed" in p.name) == []
    assert config_file(root) == {"notes": False}  # other skills' settings untouched
    assert json.loads((root / SYNC_STATE_FILE).read_text(encoding="utf-8"))["auto_disabled"] == {}


def test_unmanaged_mcp_dir_is_never_deleted(root: Path) -> None:
    mine = root / "mcp:x"
    mine.mkdir(parents=True)
    (mine / "SKILL.md").write_text("---\nname: mcp:x\ndescription: my notes\n---\nbody\n", encoding="utf-8")
    (root / "config.json").write_text(json.dumps({"is_enabled": {"mcp:x": True}}), encoding="utf-8")
    report = run(root)
    entry = report.get("x")
    assert entry is not None and entry.action == "kept_unmanaged" and entry.state == "removed"
    assert (mine / "SKILL.md").is_file() and config_file(root) == {"mcp:x": True}
    # And a configured server whose name is taken by the user's dir: reported, not overwritten.
    clash = run(root, connected("x")).get("x")
    assert clash is not None and clash.action == "kept_unmanaged" and "not generated by Keen" in clash.error
    assert sorted(p.name for p in mine.iterdir()) == ["SKILL.md"]


def test_secret_in_last_error_never_written(root: Path) -> None:
    secret = "sk-live-123456"
    redactor.add(secret)
    run(root, connected("srv"))
    report = run(root, failed("srv", ServerState.AUTH_FAILED, f"401: Authorization: Bearer {secret}"))
    entry = report.get("srv")
    assert entry is not None and secret not in json.dumps(report.to_dict())
    files = [p for p in root.parent.rglob("*") if p.is_file()]
    assert any(p.name == MARKER_FILE for p in files)
    for path in files:
        assert secret.encode() not in path.read_bytes(), path
    assert "[REDACTED]" in str(marker(root, "srv")["last_error"])


def test_report_to_dict_is_json(root: Path) -> None:
    bad = ServerSnapshot(status("bad"), [replace(t, name="../x") for t in simple_tools("bad", 1)])
    report = run(root, connected("ok"), bad, failed("down", ServerState.AUTH_REQUIRED))
    data = json.loads(json.dumps(report.to_dict()))
    assert data["skills_root"] == str(root)
    by_server = {e["server"]: e for e in data["servers"]}
    assert [e["server"] for e in data["servers"]] == ["bad", "down", "ok"]
    assert by_server["bad"]["rejected"] == ["../x"] and by_server["bad"]["skill"] == "mcp:bad"
    assert by_server["down"]["remedy"] == "sign_in" and by_server["down"]["enabled"] is False
    assert set(by_server["ok"]) == {
        "server",
        "skill",
        "state",
        "action",
        "enabled",
        "hint",
        "skill_path",
        "rejected",
        "rejected_count",
        "error",
        "remedy",
    }
    assert by_server["bad"]["rejected_count"] == 1


def test_sync_server_for_connect_leaves_other_skills_alone(root: Path) -> None:
    run(root, connected("a"), connected("b"))
    config = SkillsConfig.load(paths.skills_config_path())
    config.set_enabled("mcp:a", False)  # the user's own disable
    config.save()
    # `keen mcp connect a` fails: disabled the sync way; b untouched, nothing removed.
    down = sync_server(
        failed("a", ServerState.AUTH_FAILED), skills_root=root, skills_config=config, force_enable=True
    )
    assert (down.action, down.enabled) == ("disabled", False)
    assert (root / "mcp:b" / "SKILL.md").is_file() and config_file(root) == {"mcp:a": False}
    # It succeeds: regenerated and enabled despite the earlier user disable.
    up = sync_server(connected("a", tag=" new"), skills_root=root, skills_config=config, force_enable=True)
    assert (up.action, up.enabled) == ("generated", True)
    assert config_file(root) == {"mcp:a": True} and (root / "mcp:b").is_symlink()
