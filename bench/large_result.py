"""CPU of a call whose result is large, by its size: does reading it grow with its size?

A stdio server sends each message as one line of JSON-RPC, so a result of 16 MB arrives as
one line read from the pipe in about 250 reads of 64 KB. A reader that scans what it has
gathered again at each read costs in proportion to the square of the size; one that
scans each read once, in proportion to the size.

Each run calls ``text_of_size`` of ``bench/servers/tiny_stdio.py --sized`` (standard library
only: the server's own CPU is not measured) through ``Manager.call_tool`` (Keen's stdio
transport, the SDK's session and result model) at each size, the sizes in turns, and
measures this process's CPU (``time.process_time``: every thread; the server is another
process) per call: min / median / max over ``--repeat`` calls of each size, the median per
MB, and the growth from the smallest to the largest size as a ratio of the per-MB figures
(about 1 when the cost is proportional to the size; 16 when it is proportional to its
square between 1 and 16 MB). Prints figures, never asserts.

Each transport runs in turn (``--transports``): ``stdio``; ``events``, a Streamable HTTP
server of the 2025-11-25 era that answers in server-sent events (``bench/servers/sized_http.py``,
the MCP SDK's own server, on 127.0.0.1); ``json``, the same answering with JSON bodies; and
``gzip``, those compressed. Over HTTP the server's process is apart too; this process's
CPU includes its HTTP client (httpx2) and, for ``gzip``, the decompression. Until Keen set
its own bound on one message, the SDK's 1 MiB an event failed ``events`` at 1 MB.

``host`` is the other way: one message a host sends ``keen serve`` over stdio, read as
``keen serve`` reads its stdin (``keen.serve._stdin.StdinLines`` on a pipe, a thread of this
process writing it; its CPU is counted too, in proportion to the size).

Usage: ``python bench/large_result.py [--sizes 1,4,16] [--repeat 5] [--transports stdio,events,json,gzip]
[--json]`` (sizes in MB; transports of stdio, events, json, gzip, host).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio

from _common import PYTHON, TINY_SERVER, keen_home, load_text, print_block, write_config
from keen.mcp import Manager
from keen.trust import PinGuard

MB = 1 << 20
SIZED_HTTP = str(Path(__file__).resolve().parent / "servers" / "sized_http.py")
TRANSPORTS = {
    "stdio": "one stdio result",
    "events": "one Streamable HTTP result in a server-sent event",
    "json": "one Streamable HTTP result as a JSON body",
    "gzip": "one Streamable HTTP result as a gzipped JSON body",
    "host": "one host message read by keen serve over stdio",
}


@contextlib.contextmanager
def _server(transport: str) -> Iterator[dict[str, Any]]:
    """The configs.json entry of the server for ``transport``, running for the block."""
    if transport == "stdio":
        yield {"command": PYTHON, "args": [TINY_SERVER, "--sized"]}
        return
    if transport == "host":
        yield {}
        return
    flags = {"events": [], "json": ["--json"], "gzip": ["--json", "--gzip"]}[transport]
    with tempfile.TemporaryDirectory(prefix="keen-bench-http-") as tmp:
        port_file = Path(tmp) / "port"
        process = subprocess.Popen([PYTHON, SIZED_HTTP, str(port_file), *flags], stdin=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 60
            while not port_file.exists() or not port_file.read_text():
                if process.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit(f"the HTTP server for {transport} did not start")
                time.sleep(0.05)
            yield {"transport": "streamable_http", "url": f"http://127.0.0.1:{port_file.read_text()}/mcp"}
        finally:
            process.terminate()
            process.wait(10)


async def _measure(sizes: list[float], repeat: int, entry: dict[str, Any]) -> dict[float, list[float]]:
    cpu: dict[float, list[float]] = {size: [] for size in sizes}
    with keen_home() as home:
        path = write_config(home, {"tiny": entry})
        async with Manager(path, trust=PinGuard()) as manager:
            if not await manager.wait_ready(60):
                raise SystemExit(f"the server did not connect: {manager.status('tiny').last_error}")
            await manager.call_tool("tiny", "text_of_size", {"bytes": MB})  # warm: first-call work
            for turn in range(repeat):
                order = sizes if turn % 2 == 0 else sizes[::-1]
                for size in order:
                    start = time.process_time()
                    result = await manager.call_tool("tiny", "text_of_size", {"bytes": int(size * MB)})
                    cpu[size].append(time.process_time() - start)
                    if result.is_error or not result.content:
                        raise SystemExit(f"the call of {size} MB failed: {result}")
    return cpu


async def _measure_host(sizes: list[float], repeat: int) -> dict[float, list[float]]:
    from keen.serve._stdin import StdinLines

    cpu: dict[float, list[float]] = {size: [] for size in sizes}
    for turn in range(repeat):
        for size in sizes if turn % 2 == 0 else sizes[::-1]:
            text = "a" * int(size * MB)
            message = json.dumps({"jsonrpc": "2.0", "method": "notifications/x", "params": {"t": text}})
            read_fd, write_fd = os.pipe()

            def write(data: bytes = message.encode() + b"\n", fd: int = write_fd) -> None:
                with os.fdopen(fd, "wb") as pipe:
                    pipe.write(data)

            writer = threading.Thread(target=write, daemon=True)
            start = time.process_time()
            writer.start()
            lines = [line async for line in StdinLines(read_fd)]
            writer.join()
            cpu[size].append(time.process_time() - start)
            os.close(read_fd)
            if len(lines) != 1 or len(lines[0]) != len(message) + 1:
                raise SystemExit(f"the {size} MB message was not read whole")
    return cpu


def main() -> None:
    parser = argparse.ArgumentParser(description="Client CPU of a call by the size of its result.")
    parser.add_argument("--sizes", default="1,4,16", help="result sizes in MB, comma-separated")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--transports", default=",".join(TRANSPORTS), help="of " + ", ".join(TRANSPORTS))
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    sizes = sorted(float(x) for x in args.sizes.split(","))
    for transport in args.transports.split(","):
        if transport not in TRANSPORTS:
            raise SystemExit(f"unknown transport {transport!r}: use {', '.join(TRANSPORTS)}")
        with _server(transport) as entry:
            _report(transport, sizes, args.repeat, entry, as_json=args.json)


def _report(transport: str, sizes: list[float], repeat: int, entry: dict[str, Any], *, as_json: bool) -> None:
    before = os.getloadavg()
    cpu = (
        anyio.run(_measure_host, sizes, repeat)
        if transport == "host"
        else anyio.run(_measure, sizes, repeat, entry)
    )
    after = os.getloadavg()
    medians = {size: statistics.median(values) for size, values in cpu.items()}
    per_mb = {size: medians[size] / size for size in sizes}
    growth = per_mb[sizes[-1]] / per_mb[sizes[0]]
    if as_json:
        record = {
            "transport": transport,
            "cpu_s": cpu,
            "per_mb_s": per_mb,
            "growth": growth,
            "load": [before, after],
        }
        print(json.dumps(record))
        return
    rows = [
        (
            f"{size:g} MB {'message' if transport == 'host' else 'result'}",
            f"CPU {min(cpu[size]) * 1000:7.1f} / {medians[size] * 1000:7.1f} / {max(cpu[size]) * 1000:7.1f} ms"
            f"   {per_mb[size] * 1000:5.1f} ms per MB",
        )
        for size in sizes
    ]
    rows.append(
        (
            "growth per MB",
            f"x{growth:.2f} from {sizes[0]:g} to {sizes[-1]:g} MB (x1 when the cost is proportional to"
            f" the size; x{sizes[-1] / sizes[0]:g} when to its square)",
        )
    )
    who = "keen serve's stdin" if transport == "host" else "Manager.call_tool"
    print_block(
        f"{who}, {TRANSPORTS[transport]} of each size, client CPU (min / median / max of {repeat})",
        rows,
        [load_text(before, after)],
    )


if __name__ == "__main__":
    main()
