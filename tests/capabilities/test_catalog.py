"""The capability catalog over generated skills on disk, no server running (summaries until
load(); search is permission-filtered, never authorization)."""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from keen.capabilities import Catalog, Risk, SearchFilter
from keen.capabilities.search import flush
from keen.errors import CapabilityNotFound, KeenError
from keen.mcp.types import ServerInfo, ServerState, ServerStatus, Tool
from keen.mcpskills import generate_skill

NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
READ = {"readOnlyHint": True}
WRITE = {"readOnlyHint": False, "destructiveHint": False}
LONG_TAIL = "Internal detail that belongs to the full layer only. " * 20


def _schema(**props: str) -> dict:
    return {
        "type": "object",
        "properties": {k: {"type": "string", "description": v} for k, v in props.items()},
    }


GITHUB = [
    Tool(
        "github",
        "get_pull_request",
        "Get a pull request by number. " + LONG_TAIL,
        _schema(number="PR number"),
        annotations=READ,
    ),
    Tool(
        "github",
        "list_check_runs",
        "List the CI check runs of a commit.",
        _schema(ref="Commit SHA"),
        annotations=READ,
    ),
    Tool(
        "github",
        "create_issue",
        "Create a new issue in a repository.",
        _schema(title="Issue title"),
        annotations=WRITE,
    ),
    Tool("github", "merge_pull_request", "Merge a pull request.", _schema(number="PR number")),
]
SLACK = [
    Tool(
        "slack",
        "send_message",
        "Send a message to a Slack channel.",
        _schema(channel="Channel id", text="Text"),
    ),
    Tool("slack", "search_messages", "Search messages in Slack.", _schema(query="Words"), annotations=READ),
]
WEATHER = [
    Tool(
        "weather",
        "get_forecast",
        "Weather forecast for a city: temperature, rain, wind.",
        _schema(city="City name"),
        annotations=READ,
    ),
]


def _generate(root: Path, server: str, tools: list[Tool], instructions: str | None = None) -> None:
    status = ServerStatus(server, "stdio", "none", ServerState.CONNECTED, last_refresh_at=NOW)
    generate_skill(
        root, status, tools, info=ServerInfo(server, "1", None, instructions), now=NOW, fsync=False
    )


@pytest.fixture
def skills(keen_home: Path) -> Path:
    root = keen_home / "skills"
    _generate(root, "github", GITHUB, "Work with GitHub pull requests, issues and CI.")
    _generate(root, "slack", SLACK)
    _generate(root, "weather", WEATHER)
    review = root / "code-review"
    review.mkdir()
    (review / "SKILL.md").write_text(
        "---\nname: code-review\ndescription: How to review a diff and what to check first.\n---\n"
        "# Code review\n\nSECRET-BODY-MARKER: read the tests before the code.\n"
    )
    return root


def test_catalog_holds_summaries_not_bodies_until_load(skills: Path) -> None:
    catalog = Catalog.from_skills_dir(skills)
    assert len(catalog) == 8
    pr = catalog.get("mcp__github__get_pull_request")
    assert pr.summary.startswith("Get a pull request by number.")
    assert len(pr.summary) <= 200 and "inputSchema" not in repr(pr)
    assert pr.tokens_full > pr.tokens_index
    loaded = pr.load()
    assert loaded.schema == GITHUB[0].input_schema
    assert json.loads(loaded.text)["description"] == GITHUB[0].description
    skill = catalog.get("skill__code-review")
    assert "SECRET-BODY-MARKER" not in json.dumps([c.to_dict() for c in catalog])
    assert "SECRET-BODY-MARKER" in skill.load().text


def test_load_reads_the_file_now(skills: Path) -> None:
    catalog = Catalog.from_skills_dir(skills)
    cap = catalog.get("mcp__weather__get_forecast")
    Path(cap.location).unlink()
    with pytest.raises(Exception, match="keen mcp sync"):
        cap.load()


