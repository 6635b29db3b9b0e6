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
against the SDK's in the same repetition (target: within 5 % at p50 and p99), with the
machine's load average before and after.

The default server is Keen's demo server (official SDK ``MCPServer``) calling
``word_count``, a cheap tool with an output schema; ``--server tiny`` uses
``bench/servers/tiny_stdio.py``'s ``echo`` (no SDK on the server side, so the client's share
of each call is as large as it gets).

Usage: ``python bench/call_overhead.py [--calls 1000] [--warmup 50] [--repeat 5] [--server demo|tiny] [--sdk-era same|legacy] [--json]``
"""

from __future__ import annotations

import argparse
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


async def bench(args: argparse.Namespace) -> dict[str, Any]:
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
            runs: list[dict[str, Any]] = []
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
    before, after = fig["load_average"]
    rows.append(("machine", load_text(before, after)))
    print_block("Keen call-overhead benchmark (bench/call_overhead.py)", rows)


def main() -> None:
    parser = argparse.ArgumentParser(
        description="Compare Manager.call_tool with the raw SDK ClientSession.call_tool (figures, not assertions)."
    )
    parser.add_argument("--calls", type=int, default=1000, help="timed calls per path (default 1000)")
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
