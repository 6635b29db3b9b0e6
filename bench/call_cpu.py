"""CPU per call: ``keen serve``'s pipeline and ``Manager.call_tool`` against the raw SDK.

Paths to the same tool of the same stdio server (Keen's demo server, ``word_count``), in
one process, so the client's CPU time (``time.process_time``: every thread of this process;
the servers are other processes) is each path's own:

- ``ClientSession.call_tool``: the MCP SDK alone, on a session opened here that negotiates
  the protocol era as Keen's Manager does (``server/discover``, else ``initialize``: the
  SDK's ``Client(mode="auto")``), so both speak the same era (the baseline; with the demo
  server 2026-07-28, whose requests carry the client's info and capabilities in ``_meta``);
- the same on a session opened with ``initialize`` alone (the 2025-11-25 handshake era),
  for reference;
- ``Manager.call_tool``: Keen's MCP client (its own stdio transport, argument checks);
- ``keen serve``: a served ``tools/call`` as :class:`keen.serve.server.KeenServer` runs it
  (``router.call``: the harness's pipeline, validate, visibility, permission, pin check,
  execute, truncate, the audit log written), without the HTTP layer in front.

Each repetition makes ``--calls`` rounds of one call of each path (after 50 untimed calls
each), the order reversed every round so a change in the machine's load falls on every path
alike, and the figures are min / median / max of the per-call CPU over ``--repeat`` repetitions,
with the ratios of the medians to the SDK's (target: ``keen serve`` within 1.3x) and the
machine's load average before and after. Prints figures, never asserts.

Each path's CPU is split into user and system time too (``getrusage``, read around each call
outside the ``process_time`` window: a call's system calls, its socket or pipe reads and
writes, epoll, the event log's writes, are the system part), with the garbage collections
that ran during its calls (``gc.callbacks``), per thousand calls.

CPU time on a loaded machine moves by tens of percent between runs, so each path's Python
function calls per call (``sys.setprofile``: functions entered and coroutines resumed, the
SDK's and the event loop's included, over 100 more calls) are printed too: a figure that
hardly moves with the load, to compare two versions of Keen by.

Usage: ``python bench/call_cpu.py [--calls 200] [--repeat 6] [--json]``
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import resource
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
from keen import paths
from keen.mcp import Manager
from keen.mcp.connection.sdk_private import negotiate_auto
from keen.serve.server import KeenServer
from keen.trust import PinGuard, PinStore
from mcp import ClientSession

__all__ = ["bench", "main", "served_demo"]

SERVE_TARGET = 1.3
_ORDER = ("sdk", "sdk_legacy", "manager", "serve")
TOOL, ARGUMENTS = "word_count", {"text": "the quick brown fox jumps over the lazy dog"}


async def served_demo(stack: AsyncExitStack, home: Path) -> tuple[Manager, KeenServer]:
    """A Manager connected to the demo server and a ``keen serve`` (search mode) over it,
    both closed with ``stack``: what each path of this bench and ``bench/call_grind.py`` calls."""
    manager = Manager(
        write_config(home, {"bench": {"command": PYTHON, "args": DEMO_SERVER}}),
        trust=PinGuard(PinStore(paths.pins_dir())),  # as keen serve makes it
    )
    served = await stack.enter_async_context(
        KeenServer(manager, mode="search", audit_path=Path(home) / "serve-audit.jsonl")
    )
    await manager.wait_ready(60)
    return manager, served


async def bench(calls: int, repeat: int) -> dict[str, Any]:
    load_before = os.getloadavg()
    with keen_home() as home, tempfile.TemporaryFile("w+", dir=home) as errlog:
        async with AsyncExitStack() as stack:
            manager, served = await served_demo(stack, home)
            params = StdioServerParameters(command=PYTHON, args=DEMO_SERVER, env=dict(os.environ))
            sessions: dict[str, ClientSession] = {}
            for era in ("same", "legacy"):
                read, write = await stack.enter_async_context(stdio_client(params, errlog=errlog))
                session = sessions[era] = await stack.enter_async_context(ClientSession(read, write))
                await (negotiate_auto(session) if era == "same" else session.initialize())
                await session.list_tools()
            eras = {era: str(session.protocol_version) for era, session in sessions.items()}
            eras["keen"] = str(manager.server_info("bench").protocol_version)  # type: ignore[union-attr]

            async def sdk() -> None:
                result = await sessions["same"].call_tool(TOOL, ARGUMENTS)
                assert not result.is_error

            async def sdk_legacy() -> None:
                result = await sessions["legacy"].call_tool(TOOL, ARGUMENTS)
                assert not result.is_error

            async def keen_manager() -> None:
                result = await manager.call_tool("bench", TOOL, ARGUMENTS)
                assert not result.is_error, result.text

            async def keen_serve() -> None:
                obs = await served.router.call("bench", TOOL, ARGUMENTS, caller="bench")
                assert not obs.is_error, obs.text

            paths: dict[str, Callable[[], Awaitable[None]]] = {
                "sdk": sdk,
                "sdk_legacy": sdk_legacy,
                "manager": keen_manager,
                "serve": keen_serve,
            }
            for call in paths.values():
                for _ in range(50):
                    await call()
            per_call: dict[str, list[float]] = {name: [] for name in paths}
            user: dict[str, list[float]] = {name: [] for name in paths}
            system: dict[str, list[float]] = {name: [] for name in paths}
            collected = dict.fromkeys(paths, 0)
            collections = [0]

            def counted(phase: str, info: dict[str, Any]) -> None:
                if phase == "start":
                    collections[0] += 1

            order = list(paths.items())
            gc.callbacks.append(counted)
            try:
                for _ in range(repeat):
                    spent = dict.fromkeys(paths, 0)
                    split = {name: [0.0, 0.0] for name in paths}
                    for i in range(calls):
                        # One call of each path in turn, the order reversed every round: the load
                        # of a shared machine moves each path's figure alike.
                        for name, call in order if i % 2 == 0 else order[::-1]:
                            before, seen = resource.getrusage(resource.RUSAGE_SELF), collections[0]
                            start = time.process_time_ns()
                            await call()
                            spent[name] += time.process_time_ns() - start
                            after = resource.getrusage(resource.RUSAGE_SELF)
                            split[name][0] += after.ru_utime - before.ru_utime
                            split[name][1] += after.ru_stime - before.ru_stime
                            collected[name] += collections[0] - seen
                    for name in paths:
                        per_call[name].append(spent[name] / calls / 1e3)
                        user[name].append(split[name][0] / calls * 1e6)
                        system[name].append(split[name][1] / calls * 1e6)
            finally:
                gc.callbacks.remove(counted)
            python_calls = {name: await _python_calls(call) for name, call in paths.items()}
    medians = {name: statistics.median(values) for name, values in per_call.items()}
    return {
        "calls": calls,
        "repeat": repeat,
        "eras": eras,
        "cpu_us": per_call,
        "median_us": medians,
        "user_us": {name: statistics.median(values) for name, values in user.items()},
        "system_us": {name: statistics.median(values) for name, values in system.items()},
        "gc_per_1000": {name: count * 1000 / (calls * repeat) for name, count in collected.items()},
        "legacy_ratio": medians["sdk_legacy"] / medians["sdk"],
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
            (
                "protocol era",
                f"{fig['eras']['keen']} (Keen and the baseline); the reference: {fig['eras']['legacy']}",
            ),
            ("ClientSession.call_tool", row("sdk") + "  (baseline: the same era as Keen)"),
            (
                "  the same, 2025-11-25 era",
                row("sdk_legacy") + f"  x{fig['legacy_ratio']:.2f}  (reference: another protocol era)",
            ),
            ("Manager.call_tool", row("manager") + f"  x{fig['manager_ratio']:.2f}"),
            (
                "keen serve pipeline",
                row("serve")
                + f"  x{fig['serve_ratio']:.2f}   target <= x{SERVE_TARGET}: {verdict(fig['serve_ratio'] <= SERVE_TARGET)}",
            ),
            (
                "Python calls per call",
                " / ".join(f"{fig['python_calls'][n]:.0f}" for n in _ORDER)
                + "  (SDK / SDK 2025-11-25 / Manager / keen serve)",
            ),
            (
                "user + system per call",
                " / ".join(f"{fig['user_us'][n]:.0f}+{fig['system_us'][n]:.0f}" for n in _ORDER)
                + " us  (medians; SDK / SDK 2025-11-25 / Manager / keen serve)",
            ),
            (
                "GC runs per 1000 calls",
                " / ".join(f"{fig['gc_per_1000'][n]:.1f}" for n in _ORDER),
            ),
            (
                "machine",
                load_text(*fig["load_average"]),
            ),
        ],
    )


if __name__ == "__main__":
    main()
