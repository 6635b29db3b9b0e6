"""Idle and sync cost of holding N stdio servers: Keen against the bare MCP SDK.

Each run is a fresh child process (threads and caches of one run never reach the next) in
one of three modes, over the same ``bench/servers/tiny_stdio.py`` servers:

- ``sdk``: the MCP SDK alone, one ``stdio_client`` + ``ClientSession`` per server
  (initialize, tools/list), each server's stderr into a file of its own: the handshake
  era only;
- ``sdk auto``: the SDK as it connects to a server of either protocol era, as Keen does:
  ``mcp.client.client.Client(stdio_client(...), mode="auto")`` (``server/discover`` first,
  the initialize handshake when the server does not answer it), then tools/list;
- ``keen``: ``keen.runtime.open_runtime(wait=..., sync=True)``: the Manager connects every
  server (stderr copied to ``logs/<server>.stderr.log``), then the startup sync writes
  their skills.

Per run it measures:

- sync: the child's own CPU (user + system, ``RUSAGE_SELF``) and wall time from the
  start until every server is connected (and, for Keen, the skills are written); both
  children import the SDK's client modules (``mcp.client.stdio``, ``mcp.ClientSession``)
  before the start, so the SDK's import is in neither figure and Keen's own modules, and
  whatever more of the SDK it loads, are in Keen's. The SDK children import all they use
  before the clock; so that the two compare alike, a fourth mode, ``keen, imports before``,
  first imports every module a Keen sync loaded in its window (the list taken from the
  first ``keen`` run), then starts the clock: its sync CPU excludes its imports as the
  SDK's does, and the ``keen`` row, beside it, counts them. Both are printed;
- loop blocked: the longest single step the event loop ran meanwhile (one callback: a
  task's step, a timer, an I/O callback; a process spawn done on the loop shows here),
  timed around each step. A 1 ms ticker task measured this before: its own wake-ups cost
  about 85 ms of CPU per second of wall time on a 2-CPU machine, counted in the sync CPU of
  whichever mode took longer (Keen, which then started one server per CPU at a time, took
  4.5x the SDK's wall time at 70 servers), where timing a step costs under a microsecond;
- peak RSS: the child's peak resident set (``ru_maxrss``) when sync ends, its imports
  included (both children import the SDK's client modules first);
- idle: once everything is up, over ``--idle`` seconds: the threads the process holds, the
  context switches of all its threads per second (wake-ups) and its CPU as a percentage of
  one core.

Every figure is printed as min / median / max over ``--repeat`` runs, Keen's medians as a
ratio to the SDK's, with the machine's load average before and after. Prints; never asserts.

Every child freezes the objects its imports made out of the cyclic collector's walks
(``gc.freeze``): Keen's when its first Manager starts, as the ``keen`` command asks
(``keen.freeze_at_first_start``), the SDK's after its imports, so a full collection walking
some 100,000 import-time objects during the connect storm is in neither figure.

Children run with Python's bytecode cache on (``PYTHONDONTWRITEBYTECODE`` removed from their
environment), as ``bench/prompt_start.py``'s do.

``--max-starting N`` runs Keen with ``[mcp] max_starting = N`` in config.toml (a fixed bound;
``0``: none) instead of its default bound, which grows while starts are quick.

Usage: ``python bench/idle.py [--servers 24] [--repeat 3] [--idle 3] [--max-starting N] [--json]``
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import gc
import importlib
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio

from _common import PYTHON, TINY_SERVER, keen_home, load_text, median, print_block, sdk_hold, write_config

__all__ = ["main"]

CONNECT_WAIT = 120.0


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _peak_rss_mb() -> float:
    """This process's peak resident set so far, in MiB (getrusage(2): ``ru_maxrss`` in KiB on Linux)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _switches() -> tuple[int, int]:
    """(threads, context switches summed over them) of this process, from /proc (proc(5))."""
    total = threads = 0
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/status", encoding="ascii") as handle:
                for line in handle:
                    if line.startswith(("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches")):
                        total += int(line.split()[1])
        except OSError:
            continue
        threads += 1
    return threads, total


