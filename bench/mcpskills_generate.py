"""Generation time of one N-tool MCP server skill on real schemas (prints, never asserts).

Usage: python bench/mcpskills_generate.py [TOOLS_JSON] [--tools 1000] [--runs 5]
TOOLS_JSON defaults to ../shared/data/livemcpbench/tools.json (LiveMCPBench format); its
tools are repeated with unique names up to --tools. Target: <= 1 s for 1,000 tools.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from keen.mcp.types import ServerState, ServerStatus, Tool
from keen.mcpskills import generate_skill

DEFAULT = Path(__file__).resolve().parents[2] / "shared" / "data" / "livemcpbench" / "tools.json"


def load_tools(path: Path, count: int) -> list[Tool]:
    entries = [
        t
        for srv in json.loads(path.read_text(encoding="utf-8"))
        for b in srv["tools"].values()
        for t in b["tools"]
    ]
    return [
        Tool(
            "bench",
            f"{e['name']}_{i:05d}",
            e.get("description") or "",
            e.get("inputSchema") or {},
            annotations=e.get("annotations") or None,
        )
        for i, e in ((i, entries[i % len(entries)]) for i in range(count))
    ]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("tools_json", nargs="?", type=Path, default=DEFAULT)
    parser.add_argument("--tools", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    tools = load_tools(args.tools_json, args.tools)
    now = datetime.now(UTC)
    status = ServerStatus("bench", "stdio", "none", ServerState.CONNECTED, last_refresh_at=now)
    for fsync in (True, False):
        first: list[float] = []
        swap: list[float] = []
        same: list[float] = []
        for _ in range(args.runs):
            base = Path(tempfile.mkdtemp(prefix="keen-bench-", dir=Path.cwd()))
            root = base / "skills"
            t = time.perf_counter()
            generate_skill(root, status, tools, now=now, fsync=fsync)
            first.append(time.perf_counter() - t)
            t = time.perf_counter()
            generate_skill(root, status, tools[:-1], now=now, fsync=fsync)  # new version + delete old
            swap.append(time.perf_counter() - t)
            t = time.perf_counter()
            generate_skill(root, status, tools[:-1], now=now, fsync=fsync)  # unchanged
            same.append(time.perf_counter() - t)
            shutil.rmtree(base)
        ms = lambda xs: f"median {statistics.median(xs) * 1000:.0f} ms, min {min(xs) * 1000:.0f} ms"  # noqa: E731
        print(
            f"{args.tools} tools, fsync={fsync}: first generation {ms(first)}; "
            f"regenerate+swap {ms(swap)}; unchanged {ms(same)}"
        )


if __name__ == "__main__":
    main()
