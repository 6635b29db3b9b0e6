"""Prompt footprint and sync time with real MCP tool catalogs (prints, never asserts).

Usage: ``python bench/footprint.py [CATALOG_OR_DIR ...] [--impl lite|sdk] [--names key|name]
[--gen-tools 1000] [--gen-runs 5] [--budget TOKENS [--annotations FILE]] [--json]``

Catalogs default to ``../shared/data/livemcpbench/tools.json`` and
``../shared/data/toolgym/tool_descriptions.ndjson`` beside the repo; a directory stands for
the ``tools.json`` and ``*.ndjson`` files under it. Scenario *k* configures every server of
the first *k* catalogs (70 LiveMCPBench servers, then those plus the 222 ToolGym ones),
each a ``bench/catalog_server.py`` stdio process replaying its recorded tools, in a fresh
``KEEN_HOME``. Per scenario, through the public API:

- sync wall time: ``Manager.start()`` + ``wait_ready()`` + ``sync_from_manager()``, from
  start() until every skill is written (fsync on, as in real use), with its parts
  (all connected; skill generation, and the same skills written again with fsync off) and
  the CPU seconds the server processes and Keen used, and Keen's peak resident memory
  over the same span (``VmHWM``, reset through ``/proc/self/clear_refs`` before each
  scenario; where that is unavailable, the process's lifetime peak);
- ``prompt_stats()``: tokens with every tool definition inline vs Keen's skills section
  plus the ``call_mcp_tool`` definition, and the reduction; split into section header,
  catalog lines and gateway tool, and recounted with the skills dir written as
  ``/home/user/.keen/skills`` (each catalog line holds the absolute skill path, and a random
  temp dir name costs more tokens than a real home). Counts are exact o200k_base counts
  (:mod:`keen.tokens`; the tokenizer is printed).

``--budget TOKENS`` adds, per scenario, the budgeted MCP part of the prompt (catalog +
``call_mcp_tool`` + ``search_tools`` within the budget) and server-level recall@3 of the
LiveMCPBench task questions (``--annotations``) with the unbudgeted catalog, the budgeted
lines alone, and the budgeted lines plus ToolSearch (see ``_budget.py``).

A scenario whose replay servers would need more than half the available memory (measured
RSS of one replay process x servers; 292 SDK servers need ~19 GB) is skipped and says so.

Then the generation time of one 1,000-tool skill (``generate_skill``, fsync on) from the
first catalog's tools, repeated with unique names, and the start time of one replay server
process per implementation (spawn to ``initialize`` answered, and its resident memory).

Server names: Keen needs ``^[A-Za-z0-9_-]{1,64}$``. ``--names key`` (default) uses the
LiveMCPBench ``mcpServers`` key (what a user would call it) and the ToolGym qualified name;
an invalid one is slugified (``@docfork/mcp`` -> ``docfork-mcp``) and a taken one gets
``-2``, ``-3``, ...; the output says how many were changed. ``--impl lite`` (default) runs
the replay servers without the SDK (see catalog_server.py): the SDK import costs each
process about a second of CPU, which on 2 cores is most of the wall time and not Keen's.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio

from _budget import budget_figures
from _catalog import RecordedServer, keen_names, load_catalog
from _common import PYTHON, keen_home, print_block, verdict, write_config
from keen.gateway import tool_definition
from keen.mcp import Manager, ServerState, ServerStatus
from keen.mcp.types import Tool
from keen.mcpskills import generate_skill
from keen.mcpskills.startup import snapshots, sync_from_manager
from keen.mcpskills.sync import sync_mcp_skills
from keen.prompt import prompt_stats, skills_prompt
from keen.skills.config import SkillsConfig
from keen.tokens import TokenCounter, token_counter
from keen.trust import PinGuard
from livemcpbench_queries import convert

__all__ = ["generation", "main", "process_start", "scenario"]

HERE = Path(__file__).resolve().parent
CATALOG_SERVER = str(HERE / "catalog_server.py")
SHARED = HERE.parents[1] / "shared" / "data"
DEFAULT_CATALOGS = [SHARED / "livemcpbench" / "tools.json", SHARED / "toolgym" / "tool_descriptions.ndjson"]

REDUCTION_TARGET, REDUCTION_AIM = 0.95, 0.97
SYNC_TARGET_S, SYNC_TARGET_SERVERS = 20.0, 70
GEN_TARGET_S = 1.0
TYPICAL_ROOT = "/home/user/.keen/skills"
"""The catalog names each skill by absolute path; a random temp dir costs more tokens than this."""
MEMORY_SHARE = 0.5
"""Skip a scenario whose replay servers would need more than this share of MemAvailable."""
# Generous: 292 interpreters starting at once on 2 cores must not time out (each has its own).
CONNECT_TIMEOUT_S = 900.0


def _catalog_files(args: list[Path]) -> list[Path]:
    files: list[Path] = []
    for path in args or DEFAULT_CATALOGS:
        if path.is_dir():
            files += sorted([*path.rglob("tools.json"), *path.rglob("*.ndjson")])
        elif path.is_file():
            files.append(path)
        else:
            raise SystemExit(f"footprint: {path} does not exist; pass a tools.json, an .ndjson or a folder")
    if not files:
        raise SystemExit("footprint: no tools.json or .ndjson under the given folders")
    return files


def _cpu(who: int) -> float:
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


def _reset_peak_rss() -> bool:
    """Reset this process's peak resident set (Linux ``/proc/self/clear_refs``, value 5),
    so :func:`_peak_rss_mb` measures from here; whether it could."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        return False
    return True