class _Blocked:
    """The longest single step of the asyncio event loop while the block runs: how long the
    loop was held at once. Every callback the loop runs (a task's step, a timer, a reader)
    goes through ``asyncio.events.Handle._run``, which is wrapped to time it; nothing wakes
    the process to measure (a ticker task would, and its CPU would count as the child's)."""

    def __init__(self) -> None:
        self.worst = 0.0
        self._original: Any = None

    def __enter__(self) -> _Blocked:
        original = self._original = asyncio.events.Handle._run  # pyright: ignore[reportPrivateUsage]
        clock = time.perf_counter
        blocked = self

        def timed(self: asyncio.Handle) -> None:  # a method of Handle: named as one
            start = clock()
            original(self)
            took = clock() - start
            if took > blocked.worst:
                blocked.worst = took

        asyncio.events.Handle._run = timed  # pyright: ignore[reportPrivateUsage]
        return self

    def __exit__(self, *_: object) -> None:
        asyncio.events.Handle._run = self._original  # pyright: ignore[reportPrivateUsage]


async def _idle(seconds: float) -> dict[str, float]:
    await anyio.sleep(0.5)  # let the last connection's follow-up work settle
    _, before = _switches()
    cpu0, t0 = _cpu(), time.perf_counter()
    await anyio.sleep(seconds)
    threads, after = _switches()
    elapsed = time.perf_counter() - t0
    return {
        "threads": threads,
        "wakeups_per_s": (after - before) / elapsed,
        "idle_cpu_pct": 100 * (_cpu() - cpu0) / elapsed,
    }


def _servers(n: int) -> dict[str, dict[str, Any]]:
    return {f"s{i:03d}": {"command": PYTHON, "args": [TINY_SERVER, "--name", f"s{i:03d}"]} for i in range(n)}


async def _child_sdk(n: int, idle: float, *, auto: bool = False) -> dict[str, float]:
    # The SDK's modules sdk_hold uses, imported before the clock starts (as in the keen child).
    from mcp.client.client import Client  # noqa: F401
    from mcp.client.stdio import stdio_client  # noqa: F401

    from mcp import ClientSession  # noqa: F401

    # As the keen child's Manager does when it starts (the keen command asks it to:
    # keen._gcfreeze): the objects the imports made are frozen out of the collector's walks,
    # so neither child's sync pays for walking its imports and the two stay comparable.
    gc.freeze()
    ready = 0
    all_ready, stop = anyio.Event(), anyio.Event()
    with tempfile.TemporaryDirectory(prefix="keen-bench-sdk-") as tmp:

        def one_ready() -> None:
            nonlocal ready
            ready += 1
            if ready == n:
                all_ready.set()

        async def hold(name: str, entry: dict[str, Any]) -> None:
            with open(Path(tmp) / f"{name}.stderr.log", "w", encoding="utf-8") as errlog:  # noqa: ASYNC230 (as the SDK is used)
                await sdk_hold(entry, errlog, one_ready, stop, auto=auto)

        async with anyio.create_task_group() as tg:
            with _Blocked() as blocked:
                cpu0, t0 = _cpu(), time.perf_counter()
                for name, entry in _servers(n).items():
                    tg.start_soon(hold, name, entry)
                with anyio.fail_after(CONNECT_WAIT):
                    await all_ready.wait()
                figures = {"sync_cpu_s": _cpu() - cpu0, "sync_wall_s": time.perf_counter() - t0}
            figures["peak_rss_mb"] = _peak_rss_mb()
            figures["loop_blocked_ms"] = 1000 * blocked.worst
            figures.update(await _idle(idle))
            stop.set()
    return figures


