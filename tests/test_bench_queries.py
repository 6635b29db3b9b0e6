"""The natural-request query sets (``bench/queries/``), the real-server recording they are
labelled against (``bench/data/real_servers.ndjson``), the script that records it
(``bench/real_servers_dump.py``, run here on real stdio servers: the catalog replay of
``bench/catalog_server.py``) and the candidate pooling of ``bench/label_candidates.py``."""

from __future__ import annotations

import importlib
import json
import sys
from collections import Counter
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench"
SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"
REPLAY = str(BENCH / "catalog_server.py")

TOOLS = [
    {
        "name": "open_note",
        "title": "Open a note",
        "description": "Open one note by name.",
        "inputSchema": {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]},
        "annotations": {"readOnlyHint": True},
    },
    {"name": "save_note", "description": "Save a note.", "inputSchema": {"type": "object"}},
    {"name": "drop_note", "description": "Delete a note for good.", "inputSchema": {"type": "object"}},
]


@pytest.fixture
def bench(monkeypatch: pytest.MonkeyPatch) -> dict[str, ModuleType]:
    monkeypatch.syspath_prepend(str(BENCH))
    names = ("_catalog", "real_servers_dump", "label_candidates")
    for name in names:
        sys.modules.pop(name, None)
    return {name: importlib.import_module(name) for name in names}


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _recorded(tmp_path: Path) -> Path:
    catalog = tmp_path / "recorded.ndjson"
    catalog.write_text(json.dumps({"qualifiedName": "notes", "tools": TOOLS}) + "\n", encoding="utf-8")
    return catalog


def _config(tmp_path: Path, servers: dict[str, dict[str, Any]]) -> Path:
    path = tmp_path / "servers.json"
    path.write_text(json.dumps({"servers": servers}), encoding="utf-8")
    return path


def _replay(catalog: Path, package: str, *extra: str) -> dict[str, Any]:
    return {
        "ecosystem": "npm",
        "package": package,
        "command": sys.executable,
        "args": [REPLAY, "--catalog", str(catalog), "--server", "notes", "--impl", "lite", *extra],
        "env": {"NOTES_API_KEY": "{workdir}/unused"},
    }


def _dump(bench: dict[str, ModuleType], tmp_path: Path, config: Path, out: Path, *extra: str) -> int:
    npm = tmp_path / "npm"
    return bench["real_servers_dump"].main(
        [
            "--config", str(config), "--out", str(out), "--npm-prefix", str(npm),
            "--py-prefix", str(tmp_path / "py"), "--workdir", str(tmp_path / "work"),
            "--log-dir", str(tmp_path / "logs"), "--timeout", "30", *extra,
        ]
    )  # fmt: skip


def test_dump_reads_every_page_and_writes_a_catalog_load_catalog_reads(
    bench: dict[str, ModuleType], tmp_path: Path
) -> None:
    catalog = _recorded(tmp_path)
    meta = tmp_path / "npm" / "node_modules" / "@acme" / "notes-mcp" / "package.json"
    meta.parent.mkdir(parents=True)
    meta.write_text(json.dumps({"name": "@acme/notes-mcp", "version": "1.4.2"}), encoding="utf-8")
    config = _config(
        tmp_path,
        {
            "paged": _replay(catalog, "@acme/notes-mcp", "--page-size", "1"),
            "broken": {"ecosystem": "npm", "package": "gone", "command": sys.executable, "args": ["-c", "1"]},
            "whole": _replay(catalog, "notes-mcp-unlisted"),
        },
    )
    out = tmp_path / "out.ndjson"
    assert _dump(bench, tmp_path, config, out) == 1  # one server could not start: said by the exit code
    entries = _lines(out)
    assert [e["qualifiedName"] for e in entries] == ["paged", "whole"]
    paged, whole = entries
    assert (paged["package"], paged["version"]) == ("@acme/notes-mcp", "1.4.2")
    # No install to read the version from: the server's own serverInfo version is recorded.
    assert (whole["package"], whole["version"]) == ("notes-mcp-unlisted", whole["serverInfo"]["version"])
    assert paged["tools"] == whole["tools"] == TOOLS  # three pages of one tool each, all read
    assert (tmp_path / "logs" / "broken.log").is_file()  # where its stderr went, as the message says
    servers = bench["_catalog"].load_catalog(out)
    assert [(s.name, len(s.tools)) for s in servers] == [("paged", 3), ("whole", 3)]
    assert servers[0].tools[0]["title"] == "Open a note"