def _peak_rss_mb() -> float:
    """This process's peak resident set in MB: ``VmHWM`` (since the last reset) where
    ``/proc`` has it, else ``getrusage``'s lifetime peak."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _entry(path: Path, server: RecordedServer, impl: str) -> dict[str, Any]:
    return {
        "command": PYTHON,
        "args": [CATALOG_SERVER, "--catalog", str(path), "--server", server.name, "--impl", impl],
        "timeouts": {"connect": CONNECT_TIMEOUT_S, "list_tools": CONNECT_TIMEOUT_S},
    }


def _split_tokens(root: Path, counter: TokenCounter, shown_root: str | None = None) -> dict[str, int]:
    """The catalog side of ``prompt_stats`` in parts (section header, lines, gateway tool),
    with the skills dir written as ``shown_root`` instead of ``root`` when given."""
    shown = shown_root or str(root)
    section = skills_prompt(root).replace(str(root), shown)
    lines = [line for line in section.splitlines() if line.startswith("- ")]
    gateway = json.dumps(tool_definition("openai", skills_dir=shown), separators=(",", ":"))
    line_tokens = sum(counter.count(line + "\n") for line in lines)
    return {
        "total": counter.count(section) + counter.count(gateway),
        "lines": line_tokens,
        "header": counter.count(section) - line_tokens,
        "gateway_tool": counter.count(gateway),
        "line_count": len(lines),
    }


def _skills_without_fsync(manager: Manager, root: Path) -> float:
    """Seconds to write the same skills into a fresh ``root`` with fsync off (what fsync costs)."""
    snaps = snapshots(manager)
    root.mkdir(parents=True)
    t = time.perf_counter()
    sync_mcp_skills(
        snaps, skills_root=root, skills_config=SkillsConfig.load(root / "config.json"), fsync=False
    )
    return time.perf_counter() - t


async def scenario(
    servers: dict[str, tuple[Path, RecordedServer]],
    impl: str,
    budget: int = 0,
    tasks: list[tuple[str, set[str]]] | None = None,
) -> dict[str, Any]:
    """Sync ``servers`` (Keen name -> (catalog, server)) in a fresh KEEN_HOME; figures as a dict.
    With ``budget``: the budgeted prompt figures over ``tasks`` (question, Keen server names)."""
    counter = token_counter()
    with keen_home() as home:
        config = write_config(home, {name: _entry(path, rec, impl) for name, (path, rec) in servers.items()})
        connected_at: list[float] = []

        def observe(status: ServerStatus) -> None:
            if status.state is ServerState.CONNECTED:
                connected_at.append(time.perf_counter())

        manager = Manager(config, trust=PinGuard())
        manager.subscribe(observe)
        rss_reset = _reset_peak_rss()
        rss_before = _peak_rss_mb()
        children0, self0 = _cpu(resource.RUSAGE_CHILDREN), _cpu(resource.RUSAGE_SELF)
        t0 = time.perf_counter()
        await manager.start()
        try:
            settled = await manager.wait_ready(CONNECT_TIMEOUT_S * 2 + 60)
            t_ready = time.perf_counter()
            report = await sync_from_manager(manager)
            t_synced = time.perf_counter()
            self_sync = _cpu(resource.RUSAGE_SELF) - self0
            rss_peak = _peak_rss_mb()
            statuses = manager.servers()
            no_fsync = _skills_without_fsync(manager, home / "skills-no-fsync")
        finally:
            await manager.aclose()
        children = _cpu(resource.RUSAGE_CHILDREN) - children0
        up = [s for s in statuses if s.state is ServerState.CONNECTED]
        failed = {s.name: f"{s.state.value}: {s.last_error[:200]}" for s in statuses if s not in up}
        mismatched = [
            _mismatch(s, servers[s.name][1]) for s in up if s.tool_count != len(servers[s.name][1].tools)
        ]
        root = home / "skills"
        stats = prompt_stats(root, tools=[tool_definition("openai", skills_dir=str(root))], counter=counter)
        split = _split_tokens(home / "skills", counter)
        typical = _split_tokens(home / "skills", counter, TYPICAL_ROOT)
        if split["total"] != stats.catalog_tokens:  # the split must explain prompt_stats' figure
            raise SystemExit(f"footprint: catalog split {split} does not add up to {stats.catalog_tokens}")
        return {
            "configured": len(servers),
            "connected": len(up),
            "all_settled": settled,
            "failed": failed,
            "tool_count_mismatch": mismatched,
            "tools_recorded": sum(len(rec.tools) for _, rec in servers.values()),
            "tools_listed": sum(s.tool_count for s in up),
            "skills_generated": sum(e.action == "generated" for e in report.entries),
            "sync_wall_s": t_synced - t0,
            "all_connected_s": (max(connected_at) - t0) if connected_at else None,
            "first_connected_s": (min(connected_at) - t0) if connected_at else None,
            "settled_s": t_ready - t0,
            "generation_s": t_synced - t_ready,
            "generation_no_fsync_s": no_fsync,
            "server_cpu_s": children,
            "keen_cpu_s": self_sync,
            "keen_peak_rss_mb": rss_peak,
            "keen_rss_at_start_mb": rss_before,
            "keen_peak_rss_since_start": rss_reset,
            "load_average_1m": os.getloadavg()[0],
            **stats.to_dict(),
            "reduction": stats.reduction,
            "catalog_split": split,
            "typical_root": {
                "root": TYPICAL_ROOT,
                "catalog_tokens": typical["total"],
                "reduction": 1 - typical["total"] / max(stats.all_schemas_tokens, 1),
            },
            "servers_detail": [s.to_dict() for s in stats.servers],
            "budgeted": budget_figures(home / "skills", budget, counter, tasks or []) if budget else None,
        }


def _mismatch(status: ServerStatus, recorded: RecordedServer) -> str:
    distinct = len({t["name"] for t in recorded.tools})
    why = " (duplicate names; Keen keeps the first)" if distinct == status.tool_count else ""
    return f"{status.name}: {status.tool_count} listed, {len(recorded.tools)} recorded{why}"


def _tools_for_generation(servers: list[RecordedServer], count: int) -> list[Tool]:
    pool = [t for s in servers for t in s.tools]
    return [
        Tool(
            "bench",
            f"{t['name']}_{i:05d}",
            t.get("description") or "",
            t.get("inputSchema") or {},
            annotations=t.get("annotations"),
        )
        for i, t in ((i, pool[i % len(pool)]) for i in range(count))
    ]


def generation(servers: list[RecordedServer], count: int, runs: int) -> dict[str, Any]:
    """First generation of one ``count``-tool skill with fsync, ``runs`` times: wall median and
    min, CPU median (s; CPU time does not count waiting for other processes or the disk)."""
    tools = _tools_for_generation(servers, count)
    now = datetime.now(UTC)
    status = ServerStatus("bench", "stdio", "none", ServerState.CONNECTED, last_refresh_at=now)
    times: list[float] = []
    cpu: list[float] = []
    for _ in range(runs):
        base = Path(tempfile.mkdtemp(prefix="keen-bench-"))
        try:
            t, c = time.perf_counter(), time.process_time()
            generate_skill(base / "skills", status, tools, now=now)
            times.append(time.perf_counter() - t)
            cpu.append(time.process_time() - c)
        finally:
            shutil.rmtree(base)
    return {
        "tools": count,
        "median_s": statistics.median(times),
        "min_s": min(times),
        "cpu_median_s": statistics.median(cpu),
        "runs": times,
        "load_average_1m": os.getloadavg()[0],
    }


def process_start(path: Path, server: RecordedServer, impl: str, runs: int = 3) -> dict[str, Any]:
    """Spawn one replay server and time it until ``initialize`` is answered; its RSS then (MB)."""
    times: list[float] = []
    rss_mb = 0.0
    hello = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "footprint", "version": "0"},
        },
    }
    for _ in range(runs):
        t = time.perf_counter()
        with subprocess.Popen(
            [PYTHON, *_entry(path, server, impl)["args"]],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        ) as proc:
            assert proc.stdin is not None and proc.stdout is not None
            proc.stdin.write(json.dumps(hello) + "\n")
            proc.stdin.flush()
            answer = proc.stdout.readline()
            times.append(time.perf_counter() - t)
            status = Path(f"/proc/{proc.pid}/status")
            if status.exists():
                rss = next((ln for ln in status.read_text().splitlines() if ln.startswith("VmRSS:")), "")
                rss_mb = max(rss_mb, int(rss.split()[1]) / 1024 if rss else 0.0)
            proc.stdin.close()
            proc.wait(timeout=30)
        if '"result"' not in answer:
            raise SystemExit(f"footprint: the {impl} replay server did not answer initialize: {answer!r}")
    return {"impl": impl, "median_s": statistics.median(times), "runs": times, "rss_mb": rss_mb}


def _pct(x: float) -> str:
    return f"{x * 100:.2f}%"


def _report_budget(sc: dict[str, Any]) -> None:
    b = sc["budgeted"]
    recall = b["server_recall@3"]
    print_block(
        f"Budgeted MCP prompt: {sc['configured']} servers, budget {b['budget']:,} tokens",
        [
            (
                "MCP part of the prompt",
                f"{b['tokens']:,} tokens ({b['tokenizer']}; catalog + call_mcp_tool + search_tools "
                f"{b['overhead_tokens']}): {verdict(b['tokens'] <= b['budget'])} (<= {b['budget']:,})",
            ),
            (
                "step",
                f"{b['step']}: {b['listed']} lines listed, {b['folded']} servers folded behind "
                f"search_tools, description cap {b['description_cap']} (rendered in {b['render_s']:.2f} s)",
            ),
            (
                "server recall@3",
                f"unbudgeted catalog {recall['unbudgeted']:.3f}; budgeted lines alone "
                f"{recall['budgeted_lines']:.3f}; budgeted lines + ToolSearch {recall['budgeted_search']:.3f} "
                f"(lines RRF ToolSearch {recall['lines_rrf_search']:.3f}) "
                f"({b['tasks']} LiveMCPBench task questions)   target: budgeted + search >= unbudgeted: "
                f"{verdict(recall['budgeted_search'] >= recall['unbudgeted'])}",
            ),
        ],
    )
    print()


def _report(fig: dict[str, Any]) -> None:
    for skipped in fig["skipped"]:
        print(f"Skipped: {skipped}\n")
    for sc in fig["scenarios"]:
        sync_ok = sc["sync_wall_s"] <= SYNC_TARGET_S
        split = sc["catalog_split"]
        rows = [
            ("servers", f"{sc['connected']} connected of {sc['configured']} configured ({sc['catalogs']})"),
            ("tools", f"{sc['tools_listed']} listed of {sc['tools_recorded']} recorded"),
            ("tokenizer", sc["tokenizer"]),
            ("all-schemas tokens", f"{sc['all_schemas_tokens']:,}"),
            (
                "catalog tokens",
                f"{sc['catalog_tokens']:,} (header {split['header']}, {split['line_count']} lines "
                f"{split['lines']:,}, call_mcp_tool {split['gateway_tool']})",
            ),
            (
                "reduction",
                f"{_pct(sc['reduction'])}   target >= {REDUCTION_TARGET:.0%} "
                f"(aim {REDUCTION_AIM:.0%}): {verdict(sc['reduction'] >= REDUCTION_TARGET)}"
                + ("" if sc["reduction"] >= REDUCTION_AIM else ", below aim"),
            ),
            (
                "  skills dir shown as",
                f"{sc['typical_root']['root']} instead of the temp dir: "
                f"{sc['typical_root']['catalog_tokens']:,} tokens, {_pct(sc['typical_root']['reduction'])}",
            ),
            (
                "sync wall time",
                f"{sc['sync_wall_s']:.2f} s"
                + (
                    f"   target <= {SYNC_TARGET_S:.0f} s at {SYNC_TARGET_SERVERS} servers: {verdict(sync_ok)}"
                    if sc["configured"] <= SYNC_TARGET_SERVERS
                    else "   (no target at this size)"
                ),
            ),
            (
                "  of which connect",
                f"{sc['settled_s']:.2f} s to all settled (first connected {sc['first_connected_s'] or 0:.2f} s)",
            ),
            (
                "  of which skills",
                f"{sc['generation_s']:.2f} s sync_from_manager ({sc['skills_generated']} written; "
                f"{sc['generation_no_fsync_s']:.2f} s again without fsync)",
            ),
            (
                "CPU",
                f"servers {sc['server_cpu_s']:.1f} s, Keen {sc['keen_cpu_s']:.1f} s "
                f"on {fig['machine']['cpus']} CPUs (1-min load {sc['load_average_1m']:.2f} at the end)",
            ),
            (
                "Keen peak RSS",
                f"{sc['keen_peak_rss_mb']:.0f} MB during start + sync ("
                + (
                    f"{sc['keen_rss_at_start_mb']:.0f} MB when it began: the benchmark's own)"
                    if sc["keen_peak_rss_since_start"]
                    else "the process's lifetime peak: /proc/self/clear_refs unavailable)"
                ),
            ),
        ]
        notes = [f"not connected: {name}: {why}" for name, why in list(sc["failed"].items())[:5]]
        if sc["tool_count_mismatch"]:
            notes += [f"tool count differs from the recording: {m}" for m in sc["tool_count_mismatch"]]
        print_block(
            f"Footprint: {sc['configured']} servers, replay servers --impl {fig['impl']}", rows, notes
        )
        print()
        if sc.get("budgeted"):
            _report_budget(sc)
    gen = fig["generation"]
    starts = ", ".join(
        f"{p['impl']} {p['median_s'] * 1000:.0f} ms ({p['rss_mb']:.0f} MB RSS)" for p in fig["process_start"]
    )
    names = fig["names"]
    print_block(
        "Generation and process start",
        [
            (
                f"{gen['tools']:,}-tool skill",
                f"{gen['median_s'] * 1000:.0f} ms median, {gen['min_s'] * 1000:.0f} ms min over "
                f"{len(gen['runs'])} runs (fsync on)   target <= {GEN_TARGET_S:.0f} s: "
                f"{verdict(gen['median_s'] <= GEN_TARGET_S)}; CPU {gen['cpu_median_s'] * 1000:.0f} ms, "
                f"1-min load {gen['load_average_1m']:.1f}",
            ),
            ("replay server start", f"{starts} (spawn to initialize answered, median of 3, idle)"),
            ("limits", f"open files {fig['machine']['nofile']}, processes {fig['machine']['nproc']}"),
        ],
        notes=[
            f"server names: --names {names['use']}; {len(names['renamed'])} of {names['total']} changed to "
            "valid, unique Keen names, e.g. " + "; ".join(f"{a!r} -> {b}" for a, b in names["renamed"][:3]),
        ],
    )


def _mem_available_mb() -> float | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return None


def _limit(which: int) -> str:
    soft, _ = resource.getrlimit(which)
    return "unlimited" if soft == resource.RLIM_INFINITY else str(soft)


def _tasks(
    annotations: Path,
    pairs: list[tuple[Path, RecordedServer]],
    everything: dict[str, tuple[Path, RecordedServer]],
) -> list[tuple[str, set[str]]]:
    """LiveMCPBench task questions with the Keen names of their tools' servers."""
    if not annotations.is_file():
        raise SystemExit(f"footprint: {annotations} does not exist; pass --annotations all_annotations.json")
    keen_of = {(path, rec.name): name for name, (path, rec) in everything.items()}
    livemcp = next((path for path, rec in pairs if rec.source == "livemcpbench"), None)
    if livemcp is None:
        raise SystemExit("footprint: --budget needs the LiveMCPBench tools.json among the catalogs")
    tasks, _, _ = convert(annotations, livemcp)
    return [(t["query"], {keen_of[(livemcp, ref.rpartition("/")[0])] for ref in t["tools"]}) for t in tasks]


