"""Call-overhead benchmark: ``Manager.call_tool`` against the raw SDK.

Two processes of the same stdio server: one owned by a Manager, one driven by a plain
``mcp.ClientSession`` opened here. Each iteration makes one call through each path, in an
order that alternates every iteration so neither path always runs first (warm caches,
scheduler luck). After ``--warmup`` untimed calls each, ``--calls`` calls per path are
timed with ``perf_counter_ns``. Reports p50/p90/p99 per path and the p50 overhead
(target <= 5 %).

The default server is Keen's demo server (official SDK ``MCPServer``) calling
``word_count``, a cheap tool with an output schema; ``--server tiny`` uses
``bench/servers/tiny_stdio.py``'s ``echo`` (no SDK on the server side, so the client's share
of each call is as large as it gets).

Usage: ``python bench/call_overhead.py [--calls 1000] [--warmup 50] [--server demo|tiny] [--json]``
"""

from __future__ import annotations

import argparse
import json
import os
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
    percentiles,
    print_block,
    verdict,
    write_config,
)
from keen.mcp import Manager, ServerState
from keen.trust import PinGuard
from mcp import ClientSession

__all__ = ["bench", "main", "report"]

OVERHEAD_TARGET = 0.05
SERVERS: dict[str, tuple[list[str], str, dict[str, Any]]] = {
    "demo": (DEMO_SERVER, "word_count", {"text": "the quick brown fox jumps over the lazy dog"}),
    "tiny": ([TINY_SERVER], "echo", {"text": "the quick brown fox jumps over the lazy dog"}),
}


async def bench(args: argparse.Namespace) -> dict[str, Any]:
    server_args, tool, arguments = SERVERS[args.server]
    with keen_home() as home, tempfile.TemporaryFile("w+", dir=home) as errlog:
        async with AsyncExitStack() as stack:
            manager = await stack.enter_async_context(
                Manager(
                    write_config(home, {"bench": {"command": PYTHON, "args": server_args}}), trust=PinGuard()
                )
            )
            await manager.wait_ready(60)
            status = manager.status("bench")
            if status.state is not ServerState.CONNECTED:
                raise SystemExit(f"the Manager could not connect: {status.last_error}")
            params = StdioServerParameters(command=PYTHON, args=server_args, env=dict(os.environ))
            read, write = await stack.enter_async_context(stdio_client(params, errlog=errlog))
            session = await stack.enter_async_context(ClientSession(read, write))
            await session.initialize()
            await session.list_tools()  # the same warm tool cache the Manager has

            async def via_manager() -> int:
                start = time.perf_counter_ns()
                result = await manager.call_tool("bench", tool, arguments)
                elapsed = time.perf_counter_ns() - start
                assert not result.is_error, result.text
                return elapsed

            async def via_sdk() -> int:
                start = time.perf_counter_ns()
                result = await session.call_tool(tool, arguments)
                elapsed = time.perf_counter_ns() - start
                assert not result.is_error
                return elapsed

            for _ in range(args.warmup):
                await via_manager()
                await via_sdk()
            keen_ns: list[int] = []
            sdk_ns: list[int] = []
            for i in range(args.calls):
                if i % 2 == 0:
                    keen_ns.append(await via_manager())
                    sdk_ns.append(await via_sdk())
                else:
                    sdk_ns.append(await via_sdk())
                    keen_ns.append(await via_manager())
    keen = percentiles([v / 1e6 for v in keen_ns])
    sdk = percentiles([v / 1e6 for v in sdk_ns])
    return {
        "server": args.server,
        "tool": tool,
        "calls": args.calls,
        "warmup": args.warmup,
        "manager_ms": keen,
        "sdk_ms": sdk,
        "p50_overhead": keen["p50"] / sdk["p50"] - 1,
        "p50_overhead_ms": keen["p50"] - sdk["p50"],
        "cpus": os.cpu_count(),
        "load_average_1m": os.getloadavg()[0],
    }


def _row(stats: dict[str, float]) -> str:
    return "   ".join(f"{key} {stats[key]:.3f}" for key in ("p50", "p90", "p99", "min", "max")) + "  (ms)"


def report(fig: dict[str, Any]) -> None:
    overhead = fig["p50_overhead"]
    print_block(
        "Keen call-overhead benchmark (bench/call_overhead.py)",
        [
            ("server / tool", f"{fig['server']} over stdio / {fig['tool']}"),
            (
                "calls per path",
                f"{fig['calls']} timed, alternating order, after {fig['warmup']} warm-up calls",
            ),
            ("Manager.call_tool", _row(fig["manager_ms"])),
            ("ClientSession.call_tool", _row(fig["sdk_ms"])),
            (
                "p50 overhead",
                f"{overhead * 100:+.1f} % ({fig['p50_overhead_ms'] * 1000:+.0f} us per call)"
                f"   target <= {OVERHEAD_TARGET * 100:.0f} %: {verdict(overhead <= OVERHEAD_TARGET)}",
            ),
            ("machine", f"{fig['cpus']} CPUs, 1-min load average {fig['load_average_1m']:.2f} at the end"),
        ],
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description="Compare Manager.call_tool with the raw SDK ClientSession.call_tool (figures, not assertions)."
    )
    parser.add_argument("--calls", type=int, default=1000, help="timed calls per path (default 1000)")
    parser.add_argument("--warmup", type=int, default=50, help="untimed calls per path first (default 50)")
    parser.add_argument(
        "--server", choices=sorted(SERVERS), default="demo", help="server program (default demo)"
    )
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    if args.calls < 2:
        parser.error("--calls must be at least 2")
    figures = anyio.run(bench, args)
    if args.json:
        print(json.dumps(figures, indent=2))
    else:
        report(figures)


if __name__ == "__main__":
    main()
