"""One text module: a tool's summary is the same in SKILL.md and in ``keen serve``."""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers.mcpskills import NOW, status
from keen._text import first_sentence, near_names, sentences, shorten, some_of, summary
from keen.mcp.types import Tool
from keen.mcpskills import generate_skill
from keen.serve.catalog import ToolCatalog

TRICKY = {
    "abbreviation": (
        "Search files, e.g. logs or configs. Slow on big trees.",
        "Search files, e.g. logs or configs.",
    ),
    "initials": ("Query the U.S. census by county. Needs a FIPS code.", "Query the U.S. census by county."),
    "version": ("Uses API v1.2 of the service. Deprecated soon.", "Uses API v1.2 of the service."),
    "url": (
        "Fetch https://example.com/a.b?x=1 and return it. Follows redirects.",
        "Fetch https://example.com/a.b?x=1 and return it.",
    ),
    "no final period": ("Adds two numbers", "Adds two numbers"),
    "lower case after": (
        "Compare A vs. B side by side. needs two ids",
        "Compare A vs. B side by side. needs two ids",
    ),
    "cjk": ("查询天气。返回温度。", "查询天气。"),
    "newline": ("Create an issue.\n\nExamples: ...", "Create an issue."),
    "exclamation": ("Run it! Then stop.", "Run it!"),
    "long": ("word " * 60, "word " * 22 + "word…"),  # cut at a word, within 120 characters
}


@pytest.mark.parametrize("name", sorted(TRICKY))
def test_skill_md_and_keen_serve_give_the_same_summary(tmp_path: Path, name: str) -> None:
    """Before, SKILL.md, server_line and keen serve each split sentences with their own regex:
    "Uses API v1.2 of the service. Deprecated soon." and "e.g." read differently in each."""
    description, expected = TRICKY[name]
    tool = Tool(server="srv", name="t", description=description, input_schema={"type": "object"})
    generate_skill(tmp_path, status("srv"), [tool], now=NOW, fsync=False)
    skill_md = (tmp_path / "mcp:srv" / "SKILL.md").read_text(encoding="utf-8")
    row = next(line for line in skill_md.splitlines() if line.startswith("| t |"))
    in_skill_md = row.split(" | ")[1]
    in_serve = ToolCatalog([tool]).tools()[0].minimal()  # "[<server>] <summary>"
    assert in_serve == f"[srv] {in_skill_md}"
    assert in_skill_md == summary(description) == expected.strip()


def test_sentences_and_cuts() -> None:
    assert sentences("One. Two e.g. three. Four") == ["One.", "Two e.g. three.", "Four"]
    assert first_sentence("") == "" and summary(None) == ""
    assert shorten("abcdef", 4) == "abc…" and shorten("abc", 4) == "abc"
    assert shorten("alpha beta gamma", 12, at_word=True) == "alpha beta…"


def test_a_long_text_is_split_whole_each_abbreviation_kept_in_its_sentence() -> None:
    # 60,000 sentences in one line (a server's instructions can be that long): each is one
    # sentence, "e.g." and "Dr." end none of them, a lower-case word after a period goes on.
    one = "See e.g. the logs of Dr. Who. then more. Done!"
    text = " ".join([one] * 20_000)
    assert sentences(text) == ["See e.g. the logs of Dr. Who. then more.", "Done!"] * 20_000


def test_a_long_list_is_named_in_part_and_counted() -> None:
    said: list[int] = []

    def say(n: int) -> str:
        said.append(n)
        return f"#{n}"

    assert some_of(range(20_000), 3, "; ", say) == "#0; #1; #2; and 19997 more"
    assert said == [0, 1, 2]  # only what is named is put into words
    assert some_of(["a", "b"], 2) == "a, b" and some_of(["a", "b", "c"], 2) == "a, b, and 1 more"
    assert some_of([], 3) == ""


def test_near_names_finds_what_a_short_or_misspelt_name_meant() -> None:
    names = ["Bing_CN_MCP", "MCP-Weather-Free", "Time-MCP-Server", "time-zones", "Trends-Hub"]
    assert near_names("weather", names) == ["MCP-Weather-Free"]  # contained, whatever the case
    assert near_names("TIME", names) == ["Time-MCP-Server", "time-zones"]
    assert near_names("Trend-Hub", names) == ["Trends-Hub"]  # a close spelling
    assert near_names("zzz", names) == [] and near_names("", names) == []
    assert near_names("mcp", names, limit=2) == ["Bing_CN_MCP", "MCP-Weather-Free"]
