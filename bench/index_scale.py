"""Search index at scale: full build against one server's refresh, warm load, first query,
peak memory (prints, never asserts).

Each size runs ``--runs`` times, each in a fresh process (so its peak resident memory is
its own, read with ``resource.getrusage``), and every figure is printed as min / median /
max over the runs with the machine's 1-minute load average. Sizes are tool counts: the
LiveMCPBench and ToolGym catalogs (292 servers, 4,310 tools after one duplicate id), then
their servers replicated under new names (``<name>-r2``, ...) up to the size, plus one
``probe`` server (so 293 servers at the first size). In each process, with an empty cache
folder and the keyword and wordllama signals (the transformer vectors are encoded in the
background and cached per tool text: ``keen.capabilities.dense``):

- ``full build``: every document tokenised and the index assembled (the baseline: what
  every change cost before the index kept its documents);
- ``refresh``: the probe server's tool list changes (a new tool), a new catalog is made
  with the other servers' descriptors unchanged, as ``CatalogCache`` makes it (the last
  catalog with the probe server replaced: ``Catalog.with_servers``; a Keen from before it,
  a new catalog of every descriptor), and the time until a search finds the new tool in
  its top 5 (target 100 ms at 293 servers);
- ``new process, one server changed``: the same after the process forgot its rows, from
  the cache folder of the last catalog (its other servers' rows reused);
- ``warm load``: the index of an unchanged catalog loaded from its cache folder, and the
  first query after it (target 20 ms) and the median of the next ten;
- ``peak RSS`` of the process, beside its peak right after the full build.

The full build, the refreshes, the warm load and the first query also print the CPU time
of the thread that ran them (``time.thread_time``: not the background writer's, nor other processes'), the
figure the machine's load moves least.

Each time figure is printed beside its ratio to the full build of the same size (the
baseline, medians of the same processes), and with more than one size a last table gives
each figure's growth from the smallest size to the largest beside the catalog's.

With ``--dense-cache DIR`` (default ``.bench/cache/embeddings`` when it exists: the vector
cache ``bench/search.py`` fills), the first size also times the refresh with the
transformer on: when the new tool is findable, and when its vector is encoded and the
transformer signal is back.

Usage: ``python bench/index_scale.py [CATALOG ...] [--sizes 4311,20000,50000] [--runs 3] [--json]``
"""

from __future__ import annotations

import argparse
import bisect
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
SHARED = Path(os.environ.get("KEEN_SHARED_DATA", HERE.parents[1] / "shared" / "data"))
if not SHARED.is_dir():
    SHARED = Path("/work/shared/data")
DEFAULT_CATALOGS = [SHARED / "livemcpbench" / "tools.json", SHARED / "toolgym" / "tool_descriptions.ndjson"]
REFRESH_TARGET_MS = 100.0
FIRST_QUERY_TARGET_MS = 20.0
QUERIES = [
    "send an email to my team about the release",
    "weather forecast for Paris tomorrow",
    "open a pull request on github",
    "convert a pdf file to text",
    "search arxiv for papers on retrieval",
    "list the files in a folder",
    "translate a sentence to French",
    "create a calendar event next monday",
    "get the stock price of apple",
    "query a postgres database table",
    "resize an image",
]
PROBE_QUERY = "zanzibarite frobnicator lookup"


def _catalog_servers(paths: list[Path], size: int) -> list[tuple[str, str, list[dict[str, Any]]]]:
    """(server name, server text, tools) up to ``size`` tools, replicated under new names."""
    sys.path.insert(0, str(HERE))
    from _catalog import load_catalog
    from keen.capabilities.catalog import server_text
    from keen.mcp.types import ServerInfo, Tool

    recorded = [s for p in paths for s in load_catalog(p)]
    out: list[tuple[str, str, list[dict[str, Any]]]] = []
    total = 0
    copy = 1
    while total < size:
        for rec in recorded:
            if total >= size:
                break
            name = rec.name if copy == 1 else f"{rec.name}-r{copy}"
            tools = rec.tools[: size - total]
            info = ServerInfo(rec.info_name, rec.version, None, rec.instructions)
            listed = [
                Tool(name, t["name"], t.get("description") or "", t.get("inputSchema") or {}) for t in tools
            ]
            out.append((name, server_text(name, info, listed), tools))
            total += len(tools)
        copy += 1
    return out


