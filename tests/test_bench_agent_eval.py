"""``bench/agent_eval.py`` end to end on a small LiveMCPBench-shaped catalog written here:
two replayed servers, two annotated tasks, the scripted model in both modes. The figures
come from the real runs (replay servers over stdio, Keen's loop or the inline baseline)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from helpers.forkserver import forked

BENCH = Path(__file__).resolve().parents[1] / "bench" / "agent_eval.py"


def tool(name: str, description: str, **properties: Any) -> dict[str, Any]:
    schema = {"type": "object", "properties": properties, "required": list(properties)}
    return {"name": name, "description": description, "inputSchema": schema, "annotations": None}


def server(name: str, key: str, tools: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "name": name,
        "description": f"{name} tools",
        "config": {"mcpServers": {key: {"command": "npx", "args": [key]}}},
        "category": "Test",
        "tools": {key: {"server_name": key, "version": "1.0.0", "tools": tools}},
    }


def write_data(tmp: Path) -> tuple[Path, Path]:
    catalog = [
        server(
            "Weather Now",
            "weather",
            [
                tool("get_forecast", "Weather forecast for a city.", city={"type": "string"}),
                tool("get_alerts", "Weather alerts for a region.", region={"type": "string"}),
            ],
        ),
        server(
            "Office-Word",
            "word",
            [
                tool("create_document", "Create a Word document.", filename={"type": "string"}),
                tool(
                    "add_paragraph", "Add a paragraph.", filename={"type": "string"}, text={"type": "string"}
                ),
            ],
        ),
    ]
    annotations = [
        {
            "task_id": f"t{i}",
            "Question": question,
            "Annotator Metadata": {"Tools": "\n".join(f"{n + 1}. {t}" for n, t in enumerate(tools))},
        }
        for i, (question, tools) in enumerate(
            [
                (
                    "Write tomorrow's forecast for Paris into forecast.docx",
                    ["get_forecast", "create_document", "add_paragraph"],
                ),
                ("Any weather alerts for Brittany?", ["get_alerts"]),
            ]
        )
    ]
    (tmp / "tools.json").write_text(json.dumps(catalog))
    (tmp / "all_annotations.json").write_text(json.dumps(annotations))
    return tmp / "tools.json", tmp / "all_annotations.json"


def run(mode: str, catalog: Path, annotations: Path) -> dict[str, Any]:
    # The script forked from the worker's warm process (tests/helpers/forkserver.py): its
    # figures are under test, not the interpreter's start.
    done = subprocess.run(
        forked(str(BENCH), "--model", "scripted:annotations", "--mode", mode, "--json",
               "--catalog", str(catalog), "--annotations", str(annotations)),
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_both_modes_call_the_annotated_tools_and_report_prompt_tokens(tmp_path: Path) -> None:
    catalog, annotations = write_data(tmp_path)
    keen = run("keen", catalog, annotations)
    inline = run("inline", catalog, annotations)
    for figures in (keen, inline):
        assert figures["tasks"] == 2 and figures["servers_connected"] == "2/2"
        assert (
            figures["recall"] == 1.0 and figures["precision"] == 1.0 and figures["first_call_accuracy"] == 1.0
        )
        assert figures["failed_tasks"] == 0 and figures["tool_errors"] == 0
        assert figures["prompt_tokens_per_call_mean"] > 0
    first = keen["per_task"][0]
    assert first["called"] == [
        "Weather-Now/get_forecast",
        "Office-Word/create_document",
        "Office-Word/add_paragraph",
    ]
    assert keen["steps_mean"] == 3.0 and inline["steps_mean"] == 2.0
