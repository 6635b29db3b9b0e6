"""A stdio MCP server that spends CPU before it answers, as ``uvx``/``npx`` servers do.

Usage: ``python cpu_burn.py SECONDS [--sleep WALL] [--hold PATH] [--cpus DIR] [--list-sleep WALL]``:
burns SECONDS
of its own CPU time (process time, so a busy machine makes it take longer on the wall clock, as
a real start-up would), or with ``--cpus`` holds one of the lock files ``DIR/cpu*`` for SECONDS
of wall time instead (a start on a machine of as many CPUs as there are files, other processes
left out: servers started together queue for them, as CPU-bound starts share real CPUs, but
load from outside the test does not stretch a start), sleeps WALL seconds (a server waiting on something else, costing no CPU),
holds while the file PATH exists (touching ``PATH.held`` first, so a test knows it holds and
decides when it comes up, instead of guessing a WALL long enough on a loaded machine), then
answers ``initialize`` (``server/discover`` is refused with -32601, as a handshake-only
server does), ``tools/list`` with one tool ``ping`` (after ``--list-sleep`` WALL seconds) and ``tools/call`` of it. Standard
library only, so the interpreter's own start stays small beside the burn.
"""

from __future__ import annotations

import fcntl
import json
import sys
import time
from pathlib import Path


def burn(seconds: float) -> None:
    """Spin until this process has used ``seconds`` of CPU time."""
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass


def use_a_cpu(folder: Path, seconds: float) -> None:
    """Hold one free ``folder/cpu*`` lock file for ``seconds`` (polling for one while all are
    held: the first to find one free takes it)."""
    files = sorted(folder.glob("cpu*"))
    while True:
        for path in files:
            with open(path, "rb") as cpu:
                try:
                    fcntl.flock(cpu, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    continue
                time.sleep(seconds)
                return
        time.sleep(0.005)


def answer(message: dict) -> dict | None:
    method, ident = message.get("method"), message.get("id")
    if ident is None:
        return None  # a notification
    if method == "initialize":
        version = message.get("params", {}).get("protocolVersion", "2025-11-25")
        result = {
            "protocolVersion": version,
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "cpu-burn", "version": "1"},
        }
    elif method == "tools/list":
        tool = {"name": "ping", "description": "Answer pong.", "inputSchema": {"type": "object"}}
        result = {"tools": [tool]}
    elif method == "tools/call":
        result = {"content": [{"type": "text", "text": "pong"}], "isError": False}
    elif method == "ping":
        result = {}
    else:
        return {"jsonrpc": "2.0", "id": ident, "error": {"code": -32601, "message": "Method not found"}}
    return {"jsonrpc": "2.0", "id": ident, "result": result}


def main() -> None:
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 1.5
    if "--cpus" in sys.argv:
        use_a_cpu(Path(sys.argv[sys.argv.index("--cpus") + 1]), seconds)
    else:
        burn(seconds)
    if "--sleep" in sys.argv:
        time.sleep(float(sys.argv[sys.argv.index("--sleep") + 1]))
    if "--hold" in sys.argv:
        hold = Path(sys.argv[sys.argv.index("--hold") + 1])
        hold.with_name(hold.name + ".held").touch()
        end = time.monotonic() + 120  # a test that never releases it still ends
        while hold.exists() and time.monotonic() < end:
            time.sleep(0.01)
    for line in sys.stdin:
        if not line.strip():
            continue
        message = json.loads(line)
        if message.get("method") == "tools/list" and "--list-sleep" in sys.argv:
            time.sleep(float(sys.argv[sys.argv.index("--list-sleep") + 1]))
        reply = answer(message)
        if reply is not None:
            sys.stdout.write(json.dumps(reply) + "\n")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