async def bench(args: argparse.Namespace) -> dict[str, Any]:
    files = _catalog_files(args.catalogs)
    catalogs = [(path, load_catalog(path)) for path in files]
    pairs = [(path, rec) for path, recs in catalogs for rec in recs]
    raw = [rec.key if args.names == "key" else rec.name for _, rec in pairs]
    everything = dict(zip(keen_names(raw), pairs, strict=True))
    first_path, first = catalogs[0]
    tasks = _tasks(args.annotations, pairs, everything) if args.budget else []
    # Measured first, on a machine not yet busy with this benchmark's own servers.
    starts = {impl: process_start(first_path, first[0], impl) for impl in ("lite", "sdk")}
    generated = generation(first, args.gen_tools, args.gen_runs)
    available = _mem_available_mb()
    scenarios: list[dict[str, Any]] = []
    skipped: list[str] = []
    for k in range(1, len(catalogs) + 1):
        included = {p for p, _ in catalogs[:k]}
        subset = {name: pr for name, pr in everything.items() if pr[0] in included}
        need = len(subset) * starts[args.impl]["rss_mb"]
        if available is not None and need > MEMORY_SHARE * available:
            skipped.append(
                f"{len(subset)} {args.impl} replay servers need ~{need / 1024:.1f} GB resident "
                f"({starts[args.impl]['rss_mb']:.0f} MB each), over {MEMORY_SHARE:.0%} of the "
                f"{available / 1024:.1f} GB available; use --impl lite"
            )
            continue
        figures = await scenario(subset, args.impl, args.budget, tasks)
        figures["catalogs"] = " + ".join(f"{p.parent.name}/{p.name}" for p, _ in catalogs[:k])
        scenarios.append(figures)
    return {
        "impl": args.impl,
        "scenarios": scenarios,
        "skipped": skipped,
        "generation": generated,
        "process_start": list(starts.values()),
        "names": {
            "use": args.names,
            "total": len(everything),
            "renamed": [(a, b) for a, b in zip(raw, everything, strict=True) if a != b],
        },
        "machine": {
            "cpus": os.cpu_count(),
            "nofile": _limit(resource.RLIMIT_NOFILE),
            "nproc": _limit(resource.RLIMIT_NPROC),
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description="Prompt footprint and sync time with recorded MCP catalogs.")
    parser.add_argument("catalogs", nargs="*", type=Path, help="tools.json / .ndjson files or folders")
    parser.add_argument(
        "--impl", choices=("lite", "sdk"), default="lite", help="replay server implementation"
    )
    parser.add_argument("--names", choices=("key", "name"), default="key", help="which recorded name to map")
    parser.add_argument("--gen-tools", type=int, default=1000, help="tools in the generation run (1000)")
    parser.add_argument("--gen-runs", type=int, default=5, help="generation runs (5)")
    parser.add_argument("--budget", type=int, default=0, help="token budget of the MCP prompt part (0: off)")
    parser.add_argument(
        "--annotations",
        type=Path,
        default=SHARED / "livemcpbench" / "all_annotations.json",
        help="LiveMCPBench all_annotations.json (task questions for --budget)",
    )
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    figures = anyio.run(bench, args)
    if args.json:
        print(json.dumps(figures, indent=2, default=str))
    else:
        _report(figures)


if __name__ == "__main__":
    main()
