"""Generated MCP skill dirs on real files (docs/architecture.md "Generated skills").

Goldens live in ``tests/golden/mcpskills/<case>/``; regenerate them with
``KEEN_UPDATE_GOLDEN=1 .venv/bin/python -m pytest tests/mcpskills/test_generate.py``
and review the diff before committing.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import pytest
import yaml

from helpers.mcpskills import NOW, read_tree, simple_tools, status
from keen import skills as skills_pkg
from keen._redact import redactor
from keen.capabilities import Catalog
from keen.errors import SkillError
from keen.mcp.types import ServerInfo, ServerState, Tool
from keen.mcpskills import MANAGED_BY, MARKER_FILE, _swap, delete_skill, generate_skill
from keen.skills import SkillsConfig, discover, split_frontmatter
from keen.trust.fingerprint import fingerprint
from keen.trust.pins import PinStore, trust
from keen.trust.skill_trust import skill_annotations_trusted

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "mcpskills"


def github_case() -> tuple[str, list[Tool], ServerInfo | None]:
    s = "github"
    tools = [
        Tool(
            s,
            "create_issue",
            "Create a GitHub issue in a repository. The caller needs push access.\nSecond line is ignored.",
            {
                "type": "object",
                "properties": {
                    "owner": {"type": "string"},
                    "repo": {"type": "string"},
                    "title": {"type": "string"},
                    "body": {"type": "string"},
                },
                "required": ["owner", "repo", "title"],
            },
            title="Create issue",
            annotations={"destructiveHint": False, "readOnlyHint": False},
        ),
        Tool(
            s, "list_issues", "List issues | filter by state | paginate", {"type": "object", "properties": {}}
        ),
        Tool(
            s,
            "get_issue",
            "Get one issue by number.",
            {"type": "object", "properties": {"number": {"type": "integer"}}, "required": ["number"]},
            annotations={"readOnlyHint": True},
            output_schema={"type": "object", "properties": {"title": {"type": "string"}}},
        ),
        Tool(s, "search/code", "Search code across repositories.", {"type": "object"}),
        Tool(s, "ping", ""),
        Tool(
            s, "translate", "把文本翻译成英文。第二句不显示。", {"type": "object", "properties": {"text": {}}}
        ),
        Tool(s, "long_one", "word " * 80, {"type": "object"}),
        Tool(s, "../escape", "Tries to leave the schemas dir.", {}),
        Tool(s, "a\\b", "Backslash name.", {}),
    ]
    info = ServerInfo(
        name="github-mcp-server",
        version="1.2.0",
        title="GitHub",
        instructions="Work with GitHub: issues, pull requests and code search.\nAlways pass owner and repo.",
    )
    return s, tools, info


def plain_case() -> tuple[str, list[Tool], ServerInfo | None]:
    return "plain", simple_tools("plain", 3), None


CASES = {"github": github_case, "plain": plain_case}


@pytest.mark.parametrize("case", sorted(CASES))
def test_generation_matches_golden_bytes(tmp_path: Path, case: str) -> None:
    server, tools, info = CASES[case]()
    report = generate_skill(tmp_path / "skills", status(server), tools, info=info, now=NOW)
    produced = read_tree(report.skill_path)
    expected_dir = GOLDEN / case
    if os.environ.get("KEEN_UPDATE_GOLDEN") == "1":
        shutil.rmtree(expected_dir, ignore_errors=True)
        for rel, data in produced.items():
            (expected_dir / rel).parent.mkdir(parents=True, exist_ok=True)
            (expected_dir / rel).write_bytes(data)
    expected = read_tree(expected_dir)
    assert sorted(produced) == sorted(expected)
    for rel in expected:
        assert produced[rel] == expected[rel], f"{rel} differs from the golden file"


def test_the_golden_markers_fingerprints_are_what_the_catalog_judges_a_pin_by(tmp_path: Path) -> None:
    # The schema file of get_issue leaves its outputSchema out; the marker's fingerprint
    # holds it: a pin reviewed with another outputSchema is not trusted offline.
    server, tools, _ = github_case()
    skills = tmp_path / "skills"
    shutil.copytree(GOLDEN / "github", skills / "mcp:github")
    get_issue = next(t for t in tools if t.name == "get_issue")
    marker = json.loads((skills / "mcp:github" / MARKER_FILE).read_text(encoding="utf-8"))
    assert marker["fingerprints"] == {"get_issue": fingerprint(get_issue)}
    store = PinStore(tmp_path / "pins")

    def read_only() -> bool:
        catalog = Catalog.from_skills_dir(skills, annotations_trusted=skill_annotations_trusted(store=store))
        return catalog.get("mcp__github__get_issue").risk.read_only

    trust(server, [get_issue], store=store, by_user=True)
    assert read_only() is True
    other = replace(get_issue, output_schema={"type": "object", "properties": {"body": {"type": "string"}}})
    trust(server, [other], store=store, by_user=True)
    assert read_only() is False


def test_generation_is_order_independent_and_reproducible(tmp_path: Path) -> None:
    server, tools, info = github_case()
    one = generate_skill(tmp_path / "a", status(server), tools, info=info, now=NOW)
    two = generate_skill(tmp_path / "b", status(server), list(reversed(tools)), info=info, now=NOW)
    assert read_tree(one.skill_path) == read_tree(two.skill_path)
    assert one.tools_hash == two.tools_hash


def test_skill_md_contents_and_schema_shape(tmp_path: Path) -> None:
    server, tools, info = github_case()
    report = generate_skill(tmp_path / "skills", status(server), tools, info=info, now=NOW)
    skill_dir = report.skill_path
    front, body = split_frontmatter((skill_dir / "SKILL.md").read_text(encoding="utf-8"))
    assert front is not None
    meta = yaml.safe_load(front)
    assert meta == {"name": "mcp:github", "description": report.description}
    assert report.description.startswith("Work with GitHub: issues")
    assert len(report.description) <= 100 and "\n" not in report.description
    assert "2026-05-21T12:00:00Z" in body
    assert "call_mcp_tool" in body and '"server": "github"' in body
    assert "| Tool | Description | Schema |" in body
    assert "| create_issue | Create a GitHub issue in a repository. | schemas/create_issue.json |" in body
    assert r"| list_issues | List issues \| filter by state \| paginate | schemas/list_issues.json |" in body
    assert "| search/code | Search code across repositories. | schemas/search/code.json |" in body
    assert "| translate | 把文本翻译成英文。 | schemas/translate.json |" in body
    long_row = next(line for line in body.splitlines() if line.startswith("| long_one |"))
    cell = long_row.split(" | ")[1]
    assert cell.endswith("…") and len(cell) <= 120
    schema = json.loads((skill_dir / "schemas" / "create_issue.json").read_text(encoding="utf-8"))
    assert schema == {
        "server": "github",
        "name": "create_issue",
        "title": "Create issue",
        "description": tools[0].description,
        "inputSchema": tools[0].input_schema,
        "annotations": {"destructiveHint": False, "readOnlyHint": False},
    }
    ping = json.loads((skill_dir / "schemas" / "ping.json").read_text(encoding="utf-8"))
    assert ping == {"server": "github", "name": "ping", "description": "", "inputSchema": {}}
    marker = json.loads((skill_dir / MARKER_FILE).read_text(encoding="utf-8"))
    assert marker["managed_by"] == "keen-mcp" and marker["server"] == "github"
    assert marker["configured"] is True and marker["status"] == "connected"
    assert marker["tool_count"] == len(tools) and marker["schema_count"] == len(tools) - 2
    assert marker["tools_hash"] == report.tools_hash and marker["tools_hash"].startswith("sha256:")
    assert marker["last_successful_refresh"] == marker["generated_at"] == "2026-05-21T12:00:00Z"
    assert marker["last_error"] == "" and marker["format"] == 1


HOSTILE = [
    "../x",
    "/etc/passwd",
    "a\\b",
    "a//b",
    "a/./b",
    "a\x00b",
    "",
    "a/",
    "..",
    "x/../../y",
    "t\tab",
    "\u202eevil",
]


def test_hostile_names_rejected_good_ones_written(tmp_path: Path) -> None:
    good = ["ok", "nested/deep/tool", "dots.in.name", ".hidden_ok"]
    tools = [Tool("srv", name, f"tool {i}", {"type": "object"}) for i, name in enumerate(HOSTILE + good)]
    root = tmp_path / "skills"
    report = generate_skill(root, status("srv"), tools, now=NOW)
    assert sorted(r.name for r in report.rejected) == sorted(HOSTILE)
    assert report.schema_count == len(good)
    skill_dir = report.skill_path.resolve()
    schemas = sorted(
        p.relative_to(skill_dir / "schemas").as_posix() for p in (skill_dir / "schemas").rglob("*.json")
    )
    assert schemas == sorted(f"{n}.json" for n in good)
    # Nothing escaped: every file in tmp_path is the lock or inside the versioned skill dir.
    outside = [p for p in tmp_path.rglob("*") if p.is_file() and skill_dir not in p.parents]
    assert [p.name for p in outside] == [".keen-mcp.lock"]
    everything = b"".join(read_tree(skill_dir).values())
    assert b"\x00" not in everything and "\u202e".encode() not in everything and b"\t" not in everything
    text = (skill_dir / "SKILL.md").read_text(encoding="utf-8")
    assert "## Skipped tools" in text and r"a\u0000b" in text and "../x" in text
    assert "| ok | tool" in text and "| nested/deep/tool |" in text


def test_path_collisions_and_duplicates_are_deterministic(tmp_path: Path) -> None:
    tools = [
        Tool("srv", "x", "file x", {"type": "object"}),
        Tool("srv", "x.json/y", "needs a folder named x.json", {"type": "object"}),
        Tool("srv", "dup", "first description", {"type": "object"}),
        Tool("srv", "dup", "another description", {"type": "object"}),
    ]
    one = generate_skill(tmp_path / "a", status("srv"), tools, now=NOW)
    two = generate_skill(tmp_path / "b", status("srv"), list(reversed(tools)), now=NOW)
    assert read_tree(one.skill_path) == read_tree(two.skill_path)
    reasons = {r.name: r.reason for r in one.rejected}
    assert set(reasons) == {"x.json/y", "dup"}
    assert "collides" in reasons["x.json/y"] and "more than once" in reasons["dup"]
    kept = json.loads((one.skill_path / "schemas" / "dup.json").read_text(encoding="utf-8"))
    assert kept["description"] == "another description"  # smallest canonical JSON wins, whatever the order


def test_table_capped_at_1000_rows_all_schemas_written(tmp_path: Path) -> None:
    report = generate_skill(
        tmp_path / "skills", status("big"), simple_tools("big", 1200), now=NOW, fsync=False
    )
    text = (report.skill_path / "SKILL.md").read_text(encoding="utf-8")
    rows = [line for line in text.splitlines() if line.startswith("| tool_")]
    assert len(rows) == 1000 and rows[-1].startswith("| tool_0999 |")
    assert "200 more tools are not listed" in text and "`schemas/`" in text
    assert len(list((report.skill_path / "schemas").glob("*.json"))) == 1200
    assert (report.table_rows, report.omitted_rows, report.schema_count) == (1000, 200, 1200)
    assert report.description.endswith(", … (1200).")


def test_unchanged_keeps_files_and_updates_marker(tmp_path: Path) -> None:
    root = tmp_path / "skills"
    tools = simple_tools("srv", 5)
    first = generate_skill(root, status("srv"), tools, now=NOW)
    version = first.skill_path.resolve()
    before = read_tree(first.skill_path)
    later = replace(status("srv"), last_refresh_at=NOW + timedelta(hours=1))
    second = generate_skill(root, later, list(reversed(tools)), now=NOW + timedelta(hours=1))
    assert second.action == "unchanged"
    assert second.skill_path.resolve() == version
    after = read_tree(second.skill_path)
    assert (
        after["SKILL.md"] == before["SKILL.md"]
        and after["schemas/tool_0001.json"] == before["schemas/tool_0001.json"]
    )
    marker = json.loads(after[MARKER_FILE])
    assert marker["last_successful_refresh"] == "2026-05-21T13:00:00Z"
    assert marker["generated_at"] == "2026-05-21T12:00:00Z"
    third = generate_skill(root, status("srv"), simple_tools("srv", 5, tag=" v2"), now=NOW)
    assert third.action == "generated" and third.skill_path.resolve() != version
    # The replaced version stays, whole, for readers that resolved it before the swap.
    assert (version / "SKILL.md").read_bytes() == before["SKILL.md"]
    assert sorted(p.name for p in root.iterdir() if p.name.startswith(".mcp:")) == sorted(
        [third.skill_path.resolve().name, version.name]
    )


def test_changed_server_info_regenerates(tmp_path: Path) -> None:
    root = tmp_path / "skills"
    tools = simple_tools("srv", 2)
    generate_skill(root, status("srv"), tools, info=ServerInfo(name="srv", version="1"), now=NOW)
    again = generate_skill(root, status("srv"), tools, info=ServerInfo(name="srv", version="2"), now=NOW)
    assert again.action == "generated"
    assert "srv 2." in (root / "mcp:srv" / "SKILL.md").read_text(encoding="utf-8")


def test_unmanaged_dir_is_never_overwritten_or_deleted(tmp_path: Path) -> None:
    root = tmp_path / "skills"
    user_dir = root / "mcp:github"
    user_dir.mkdir(parents=True)
    (user_dir / "SKILL.md").write_text(
        "---\nname: mcp:github\ndescription: mine\n---\nmine\n", encoding="utf-8"
    )
    with pytest.raises(SkillError, match="not generated by Keen"):
        generate_skill(root, status("github"), simple_tools("github", 2), now=NOW)
    assert delete_skill(root, "github") is False
    assert (user_dir / "SKILL.md").read_text(encoding="utf-8").endswith("mine\n")
    assert sorted(p.name for p in user_dir.iterdir()) == ["SKILL.md"]


def test_symlink_elsewhere_with_fake_marker_is_not_followed(tmp_path: Path) -> None:
    root = tmp_path / "skills"
    root.mkdir()
    precious = tmp_path / "precious"
    precious.mkdir()
    (precious / MARKER_FILE).write_text(
        json.dumps({"managed_by": MANAGED_BY, "server": "evil"}), encoding="utf-8"
    )
    (root / "mcp:evil").symlink_to(precious)
    assert delete_skill(root, "evil") is False
    with pytest.raises(
        SkillError, match=r"mcp:evil exists and is not generated by Keen \(it is a symlink to "
    ):
        generate_skill(root, status("evil"), simple_tools("evil", 1), now=NOW)
    assert (root / "mcp:evil").is_symlink() and (precious / MARKER_FILE).exists()


def test_delete_skill_removes_link_version_and_debris(tmp_path: Path) -> None:
    root = tmp_path / "skills"
    report = generate_skill(root, status("srv"), simple_tools("srv", 3), now=NOW)
    version = report.skill_path.resolve()
    debris = root / ".mcp:srv.0123456789ab.tmp"
    debris.mkdir()
    assert delete_skill(root, "srv") is True
    assert not os.path.lexists(report.skill_path) and not version.exists() and not debris.exists()
    assert delete_skill(root, "srv") is False
    with pytest.raises(SkillError, match="not a valid MCP server name"):
        delete_skill(root, "../etc")


def test_plain_managed_dir_from_older_layout_is_migrated(tmp_path: Path) -> None:
    root = tmp_path / "skills"
    old = root / "mcp:srv"
    (old / "schemas").mkdir(parents=True)
    (old / MARKER_FILE).write_text(json.dumps({"managed_by": MANAGED_BY, "server": "srv"}), encoding="utf-8")
    (old / "SKILL.md").write_text("---\nname: mcp:srv\ndescription: old\n---\n", encoding="utf-8")
    (old / "schemas" / "gone.json").write_text("{}", encoding="utf-8")
    report = generate_skill(root, status("srv"), simple_tools("srv", 2), now=NOW)
    assert report.skill_path.is_symlink()
    # The old plain dir stays as .old for its grace period (readers may be inside it).
    assert sorted(p.name for p in root.iterdir()) == [
        ".keen-mcp.lock",
        report.skill_path.resolve().name,
        report.skill_path.resolve().name + ".old",
        "mcp:srv",
    ]
    assert not (report.skill_path / "schemas" / "gone.json").exists()
    assert (report.skill_path / "schemas" / "tool_0001.json").is_file()


def test_secrets_never_written(tmp_path: Path) -> None:
    secret = "sk-live-123456"
    redactor.add(secret)
    root = tmp_path / "skills"
    failing = replace(status("srv"), last_error=f"Authorization: Bearer {secret} rejected; raw {secret}")
    generate_skill(root, failing, simple_tools("srv", 3), now=NOW)
    generate_skill(root, failing, simple_tools("srv", 3, tag=" v2"), now=NOW)
    files = [p for p in root.rglob("*") if p.is_file()]
    assert len(files) >= 5
    for path in files:
        assert secret.encode() not in path.read_bytes(), path
    marker = json.loads((root / "mcp:srv" / MARKER_FILE).read_text(encoding="utf-8"))
    assert "[REDACTED]" in marker["last_error"] and "rejected" in marker["last_error"]


@pytest.mark.parametrize(
    "instructions",
    [
        "Key: value # not a comment \"quoted\" 'single'",
        "- starts like a list",
        "first line\n---\nname: evil\ndescription: injected",
        "  {not: [yaml]}  & *alias ! %tag @at `tick`",
        "\u2028line separator\u0085next",
    ],
)
def test_description_is_one_safe_yaml_line(tmp_path: Path, instructions: str) -> None:
    info = ServerInfo(name="srv", instructions=instructions)
    report = generate_skill(tmp_path / "skills", status("srv"), simple_tools("srv", 2), info=info, now=NOW)
    front, _ = split_frontmatter((report.skill_path / "SKILL.md").read_text(encoding="utf-8"))
    assert front is not None and len(front.splitlines()) == 2
    meta = yaml.safe_load(front)
    assert meta["name"] == "mcp:srv" and meta["description"] == report.description
    assert "\n" not in report.description and len(report.description) <= 100
    assert "name: evil" not in front.splitlines()


def test_description_digest_without_server_info(tmp_path: Path) -> None:
    report = generate_skill(tmp_path / "skills", status("many"), simple_tools("many", 42), now=NOW)
    # No instructions nor title: the server is described by what its tools do.
    assert report.description.startswith("Tool number 0; Tool number 1; Tool number 2; Tool number 3.")
    assert "Tools: tool_0000, tool_0001," in report.description
    assert report.description.endswith(", … (42).") and len(report.description) <= 100
    empty = generate_skill(tmp_path / "skills", status("none"), [], now=NOW)
    assert empty.description == "The `none` MCP server. It lists no tools."
    assert "## Available tools (0)" in (empty.skill_path / "SKILL.md").read_text(encoding="utf-8")


def test_skill_discovery_sees_one_managed_skill(tmp_path: Path) -> None:
    root = tmp_path / "skills"
    generate_skill(root, status("srv"), simple_tools("srv", 2), now=NOW)
    second = generate_skill(root, status("srv"), simple_tools("srv", 2, tag=" v2"), now=NOW)
    (root / ".mcp:srv.0123456789ab.tmp").mkdir()  # debris: must stay invisible
    found = discover(root, config=SkillsConfig(root / "config.json"))
    assert [s.name for s in found.skills] == ["mcp:srv"] and found.problems == []
    skill = found.skills[0]
    assert skill.managed and skill.description == second.description and skill.path == root / "mcp:srv"
    assert (skills_pkg.MARKER_FILE, skills_pkg.MANAGED_BY) == (MARKER_FILE, MANAGED_BY)


EVERYTHING_INSTRUCTIONS = """# Everything Server – Server Instructions

