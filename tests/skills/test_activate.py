"""Slash activation ("[Activate skill: ...]" with argument substitution) on real skill files."""

from __future__ import annotations

from pathlib import Path

import pytest

from keen import paths
from keen.cli._wording import describe
from keen.errors import Remedy, SkillError
from keen.skills import activate, substitute

BODY = (
    "All: [$ARGUMENTS]\n"
    "One: [$1] Two: [$2] Three: [$3]\n"
    "Ten: [$10] Zero: [$0]\n"
    "Dir: ${KEEN_SKILL_DIR}/scripts/run.sh\n"
)


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("KEEN_HOME", str(tmp_path / "home"))
    skills = paths.skills_dir()
    skills.mkdir(parents=True)
    return skills


def write_skill(root: Path, name: str, body: str) -> Path:
    skill_dir = root / name
    skill_dir.mkdir()
    (skill_dir / "SKILL.md").write_text(
        f"---\nname: {name}\ndescription: Test.\n---\n\n{body}", encoding="utf-8"
    )
    return skill_dir


def test_activation_message_with_quoted_args(root: Path) -> None:
    skill_dir = write_skill(root, "deploy", BODY)
    message = activate("deploy", " prod \"two words\" 'it''s' ")
    assert message == (
        "[Activate skill: deploy]\n\n"
        "All: [prod \"two words\" 'it''s']\n"
        "One: [prod] Two: [two words] Three: [its]\n"
        "Ten: [] Zero: [$0]\n"
        f"Dir: {skill_dir}/scripts/run.sh"
    )
    assert "name:" not in message and "---" not in message


def test_missing_positionals_are_empty_and_ten_is_tenth(root: Path) -> None:
    write_skill(root, "many", BODY)
    message = activate("many", "a")
    assert "One: [a] Two: [] Three: []" in message
    eleven = " ".join(f"w{i}" for i in range(1, 12))
    assert "Ten: [w10]" in activate("many", eleven)


def test_arguments_are_not_substituted_twice(root: Path) -> None:
    write_skill(root, "echo", "[$1] [$2] [$ARGUMENTS]\n")
    message = activate("echo", "'$2' '${KEEN_SKILL_DIR}'")
    assert message.endswith("[$2] [${KEEN_SKILL_DIR}] ['$2' '${KEEN_SKILL_DIR}']")


def test_arguments_appended_when_body_has_no_placeholder(root: Path) -> None:
    write_skill(root, "plain", "Just do it.\n")
    assert (
        activate("plain", "  fix the bug ")
        == "[Activate skill: plain]\n\nJust do it.\n\nARGUMENTS: fix the bug"
    )
    assert activate("plain", "") == "[Activate skill: plain]\n\nJust do it."


def test_body_is_read_at_activation_time(root: Path) -> None:
    skill_dir = write_skill(root, "live", "old\n")
    assert activate("live").endswith("old")
    (skill_dir / "SKILL.md").write_text("---\ndescription: Test.\n---\nnew $1\n", encoding="utf-8")
    assert activate("live", "x").endswith("new x")


def test_explicit_skills_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KEEN_HOME", str(tmp_path / "unused"))
    other = tmp_path / "other-skills"
    other.mkdir()
    write_skill(other, "elsewhere", "at ${KEEN_SKILL_DIR}\n")
    assert activate("elsewhere", skills_root=other).endswith(f"at {other}/elsewhere")
    (other / "config.json").write_text('{"is_enabled": {"elsewhere": false}}', encoding="utf-8")
    with pytest.raises(SkillError, match="disabled"):
        activate("elsewhere", skills_root=other)


def test_errors_say_what_to_do(root: Path) -> None:
    write_skill(root, "paused", "x\n")
    (root / "broken").mkdir()
    (root / "broken" / "SKILL.md").write_text("no frontmatter\n", encoding="utf-8")
    paths.skills_config_path().write_text('{"is_enabled": {"paused": false}}', encoding="utf-8")

    with pytest.raises(SkillError, match="no skill named 'nope'") as info:
        activate("nope", "")
    assert info.value.name == "nope" and info.value.remedy is Remedy.LIST_SKILLS
    assert "keen skills list" in describe(info.value)
    with pytest.raises(SkillError, match="'paused' is disabled") as info:
        activate("paused", "")
    assert info.value.remedy is Remedy.ENABLE_SKILL
    assert "keen skills enable paused" in describe(info.value)
    with pytest.raises(SkillError, match=r"broken: SKILL\.md must start with YAML frontmatter"):
        activate("broken", "")
    write_skill(root, "quoted", "$1\n")
    with pytest.raises(SkillError, match="close the quote"):
        activate("quoted", 'unbalanced "quote')


def test_substitute_directly() -> None:
    assert substitute("$ARGUMENTSX $ARGUMENTS", "a b", Path("/d")) == "$ARGUMENTSX a b"
    assert substitute("${1} $1", "a", Path("/d")) == "${1} a"
