"""The prompt catalog (docs/architecture.md "The prompt catalog") and its character budget."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from keen import paths
from keen.skills import (
    MARKER_FILE,
    Skill,
    catalog_line,
    discover,
    omitted_line,
    render_catalog,
    render_skills_section,
)

GITHUB_DESC = "Use this skill to interact with the `github` MCP server."


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("KEEN_HOME", str(tmp_path / "home"))
    skills = paths.skills_dir()
    skills.mkdir(parents=True)
    return skills


def make(name: str, description: str, *, enabled: bool = True, managed: bool = False) -> Skill:
    path = Path("/k/skills") / name
    return Skill(name, description, path, path / "SKILL.md", enabled=enabled, managed=managed)


def test_lines_are_byte_exact_and_skip_disabled(root: Path) -> None:
    gh = root / "mcp:github"
    gh.mkdir()
    (gh / "SKILL.md").write_text(
        f"---\nname: mcp:github\ndescription: {GITHUB_DESC}\n---\n", encoding="utf-8"
    )
    (gh / MARKER_FILE).write_text(json.dumps({"managed_by": "keen-mcp"}), encoding="utf-8")
    for name in ("notes", "off"):
        (root / name).mkdir()
        (root / name / "SKILL.md").write_text(f"---\ndescription: About {name}.\n---\n", encoding="utf-8")
    paths.skills_config_path().write_text('{"is_enabled": {"off": false}}', encoding="utf-8")

    text = render_catalog(discover().skills)
    expected = (
        f"- mcp:github: {GITHUB_DESC} \u2192 read {root}/mcp:github/SKILL.md\n"
        f"- notes: About notes. \u2192 read {root}/notes/SKILL.md"
    )
    assert text.encode("utf-8") == expected.encode("utf-8")
    assert str(root).startswith("/")


def test_empty_catalog() -> None:
    assert render_catalog([]) == ""
    assert render_catalog([make("a", "x", enabled=False)], max_chars=1000) == ""
    assert render_skills_section([make("a", "x", enabled=False)]) == ""


def test_budget_large_enough_changes_nothing() -> None:
    skills = [make("a", "A" * 50), make("b", "B" * 10)]
    full = render_catalog(skills)
    assert render_catalog(skills, max_chars=len(full)) == full
    assert render_catalog(skills, max_chars=len(full) + 100) == full


def test_budget_shortens_longest_first_before_dropping() -> None:
    skills = [make("long", "L" * 200), make("mid", "M" * 60), make("short", "S" * 15)]
    full = render_catalog(skills)
    for cut in (1, 20, 100, 150, 180):
        budget = len(full) - cut
        text = render_catalog(skills, max_chars=budget)
        lines = text.split("\n")
        assert len(text) <= budget
        assert [ln.split(":")[0] for ln in lines] == ["- long", "- mid", "- short"], "no line dropped"
        descriptions = [ln.split(": ", 1)[1].split(" \u2192 ")[0] for ln in lines]
        assert descriptions[2] == "S" * 15, "the shortest description is untouched"
        cut_ones = [d for d in descriptions if d.endswith("…")]
        assert cut_ones, "something was shortened"
        # Longest first: all shortened descriptions share one cap and none kept is longer.
        cap = len(cut_ones[0])
        assert all(len(d) == cap for d in cut_ones)
        assert all(len(d) <= cap for d in descriptions)
        # The cap is as large as possible: one more character each would not fit.
        assert len(text) + len(cut_ones) > budget


def test_budget_drops_lines_last_and_says_so() -> None:
    skills = [make(f"skill{i:02d}", f"Description number {i} " * 5) for i in range(30)]
    minimal = render_catalog(skills, max_chars=None, min_description_chars=12)
    budget = 1200
    assert len(minimal) > budget
    text = render_catalog(skills, max_chars=budget)
    assert len(text) <= budget
    lines = text.split("\n")
    kept = lines[:-1]
    assert kept and len(kept) < 30
    assert [ln.split(":")[0] for ln in kept] == [f"- skill{i:02d}" for i in range(len(kept))]
    assert lines[-1] == omitted_line(30 - len(kept))
    assert "keen skills list" in lines[-1] and f"{30 - len(kept)} more skills" in lines[-1]
    # Minimal descriptions (12 chars) are kept; there is no room for one more line.
    for line in kept:
        description = line.split(": ", 1)[1].split(" \u2192 ")[0]
        assert len(description) >= 11
    one_more = len(catalog_line(skills[len(kept)], "x" * 12)) + 1
    assert len(text) + one_more > budget


def test_tiny_budgets() -> None:
    skills = [make("a", "alpha"), make("b", "beta")]
    note = omitted_line(2)
    assert render_catalog(skills, max_chars=len(note)) == note
    assert render_catalog(skills, max_chars=len(note) - 1) == ""
    assert omitted_line(1).startswith("- (1 more skill not")
    with pytest.raises(ValueError, match="min_description_chars"):
        render_catalog(skills, max_chars=100, min_description_chars=0)


def test_section_header_and_mcp_hint() -> None:
    user_only = render_skills_section([make("notes", "Notes.")])
    assert user_only.startswith("## Skills\n")
    assert "read its SKILL.md" in user_only
    assert "call_mcp_tool" not in user_only
    assert user_only.endswith(catalog_line(make("notes", "Notes.")) + "\n")

    with_mcp = render_skills_section([make("notes", "Notes."), make("mcp:gh", GITHUB_DESC, managed=True)])
    assert "`call_mcp_tool`" in with_mcp and "schema" in with_mcp
    # The hint only counts enabled managed skills.
    assert "call_mcp_tool" not in render_skills_section(
        [make("notes", "Notes."), make("mcp:gh", GITHUB_DESC, managed=True, enabled=False)]
    )


def test_section_budget_covers_the_header() -> None:
    skills = [make(f"s{i}", "D" * 80) for i in range(10)]
    full = render_skills_section(skills)
    for budget in (len(full) - 300, 400, 250):
        text = render_skills_section(skills, max_chars=budget)
        assert text and len(text) <= budget
        assert text.startswith("## Skills\n")
    assert render_skills_section(skills, max_chars=40) == ""
