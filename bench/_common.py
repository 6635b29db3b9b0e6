"""Shared by the benchmark scripts: a throwaway KEEN_HOME, server commands, statistics, output.

Benchmarks print figures; they never assert them (targets are shown next to the figure).
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TextIO

__all__ = [
    "DEMO_SERVER",
    "PYTHON",
    "TINY_SERVER",
    "keen_home",
    "load_text",
    "median",
    "percentiles",
    "print_block",
    "sdk_hold",
    "verdict",
    "write_config",
]

PYTHON = sys.executable
TINY_SERVER = str(Path(__file__).resolve().parent / "servers" / "tiny_stdio.py")
DEMO_SERVER = ["-m", "keen.demo.server"]


@contextmanager
def keen_home(reuse: Path | None = None) -> Iterator[Path]:
    """A fresh temporary ``KEEN_HOME`` for the block, or ``reuse`` (a home an outer block made,
    kept with what earlier runs left in it); restores the previous value after."""
    previous = os.environ.get("KEEN_HOME")
    with tempfile.TemporaryDirectory(prefix="keen-bench-") as tmp:
        home = reuse or Path(tmp)
        os.environ["KEEN_HOME"] = str(home)
        try:
            yield home
        finally:
            if previous is None:
                os.environ.pop("KEEN_HOME", None)
            else:
                os.environ["KEEN_HOME"] = previous


def write_config(home: Path, servers: dict[str, Any]) -> Path:
    """Write ``$home/mcp/configs.json`` (version 1) and return its path."""
    path = home / "mcp" / "configs.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"version": 1, "servers": servers}, indent=2), encoding="utf-8")
    return path


async def sdk_hold(
    entry: dict[str, Any], errlog: TextIO, ready: Callable[[], None], stop: Any, *, auto: bool = False
) -> None:
    """Connect to one stdio server with the bare MCP SDK, call ``ready()`` once its tools are
    listed, then hold the session until ``stop`` (an ``anyio.Event``) is set.

    Args:
        entry: the server's configs.json entry (``command``, ``args``).
        errlog: where the server's stderr goes (the SDK's ``errlog``).
        ready: called once, after ``initialize`` and ``tools/list``.
        stop: the session is held until it is set.
        auto: connect as Keen does to a server of either protocol era,
            ``mcp.client.client.Client(..., mode="auto")`` (``server/discover`` first, the
            initialize handshake when the server does not answer it); else
            ``ClientSession.initialize`` (the handshake era only).
    """
    from mcp.client.client import Client
    from mcp.client.stdio import StdioServerParameters, stdio_client

    from mcp import ClientSession

    params = StdioServerParameters(command=entry["command"], args=entry["args"])
    if auto:
        async with Client(stdio_client(params, errlog=errlog), mode="auto") as client:
            await client.list_tools()
            ready()
            await stop.wait()
        return
    async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        await session.list_tools()
        ready()
        await stop.wait()


def median(values: Sequence[float]) -> float:
    return statistics.median(values)


def percentiles(values: Sequence[float]) -> dict[str, float]:
    """p50, p90 and p99 (inclusive linear interpolation) plus min and max."""
    cuts = statistics.quantiles(values, n=100, method="inclusive")
    return {"p50": cuts[49], "p90": cuts[89], "p99": cuts[98], "min": min(values), "max": max(values)}


def load_text(before: Sequence[float], after: Sequence[float]) -> str:
    """The machine's CPUs and its load averages (``os.getloadavg``: 1, 5, 15 min) before and
    after a run, for the reader to judge how busy the machine was."""

    def three(load: Sequence[float]) -> str:
        return " ".join(f"{v:.2f}" for v in load)

    return f"{os.cpu_count()} CPUs; load average (1 5 15 min) before {three(before)}, after {three(after)}"


def verdict(ok: bool) -> str:
    return "OK" if ok else "ABOVE TARGET"


def print_block(title: str, rows: Sequence[tuple[str, str]], notes: Sequence[str] = ()) -> None:
    """A titled block of ``label : value`` lines, labels aligned, then indented notes."""
    width = max(len(label) for label, _ in rows)
    print(title)
    print("-" * len(title))
    for label, value in rows:
        print(f"  {label.ljust(width)} : {value}")
    for note in notes:
        print(f"  {note}")