def test_an_unknown_capability_is_a_keen_error_a_library_caller_can_catch(skills: Path) -> None:
    # Catalog.get and Catalog.load raised a bare KeyError, outside the KeenError tree.
    catalog = Catalog.from_skills_dir(skills)
    for look_up in (catalog.get, catalog.load):
        with pytest.raises(
            KeenError, match="no capability 'mcp__github__nope' in the catalog; search"
        ) as caught:
            look_up("mcp__github__nope")
        assert isinstance(caught.value, CapabilityNotFound) and isinstance(caught.value, KeyError)
        assert (caught.value.code, caught.value.capability) == ("capability_not_found", "mcp__github__nope")
        assert str(caught.value).startswith("no capability")  # not a KeyError's quoted repr


def _trusting(server: str, schema: dict) -> bool:
    """Every server trusted for its annotations (``"trust_annotations": true`` for all)."""
    return True


def test_risk_follows_annotations_and_unannotated_tools_write(skills: Path) -> None:
    catalog = Catalog.from_skills_dir(skills, annotations_trusted=_trusting)
    assert catalog.get("mcp__github__get_pull_request").risk.level == "low"
    assert catalog.get("mcp__github__create_issue").risk.level == "medium"
    merge = catalog.get("mcp__github__merge_pull_request").risk
    assert not merge.read_only and merge.destructive and merge.level == "high"
    assert Risk.from_annotations({"readOnlyHint": "yes"}).read_only is False


def test_annotations_are_claims_unless_the_caller_trusts_their_server(skills: Path) -> None:
    claims = Catalog.from_skills_dir(skills)
    assert not any(c.risk.read_only for c in claims if c.kind == "tool")
    read_only = claims.search("pull request", k=8, filter=SearchFilter(mode="read-only"))
    assert [h.kind for h in read_only] == ["skill"]  # a plain skill runs no tool
    asked: list[tuple[str, str]] = []

    def github_only(server: str, schema: dict) -> bool:
        asked.append((server, schema["name"]))
        return server == "github"

    judged = Catalog.from_skills_dir(skills, annotations_trusted=github_only)
    assert judged.get("mcp__github__get_pull_request").risk.level == "low"
    assert not judged.get("mcp__weather__get_forecast").risk.read_only
    # Asked only of tools claiming readOnlyHint.
    assert ("github", "merge_pull_request") not in asked and ("weather", "get_forecast") in asked


def test_tools_held_for_review_are_left_out(keen_home: Path) -> None:
    root = keen_home / "skills"
    status = ServerStatus("github", "stdio", "none", ServerState.CONNECTED, last_refresh_at=NOW)
    generate_skill(root, status, GITHUB, now=NOW, fsync=False, held_tools=["create_issue"])
    ids = {c.id for c in Catalog.from_skills_dir(root)}
    assert "mcp__github__create_issue" not in ids and "mcp__github__get_pull_request" in ids
    assert "mcp__github__create_issue" in {c.id for c in Catalog.from_skills_dir(root, include_held=True)}


def test_search_finds_tools_with_no_server_running(skills: Path) -> None:
    catalog = Catalog.from_skills_dir(skills)
    assert catalog.search("GitHub PR CI logs failed checks", k=3)[0].server == "github"
    hits = catalog.search("will it rain in Paris tomorrow", k=1)
    assert [h.id for h in hits] == ["mcp__weather__get_forecast"]
    assert hits[0].location.endswith("get_forecast.json") and hits[0].model_name == hits[0].id
    assert catalog.search("post a note to the team channel", k=1)[0].tool == "send_message"


QUERIES = [
    "send a message to slack",
    "merge the pull request",
    "create an issue",
    "open a new bug report",
    "post to the channel",
    "weather",
    "review",
    "github",
]


@pytest.mark.parametrize("query", QUERIES)
def test_read_only_filter_never_returns_a_write_tool(skills: Path, query: str) -> None:
    catalog = Catalog.from_skills_dir(skills, annotations_trusted=_trusting)
    writes = {c.id for c in catalog if not c.risk.read_only}
    assert writes == {
        "mcp__github__create_issue",
        "mcp__github__merge_pull_request",
        "mcp__slack__send_message",
    }
    hits = catalog.search(query, k=len(catalog), filter=SearchFilter(mode="read-only"))
    assert hits and not {h.id for h in hits} & writes
    shown = json.dumps([h.to_dict() for h in hits])
    for cap_id in writes:  # no detail of a write tool leaks through another hit either
        assert catalog.get(cap_id).summary not in shown
    # Search is not authorization: the same query in "ask" mode may return the write tool,
    # and read-only mode still returns candidates only (nothing became callable).
    assert {h.id for h in catalog.search(query, k=len(catalog), filter=SearchFilter(mode="ask"))} >= writes


