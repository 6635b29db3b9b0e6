"""Startup benchmark: 20 stdio servers, 3 of which hang at initialize.

Measures, through the public Manager API:

- ``start()`` return time (target < 50 ms): it must not wait for any server;
- the time from ``start()`` to every healthy server connected, taken from the status
  observer's timestamps (the hanging servers have a connect timeout far above it, so
  they are still connecting when it is measured and cannot shorten it);
- the same figure for the slowest healthy server connected alone, in its own Manager;
- their ratio (target <= 1.3x): discovery runs servers in parallel, so many servers should
  cost about as much as the slowest one;
- the floor, measured in the same run (each of its runs right after one of Keen's): the same
  20 servers started all at once by the bare MCP SDK (``_common.sdk_hold``, as
  ``bench/idle.py``'s SDK auto side connects), time to every healthy one's tools listed, and
  Keen's figure as a ratio to it. Keen bounds how many stdio servers start at once
  (docs/architecture.md "Servers and their states"); the SDK starts them all together, which
  on two CPUs is the fastest these sleeping servers can come up.

The healthy servers are ``bench/servers/tiny_stdio.py`` with initialize delays spread
from ``--min-delay`` to ``--max-delay`` (a server's own start-up work), so the ratio
measures Keen's concurrency rather than 17 interpreters importing libraries on a small
machine; ``--server demo`` runs Keen's demo server (official SDK) instead, with no delay.
Figures are medians over ``--runs`` runs (solo: ``--solo-runs``); every run is listed.

Keen remembers how long each server's last start took and lets the longest in first
(docs/architecture.md "Servers and their states"), so a run depends on those before it. The
runs of all 20 servers share one ``KEEN_HOME`` (as one user's starts do; the later runs also
find the first run's pins there, and compare the tool lists with them): the first run, with
nothing remembered, is printed on its own, and every median (all healthy connected, the
ratios, ``start()``'s return, the fastest healthy server, ``aclose()``, the CPU) is the later
runs'. Before them one run in a home of its own warms the process up (its imports),
printed apart and counted nowhere. ``--fresh-home`` gives each run a home of its own instead
(every run a first run, as this benchmark measured before the record existed).

Usage: ``python bench/startup.py [--runs 4] [--solo-runs 5] [--server tiny|demo] [--fresh-home] [--json]``
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import anyio
import anyio.abc

from _common import (
    DEMO_SERVER,
    PYTHON,
    TINY_SERVER,
    keen_home,
    median,
    print_block,
    sdk_hold,
    verdict,
    write_config,
)
from keen.mcp import Manager, ServerState, ServerStatus
from keen.trust import PinGuard

__all__ = ["bench", "main", "report"]

START_TARGET_S = 0.050
RATIO_TARGET = 1.3
HANG_CONNECT_TIMEOUT = 60.0
RUN_DEADLINE = 120.0


@dataclass
class RunFigures:
    start_return_s: float
    all_healthy_s: float
    aclose_s: float
    hanging_still_connecting: int
    first_healthy_s: float
    keen_cpu_s: float
    servers_cpu_s: float


def _healthy_entry(server: str, delay: float, index: int) -> dict[str, Any]:
    if server == "demo":
        return {"command": PYTHON, "args": DEMO_SERVER}
    return {"command": PYTHON, "args": [TINY_SERVER, "--delay", f"{delay:.3f}", "--name", f"tiny-{index}"]}


def _delays(n: int, low: float, high: float) -> list[float]:
    if n == 1:
        return [high]
    return [low + (high - low) * i / (n - 1) for i in range(n)]


async def _measure(
    servers: dict[str, Any], healthy: set[str], hanging: set[str], reuse: Path | None = None
) -> RunFigures:
    """One Manager over ``servers``: start() time, time to all ``healthy`` connected, aclose() time;
    in the home ``reuse`` (kept as earlier runs left it) or in a fresh one."""
    with keen_home(reuse) as home:
        manager = Manager(write_config(home, servers), trust=PinGuard())
        connected_at: dict[str, float] = {}
        failed: dict[str, str] = {}
        done = anyio.Event()

        def observe(status: ServerStatus) -> None:
            if done.is_set() or status.name not in healthy:
                return
            if status.state is ServerState.CONNECTED:
                connected_at.setdefault(status.name, time.perf_counter())
                if len(connected_at) == len(healthy):
                    done.set()
            elif status.state is not ServerState.CONNECTING:
                failed[status.name] = f"{status.state.value}: {status.last_error}"
                done.set()

        manager.subscribe(observe)
        own0, kids0 = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        await manager.start()
        start_return = time.perf_counter() - t0
        try:
            with anyio.fail_after(RUN_DEADLINE):
                await done.wait()
            if failed:
                raise SystemExit(f"a healthy server did not connect: {failed}")
            still = sum(manager.status(name).state is ServerState.CONNECTING for name in hanging)
            own1 = resource.getrusage(resource.RUSAGE_SELF)
        finally:
            t_close = time.perf_counter()
            await manager.aclose()
            aclose = time.perf_counter() - t_close
        kids1 = resource.getrusage(resource.RUSAGE_CHILDREN)  # reaped children only: read after aclose
        ends = connected_at.values()
        return RunFigures(
            start_return,
            max(ends) - t0,
            aclose,
            still,
            min(ends) - t0,
            _cpu(own1) - _cpu(own0),
            _cpu(kids1) - _cpu(kids0),
        )


async def _measure_sdk(servers: dict[str, Any], healthy: set[str]) -> tuple[float, float]:
    """The floor: every server of ``servers`` started at once by the bare MCP SDK; returns
    (seconds until every ``healthy`` one has listed its tools, this process's CPU seconds
    meanwhile)."""
    connected: set[str] = set()
    took = cpu = 0.0
    done, stop = anyio.Event(), anyio.Event()
    with tempfile.TemporaryDirectory(prefix="keen-bench-sdk-") as tmp:

        async def hold(name: str, entry: dict[str, Any]) -> None:
            def ready() -> None:
                connected.add(name)
                if connected >= healthy:
                    done.set()

            with open(Path(tmp) / f"{name}.stderr.log", "w", encoding="utf-8") as errlog:  # noqa: ASYNC230 (as the SDK is used)
                await sdk_hold(entry, errlog, ready, stop, auto=True)

        async with anyio.create_task_group() as tg:
            own0 = resource.getrusage(resource.RUSAGE_SELF)
            t0 = time.perf_counter()
            for name, entry in servers.items():
                tg.start_soon(hold, name, entry)
            with anyio.fail_after(RUN_DEADLINE):
                await done.wait()
            took = time.perf_counter() - t0
            cpu = _cpu(resource.getrusage(resource.RUSAGE_SELF)) - _cpu(own0)
            tg.cancel_scope.cancel()  # the hanging ones never get there
    return took, cpu


def _cpu(usage: resource.struct_rusage) -> float:
    return usage.ru_utime + usage.ru_stime


async def bench(args: argparse.Namespace) -> dict[str, Any]:
    n_healthy = args.servers - args.hanging
    delays = _delays(n_healthy, args.min_delay, args.max_delay)
    healthy = {f"healthy-{i:02d}": _healthy_entry(args.server, d, i) for i, d in enumerate(delays)}
    hang = {
        f"hang-{j}": {
            "command": PYTHON,
            "args": [TINY_SERVER, "--hang"],
            "timeouts": {"connect": HANG_CONNECT_TIMEOUT},
        }
        for j in range(args.hanging)
    }
    # Hanging servers first in config order: a serial connect would be stuck behind them.
    servers = {**hang, **healthy}
    slowest_name = f"healthy-{n_healthy - 1:02d}"

    # The process's first run pays for its imports (the MCP SDK: seconds under load), in a
    # home of its own: not a figure of the record's.
    warm = await _measure(servers, set(healthy), set(hang))
    runs: list[RunFigures] = []
    sdk: list[tuple[float, float]] = []
    with tempfile.TemporaryDirectory(prefix="keen-bench-home-") as shared:
        for _ in range(args.runs):  # alternated: a busy moment of the machine hits both
            home = None if args.fresh_home else Path(shared)
            runs.append(await _measure(servers, set(healthy), set(hang), home))
            sdk.append(await _measure_sdk(servers, set(healthy)))
    first, later = runs[0], (runs[1:] or runs)
    if args.fresh_home:
        later = runs
    solo = [
        await _measure({slowest_name: healthy[slowest_name]}, {slowest_name}, set())
        for _ in range(args.solo_runs)
    ]
    all_healthy = median([r.all_healthy_s for r in later])
    slowest_alone = median([r.all_healthy_s for r in solo])
    return {
        "server": args.server,
        "servers": args.servers,
        "healthy": n_healthy,
        "hanging": args.hanging,
        "init_delay_s": [round(delays[0], 3), round(delays[-1], 3)] if args.server == "tiny" else [0, 0],
        "start_return_s": median([r.start_return_s for r in later]),
        "fresh_home": args.fresh_home,
        "warm_up_all_healthy_s": warm.all_healthy_s,
        "first_run_all_healthy_s": first.all_healthy_s,
        "first_run_first_healthy_s": first.first_healthy_s,
        "all_healthy_s": all_healthy,
        "slowest_alone_s": slowest_alone,
        "ratio": all_healthy / slowest_alone,
        "sdk_all_healthy_s": median([took for took, _ in sdk]),
        "sdk_cpu_s": median([cpu for _, cpu in sdk]),
        "sdk_ratio": all_healthy / median([took for took, _ in sdk]),
        "sdk_runs": [{"all_healthy_s": took, "cpu_s": cpu} for took, cpu in sdk],
        "aclose_s": median([r.aclose_s for r in later]),
        "first_healthy_s": median([r.first_healthy_s for r in later]),
        "keen_cpu_s": median([r.keen_cpu_s for r in later]),
        "servers_cpu_s": median([r.servers_cpu_s for r in later]),
        "cpus": os.cpu_count(),
        "load_average_1m": os.getloadavg()[0],
        "runs": [asdict(r) for r in runs],
        "solo_runs": [asdict(r) for r in solo],
    }


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms"


def report(fig: dict[str, Any]) -> None:
    runs, solo = fig["runs"], fig["solo_runs"]
    later = runs if fig["fresh_home"] or len(runs) == 1 else runs[1:]
    each = ", ".join(_ms(r["all_healthy_s"]) for r in later)
    if fig["fresh_home"]:
        first_row = ("homes", "a fresh KEEN_HOME per run: every run a first run, nothing remembered")
        all_row = "all healthy connected"
    else:
        first_row = (
            "first run, nothing known",
            f"{_ms(fig['first_run_all_healthy_s'])}   (all healthy connected; one KEEN_HOME for every run;"
            f" fastest healthy connected {_ms(fig['first_run_first_healthy_s'])})",
        )
        all_row = "later runs, starts known"
    if fig["server"] == "tiny":
        kind = "tiny stdio, initialize delays {:.2f}..{:.2f} s".format(*fig["init_delay_s"])
    else:
        kind = "keen demo server (official SDK), no delay"
    print_block(
        "Keen startup benchmark (bench/startup.py)",
        [
            ("servers", f"{fig['healthy']} healthy ({kind}) + {fig['hanging']} hanging at initialize"),
            (
                "start() returned in",
                f"{_ms(fig['start_return_s'])}   [{', '.join(_ms(r['start_return_s']) for r in later)}]"
                f"   target < {_ms(START_TARGET_S)}: {verdict(fig['start_return_s'] < START_TARGET_S)}",
            ),
            (
                "warm-up run",
                f"{_ms(fig['warm_up_all_healthy_s'])}   (a fresh home; the process's imports; not counted)",
            ),
            first_row,
            (all_row, f"{_ms(fig['all_healthy_s'])}   [{each}]   (all healthy connected)"),
            (
                "slowest healthy alone",
                f"{_ms(fig['slowest_alone_s'])}   [{', '.join(_ms(r['all_healthy_s']) for r in solo)}]",
            ),
            (
                "ratio",
                f"{fig['ratio']:.2f}x   target <= {RATIO_TARGET}x: {verdict(fig['ratio'] <= RATIO_TARGET)}",
            ),
            (
                "the bare SDK, all at once",
                f"{_ms(fig['sdk_all_healthy_s'])}   [{', '.join(_ms(r['all_healthy_s']) for r in fig['sdk_runs'])}]"
                f"   (the floor; its CPU {_ms(fig['sdk_cpu_s'])})",
            ),
            ("ratio to the SDK", f"{fig['sdk_ratio']:.2f}x"),
            (
                "hanging still connecting",
                f"{[r['hanging_still_connecting'] for r in runs]} (of {fig['hanging']}, per run)",
            ),
            (
                "fastest healthy connected",
                f"{_ms(fig['first_healthy_s'])}   [{', '.join(_ms(r['first_healthy_s']) for r in later)}] (initialize delay {fig['init_delay_s'][0]:g} s)",
            ),
            ("machine", f"{fig['cpus']} CPUs, 1-min load average {fig['load_average_1m']:.2f} at the end"),
            ("aclose() with hung servers", _ms(fig["aclose_s"])),
            (
                "CPU until all connected",
                f"Keen {_ms(fig['keen_cpu_s'])}; the {fig['servers']} server processes {_ms(fig['servers_cpu_s'])} "
                "(whole run): on 2 cores their start-up, not Keen, sets the floor",
            ),
        ],
        notes=[
            f"medians over {len(later)} runs of all {fig['servers']} servers and {len(solo)} solo runs of the",
            "slowest healthy server (its own Manager); times run from start() to the observer's CONNECTED event;",
            "the SDK's runs alternate with Keen's, from its first start to the last healthy tools/list answer.",
        ],
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description="Time Manager.start() and parallel discovery with hanging servers (figures, not assertions)."
    )
    parser.add_argument("--servers", type=int, default=20, help="total servers (default 20)")
    parser.add_argument("--hanging", type=int, default=3, help="how many hang at initialize (default 3)")
    parser.add_argument("--server", choices=("tiny", "demo"), default="tiny", help="healthy server program")
    parser.add_argument("--min-delay", type=float, default=0.1, help="tiny: shortest initialize delay, s")
    parser.add_argument("--max-delay", type=float, default=0.9, help="tiny: longest initialize delay, s")
    parser.add_argument(
        "--runs",
        type=int,
        default=4,
        help="runs with every server (default 4: the first, then 3 with it known)",
    )
    parser.add_argument(
        "--fresh-home",
        action="store_true",
        help="a fresh KEEN_HOME per run (nothing remembered from run to run)",
    )
    parser.add_argument(
        "--solo-runs", type=int, default=5, help="runs of the slowest server alone (default 5)"
    )
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    if not 0 <= args.hanging < args.servers:
        parser.error("--hanging must be at least 0 and less than --servers")
    figures = anyio.run(bench, args)
    if args.json:
        print(json.dumps(figures, indent=2))
    else:
        report(figures)


if __name__ == "__main__":
    main()
