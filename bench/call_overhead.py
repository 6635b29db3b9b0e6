"""Call-overhead benchmark: ``Manager.call_tool`` against the raw SDK.

Two processes of the same stdio server: one owned by a Manager, one driven by a plain
``mcp.ClientSession`` opened here, which negotiates the protocol era as the Manager does
(``server/discover``, else ``initialize``: the SDK's ``Client(mode="auto")``), so both paths
speak the same era (``--sdk-era legacy``: the baseline session uses ``initialize`` alone, the
2025-11-25 era, for reference). Each iteration makes one call through each path, in an
order that alternates every iteration so neither path always runs first (warm caches,
scheduler luck). After ``--warmup`` untimed calls each, ``--calls`` calls per path are
timed with ``perf_counter_ns``, ``--repeat`` times over the same connections. Reports, as
min / median / max over the repetitions, p50 and p99 per path and Keen's overhead on each
against the SDK's in the same repetition (target: within 5 % at p50 and p99), then p50 and
p99 over every timed call of all repetitions together (a repetition's p99 rests on its
slowest 1 %: 20 calls at the default 2,000, which one busy moment of a shared machine
moves by more than 5 %), the same of the CPU time this process spent in each call
(``time.process_time_ns``: what Keen's own code, its allocations and the collector add to a
call, without the waits for a core that make most of a loaded machine's tail), the cyclic
collector's passes that ran inside each path's timed
calls (``gc.callbacks``: how many per generation, their total and longest duration; a pass
runs in whichever call's allocations cross the collector's threshold, and a full one walks
every object of the process), and the machine's load average before and after.

The default server is Keen's demo server (official SDK ``MCPServer``) calling
``word_count``, a cheap tool with an output schema; ``--server tiny`` uses
``bench/servers/tiny_stdio.py``'s ``echo`` (no SDK on the server side, so the client's share
of each call is as large as it gets).

Usage: ``python bench/call_overhead.py [--calls 2000] [--warmup 50] [--repeat 5] [--server demo|tiny] [--sdk-era same|legacy] [--json]``
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import tempfile
import time
from contextlib import AsyncExitStack
from typing import Any

import anyio
from mcp.client.stdio import StdioServerParameters, stdio_client

from _common import (
    DEMO_SERVER,
    PYTHON,
    TINY_SERVER,
    keen_home,
    load_text,
    percentiles,
    print_block,
    verdict,
    write_config,
)
from keen import paths
from keen.mcp import Manager, ServerState
from keen.mcp.connection.sdk_private import negotiate_auto
from keen.trust import PinGuard, PinStore
from mcp import ClientSession

__all__ = ["bench", "main", "report"]

OVERHEAD_TARGET = 0.05
SERVERS: dict[str, tuple[list[str], str, dict[str, Any]]] = {
    "demo": (DEMO_SERVER, "word_count", {"text": "the quick brown fox jumps over the lazy dog"}),
    "tiny": ([TINY_SERVER], "echo", {"text": "the quick brown fox jumps over the lazy dog"}),
}


class _Passes:
    """The collector's passes (``gc.callbacks``) that run while a path's timed call runs,
    by path and generation: ``{path: {generation: [milliseconds, ...]}}``."""

    def __init__(self) -> None:
        self.path: str | None = None
        self.seen: dict[str, dict[int, list[float]]] = {"keen": {}, "sdk": {}}
        self._started = 0

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._started = time.perf_counter_ns()
        elif self.path is not None:
            took = (time.perf_counter_ns() - self._started) / 1e6
            self.seen[self.path].setdefault(info["generation"], []).append(took)


async def bench(args: argparse.Namespace) -> dict[str, Any]:
    passes = _Passes()
    gc.callbacks.append(passes)
    try:
        return await _bench(args, passes)
    finally:
        gc.callbacks.remove(passes)


async def _bench(args: argparse.Namespace, passes: _Passes) -> dict[str, Any]:
    load_before = os.getloadavg()
    server_args, tool, arguments = SERVERS[args.server]
    with keen_home() as home, tempfile.TemporaryFile("w+", dir=home) as errlog:
        async with AsyncExitStack() as stack:
            manager = await stack.enter_async_context(
                Manager(
                    write_config(home, {"bench": {"command": PYTHON, "args": server_args}}),
                    trust=PinGuard(PinStore(paths.pins_dir())),  # as keen serve makes it
                )
            )
            await manager.wait_ready(60)
            status = manager.status("bench")
            if status.state is not ServerState.CONNECTED:
                raise SystemExit(f"the Manager could not connect: {status.last_error}")
            params = StdioServerParameters(command=PYTHON, args=server_args, env=dict(os.environ))
            read, write = await stack.enter_async_context(stdio_client(params, errlog=errlog))
            session = await stack.enter_async_context(ClientSession(read, write))
            await (session.initialize() if args.sdk_era == "legacy" else negotiate_auto(session))
            await session.list_tools()  # the same warm tool cache the Manager has
            info = manager.server_info("bench")
            eras = {
                "keen": str(info.protocol_version if info else None),
                "sdk": str(session.protocol_version),
            }

            cpu: dict[str, list[int]] = {"keen": [], "sdk": []}

            async def via_manager() -> int:
                passes.path = "keen"
                cpu_start = time.process_time_ns()
                start = time.perf_counter_ns()
                result = await manager.call_tool("bench", tool, arguments)
                elapsed = time.perf_counter_ns() - start
                cpu["keen"].append(time.process_time_ns() - cpu_start)
                passes.path = None
                assert not result.is_error, result.text
                return elapsed

            async def via_sdk() -> int:
                passes.path = "sdk"
                cpu_start = time.process_time_ns()
                start = time.perf_counter_ns()
                result = await session.call_tool(tool, arguments)
                elapsed = time.perf_counter_ns() - start
                cpu["sdk"].append(time.process_time_ns() - cpu_start)
                passes.path = None
                assert not result.is_error
                return elapsed

            for _ in range(args.warmup):
                await via_manager()
                await via_sdk()
            for seen in passes.seen.values():
                seen.clear()  # only the timed calls' passes are reported
            for kept in cpu.values():
                kept.clear()
            runs: list[dict[str, Any]] = []
            every: dict[str, list[float]] = {"keen": [], "sdk": []}
            for _ in range(args.repeat):
                keen_ns: list[int] = []
                sdk_ns: list[int] = []
                for i in range(args.calls):
                    if i % 2 == 0:
                        keen_ns.append(await via_manager())
                        sdk_ns.append(await via_sdk())
                    else:
                        sdk_ns.append(await via_sdk())
                        keen_ns.append(await via_manager())
                every["keen"] += [v / 1e6 for v in keen_ns]
                every["sdk"] += [v / 1e6 for v in sdk_ns]
                keen = percentiles([v / 1e6 for v in keen_ns])
                sdk = percentiles([v / 1e6 for v in sdk_ns])
                runs.append(
                    {
                        "manager_ms": keen,
                        "sdk_ms": sdk,
                        "p50_overhead": keen["p50"] / sdk["p50"] - 1,
                        "p99_overhead": keen["p99"] / sdk["p99"] - 1,
                    }
                )
    return {
        "server": args.server,
        "tool": tool,
        "eras": eras,
        "calls": args.calls,
        "warmup": args.warmup,
        "repeat": args.repeat,
        "runs": runs,
        "pooled_ms": {"manager": percentiles(every["keen"]), "sdk": percentiles(every["sdk"])},
        "pooled_cpu_ms": {
            "manager": percentiles([v / 1e6 for v in cpu["keen"]]),
            "sdk": percentiles([v / 1e6 for v in cpu["sdk"]]),
        },
        "gc_passes": {
            path: {
                str(generation): {"count": len(took), "total_ms": sum(took), "longest_ms": max(took)}
                for generation, took in sorted(seen.items())
            }
            for path, seen in (("manager", passes.seen["keen"]), ("sdk", passes.seen["sdk"]))
        },
        "cpus": os.cpu_count(),
        "load_average": [load_before, os.getloadavg()],
    }


def _spread(values: list[float], fmt: str) -> str:
    return " / ".join(fmt.format(v) for v in (min(values), statistics.median(values), max(values)))


def report(fig: dict[str, Any]) -> None:
    runs = fig["runs"]

    def cut(path: str, key: str) -> list[float]:
        return [r[path][key] for r in runs]

    rows = [
        ("server / tool", f"{fig['server']} over stdio / {fig['tool']}"),
        ("protocol era", f"Manager {fig['eras']['keen']}, ClientSession {fig['eras']['sdk']}"),
        (
            "calls per path",
            f"{fig['calls']} timed x {fig['repeat']} repetitions, alternating order, after "
            f"{fig['warmup']} warm-up calls (min / median / max over the repetitions)",
        ),
    ]
    for key in ("p50", "p99"):
        rows.append((f"ClientSession {key} (ms)", _spread(cut("sdk_ms", key), "{:.3f}") + "  (baseline)"))
        rows.append((f"Manager {key} (ms)", _spread(cut("manager_ms", key), "{:.3f}")))
        over = [r[f"{key}_overhead"] for r in runs]
        median = statistics.median(over)
        rows.append(
            (
                f"{key} overhead",
                " / ".join(f"{v * 100:+.1f} %" for v in (min(over), median, max(over)))
                + f"   ratio of the medians x{1 + median:.3f}"
                + f"   target <= {OVERHEAD_TARGET * 100:.0f} %: {verdict(median <= OVERHEAD_TARGET)}",
            )
        )
    for label, pooled in (("", fig["pooled_ms"]), ("client CPU ", fig["pooled_cpu_ms"])):
        for key in ("p50", "p99"):
            keen, sdk = pooled["manager"][key], pooled["sdk"][key]
            rows.append(
                (
                    f"{label}{key} of all calls",
                    f"ClientSession {sdk:.3f} ms, Manager {keen:.3f} ms: {(keen / sdk - 1) * 100:+.1f} %"
                    f"  ({fig['calls'] * fig['repeat']} calls per path)",
                )
            )
    for path, label in (("sdk", "ClientSession"), ("manager", "Manager")):
        seen = fig["gc_passes"][path]
        text = ", ".join(
            f"gen {g}: {p['count']} ({p['total_ms']:.1f} ms, longest {p['longest_ms']:.1f})"
            for g, p in seen.items()
        )
        rows.append((f"collector in {label} calls", text or "no pass"))
    before, after = fig["load_average"]
    rows.append(("machine", load_text(before, after)))
    print_block("Keen call-overhead benchmark (bench/call_overhead.py)", rows)


def main() -> None:
    parser = argparse.ArgumentParser(
        description="Compare Manager.call_tool with the raw SDK ClientSession.call_tool (figures, not assertions)."
    )
    parser.add_argument(
        "--calls", type=int, default=2000, help="timed calls per path and repetition (default 2000)"
    )
    parser.add_argument("--warmup", type=int, default=50, help="untimed calls per path first (default 50)")
    parser.add_argument("--repeat", type=int, default=5, help="timed repetitions (default 5)")
    parser.add_argument(
        "--server", choices=sorted(SERVERS), default="demo", help="server program (default demo)"
    )
    parser.add_argument(
        "--sdk-era",
        choices=["same", "legacy"],
        default="same",
        help="the baseline session's protocol era: the Manager's (default) or 2025-11-25",
    )
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    if args.calls < 2 or args.repeat < 1:
        parser.error("--calls must be at least 2 and --repeat at least 1")
    figures = anyio.run(bench, args)
    if args.json:
        print(json.dumps(figures, indent=2))
    else:
        report(figures)


if __name__ == "__main__":
    main()
