"""Many CPU-hungry stdio servers starting at once, with every default (issue: 30 real servers).

Usage: python bench/startup_many.py [--servers 24] [--burn 1.5]

Each server (``tests/servers/cpu_burn.py``) burns ``--burn`` seconds of its own CPU before it
answers ``initialize``, as ``uvx``/``npx`` servers do. The Manager starts them with its
defaults (``timeouts.connect`` 15 s, ``max_starting`` one per CPU); the figure is how many
connected and when the last did. Prints; never asserts.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import anyio

from _common import PYTHON, keen_home, print_block, write_config
from keen.mcp import Manager, ServerState

BURN = str(Path(__file__).resolve().parents[1] / "tests" / "servers" / "cpu_burn.py")


async def main(servers: int, burn: float) -> None:
    with keen_home() as home:
        path = write_config(
            home, {f"burn{i:02d}": {"command": PYTHON, "args": [BURN, str(burn)]} for i in range(servers)}
        )
        began = time.monotonic()
        async with Manager(path) as manager:
            await manager.wait_ready(300)
            took = time.monotonic() - began
            statuses = manager.servers()
    connected = [s for s in statuses if s.state is ServerState.CONNECTED]
    failed = [s for s in statuses if s.state is not ServerState.CONNECTED]
    rows = [
        ("CPUs", str(os.cpu_count())),
        ("servers x CPU each", f"{servers} x {burn:g} s"),
        ("connected", f"{len(connected)} of {servers}"),
        ("all settled after", f"{took:.1f} s"),
    ]
    notes = [f"{s.name}: {s.last_error[:120]}" for s in failed[:5]]
    print_block("stdio servers starting at once, default settings", rows, notes)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--servers", type=int, default=24)
    parser.add_argument("--burn", type=float, default=1.5)
    args = parser.parse_args()
    anyio.run(main, args.servers, args.burn)