def _probe(version: int) -> list[dict[str, Any]]:
    tools = [
        {"name": "probe_status", "description": "Status of the probe.", "inputSchema": {"type": "object"}}
    ]
    if version:
        tools.append(
            {
                "name": f"zanzibarite_frobnicator_{version}",
                "description": "Look up a zanzibarite frobnicator by its serial number.",
                "inputSchema": {"type": "object", "properties": {"serial": {"type": "string"}}},
            }
        )
    return tools


def _forget() -> Any:
    """``keen.capabilities.search.forget`` (a process's kept rows dropped), or nothing to
    drop: run against a Keen from before the index kept rows (``PYTHONPATH`` pointing at
    its ``src``), the same figures are its baseline."""
    import keen.capabilities.search as search

    return getattr(search, "forget", lambda: None)


def _child(paths: list[Path], size: int, dense_cache: Path | None) -> dict[str, Any]:
    """One process's figures at ``size`` tools."""
    from keen.capabilities import Catalog, tool_capability

    forget = _forget()

    servers = _catalog_servers(paths, size)
    # In id order, as CatalogCache gives a catalog its servers' parts (each sorted once).
    base = sorted((tool_capability(name, t) for name, _, tools in servers for t in tools), key=lambda c: c.id)
    cut = bisect.bisect_left([c.id for c in base], "mcp__probe__")
    texts = {name: text for name, text, _ in servers} | {"probe": "A probe server."}
    out: dict[str, Any] = {"tools": len(base) + 1, "servers": len(texts)}

    def probe(version: int) -> list[Any]:
        return sorted((tool_capability("probe", t) for t in _probe(version)), key=lambda c: c.id)

    def catalog(version: int, cache_dir: Path, dense: bool = False) -> Catalog:
        return Catalog([*base[:cut], *probe(version), *base[cut:]], texts, cache_dir=cache_dir, dense=dense)

    def replaced(last: Catalog, version: int, cache_dir: Path, dense: bool = False) -> Catalog:
        """``last`` with the probe server's new list, as CatalogCache makes it."""
        if hasattr(last, "with_servers"):
            return last.with_servers({"probe": (texts["probe"], probe(version))})
        return catalog(version, cache_dir, dense)

    def found(cat: Catalog, version: int) -> bool:
        wanted = f"mcp__probe__zanzibarite_frobnicator_{version}"
        return any(h.id == wanted for h in cat.search(PROBE_QUERY, k=5))

    with tempfile.TemporaryDirectory(prefix="keen-bench-") as tmp:
        cache = Path(tmp) / "toolsearch"
        t, c = time.perf_counter(), time.thread_time()
        first = catalog(0, cache)
        first.index()
        out["full_build_s"] = time.perf_counter() - t
        out["full_build_cpu_s"] = time.thread_time() - c
        out["full_build_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        t, c = time.perf_counter(), time.thread_time()
        changed = replaced(first, 1, cache)
        ok = found(changed, 1)
        out["refresh_ms"] = (time.perf_counter() - t) * 1000
        out["refresh_cpu_ms"] = (time.thread_time() - c) * 1000
        out["refresh_found"] = ok
        forget()
        t, c = time.perf_counter(), time.thread_time()
        again = catalog(2, cache)
        ok = found(again, 2)
        out["new_process_refresh_ms"] = (time.perf_counter() - t) * 1000
        out["new_process_refresh_cpu_ms"] = (time.thread_time() - c) * 1000
        out["new_process_refresh_found"] = ok
        forget()
        t, c = time.perf_counter(), time.thread_time()
        warm = catalog(2, cache)
        warm.index()
        out["warm_load_ms"] = (time.perf_counter() - t) * 1000
        out["warm_load_cpu_ms"] = (time.thread_time() - c) * 1000
        t, c = time.perf_counter(), time.thread_time()
        warm.search(QUERIES[0], k=5)
        out["first_query_ms"] = (time.perf_counter() - t) * 1000
        out["first_query_cpu_ms"] = (time.thread_time() - c) * 1000
        times = []
        for query in QUERIES[1:]:
            t = time.perf_counter()
            warm.search(query, k=5)
            times.append((time.perf_counter() - t) * 1000)
        out["next_query_ms"] = statistics.median(times)
        out["cache_folders"] = sum(1 for p in cache.iterdir() if not p.name.startswith("."))
        out["cache_mb"] = sum(f.stat().st_size for f in cache.rglob("*") if f.is_file()) / 1e6
        if dense_cache is not None:
            out |= _dense_refresh(catalog, replaced, found, Path(tmp), dense_cache)
        forget()  # waits for the cache folders written in the background
    out["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    out["load_average_1m"] = os.getloadavg()[0]
    return out


def _dense_refresh(catalog: Any, replaced: Any, found: Any, tmp: Path, dense_cache: Path) -> dict[str, Any]:
    """The refresh with the transformer on, over a copy of the vector cache."""
    forget = _forget()

    root = tmp / "dense"
    shutil.copytree(dense_cache, root / "embeddings")
    forget()
    before = catalog(3, root / "toolsearch", dense=True)
    before.index()
    if not before.wait_ready(600):
        return {"dense": "the transformer did not get ready: " + before.search_status()}
    t = time.perf_counter()
    changed = replaced(before, 4, root / "toolsearch", dense=True)
    ok = found(changed, 4)
    findable = (time.perf_counter() - t) * 1000
    changed.wait_ready(600)
    ready = (time.perf_counter() - t) * 1000
    missing = changed.index().dense
    return {
        "dense_findable_ms": findable,
        "dense_found": ok,
        "dense_ready_ms": ready,
        "dense_encoded": 0 if missing is None else missing.missing,
    }


def _stats(values: list[float]) -> str:
    return f"{min(values):.1f} / {statistics.median(values):.1f} / {max(values):.1f}"


# (label, key, unit, scale, note): each time figure, printed beside its ratio to the cold
# full build of the same size (its baseline, from the same processes).
_FIGURES = [
    ("refresh of one server", "refresh_ms", "ms", 1.0, "to the new tool found, target {refresh} ms"),
    ("  its CPU (this thread)", "refresh_cpu_ms", "ms", 1.0, "against the full build's CPU"),
    ("new process, one server changed", "new_process_refresh_ms", "ms", 1.0, "from the last cache folder"),
    ("  its CPU (this thread)", "new_process_refresh_cpu_ms", "ms", 1.0, "against the full build's CPU"),
    ("warm load", "warm_load_ms", "ms", 1.0, "cache folder"),
    ("  its CPU (this thread)", "warm_load_cpu_ms", "ms", 1.0, "against the full build's CPU"),
    ("first query after it", "first_query_ms", "ms", 1.0, "target {query} ms"),
    ("  its CPU (this thread)", "first_query_cpu_ms", "ms", 1.0, "against the full build's CPU"),
    ("next queries (median of 10)", "next_query_ms", "ms", 1.0, ""),
]


def _rows(runs: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """The printed rows of one size: min / median / max over its processes, each with its
    ratio to the baseline's median."""
    full = [r["full_build_s"] * 1000 for r in runs]
    base = statistics.median(full)
    rows = [("full build (baseline)", f"{_stats(full)} ms")]
    if all("full_build_cpu_s" in r for r in runs):
        rows.append(("  its CPU (this thread)", f"{_stats([r['full_build_cpu_s'] * 1000 for r in runs])} ms"))
    for label, key, unit, scale, note in _FIGURES:
        values = [r[key] * scale for r in runs]
        # CPU figures against the full build's CPU: what the shared machine's load moves least.
        cpu = key.endswith("_cpu_ms") and all("full_build_cpu_s" in r for r in runs)
        ratio = statistics.median(values) / (
            statistics.median([r["full_build_cpu_s"] * 1000 for r in runs]) if cpu else base
        )
        text = note.format(refresh=f"{REFRESH_TARGET_MS:.0f}", query=f"{FIRST_QUERY_TARGET_MS:.0f}")
        found = {"refresh_ms": "refresh_found", "new_process_refresh_ms": "new_process_refresh_found"}.get(
            key
        )
        missing = "  NOT FOUND" if found and not all(r[found] for r in runs) else ""
        rows.append(
            (
                label,
                f"{_stats(values)} {unit}  (x{ratio:.4f} of a full build; {text}){missing}".replace(
                    "; )", ")"
                ),
            )
        )
    fig = runs[0]
    full_rss = [r["full_build_rss_mb"] for r in runs]
    peak = [r["peak_rss_mb"] for r in runs]
    rows += [
        (
            "cache folder",
            f"{fig['cache_folders']} catalogs kept, {statistics.median([r['cache_mb'] for r in runs]):.1f} MB",
        ),
        (
            "peak RSS",
            f"{_stats(peak)} MB  (x{statistics.median(peak) / statistics.median(full_rss):.2f} of the peak "
            f"after the full build, {_stats(full_rss)} MB)",
        ),
        ("1-min load average", f"{_stats([r['load_average_1m'] for r in runs])} on {os.cpu_count()} CPUs"),
    ]
    if "dense_findable_ms" in fig:
        rows.append(
            (
                "refresh, transformer on",
                f"findable {_stats([r['dense_findable_ms'] for r in runs])} ms; its vector encoded and "
                f"the transformer back {_stats([r['dense_ready_ms'] for r in runs])} ms",
            )
        )
    elif "dense" in fig:
        rows.append(("refresh, transformer on", fig["dense"]))
    return rows


def _growth(results: dict[int, list[dict[str, Any]]]) -> list[tuple[str, str]]:
    """Each figure's median at the largest size over the smallest, beside the growth of the
    catalog (linear: the same ratio; a refresh of one server should grow far less)."""
    sizes = sorted(results)
    small, large = results[sizes[0]], results[sizes[-1]]
    tools = large[0]["tools"] / small[0]["tools"]
    servers = large[0]["servers"] / small[0]["servers"]
    rows = [("tools / servers", f"x{tools:.1f} / x{servers:.1f}")]
    keys = [("full build (baseline)", "full_build_s"), *[(label, key) for label, key, *_ in _FIGURES]]
    keys = [(label, key) for label, key in keys if all(key in r for r in small + large)]
    keys.append(("peak RSS", "peak_rss_mb"))
    for label, key in keys:
        ratio = statistics.median([r[key] for r in large]) / statistics.median([r[key] for r in small])
        rows.append(
            (label, f"x{ratio:.1f} ({'linear or better' if ratio <= tools * 1.1 else 'WORSE than linear'})")
        )
    return rows


def _print(title: str, rows: list[tuple[str, str]]) -> None:
    print(title)
    print("-" * len(title))
    width = max(len(label) for label, _ in rows)
    for label, value in rows:
        print(f"  {label.ljust(width)} : {value}")
    print()


def main() -> None:
    parser = argparse.ArgumentParser(description="Search index build, refresh, load and memory at scale.")
    parser.add_argument(
        "catalog", nargs="*", type=Path, help="tools.json / .ndjson (default: the shared data)"
    )
    parser.add_argument("--sizes", default="4311,20000,50000", help="tool counts (default 4311,20000,50000)")
    parser.add_argument("--runs", type=int, default=3, help="processes per size (default 3)")
    parser.add_argument("--dense-cache", type=Path, default=Path(".bench/cache/embeddings"))
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    paths = args.catalog or DEFAULT_CATALOGS
    for path in paths:
        if not path.is_file():
            raise SystemExit(f"index_scale: {path} does not exist; pass the catalogs")
    if args.child:
        size, dense = args.child.split(":", 1)
        print(json.dumps(_child(paths, int(size), Path(dense) if dense else None)))
        return
    sizes = [int(s) for s in args.sizes.split(",")]
    results: dict[int, list[dict[str, Any]]] = {}
    for n, size in enumerate(sizes):
        dense = str(args.dense_cache.resolve()) if n == 0 and args.dense_cache.is_dir() else ""
        runs = []
        for _ in range(args.runs):
            done = subprocess.run(
                [sys.executable, __file__, *map(str, paths), "--child", f"{size}:{dense}"],
                capture_output=True,
                text=True,
                check=False,
            )
            if done.returncode != 0:
                raise SystemExit(f"index_scale: the {size}-tool run failed: {done.stderr[-2000:]}")
            runs.append(json.loads(done.stdout.strip().splitlines()[-1]))
        results[size] = runs
    if args.json:
        print(json.dumps(results, indent=2))
        return
    for runs in results.values():
        fig = runs[0]
        _print(
            f"search index, {fig['tools']:,} tools on {fig['servers']} servers ({len(runs)} processes)",
            _rows(runs),
        )
    if len(results) > 1:
        sizes = sorted(results)
        _print(
            f"growth from {results[sizes[0]][0]['tools']:,} to {results[sizes[-1]][0]['tools']:,} tools (medians)",
            _growth(results),
        )


if __name__ == "__main__":
    main()
