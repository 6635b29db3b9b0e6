"""Catalog lines built from what a server's tools do as a whole (keen.mcpskills.server_line)."""

from __future__ import annotations

from keen.mcp.types import ServerInfo
from keen.mcpskills import describe_server
from keen.mcpskills.server_line import distinctive_terms, summary_from_terms, tools_by_coverage

# A spreadsheet server whose alphabetically first tool is the least typical of it.
EXCEL = {
    "add_conditional_format": "Add a conditional format rule to a range.",
    "create_chart": "Create a chart from a range of cells in a worksheet.",
    "create_pivot_table": "Create a pivot table from worksheet data.",
    "read_range": "Read the values of a range of cells in a worksheet.",
    "write_range": "Write values to a range of cells in a worksheet.",
    "create_workbook": "Create a new Excel workbook.",
    "add_worksheet": "Add a worksheet to a workbook.",
}


def test_a_line_is_not_the_first_tools_sentence_when_others_do_other_things() -> None:
    line = describe_server("excel", None, list(EXCEL), list(EXCEL.values()))
    about = line.split(" Tools: ")[0]
    assert not about.startswith("Add a conditional format rule")
    # Words several tools share, not the words of one.
    for word in ("worksheet", "range", "cells"):
        assert word in about.lower(), line
    assert len(line) <= 100


def test_tools_are_named_in_the_order_that_covers_the_server_soonest() -> None:
    names, descriptions = list(EXCEL), list(EXCEL.values())
    order = tools_by_coverage(names, distinctive_terms(names, descriptions, "excel"))
    assert sorted(order) == sorted(names)
    assert order[0] != "add_conditional_format"
    line = describe_server("excel", None, names, descriptions)
    assert "Tools: add_conditional_format" not in line


def test_generic_words_and_the_servers_own_name_are_not_terms() -> None:
    names = ["get_issue", "list_issues", "create_pull_request", "merge_pull_request", "github_search"]
    descriptions = ["Get an issue.", "List issues.", "Create a pull request.", "Merge a pull request.", ""]
    terms = [form for form, _, _ in distinctive_terms(names, descriptions, "github")]
    assert "pull request" in terms and "issue" in terms
    assert not {"get", "list", "create", "github"} & set(terms)
    summary = summary_from_terms(distinctive_terms(names, descriptions, "github"), 60)
    assert summary.startswith(("Pull request", "Issue")) and ", request" not in summary


def test_the_servers_own_words_come_first_when_they_say_what_it_does() -> None:
    info = ServerInfo(name="gh", version="1", instructions="Work with GitHub issues and pull requests.")
    line = describe_server("gh", info, ["get_issue", "list_issues"], ["Get an issue.", "List issues."])
    assert line.startswith("Work with GitHub issues and pull requests.")


def test_only_generic_words_fall_back_to_the_tools_sentences() -> None:
    names = [f"tool_{i}" for i in range(3)]
    line = describe_server("many", None, names, [f"Tool number {i}." for i in range(3)])
    assert line.startswith("Tool number 0; Tool number 1; Tool number 2.")