Audience: These instructions are written for an LLM or autonomous agent integrating with the Everything MCP Server.
Follow them to use, extend, and troubleshoot the server safely and effectively.

## Cross-Feature Relationships

- Use `get-roots-list` to see client workspace roots before file operations
"""


def test_description_skips_instructions_about_their_audience(tmp_path: Path) -> None:
    # server-everything's own descriptions, in name order: the long second one no longer
    # leaves the first tool's words as the whole server's description.
    tools = [
        Tool("everything", "echo", "Echoes back the input string", {}),
        Tool(
            "everything",
            "get-annotated-message",
            "Demonstrates how annotations can be used to provide metadata about content.",
            {},
        ),
        Tool("everything", "get-sum", "Returns the sum of two numbers", {}),
    ]
    info = ServerInfo(name="everything", version="1", instructions=EVERYTHING_INSTRUCTIONS)
    report = generate_skill(tmp_path / "skills", status("everything"), tools, info=info, now=NOW)
    # Built from what all three tools do, not from the first tool's sentence.
    about = report.description.split(" Tools: ")[0].lower()
    assert all(word in about for word in ("annotated message", "echo", "sum")), report.description
    assert not about.startswith("echoes back the input string")
    assert "Audience" not in report.description and "instructions" not in report.description
    # Instructions that open with what the server does still win.
    info = ServerInfo(
        name="gh", version="1", instructions="Audience: agents.\nWork with GitHub issues and PRs."
    )
    gh = generate_skill(tmp_path / "skills", status("gh"), tools, info=info, now=NOW)
    assert gh.description.startswith("Work with GitHub issues and PRs.")


def test_invalid_server_name_is_refused(tmp_path: Path) -> None:
    bad = replace(status("x"), name="../x")
    with pytest.raises(SkillError, match="not a valid MCP server name"):
        generate_skill(tmp_path / "skills", bad, [], now=NOW)
    assert not (tmp_path / "skills").exists()


def test_status_of_generation_is_written(tmp_path: Path) -> None:
    st = replace(status("srv"), state=ServerState.CONNECTED, last_refresh_at=None)
    report = generate_skill(tmp_path / "skills", st, simple_tools("srv", 1), now=NOW + timedelta(minutes=5))
    marker = json.loads((report.skill_path / MARKER_FILE).read_text(encoding="utf-8"))
    assert marker["last_successful_refresh"] == "2026-05-21T12:05:00Z"


def test_migration_without_rename_exchange(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A kernel or filesystem without renameat2(RENAME_EXCHANGE): two renames, same end state.
    monkeypatch.setattr(_swap, "_exchange", lambda a, b: False)
    root = tmp_path / "skills"
    old = root / "mcp:srv"
    old.mkdir(parents=True)
    (old / MARKER_FILE).write_text(json.dumps({"managed_by": MANAGED_BY, "server": "srv"}), encoding="utf-8")
    report = generate_skill(root, status("srv"), simple_tools("srv", 2), now=NOW)
    assert report.skill_path.is_symlink() and (report.skill_path / "SKILL.md").is_file()
    # The old plain dir stays as .old for its grace period (readers may be inside it).
    assert sorted(p.name for p in root.iterdir()) == [
        ".keen-mcp.lock",
        report.skill_path.resolve().name,
        report.skill_path.resolve().name + ".old",
        "mcp:srv",
    ]


@pytest.mark.parametrize(
    ("instructions", "start"),
    [
        (
            "# Weather Server Instructions\n\nUse it for forecasts by city.\n\n## Tools\n\nSee below.",
            "Use it for forecasts by city.",
        ),
        (
            "A Model Context Protocol (MCP) server that provides weather forecasts.",
            "Provides weather forecasts.",
        ),
        ("A ticket search server based on the Model Context Protocol (MCP).", "A ticket search server."),
    ],
)
def test_description_skips_headings_and_protocol_boilerplate(
    tmp_path: Path, instructions: str, start: str
) -> None:
    info = ServerInfo(name="srv", instructions=instructions)
    report = generate_skill(tmp_path / "skills", status("srv"), simple_tools("srv", 2), info=info, now=NOW)
    assert report.description.startswith(start + " Tools: ")
