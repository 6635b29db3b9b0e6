"""CPU per call: ``keen serve``'s pipeline and ``Manager.call_tool`` against the raw SDK.

Three paths to the same tool of the same stdio server (Keen's demo server, ``word_count``),
in one process, so the client's CPU time (``time.process_time``: every thread of this
process; the servers are other processes) is each path's own:

- ``ClientSession.call_tool``: the MCP SDK alone, on a session opened here (the baseline);
- ``Manager.call_tool``: Keen's MCP client (its own stdio transport, argument checks);
- ``keen serve``: a served ``tools/call`` as :class:`keen.serve.server.KeenServer` runs it
  (``router.call``: the harness's pipeline, validate, visibility, permission, pin check,
  execute, truncate, the audit log written), without the HTTP layer in front.

Each repetition times ``--calls`` calls of each path in turn (after 50 untimed calls each),
and the figures are min / median / max of the per-call CPU over ``--repeat`` repetitions,
with the ratios of the medians to the SDK's (target: ``keen serve`` within 1.3x) and the
machine's load average before and after. Prints figures, never asserts.

CPU time on a loaded machine moves by tens of percent between runs, so each path's Python
function calls per call (``sys.setprofile``: functions entered and coroutines resumed, the
SDK's and the event loop's included, over 100 more calls) are printed too: a figure that
hardly moves with the load, to compare two versions of Keen by.

Usage: ``python bench/call_cpu.py [--calls 200] [--repeat 6] [--json]``
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import anyio
from mcp.client.stdio import StdioServerParameters, stdio_client

from _common import DEMO_SERVER, PYTHON, keen_home, load_text, print_block, verdict, write_config
from keen.mcp import Manager
from keen.serve.server import KeenServer
from keen.trust import PinGuard
from mcp import ClientSession

__all__ = ["bench", "main"]

SERVE_TARGET = 1.3
TOOL, ARGUMENTS = "word_count", {"text": "the quick brown fox jumps over the lazy dog"}


async def bench(calls: int, repeat: int) -> dict[str, Any]:
    load_before = os.getloadavg()
    with keen_home() as home, tempfile.TemporaryFile("w+", dir=home) as errlog:
        async with AsyncExitStack() as stack:
            manager = Manager(
                write_config(home, {"bench": {"command": PYTHON, "args": DEMO_SERVER}}), trust=PinGuard()
            )
            served = await stack.enter_async_context(
                KeenServer(manager, mode="search", audit_path=Path(home) / "serve-audit.jsonl")
            )
            await manager.wait_ready(60)
            params = StdioServerParameters(command=PYTHON, args=DEMO_SERVER, env=dict(os.environ))
            read, write = await stack.enter_async_context(stdio_client(params, errlog=errlog))
            session = await stack.enter_async_context(ClientSession(read, write))
            await session.initialize()
            await session.list_tools()

            async def sdk() -> None:
                result = await session.call_tool(TOOL, ARGUMENTS)
                assert not result.is_error

            async def keen_manager() -> None:
                result = await manager.call_tool("bench", TOOL, ARGUMENTS)
                assert not result.is_error, result.text

            async def keen_serve() -> None:
                obs = await served.router.call("bench", TOOL, ARGUMENTS, caller="bench")
                assert not obs.is_error, obs.text

            paths: dict[str, Callable[[], Awaitable[None]]] = {
                "sdk": sdk,
                "manager": keen_manager,
                "serve": keen_serve,
            }
            for call in paths.values():
                for _ in range(50):
                    await call()
            per_call: dict[str, list[float]] = {name: [] for name in paths}
            for _ in range(repeat):
                for name, call in paths.items():
                    start = time.process_time()
                    for _ in range(calls):
                        await call()
                    per_call[name].append((time.process_time() - start) / calls * 1e6)
            python_calls = {name: await _python_calls(call) for name, call in paths.items()}
    medians = {name: statistics.median(values) for name, values in per_call.items()}
    return {
        "calls": calls,
        "repeat": repeat,
        "cpu_us": per_call,
        "median_us": medians,
        "manager_ratio": medians["manager"] / medians["sdk"],
        "serve_ratio": medians["serve"] / medians["sdk"],
        "python_calls": python_calls,
        "cpus": os.cpu_count(),
        "load_average": [load_before, os.getloadavg()],
    }


async def _python_calls(call: Callable[[], Awaitable[None]], calls: int = 100) -> float:
    """Python functions entered (and coroutines resumed) per call, in this thread (the event
    loop's: the transports' tasks are counted too)."""
    count = 0

    def counter(frame: Any, event: str, arg: Any) -> None:
        nonlocal count
        if event == "call":
            count += 1

    sys.setprofile(counter)
    try:
        for _ in range(calls):
            await call()
    finally:
        sys.setprofile(None)
    return count / calls


def main() -> None:
    parser = argparse.ArgumentParser(description="Client CPU per call: keen serve, Manager, raw SDK.")
    parser.add_argument("--calls", type=int, default=200, help="calls per path and repetition (default 200)")
    parser.add_argument("--repeat", type=int, default=6, help="repetitions (default 6)")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    fig = anyio.run(bench, args.calls, args.repeat)
    if args.json:
        print(json.dumps(fig, indent=2))
        return

    def row(name: str) -> str:
        values = fig["cpu_us"][name]
        return f"{min(values):.0f} / {statistics.median(values):.0f} / {max(values):.0f} us"

    print_block(
        "Keen CPU per call (bench/call_cpu.py)",
        [
            ("server / tool", f"demo over stdio / {TOOL}"),
            ("calls", f"{fig['calls']} per path, {fig['repeat']} repetitions (min / median / max)"),
            ("ClientSession.call_tool", row("sdk") + "  (baseline)"),
            ("Manager.call_tool", row("manager") + f"  x{fig['manager_ratio']:.2f}"),
            (
                "keen serve pipeline",
                row("serve")
                + f"  x{fig['serve_ratio']:.2f}   target <= x{SERVE_TARGET}: {verdict(fig['serve_ratio'] <= SERVE_TARGET)}",
            ),
            (
                "Python calls per call",
                " / ".join(f"{fig['python_calls'][n]:.0f}" for n in ("sdk", "manager", "serve"))
                + "  (SDK / Manager / keen serve)",
            ),
            (
                "machine",
                load_text(*fig["load_average"]),
            ),
        ],
    )


if __name__ == "__main__":
    main()