async def _child_keen(
    n: int, idle: float, max_starting: int | None = None, preload: list[str] | None = None
) -> dict[str, Any]:
    # The SDK's client modules, loaded before the clock starts as the sdk child loads them:
    # importing the SDK is the same cost in both, and not what this compares.
    from mcp.client.stdio import stdio_client  # noqa: F401

    from keen import freeze_at_first_start
    from keen.mcp import ServerState
    from keen.runtime import open_runtime
    from mcp import ClientSession  # noqa: F401

    for module in preload or []:  # what a sync loads, imported before the clock as the SDK's are
        with contextlib.suppress(ImportError):
            importlib.import_module(module)
    freeze_at_first_start()  # as the keen command does (the sdk children freeze too)
    writing = _time_skill_writing()
    before = set(sys.modules)

    with keen_home() as home:
        path = write_config(home, _servers(n))
        if max_starting is not None:  # else Keen's default
            (home / "config.toml").write_text(f"[mcp]\nmax_starting = {max_starting}\n", encoding="utf-8")
        async with contextlib.AsyncExitStack() as stack:
            with _Blocked() as blocked:
                cpu0, t0 = _cpu(), time.perf_counter()
                runtime = await stack.enter_async_context(
                    open_runtime(config_path=path, wait=CONNECT_WAIT, sync=True)
                )
                figures: dict[str, Any] = {
                    "sync_cpu_s": _cpu() - cpu0,
                    "sync_wall_s": time.perf_counter() - t0,
                }
            figures["skills_write_cpu_s"] = writing[0]
            figures["sync_less_write_cpu_s"] = figures["sync_cpu_s"] - writing[0]
            figures["imported"] = sorted(set(sys.modules) - before)
            figures["peak_rss_mb"] = _peak_rss_mb()
            figures["loop_blocked_ms"] = 1000 * blocked.worst
            down = [s.name for s in runtime.manager.servers() if s.state is not ServerState.CONNECTED]
            if down:
                raise SystemExit(f"not connected: {down[:5]}")
            figures.update(await _idle(idle))
    return figures


def _time_skill_writing() -> list[float]:
    """Wrap the startup sync's skill writers (``keen.mcpskills.startup`` calls them on a
    worker thread) so that the CPU of the thread running them is summed into the returned
    one-element list: the part of Keen's sync that writes files, which the SDK has no
    counterpart of (``time.thread_time``, that thread only)."""
    from keen.mcpskills import startup

    spent = [0.0]

    def timed(write: Any) -> Any:
        @functools.wraps(write)
        def run(*args: Any, **kwargs: Any) -> Any:
            start = time.thread_time()
            try:
                return write(*args, **kwargs)
            finally:
                spent[0] += time.thread_time() - start

        return run

    startup.sync_mcp_skills = timed(startup.sync_mcp_skills)  # pyright: ignore[reportAttributeAccessIssue]
    startup.sync_server = timed(startup.sync_server)  # pyright: ignore[reportAttributeAccessIssue]
    return spent


