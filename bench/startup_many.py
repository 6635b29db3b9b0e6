"""Many CPU-hungry stdio servers starting at once, with every default (issue: 30 real servers).

Usage: python bench/startup_many.py [--servers 24] [--burn 1.5] [--chat 20] [--repeat 3]

Each server (``tests/servers/cpu_burn.py``) burns ``--burn`` seconds of its own CPU before it
answers ``initialize``, as ``uvx``/``npx`` servers do. The Manager starts them with its
defaults (``timeouts.connect`` 15 s; one start per CPU, more only while starts are quick, which
these are not); the figure is how many
connected and when the last did.

``--chat N`` then runs ``keen chat -p`` over N such servers against the fake
OpenAI-compatible endpoint of the tests (``tests/helpers/fake_llm.py``, on loopback): when
its first model request arrived, counted from the process's start, on the first run (no
skills on disk: every server is waited for) and on ``--repeat`` later runs (the skills of
the first run on disk: the model is asked first, the servers start behind), as min /
median / max, beside a bare interpreter (``python -c pass``) and ``keen --version`` timed
the same way, and the machine's load average before and after (the target: the
model asked within 1.5 s of start on the second run). Prints; never asserts.
"""

from __future__ import annotations

import argparse
import os
import statistics
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


def _spread(values: list[float]) -> str:
    return f"{min(values):.2f} / {statistics.median(values):.2f} / {max(values):.2f} s"


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def chat(servers: int, burn: float, repeat: int) -> None:
    sys.path.insert(0, str(ROOT / "tests"))
    from helpers.fake_llm import KEY, FakeLLM, Reply

    rows: list[tuple[str, str]] = []
    load_before = _load()
    with keen_home() as home:
        write_config(
            home, {f"burn{i:02d}": {"command": PYTHON, "args": [BURN, str(burn)]} for i in range(servers)}
        )
        # As an installed Keen runs: with its bytecode cached, not compiled again per process.
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env["OPENAI_API_KEY"] = KEY
        for label, argv in (
            ("python -c pass", [PYTHON, "-c", "pass"]),
            ("keen --version", [KEEN, "--version"]),
        ):
            walls: list[float] = []
            for _ in range(repeat + 1):
                began = time.monotonic()
                subprocess.run(argv, env=env, capture_output=True, check=True)
                walls.append(time.monotonic() - began)
            rows.append((label, f"{_spread(walls[1:])} wall (min / median / max of {repeat})"))
        asked: dict[str, list[float]] = {"first": [], "second": []}
        with FakeLLM([Reply(text="answer")] * (repeat + 1)) as fake:
            for run in ["first"] + ["second"] * repeat:
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
                        "--timeout",
                        "300",  # the first run waits for every server: each later run has all skills
                    ],
                    env=env,
                    capture_output=True,
                    text=True,
                    check=False,
                )
                total = time.monotonic() - began
                if done.returncode != 0 or not fake.requests:
                    raise SystemExit(
                        f"startup_many: keen chat -p exited {done.returncode}: {done.stderr[-2000:]}"
                    )
                asked[run].append(fake.requests[-1].at - began)
                print(
                    f"  {run} run: model asked after {asked[run][-1]:.2f} s, all done {total:.1f} s",
                    flush=True,
                )
    bare = float(rows[0][1].split(" / ")[1])
    rows.append(("first run (no skills on disk): model asked after", f"{asked['first'][0]:.2f} s"))
    second = statistics.median(asked["second"])
    rows.append(
        (
            "later runs (skills on disk): model asked after",
            f"{_spread(asked['second'])} (min / median / max of {repeat}), median {second / bare:.1f}x the "
            f"bare interpreter, target 1.5 s: {'met' if second <= 1.5 else 'NOT MET'}",
        )
    )
    print_block(
        f"keen chat -p over {servers} servers x {burn:g} s CPU (wall from the process's start)",
        rows,
        [f"{os.cpu_count()} CPUs, load average (1/5/15 min) {load_before} before, {_load()} after"],
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--servers", type=int, default=24)
    parser.add_argument("--burn", type=float, default=1.5)
    parser.add_argument(
        "--chat", type=int, default=0, metavar="N", help="also time keen chat -p over N servers"
    )
    parser.add_argument("--repeat", type=int, default=3, help="keen chat -p runs with the skills on disk")
    args = parser.parse_args()
    if args.servers:
        anyio.run(main, args.servers, args.burn)
    if args.chat:
        print()
        chat(args.chat, args.burn, max(1, args.repeat))
