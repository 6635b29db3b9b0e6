"""Load through ``keen serve --transport http`` vs FastMCP's proxy vs the upstream directly.

50 concurrent MCP clients (the official SDK's ``Client``, handshake era), 200 ``tools/call``
each, against one local upstream (FastMCP) reached three ways. Every fourth call is
``progress_echo`` with a progress token: the upstream sends 3 progress notifications during
the call, which must reach the calling client (relayed with its own token); the others are
``echo``. The targets:

- direct: the upstream itself,
- fastmcp-proxy: ``fastmcp.server.create_proxy(upstream)`` served over HTTP,
- keen (memory) / keen (redis): ``keen serve --mode extension`` with each store; every
  client reads ``resource:///tool_descriptions?tools=mcp__up__echo,mcp__up__progress_echo`` once
  (untimed), then calls.

Each client makes one untimed warm-up call first, on every target.

Prints calls/s, p50/p99 latency (ms) over all calls, errors (a wrong result, or a progress
call that did not receive its 3 notifications, counts as one), the progress notifications
received, and the ratios against the targets:
Keen calls/s >= FastMCP proxy's, Keen p99 <= 2x direct, 0 errors. Every loop is bounded
(clients x calls, and a 300 s cap per target); every server listens on 127.0.0.1 and is
stopped at the end. With ``--repeat N`` every target is loaded N times (in turn, so a busy
moment of the machine hits each) and each figure is min / median / max over the runs, the
ratios taken between medians; the machine's load average is printed before and after.
Usage: ``python bench/serve_load.py [--clients 50] [--calls 200] [--repeat 1]``.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import anyio
import httpx2
from mcp.client.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.dispatcher import ProgressFnT

from _common import PYTHON, load_text, percentiles, print_block, verdict, write_config

HERE = Path(__file__).resolve().parent
# The tests' loopback helpers (free ports, redis-server): one copy for tests and benchmarks.
sys.path.insert(0, str(HERE.parent / "tests"))
from helpers.loopback import free_port, redis_server, stop, wait_listening  # noqa: E402

LOAD_SERVERS = str(HERE / "servers" / "load_servers.py")
KEEN = str(Path(sys.executable).parent / "keen")
PHASE_CAP = 300.0
"""Seconds one target may take; a slower one is stopped and its completed calls reported."""


@contextlib.contextmanager
def _process(cmd: list[str], port: int, what: str, env: dict[str, str] | None = None) -> Iterator[str]:
    proc = subprocess.Popen(
        cmd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        wait_listening(port, proc, what, timeout=60)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        stop(proc, group=True, grace=15)


PROGRESS_EVERY = 4
"""Every fourth call of a client is the progress-reporting tool."""
PROGRESS_STEPS = 3


async def _one_client(
    url: str,
    prefix: str,
    calls: int,
    describe: bool,
    lat: list[float],
    errors: list[str],
    progress: list[int],
) -> None:
    echo, progress_echo = f"{prefix}echo", f"{prefix}progress_echo"
    try:
        async with (
            httpx2.AsyncClient(timeout=60) as http,
            Client(streamable_http_client(url, http_client=http), mode="legacy", cache=None) as client,
        ):
            if describe:
                await client.read_resource(f"resource:///tool_descriptions?tools={echo},{progress_echo}")
            # One untimed warm-up call of each tool per client on every target (first-call costs are not load).
            await client.call_tool(echo, {"text": "warm-up"})
            await client.call_tool(progress_echo, {"text": "warm-up", "steps": 1}, progress_callback=_ignore)
            for i in range(calls):
                seen: list[float] = []
                on_progress = _collector(seen)
                reports = i % PROGRESS_EVERY == PROGRESS_EVERY - 1
                started = time.perf_counter()
                try:
                    if reports:
                        arguments = {"text": f"m{i}", "steps": PROGRESS_STEPS}
                        result = await client.call_tool(
                            progress_echo, arguments, progress_callback=on_progress
                        )
                    else:
                        result = await client.call_tool(echo, {"text": f"m{i}"})
                except Exception as exc:
                    errors.append(type(exc).__name__)
                    continue
                lat.append(time.perf_counter() - started)
                if result.is_error or result.content[0].text != f"m{i}":  # type: ignore[union-attr]
                    errors.append("wrong result")
                if reports:
                    progress.append(len(seen))
                    if seen != [float(step) for step in range(1, PROGRESS_STEPS + 1)]:
                        errors.append(f"progress {seen} of {PROGRESS_STEPS} steps")
    except Exception as exc:
        errors.append(f"client: {type(exc).__name__}: {exc}")


def _collector(seen: list[float]) -> ProgressFnT:
    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append(progress)

    return on_progress


async def _ignore(progress: float, total: float | None, message: str | None) -> None:
    """The warm-up call's progress callback (its notifications are not counted)."""