def _run_child(
    mode: str, n: int, idle: float, max_starting: int | None = None, preload: list[str] | None = None
) -> dict[str, Any]:
    # Bytecode cached, as an installed Keen runs: compiling Keen's lazily imported modules from
    # source (PYTHONDONTWRITEBYTECODE is set on some machines) is not Keen's cost.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    done = subprocess.run(
        [PYTHON, __file__, "--child", mode, "--servers", str(n), "--idle", str(idle)]
        + ([] if max_starting is None else ["--max-starting", str(max_starting)])
        + (["--preload", ",".join(preload)] if preload else []),
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=CONNECT_WAIT + 60,
    )
    if done.returncode != 0:
        raise SystemExit(f"the {mode} run failed ({done.returncode}):\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


FIGURES = [
    ("sync_cpu_s", "sync CPU (s)", "{:.3f}"),
    ("sync_wall_s", "sync wall (s)", "{:.2f}"),
    # Keen only: its sync's CPU split into writing the skills (no SDK counterpart) and the
    # rest (connecting, listing, checking, pinning), the latter beside the SDK's whole sync.
    ("skills_write_cpu_s", "skill writing CPU (s)", "{:.3f}"),
    ("sync_less_write_cpu_s", "sync CPU less skill writing (s)", "{:.3f}"),
    ("peak_rss_mb", "peak RSS at sync's end (MiB)", "{:.1f}"),
    ("loop_blocked_ms", "loop blocked, worst (ms)", "{:.1f}"),
    ("threads", "threads, idle", "{:.0f}"),
    ("wakeups_per_s", "wake-ups/s, idle", "{:.1f}"),
    ("idle_cpu_pct", "CPU % of a core, idle", "{:.2f}"),
]
BASELINE: dict[str, str | None] = {"skills_write_cpu_s": None, "sync_less_write_cpu_s": "sync_cpu_s"}
"""The SDK figure a Keen figure is printed beside when it is not its own key (``None``: none)."""


def _spread(values: list[float], fmt: str) -> str:
    return " / ".join(fmt.format(v) for v in (min(values), median(values), max(values)))


def _ratio(keen: float, sdk: float) -> str:
    if sdk == 0:
        return "SDK 0" if keen else "1.00x"
    return f"{keen / sdk:.2f}x"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--servers", type=int, default=24)
    parser.add_argument("--repeat", "--repeats", dest="repeats", type=int, default=3, help="runs per mode")
    parser.add_argument("--idle", type=float, default=3.0)
    parser.add_argument("--json", action="store_true")
    parser.add_argument(
        "--max-starting",
        type=int,
        help="Keen's [mcp] max_starting (0: no bound; default: Keen's own default)",
    )
    parser.add_argument("--child", choices=("sdk", "sdk-auto", "keen"), help=argparse.SUPPRESS)
    parser.add_argument("--preload", default="", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        if args.child == "keen":
            preload = [m for m in args.preload.split(",") if m]
            figures = anyio.run(_child_keen, args.servers, args.idle, args.max_starting, preload)
        else:
            figures = anyio.run(
                functools.partial(_child_sdk, auto=args.child == "sdk-auto"), args.servers, args.idle
            )
        print(json.dumps(figures))
        return
    load_before = os.getloadavg()
    runs: dict[str, list[dict[str, Any]]] = {"sdk": [], "sdk-auto": [], "keen": [], "keen-preloaded": []}
    preload: list[str] = []
    for _ in range(args.repeats):
        for mode in runs:  # interleaved: a busy moment of the machine hits each
            if mode == "keen-preloaded":
                figures = _run_child("keen", args.servers, args.idle, args.max_starting, preload)
            else:
                figures = _run_child(mode, args.servers, args.idle, args.max_starting)
            if mode == "keen" and not preload:
                preload = figures["imported"]
            runs[mode].append(figures)
    load_after = os.getloadavg()
    if args.json:
        print(json.dumps({"servers": args.servers, "runs": runs, "load": [load_before, load_after]}))
        return
    rows = [
        ("machine", load_text(load_before, load_after)),
        ("servers; repeats; idle window", f"{args.servers}; {args.repeats}; {args.idle:g} s"),
    ]
    rows.append(
        (
            "imports in the window",
            f"Keen: {len(preload)} modules loaded during its first sync (in the Keen row; the SDK's"
            " and Keen's are imported before the clock in the SDK rows and the 'imports before' row)",
        )
    )
    for key, label, fmt in FIGURES:
        baseline = BASELINE.get(key, key)
        sdk = [r[baseline] for r in runs["sdk"]] if baseline else []
        auto = [r[baseline] for r in runs["sdk-auto"]] if baseline else []
        # The imports before the clock change the sync's figures; the idle ones they leave alone.
        modes = [("keen", "Keen")] + (
            [("keen-preloaded", "Keen, imports before")] if key.startswith(("sync", "skills")) else []
        )
        for mode, name in modes:
            keen = [r[key] for r in runs[mode]]
            if baseline:
                beside = (
                    f"SDK {_spread(sdk, fmt)}  SDK auto {_spread(auto, fmt)}  (min / median / max)"
                    f"  ratio of medians to SDK {_ratio(median(keen), median(sdk))},"
                    f" to SDK auto {_ratio(median(keen), median(auto))}"
                )
            else:
                per = 1000 * median(keen) / args.servers
                beside = f"(min / median / max; {per:.2f} ms a server; the SDK has no counterpart)"
            rows.append(
                (f"{label}, {name}" if mode != "keen" else label, f"{name} {_spread(keen, fmt)}  {beside}")
            )
    print_block(f"{args.servers} stdio servers held: Keen (open_runtime, sync) vs the bare MCP SDK", rows)


if __name__ == "__main__":
    main()
