"""LiveMCPBench ``all_annotations.json`` -> query files for ``bench/search.py``.

Usage: ``python bench/livemcpbench_queries.py ANNOTATIONS TOOLS_JSON OUT_DIR``

Writes ``OUT_DIR/tasks.jsonl`` (one query per task: its ``Question``) and
``OUT_DIR/steps.jsonl`` (one query per line of ``Annotator Metadata.Steps``). The
annotation names the task's tools by name only (``Annotator Metadata.Tools``, a numbered
list); each name becomes every ``server/tool`` of the catalog with that tool name (13
names occur on several servers: any of them serves), unless some of those servers also
hold another of the task's tools: then only those count (``add_table`` in a task that
also names ``create_document`` is the Word server's, not PowerPoint's). Names the
catalog lacks are dropped, and a task left with none is skipped; the counts are
printed on stderr.

Both files list all the task's tools in ``tools`` (a step is annotated with the task's
tools, not its own, so a step query is a hit when any of them ranks high). Both also
carry ``task_id`` and ``required``: one group of alternatives per needed tool, from
which ``search.py`` computes ``all@K`` (every needed tool in the top K of the query),
``tool_recall@K`` and, over the step file, ``task_union_all@K`` (every needed tool in
the union of the top K of the task's step queries); given both files, ``search.py``
prints ``task_recall@K``: every needed tool in the union of the top K of the task's
question and its steps.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

from _catalog import load_catalog

__all__ = ["convert", "main"]

_ITEM = re.compile(r"^\s*\d+\s*[.)]\s*")


def _items(text: str) -> list[str]:
    return [_ITEM.sub("", line).strip() for line in (text or "").splitlines() if _ITEM.sub("", line).strip()]


def _server(ref: str) -> str:
    return ref.rpartition("/")[0]


def _disambiguate(groups: list[list[str]]) -> list[list[str]]:
    """Each group of alternatives narrowed to the servers that hold another of the task's
    tools, when any of its alternatives is on such a server."""
    out: list[list[str]] = []
    for i, group in enumerate(groups):
        others = {_server(ref) for j, g in enumerate(groups) if j != i and len(g) == 1 for ref in g}
        narrowed = [ref for ref in group if _server(ref) in others]
        out.append(narrowed or group)
    return out


def convert(
    annotations: Path, tools_json: Path
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, int]]:
    """``(tasks, steps, counts)`` for the annotation file over the catalog's tool names."""
    where: dict[str, list[str]] = {}
    for rec in load_catalog(tools_json):
        for tool in rec.tools:
            where.setdefault(tool["name"], []).append(f"{rec.name}/{tool['name']}")
    tasks: list[dict[str, Any]] = []
    steps: list[dict[str, Any]] = []
    counts = {"tasks_in": 0, "tool_names_dropped": 0, "tasks_skipped": 0}
    for task in json.loads(annotations.read_text(encoding="utf-8")):
        counts["tasks_in"] += 1
        meta = task.get("Annotator Metadata") or {}
        names = list(dict.fromkeys(_items(meta.get("Tools", ""))))
        groups = _disambiguate([sorted(set(where[n])) for n in names if n in where])
        counts["tool_names_dropped"] += sum(n not in where for n in names)
        if not groups:
            counts["tasks_skipped"] += 1
            continue
        flat = sorted({ref for g in groups for ref in g})
        task_id = task.get("task_id", "")
        tasks.append({"query": task["Question"], "tools": flat, "required": groups, "task_id": task_id})
        for number, step in enumerate(_items(meta.get("Steps", "")), 1):
            steps.append(
                {"query": step, "tools": flat, "required": groups, "task_id": task_id, "step": number}
            )
    return tasks, steps, counts


def main() -> None:
    if len(sys.argv) != 4:
        raise SystemExit("usage: livemcpbench_queries.py ANNOTATIONS TOOLS_JSON OUT_DIR")
    annotations, tools_json, out = (Path(a) for a in sys.argv[1:])
    tasks, steps, counts = convert(annotations, tools_json)
    out.mkdir(parents=True, exist_ok=True)
    for name, rows in (("tasks.jsonl", tasks), ("steps.jsonl", steps)):
        (out / name).write_text(
            "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8"
        )
    print(
        f"{len(tasks)} task queries, {len(steps)} step queries -> {out} "
        f"({counts['tasks_skipped']} of {counts['tasks_in']} tasks skipped, "
        f"{counts['tool_names_dropped']} tool names not in the catalog)",
        file=sys.stderr,
    )


if __name__ == "__main__":
    main()
