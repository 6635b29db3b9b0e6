"""Exposed names, minimal descriptions, the ?tools= parser and section 4.4 entries."""

from __future__ import annotations

import re

import pytest

from keen.capabilities.names import capability_id, model_names
from keen.mcp.types import Tool
from keen.serve import extension as ext
from keen.serve.catalog import ToolCatalog, exposed_name, minimal_description

SAFE = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


def test_exposed_names_are_safe_stable_and_distinct() -> None:
    # One name means one thing: the capability catalog's model name of the tool's id.
    assert exposed_name("github", "create_issue") == "mcp__github__create_issue"
    tools = [Tool(server="github", name="create_issue"), Tool(server="fs", name="read file/../x")]
    served = ToolCatalog(tools)
    assert {served.capabilities.model_name(c.id) for c in served.capabilities} == set(served.names())
    assert served.names() == sorted(
        model_names(capability_id("tool", t.name, t.server) for t in tools).values()
    )
    odd = exposed_name("fs", "read file/../x")
    assert SAFE.match(odd) and odd == exposed_name("fs", "read file/../x")
    long = exposed_name("s", "t" * 200)
    assert SAFE.match(long) and len(long) == 64
    assert exposed_name("s", "t" * 200) != exposed_name("s", "t" * 199)
    # Two raw names that sanitize alike stay two tools.
    catalog = ToolCatalog(
        [Tool(server="s", name="a.b"), Tool(server="s", name="a/b"), Tool(server="s", name="a_b")]
    )
    assert len(catalog) == 3
    assert all(SAFE.match(n) for n in catalog.names())
    assert catalog.find("s", "a/b") is not None and catalog.find("s", "a/b").tool.name == "a/b"  # type: ignore[union-attr]


def test_minimal_description_is_one_short_sentence() -> None:
    text = "Create an issue. Needs owner and repo.\n\nExamples: ..."
    assert minimal_description(text) == "Create an issue."
    assert len(minimal_description("word " * 100)) <= 120
    assert minimal_description("") == ""


@pytest.mark.parametrize(
    ("text", "first"),
    [
        ("Search files, e.g. logs or configs. Slow on big trees.", "Search files, e.g. logs or configs."),
        (
            "Convert units (i.e. metric to imperial). Returns JSON.",
            "Convert units (i.e. metric to imperial).",
        ),
        ("Compare A vs. B side by side. Needs two ids.", "Compare A vs. B side by side."),
        ("Ask Dr. Who a question. It answers.", "Ask Dr. Who a question."),
        ("Run it! Then stop.", "Run it!"),
    ],
)
def test_minimal_description_never_ends_inside_an_abbreviation(text: str, first: str) -> None:
    """Before, "Search files, e.g." was the whole minimal description."""
    assert minimal_description(text) == first


def test_selected_tools_parsing() -> None:
    assert ext.selected_tools("resource:///tool_descriptions") is None
    assert ext.selected_tools("resource:///tool_descriptions?tools=") is None
    assert ext.selected_tools("resource:///tool_descriptions?tools=a,b,,a") == ["a", "b"]
    assert ext.selected_tools("resource:///tool_descriptions?tools=a&tools=c") == ["a", "c"]
    assert ext.is_tool_descriptions_uri("resource:///tool_descriptions?tools=a")
    assert not ext.is_tool_descriptions_uri("file:///tool_descriptions")


def test_full_description_example_follows_the_schema() -> None:
    tool = Tool(
        server="s",
        name="t",
        description="Do it.",
        input_schema={
            "type": "object",
            "properties": {
                "mode": {"type": "string", "enum": ["fast", "slow"]},
                "n": {"type": "integer", "default": 3},
                "tags": {"type": ["array", "null"]},
                "opt": {"type": "string"},
            },
            "required": ["mode", "n", "tags"],
        },
        annotations={"readOnlyHint": True},
    )
    entry = ext.full_description(ToolCatalog([tool]).tools()[0])
    assert entry["examples"][0]["input"] == {"mode": "fast", "n": 3, "tags": []}
    assert entry["usage_guidance"]["read_only"] is True
    assert entry["inputSchema"] == tool.input_schema and entry["inputSchema"] is not tool.input_schema


def test_keen_serve_imports_only_downward() -> None:
    import subprocess
    import sys

    code = (
        "import sys, keen.serve; "
        "bad = sorted(m for m in sys.modules if m.startswith(('keen.cli', 'keen.agent', 'keen.demo'))); "
        "print(bad); sys.exit(1 if bad else 0)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr


def test_both_searchers_rank_the_matching_tool_first() -> None:
    from keen.serve.search import CapabilitySearch, KeywordSearch

    tools = [
        Tool(server="gh", name="create_issue", description="Open a new issue in a GitHub repository."),
        Tool(server="gh", name="list_pull_requests", description="List pull requests of a repository."),
        Tool(server="clock", name="now", description="The current time in a timezone."),
    ]
    catalog = ToolCatalog(tools)
    for search in (CapabilitySearch(), KeywordSearch()):
        assert search(catalog, "what time is it in Paris", 2)[0].name == "mcp__clock__now"
        assert search(catalog, "file a bug report issue", 1)[0].name == "mcp__gh__create_issue"
        assert len(search(catalog, "repository", 5)) <= 3
