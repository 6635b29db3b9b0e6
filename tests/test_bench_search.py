"""``bench/livemcpbench_queries.py`` and ``bench/search.py``: annotated tool names become
the right ``server/tool`` references, and the figures count hits as the docstrings say."""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench"


def _server(name: str, tools: list[str]) -> dict[str, Any]:
    return {
        "name": name,
        "description": f"The {name} server.",
        "tools": {name: {"tools": [{"name": t, "description": f"{t} in {name}."} for t in tools]}},
    }


@pytest.fixture
def bench(monkeypatch: pytest.MonkeyPatch) -> dict[str, ModuleType]:
    monkeypatch.syspath_prepend(str(BENCH))
    for name in ("livemcpbench_queries", "search"):
        sys.modules.pop(name, None)
    return {name: importlib.import_module(name) for name in ("livemcpbench_queries", "search")}


def test_converter_narrows_shared_tool_names_to_the_task_server(
    bench: dict[str, ModuleType], tmp_path: Path
) -> None:
    tools = tmp_path / "tools.json"
    tools.write_text(
        json.dumps(
            [
                _server("Word", ["create_document", "add_table"]),
                _server("PowerPoint", ["create_presentation", "add_table"]),
                _server("Files", ["write_file"]),
                _server("Desktop", ["write_file"]),
            ]
        )
    )
    annotations = tmp_path / "all_annotations.json"
    meta = {"Steps": "1. Make a doc\n2. Put a table in it", "Tools": "1. create_document\n2. add_table"}
    loose = {"Steps": "1. Save it", "Tools": "1. write_file\n2. no_such_tool"}
    annotations.write_text(
        json.dumps(
            [
                {"task_id": "a", "Question": "A report with a table", "Annotator Metadata": meta},
                {"task_id": "b", "Question": "Save a file", "Annotator Metadata": loose},
            ]
        )
    )
    tasks, steps, counts = bench["livemcpbench_queries"].convert(annotations, tools)
    assert tasks[0]["required"] == [["Word/create_document"], ["Word/add_table"]]
    assert tasks[1]["required"] == [["Desktop/write_file", "Files/write_file"]]  # nothing pins one
    assert [s["task_id"] for s in steps] == ["a", "a", "b"] and steps[0]["required"] == tasks[0]["required"]
    assert counts["tool_names_dropped"] == 1


def test_halves_split_by_task_and_union_counts_a_task_found_across_its_steps(
    bench: dict[str, ModuleType], tmp_path: Path
) -> None:
    search = bench["search"]
    queries = [{"query": "q", "task_id": t, "step": s} for t, s in (("a", 1), ("a", 2), ("b", 1), ("c", 1))]
    assert [(q["task_id"], q["step"]) for q in search.select_half(queries, "even")] == [
        ("a", 1),
        ("a", 2),
        ("c", 1),
    ]
    assert [q["task_id"] for q in search.select_half(queries, "odd")] == ["b"]

    tools = tmp_path / "tools.json"
    tools.write_text(
        json.dumps(
            [
                _server("weather", ["get_forecast"]),
                _server("calendar", ["create_event"]),
                _server("mail", ["send_email"]),
            ]
        )
    )
    catalog = search.build_catalog([tools])
    required = [["weather/get_forecast"], ["calendar/create_event"]]
    steps = [
        {"query": "get forecast in weather", "tools": [], "required": required, "task_id": "t"},
        {"query": "create event in calendar", "tools": [], "required": required, "task_id": "t"},
    ]
    figures = search.evaluate(catalog, steps, 1, "tool")
    assert figures["all@1"] == 0.0  # neither step alone finds both tools
    assert figures["task_union_all@1"] == 1.0 and figures["tasks"] == 1
    assert search.evaluate(catalog, steps[:1], 1, "tool").get("task_union_all@1") is None


def test_a_result_covers_its_identical_copies_and_recall_own_does_not(
    bench: dict[str, ModuleType], tmp_path: Path
) -> None:
    search = bench["search"]
    same = {"name": "write_file", "description": "Write text to a file, replacing it."}
    tools = tmp_path / "tools.json"
    tools.write_text(
        json.dumps(
            [
                {"name": "Files", "description": "Files.", "tools": {"Files": {"tools": [same]}}},
                {"name": "Fork", "description": "Files.", "tools": {"Fork": {"tools": [same]}}},
                _server("mail", ["send_email"]),
            ]
        )
    )
    catalog = search.build_catalog([tools])
    hit = catalog.search("write text to a file", k=1)[0]
    other = "Fork" if hit.server == "Files" else "Files"
    query = {"query": "write text to a file", "tools": [f"{other}/write_file"]}
    for level in ("tool", "server"):
        figures = search.evaluate(catalog, [query], 1, level)
        assert figures["recall@1"] == 1.0, level  # the hit names the copy on the other server
        assert figures["recall@1_own"] == 0.0, level


# bench/search.py times a cold build (a new process's view of the vector cache): its own cache.
@pytest.mark.own_vector_cache
def test_task_recall_unions_a_task_question_and_its_steps_across_query_files(
    bench: dict[str, ModuleType], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    search = bench["search"]
    tools = tmp_path / "tools.json"
    tools.write_text(
        json.dumps(
            [
                _server("weather", ["get_forecast"]),
                _server("calendar", ["create_event"]),
                _server("mail", ["send_email"]),
            ]
        )
    )
    required = [["weather/get_forecast"], ["calendar/create_event"]]
    flat = [ref for g in required for ref in g]
    question = {"query": "get forecast in weather", "tools": flat, "required": required, "task_id": "t"}
    step = {"query": "create event in calendar", "tools": flat, "required": required, "task_id": "t"}
    other = {"query": "send email", "tools": ["weather/get_forecast"], "task_id": "u"}
    tasks, steps = tmp_path / "tasks.jsonl", tmp_path / "steps.jsonl"
    tasks.write_text(json.dumps(question) + "\n" + json.dumps(other) + "\n")
    steps.write_text(json.dumps(step) + "\n")

    search.main(
        ["--catalog", str(tools), "--queries", str(tasks), "--queries", str(steps), "-k", "1", "--json"]
    )
    out = json.loads(capsys.readouterr().out)
    # Neither query alone finds both tools; together they do. Task u has no "required".
    assert out["files"]["tasks.jsonl"]["all@1"] == 0.0
    assert out["task_recall@1"] == 1.0 and out["tasks"] == 1
    assert out["files"]["steps.jsonl"]["missed@100"] == 0

    search.main(["--catalog", str(tools), "--queries", str(tasks), "-k", "1", "--json"])
    single = json.loads(capsys.readouterr().out)
    assert "task_recall@1" not in single and single["queries"] == 2  # one file: its own figures only