def test_dump_only_rerecords_the_named_servers_and_keeps_the_others(
    bench: dict[str, ModuleType], tmp_path: Path
) -> None:
    catalog = _recorded(tmp_path)
    config = _config(tmp_path, {"a": _replay(catalog, "a-mcp"), "b": _replay(catalog, "b-mcp")})
    out = tmp_path / "out.ndjson"
    assert _dump(bench, tmp_path, config, out) == 0
    kept = _lines(out)[0]
    shorter = tmp_path / "shorter.ndjson"
    shorter.write_text(json.dumps({"qualifiedName": "notes", "tools": TOOLS[:1]}) + "\n", encoding="utf-8")
    _config(tmp_path, {"a": _replay(catalog, "a-mcp"), "b": _replay(shorter, "b-mcp")})
    assert _dump(bench, tmp_path, config, out, "--only", "b") == 0
    a, b = _lines(out)
    assert a == kept
    assert (b["qualifiedName"], [t["name"] for t in b["tools"]]) == ("b", ["open_note"])
    with pytest.raises(SystemExit, match=r"not in the config: \['c'\]"):
        _dump(bench, tmp_path, config, out, "--only", "c")


def test_real_server_requests_name_recorded_tools_and_cover_every_server(
    bench: dict[str, ModuleType],
) -> None:
    servers = bench["_catalog"].load_catalog(BENCH / "data" / "real_servers.ndjson")
    known = {f"{s.name}/{t['name']}" for s in servers for t in s.tools}
    config = json.loads((BENCH / "data" / "real_servers.json").read_text(encoding="utf-8"))["servers"]
    assert [s.name for s in servers] == list(config)
    assert all(s.tools for s in servers)
    queries = _lines(BENCH / "queries" / "real_servers.jsonl")
    assert len(queries) >= 80
    assert len({q["query"] for q in queries}) == len(queries)
    unknown = [t for q in queries for t in q["tools"] if t not in known]
    assert unknown == []
    per_server = Counter(t.rpartition("/")[0] for q in queries for t in set(q["tools"]))
    assert min(per_server[s.name] for s in servers) >= 2, per_server


def test_catalog_requests_name_tools_of_livemcpbench_or_toolgym(bench: dict[str, ModuleType]) -> None:
    paths = [SHARED / "livemcpbench" / "tools.json", SHARED / "toolgym" / "tool_descriptions.ndjson"]
    for path in paths:
        if not path.is_file():
            pytest.fail(f"{path} is missing: the tests need ../shared beside the clone")
    known = {
        f"{s.name}/{t['name']}" for p in paths for s in bench["_catalog"].load_catalog(p) for t in s.tools
    }
    queries = _lines(BENCH / "queries" / "catalog_natural.jsonl")
    assert len(queries) >= 180
    assert len({q["query"] for q in queries}) == len(queries)
    assert all(q["tools"] for q in queries)
    assert [t for q in queries for t in q["tools"] if t not in known] == []
    assert len({t.rpartition("/")[0] for q in queries for t in q["tools"]}) >= 100


def test_pool_groups_forks_and_adds_same_name_tools_only_when_alike(bench: dict[str, ModuleType]) -> None:
    lc = bench["label_candidates"]
    tools = [
        ("notes", "open_note", "Open one note by name from the notebook."),
        ("@fork/notes", "open_note", "Open one note by name from the notebook."),
        ("@other/notes", "open_note", "Open one note by its name from your notebook."),
        ("files", "open_note", "Launch an unrelated viewer window."),
        ("weather", "forecast", "Rain and sun for tomorrow."),
    ]
    item = {"query": "show me my shopping note", "tools": ["notes/open_note"], "grep": [r"rain", r"sun"]}
    found, missing = lc.pool(item, tools, {}, 5)
    assert missing == []
    assert found == {0: [], 1: ["copy"], 2: ["copy"], 4: ["grep"]}
    groups = lc.group(found, tools, set(item["tools"]))
    assert [(g["name"], g["servers"], g["labelled"]) for g in groups] == [
        ("open_note", ["notes", "@fork/notes"], [True, False]),
        ("forecast", ["weather"], [False]),
        ("open_note", ["@other/notes"], [False]),
    ]
    _, missing = lc.pool({"query": "x", "tools": ["notes/close_note"]}, tools, {}, 5)
    assert missing == ["notes/close_note"]
