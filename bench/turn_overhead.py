"""Time of ``Harness.begin_step`` (the catalog rebuild of every agent step) over a realistic Keen home.

Usage: python bench/turn_overhead.py [TOOLS_JSON] [--servers 70] [--user-skills 10] [--turns 30]

``TOOLS_JSON`` defaults to ../shared/data/livemcpbench/tools.json. Its servers are replayed
by ``catalog_server.py --impl lite`` (one stdio process each), the runtime syncs them into
generated skills (``mcp:<server>``, a versioned dir behind a symlink) and ``--user-skills``
hand-written skills are added beside them. Then ``begin_step`` is timed ``--turns`` times:

- uncached: the catalog rebuilt from scratch each turn (``Catalog.from_manager``: skills
  dir rescanned, every SKILL.md frontmatter parsed, every tool descriptor rebuilt);
- cached: the runtime's harness (``Runtime.harness``), whose catalog is reused while the
  skills dir and the servers' lists are unchanged;
- after a change: a user SKILL.md edited before each turn (the cache reads that skill again,
  and the one edited a turn earlier, still younger than the racy window; the catalog is
  rebuilt from the kept server parts).

Prints medians (ms); never asserts.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio

from _catalog import keen_names, load_catalog
from _common import PYTHON, keen_home, print_block, write_config
from keen.capabilities import Catalog
from keen.harness import Harness
from keen.runtime import Runtime, open_runtime

HERE = Path(__file__).resolve().parent
DEFAULT = HERE.parents[1] / "shared" / "data" / "livemcpbench" / "tools.json"
CATALOG_SERVER = str(HERE / "catalog_server.py")
CONNECT_TIMEOUT_S = 120.0


def write_user_skills(root: Path, count: int) -> list[Path]:
    files: list[Path] = []
    for i in range(count):
        folder = root / f"notes-{i:02d}"
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / "SKILL.md"
        path.write_text(
            f"---\nname: notes-{i:02d}\ndescription: House rules number {i} for the docs folder.\n"
            f"paths: [docs/part{i}/**]\n---\n\n# Notes {i}\n\n" + "Some body text.\n" * 40,
            encoding="utf-8",
        )
        files.append(path)
    return files


def time_turns(harness: Harness, turns: int, before_each: Callable[[int], None] | None = None) -> list[float]:
    times: list[float] = []
    for i in range(turns):
        if before_each is not None:
            before_each(i)
        started = time.perf_counter()
        harness.begin_step()
        times.append(time.perf_counter() - started)
        harness.end_step()
    return times


def uncached_harness(rt: Runtime, home: Path) -> Harness:
    def source() -> Catalog:
        return Catalog.from_manager(rt.manager, skills_root=rt.skills_root, pins=rt.gateway.pins)

    return Harness(source, rt.gateway, mode="auto", workspace=home)


async def run(args: argparse.Namespace) -> list[tuple[str, str]]:
    records = load_catalog(args.tools_json)[: args.servers]
    names = keen_names([r.name for r in records])
    with keen_home() as home:
        servers: dict[str, Any] = {
            name: {
                "command": PYTHON,
                "args": [
                    CATALOG_SERVER,
                    "--catalog",
                    str(args.tools_json),
                    "--server",
                    r.name,
                    "--impl",
                    "lite",
                ],
                "timeouts": {"connect": CONNECT_TIMEOUT_S, "list_tools": CONNECT_TIMEOUT_S},
            }
            for name, r in zip(names, records, strict=True)
        }
        write_config(home, servers)
        async with open_runtime(wait=CONNECT_TIMEOUT_S * 2, sync=True) as rt:
            user_files = write_user_skills(rt.skills_root, args.user_skills)
            skills = sum(1 for p in rt.skills_root.iterdir() if not p.name.startswith(".") and p.is_dir())
            tools = sum(s.tool_count for s in rt.manager.servers())
            # Files just written share the filesystem's clock tick with a possible next edit;
            # let them age so the cached runs measure the steady state, not the racy window.
            await anyio.sleep(0.2)
            plain = uncached_harness(rt, home)
            cached = rt.harness(mode="auto", workspace=home)
            try:
                time_turns(plain, 2)  # warm imports and the search cache directory
                time_turns(cached, 2)
                uncached_s = time_turns(plain, args.turns)
                scans = rt.skills.scans
                cached_s = time_turns(cached, args.turns)
                scans = rt.skills.scans - scans

                def edit(i: int) -> None:
                    path = user_files[i % len(user_files)]
                    path.write_text(path.read_text(encoding="utf-8") + f"edit {i}\n", encoding="utf-8")

                changed_s = time_turns(cached, args.turns, edit) if user_files else []
            finally:
                plain.close()
                cached.close()
        ms = lambda xs: f"median {statistics.median(xs) * 1000:.2f} ms, min {min(xs) * 1000:.2f} ms"  # noqa: E731
        rows = [
            (
                "skills dir",
                f"{skills} skills ({len(records)} generated, {len(user_files)} user), {tools} tools",
            ),
            ("begin_step uncached", ms(uncached_s)),
            ("begin_step cached", f"{ms(cached_s)} ({scans} skills-dir scans in {len(cached_s)} turns)"),
            ("speed-up", f"{statistics.median(uncached_s) / statistics.median(cached_s):.1f}x"),
        ]
        if changed_s:
            rows.append(("begin_step, SKILL.md edited", ms(changed_s)))
        return rows


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("tools_json", nargs="?", type=Path, default=DEFAULT)
    parser.add_argument("--servers", type=int, default=70)
    parser.add_argument("--user-skills", type=int, default=10)
    parser.add_argument("--turns", type=int, default=30)
    args = parser.parse_args()
    if not args.tools_json.is_file():
        sys.exit(f"no catalog at {args.tools_json}; pass the LiveMCPBench tools.json path")
    rows = anyio.run(run, args)
    print_block("Harness.begin_step overhead (catalog per turn)", rows)


if __name__ == "__main__":
    main()
