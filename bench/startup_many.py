"""Many CPU-hungry stdio servers starting at once, with every default (issue: 30 real servers).

Usage: python bench/startup_many.py [--servers 24] [--burn 1.5] [--chat 20]

Each server (``tests/servers/cpu_burn.py``) burns ``--burn`` seconds of its own CPU before it
answers ``initialize``, as ``uvx``/``npx`` servers do. The Manager starts them with its
defaults (``timeouts.connect`` 15 s, ``max_starting`` one per CPU); the figure is how many
connected and when the last did.

``--chat N`` then runs ``keen chat -p`` twice over N such servers against the fake
OpenAI-compatible endpoint of the tests (``tests/helpers/fake_llm.py``, on loopback): when
its first model request arrived, counted from the process's start, on the first run (no
skills on disk: every server is waited for) and the second (the skills of the first run on
disk), beside how long ``keen --version`` takes to start. Prints; never asserts.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

import anyio

from _common import PYTHON, keen_home, print_block, write_config
from keen.mcp import Manager, ServerState
from keen.trust import PinGuard

ROOT = Path(__file__).resolve().parents[1]
BURN = str(ROOT / "tests" / "servers" / "cpu_burn.py")
KEEN = str(Path(sys.executable).with_name("keen"))


async def main(servers: int, burn: float) -> None:
    with keen_home() as home:
        path = write_config(
            home, {f"burn{i:02d}": {"command": PYTHON, "args": [BURN, str(burn)]} for i in range(servers)}
        )
        began = time.monotonic()
        async with Manager(path, trust=PinGuard()) as manager:
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


def chat(servers: int, burn: float) -> None:
    sys.path.insert(0, str(ROOT / "tests"))
    from helpers.fake_llm import KEY, FakeLLM, Reply

    rows: list[tuple[str, str]] = []
    with keen_home() as home:
        write_config(
            home, {f"burn{i:02d}": {"command": PYTHON, "args": [BURN, str(burn)]} for i in range(servers)}
        )
        env = {**os.environ, "OPENAI_API_KEY": KEY}
        began = time.monotonic()
        subprocess.run([KEEN, "--version"], env=env, capture_output=True, check=True)
        rows.append(
            ("keen --version", f"{time.monotonic() - began:.2f} s (the interpreter and Keen's imports)")
        )
        with FakeLLM([Reply(text="one"), Reply(text="two")]) as fake:
            for run in ("first", "second"):
                began = time.monotonic()
                done = subprocess.run(
                    [
                        KEEN,
                        "chat",
                        "-p",
                        "hi",
                        "--json",
                        "--model",
                        "openai:m",
                        "--base-url",
                        fake.url + "/v1",
                    ],
                    env=env,
                    capture_output=True,
                    text=True,
                    check=False,
                )
                total = time.monotonic() - began
                asked = fake.requests[-1].at - began if fake.requests else float("nan")
                rows.append(
                    (
                        f"{run} run: model asked after",
                        f"{asked:.2f} s (exit {done.returncode}, all done {total:.1f} s)",
                    )
                )
    print_block(f"keen chat -p over {servers} servers x {burn:g} s CPU", rows)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--servers", type=int, default=24)
    parser.add_argument("--burn", type=float, default=1.5)
    parser.add_argument(
        "--chat", type=int, default=0, metavar="N", help="also time keen chat -p over N servers"
    )
    args = parser.parse_args()
    anyio.run(main, args.servers, args.burn)
    if args.chat:
        print()
        chat(args.chat, args.burn)
