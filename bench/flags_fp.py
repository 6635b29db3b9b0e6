"""False positives of the discovery flags over real tool catalogs (prints, never asserts).

Usage: ``python bench/flags_fp.py CATALOG [CATALOG ...] [--repeat 3] [--json]``

Each CATALOG is a LiveMCPBench ``tools.json`` or a ToolGym ``.ndjson`` (see ``_catalog.py``).
The servers of one catalog are treated as configured together (the shadowing check sees
every other server of the same file, which is harsher than any real configuration), and
every tool is scanned with ``keen.trust.flags.scan_server``. These catalogs are ordinary
public servers, so every flag is counted as a false positive unless a person reading the
list below judges otherwise: the list shows each flagged tool with its flags (kind,
field, reason, escaped excerpt).

Prints the tool count, the flagged count and rate (target: under 0.5%), counts per kind,
the scan time of a first scan (nothing cached) and of a second scan of the same tools (as a
session repeats it), each as min / median / max over ``--repeat`` runs (every run starts
with the caches emptied), the second as a ratio to the first, with the machine's load
average before and after, then every flagged tool.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _catalog import keen_names, load_catalog
from _common import load_text
from keen.mcp.types import Tool
from keen.trust import flags as flag_module
from keen.trust.flags import ShadowIndex, scan_server

TARGET_RATE = 0.005


def _tool(server: str, raw: dict[str, object]) -> Tool:
    def as_dict(value: object) -> dict[str, object] | None:
        return value if isinstance(value, dict) else None

    title = raw.get("title")
    return Tool(
        server=server,
        name=str(raw.get("name", "")),
        description=str(raw.get("description") or ""),
        input_schema=as_dict(raw.get("inputSchema")) or {},
        title=title if isinstance(title, str) else None,
        annotations=as_dict(raw.get("annotations")),
        output_schema=as_dict(raw.get("outputSchema")),
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("catalogs", nargs="+", type=Path, help="tools.json / .ndjson files")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead")
    parser.add_argument("--repeat", type=int, default=3, help="scan runs (default 3)")
    options = parser.parse_args()
    load_before = os.getloadavg()

    total = 0
    flagged: list[tuple[str, str, str, list[dict[str, object]]]] = []
    kinds: Counter[str] = Counter()
    catalogs: list[tuple[str, dict[str, list[Tool]], ShadowIndex]] = []
    for path in options.catalogs:  # loaded first: the scan time is the scan's alone
        servers = load_catalog(path)
        names = keen_names(s.key for s in servers)
        tools = {name: [_tool(name, raw) for raw in s.tools] for name, s in zip(names, servers, strict=True)}
        shadow = ShadowIndex({name: [t.name for t in ts] for name, ts in tools.items()})
        catalogs.append((path.name, tools, shadow))
    firsts: list[float] = []
    agains: list[float] = []
    for run in range(max(1, options.repeat)):
        _clear_caches()  # each run's first scan is a cold one
        started = time.perf_counter()
        for catalog, tools, shadow in catalogs:
            for name, server_tools in tools.items():
                found = scan_server(name, server_tools, shadow)
                if run == 0:
                    total += len(server_tools)
                    for tool_name, flags in found.items():
                        flagged.append((catalog, name, tool_name, [f.to_dict() for f in flags]))
                        kinds.update({f.kind for f in flags})
        firsts.append(time.perf_counter() - started)
        # Again, as a session does whenever servers come and go: each text's own findings and
        # its split into names are cached; only the shadowing lookups run again.
        started = time.perf_counter()
        for _, tools, shadow in catalogs:
            for name, server_tools in tools.items():
                scan_server(name, server_tools, shadow)
        agains.append(time.perf_counter() - started)
    elapsed, again = statistics.median(firsts), statistics.median(agains)
    load_after = os.getloadavg()
    rate = len(flagged) / total if total else 0.0

    if options.json:
        print(
            json.dumps(
                {
                    "tools": total,
                    "flagged": len(flagged),
                    "rate": rate,
                    "by_kind": dict(kinds),
                    "seconds": round(elapsed, 3),
                    "seconds_again": round(again, 3),
                    "seconds_runs": [round(v, 3) for v in firsts],
                    "seconds_again_runs": [round(v, 3) for v in agains],
                    "load_average": [load_before, load_after],
                    "flagged_tools": [
                        {"catalog": c, "server": s, "tool": t, "flags": f} for c, s, t, f in flagged
                    ],
                },
                indent=2,
                ensure_ascii=False,
            )
        )
        return 0
    verdict = "under" if rate < TARGET_RATE else "OVER"
    print(f"tools scanned: {total}")
    print(f"tools flagged: {len(flagged)}  rate {rate:.3%}  ({verdict} the {TARGET_RATE:.1%} target)")
    print("flagged tools by kind: " + (", ".join(f"{k} {n}" for k, n in sorted(kinds.items())) or "none"))
    print(
        f"scan time, min / median / max of {len(firsts)} runs: {_spread(firsts)} s (baseline); "
        f"again (texts cached): {_spread(agains)} s, ratio of the medians {again / elapsed:.2f}x"
    )
    print(f"machine: {load_text(load_before, load_after)}")
    for catalog, server, tool, flags in flagged:
        print(f"\n{catalog}  {server}/{tool}")
        for flag in flags:
            print(f"  [{flag['kind']}] {flag['field']}: {flag['reason']}")
            print(f"      {flag['excerpt']}")
    return 0


def _spread(values: list[float]) -> str:
    return " / ".join(f"{v:.2f}" for v in (min(values), statistics.median(values), max(values)))


def _clear_caches() -> None:
    """Empty the flag scan's caches of texts and tools (a fresh process's state)."""
    for value in vars(flag_module).values():
        clear = getattr(value, "cache_clear", None)
        if callable(clear):
            clear()
    flag_module._tool_parts.clear()  # pyright: ignore[reportPrivateUsage]


if __name__ == "__main__":
    raise SystemExit(main())