def test_a_misspelt_mode_is_refused_not_read_as_every_tool() -> None:
    # SearchFilter(mode="readonly") admitted every tool: a read-only caller with a typo saw
    # the write tools.
    with pytest.raises(
        ValueError, match="unknown permission mode 'readonly'; use one of: read-only, ask, auto"
    ):
        SearchFilter(mode="readonly")  # type: ignore[arg-type]


def test_server_and_kind_filters(skills: Path) -> None:
    catalog = Catalog.from_skills_dir(skills)
    only_slack = catalog.search("message", k=10, filter=SearchFilter(servers=frozenset({"slack"})))
    assert {h.server for h in only_slack} == {"slack"}
    skills_only = catalog.search("review a diff", k=10, filter=SearchFilter(kinds=frozenset({"skill"})))
    assert [h.id for h in skills_only] == ["skill__code-review"]


def test_disabled_skills_are_left_out(skills: Path) -> None:
    (skills / "config.json").write_text(json.dumps({"is_enabled": {"mcp:slack": False}}))
    assert {c.server for c in Catalog.from_skills_dir(skills)} == {"github", "weather", None}
    assert "slack" in Catalog.from_skills_dir(skills, include_disabled=True).servers


def test_index_is_cached_per_catalog_hash(skills: Path, keen_home: Path) -> None:
    first = Catalog.from_skills_dir(skills)
    first.search("weather", k=1)
    flush()  # the index folder is written in the background
    cache = keen_home / "cache" / "toolsearch"
    assert len(list(cache.iterdir())) == 1
    again = Catalog.from_skills_dir(skills)
    assert again.hash == first.hash
    assert [h.id for h in again.search("merge", k=3)] == [h.id for h in first.search("merge", k=3)]
    flush()
    assert len(list(cache.iterdir())) == 1  # the same catalog, the same folder
    _generate(
        skills, "weather", [*WEATHER, Tool("weather", "get_alerts", "Storm alerts.", {}, annotations=READ)]
    )
    changed = Catalog.from_skills_dir(skills)
    assert changed.hash != first.hash
    assert changed.search("storm alerts", k=1)[0].tool == "get_alerts"
    flush()
    assert len(list(cache.iterdir())) == 2


def test_search_rejects_empty_queries(skills: Path) -> None:
    catalog = Catalog.from_skills_dir(skills)
    with pytest.raises(ValueError, match="empty"):
        catalog.search("   ")
    with pytest.raises(ValueError, match="k must"):
        catalog.search("x", k=0)


def test_empty_catalog(keen_home: Path) -> None:
    catalog = Catalog.from_skills_dir(keen_home / "skills")
    assert len(catalog) == 0
    assert catalog.search("anything") == []


_OPENED: list[str] | None = None
"""Paths opened while a test records them (:func:`_record_opens`); None: not recording."""


def _record_opens(event: str, args: tuple[object, ...]) -> None:
    if event == "open" and _OPENED is not None and isinstance(args[0], str | Path):
        _OPENED.append(str(args[0]))


def test_the_catalog_reads_each_skill_marker_once_beside_discovery(skills: Path) -> None:
    # Catalog.from_skills_dir read each generated skill's marker twice after discovery had
    # read it: once for its server, once more for its held tools.
    global _OPENED
    sys.addaudithook(_record_opens)  # a hook stays for the process: it records only while asked
    _OPENED = []
    try:
        catalog = Catalog.from_skills_dir(skills)
    finally:
        opened, _OPENED = _OPENED, None
    assert {c.server for c in catalog if c.kind == "tool"} == {"github", "slack", "weather"}
    for server in ("github", "slack", "weather"):
        reads = [p for p in opened if p.endswith(f"mcp:{server}/.keen-generated-mcp.json")]
        assert len(reads) == 2, (server, reads)  # discovery's (managed, tool count), the catalog's