async def _load(url: str, prefix: str, clients: int, calls: int, describe: bool) -> dict[str, float]:
    lat: list[float] = []
    errors: list[str] = []
    progress: list[int] = []
    started = time.perf_counter()
    with anyio.move_on_after(PHASE_CAP) as cap:
        async with anyio.create_task_group() as tg:
            for _ in range(clients):
                tg.start_soon(_one_client, url, prefix, calls, describe, lat, errors, progress)
    elapsed = time.perf_counter() - started
    cuts = percentiles(lat) if len(lat) >= 2 else {"p50": float("nan"), "p99": float("nan")}
    if errors:
        print(f"  errors seen: {sorted(set(errors))[:5]}", file=sys.stderr)
    return {
        "calls_s": len(lat) / elapsed,
        "p50": cuts["p50"] * 1000,
        "p99": cuts["p99"] * 1000,
        "errors": float(len(errors)),
        "calls": float(len(lat)),
        "progress_calls": float(len(progress)),
        "progress_seen": float(sum(progress)),
        "capped": float(cap.cancelled_caught),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=1, help="loads of every target (default 1)")
    args = parser.parse_args()
    load_before = os.getloadavg()
    runs: dict[str, list[dict[str, float]]] = {}

    def load(label: str, url: str, prefix: str, describe: bool) -> None:
        runs.setdefault(label, []).append(anyio.run(_load, url, prefix, args.clients, args.calls, describe))

    with tempfile.TemporaryDirectory(prefix="keen-bench-serve-") as tmp:
        home = Path(tmp)
        up_port = free_port()
        with _process([PYTHON, LOAD_SERVERS, "upstream", str(up_port)], up_port, "upstream") as upstream:
            write_config(home, {"up": {"transport": "streamable_http", "url": upstream}})
            env = {**os.environ, "KEEN_HOME": str(home)}
            env.pop("KEEN_SERVE_TOKEN", None)
            env.pop("KEEN_SERVE_TOKENS", None)
            with redis_server(home) as redis_url:
                for _ in range(max(1, args.repeat)):
                    load("direct", upstream, "", False)
                    px_port = free_port()
                    with _process(
                        [PYTHON, LOAD_SERVERS, "proxy", str(px_port), upstream], px_port, "fastmcp proxy"
                    ) as proxy:
                        load("fastmcp-proxy", proxy, "", False)
                    for label, store in (("keen (memory)", "memory"), ("keen (redis)", redis_url)):
                        port = free_port()
                        cmd = [
                            KEEN,
                            "serve",
                            "--transport",
                            "http",
                            "--port",
                            str(port),
                            "--mode",
                            "extension",
                            "--store",
                            store,
                            "--fetch-limit",
                            "1000000",
                        ]
                        with _process(cmd, port, f"keen serve ({store})", env) as keen:
                            load(label, keen, "mcp__up__", True)
    _report(runs, args.clients, args.calls, (load_before, os.getloadavg()))


def _median(runs: list[dict[str, float]], key: str) -> float:
    return statistics.median(r[key] for r in runs)


def _spread(runs: list[dict[str, float]], key: str, fmt: str) -> str:
    values = [r[key] for r in runs]
    return "/".join(fmt.format(v) for v in (min(values), statistics.median(values), max(values)))


def _report(
    runs: dict[str, list[dict[str, float]]],
    clients: int,
    calls: int,
    loads: tuple[tuple[float, ...], tuple[float, ...]],
) -> None:
    rows = []
    for name, r in runs.items():
        capped = sum(int(x["capped"]) for x in r)
        rows.append(
            (
                name,
                f"calls/s {_spread(r, 'calls_s', '{:.1f}')}   p50 {_spread(r, 'p50', '{:.2f}')} ms   "
                f"p99 {_spread(r, 'p99', '{:.2f}')} ms   errors {int(sum(x['errors'] for x in r))}   "
                f"calls {int(sum(x['calls'] for x in r))}/{clients * calls * len(r)}   "
                f"progress {int(sum(x['progress_seen'] for x in r))}/"
                f"{int(sum(x['progress_calls'] for x in r)) * PROGRESS_STEPS}"
                + (f" ({capped} run(s) stopped at the {PHASE_CAP:.0f} s cap)" if capped else ""),
            )
        )
    direct, proxy = runs["direct"], runs["fastmcp-proxy"]
    notes = [f"min/median/max over {len(direct)} run(s) per target; ratios between medians"]
    for name in ("keen (memory)", "keen (redis)"):
        r = runs[name]
        vs_proxy = (
            _median(r, "calls_s") / _median(proxy, "calls_s") if _median(proxy, "calls_s") else float("nan")
        )
        vs_direct = (
            _median(r, "calls_s") / _median(direct, "calls_s") if _median(direct, "calls_s") else float("nan")
        )
        p99_vs_direct = _median(r, "p99") / _median(direct, "p99") if _median(direct, "p99") else float("nan")
        errors = sum(x["errors"] for x in r)
        notes.append(
            f"{name}: calls/s vs fastmcp-proxy {vs_proxy:.2f}x (target >= 1.00: {verdict(vs_proxy >= 1.0)}); "
            f"calls/s vs direct {vs_direct:.2f}x; "
            f"p99 vs direct {p99_vs_direct:.2f}x (target <= 2.00: {verdict(p99_vs_direct <= 2.0)}); "
            f"errors {int(errors)} (target 0: {verdict(errors == 0)})"
        )
    notes.append(
        f"fastmcp-proxy: calls/s vs direct {_median(proxy, 'calls_s') / _median(direct, 'calls_s'):.2f}x; "
        f"p99 vs direct {_median(proxy, 'p99') / _median(direct, 'p99'):.2f}x"
    )
    notes.append(f"machine: {load_text(*loads)}")
    print_block(
        f"keen serve load: {clients} clients x {calls} tools/call (every {PROGRESS_EVERY}th reports "
        f"progress {PROGRESS_STEPS}x), loopback HTTP, handshake era",
        rows,
        notes,
    )


if __name__ == "__main__":
    main()
