"""A flood of log messages through ``keen serve``: what the host gets, and keen serve's memory.

``tests/servers/log_stdio.py``'s ``flood`` tool, a real stdio process upstream of ``keen serve
--transport stdio --mode search``, sends ``--count`` log messages of ``--size`` characters
each (a bounded loop) during one call; the host (the SDK's ``Client`` over stdio) counts what
reaches it. keen serve's resident memory (``VmRSS`` of its process, from ``/proc``) is read
before the call and every 0.5 s during it. Prints the call's wall time, the messages and
characters the host got, keen serve's RSS before, at its peak and after, and the machine's
load average. Linux only (``/proc``). ``--source DIR`` runs keen from another checkout's
``src`` (to compare with an older Keen).
Usage: ``python bench/serve_log_flood.py [--count 20000] [--size 1000000] [--source DIR]``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import anyio
import mcp_types as mt
from mcp.client.client import Client
from mcp.client.stdio import StdioServerParameters

ROOT = Path(__file__).resolve().parent.parent


def _rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def _serve_pid() -> int:
    """The ``keen serve`` child of this process."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        if ppid == os.getpid() and b"serve" in cmdline:
            return int(entry.name)
    raise RuntimeError("keen serve's process not found")


async def main(count: int, size: int, source: str | None) -> None:
    home = Path(tempfile.mkdtemp(prefix="keen-flood-"))
    (home / "mcp").mkdir()
    logs = {
        "transport": "stdio",
        "command": sys.executable,
        "args": [str(ROOT / "tests/servers/log_stdio.py")],
        "timeouts": {"call_tool": 900},  # the whole flood, on a loaded machine too
    }
    (home / "mcp" / "configs.json").write_text(json.dumps({"version": 1, "servers": {"logs": logs}}))
    env = {**os.environ, "KEEN_HOME": str(home)}
    if source is not None:
        env["PYTHONPATH"] = str(Path(source) / "src")
    params = StdioServerParameters(
        command=sys.executable,
        args=["-c", "from keen.cli import main; main()", "serve", "--transport", "stdio", "--mode", "search"],
        env=env,
    )
    got = {"messages": 0, "chars": 0, "dropped_notices": []}

    async def on_log(params: mt.LoggingMessageNotificationParams) -> None:
        got["messages"] += 1
        text = params.data if isinstance(params.data, str) else json.dumps(params.data)
        got["chars"] += len(text)
        if params.logger == "keen serve":
            got["dropped_notices"].append(text)

    print(f"load average before: {os.getloadavg()}")
    async with Client(params, mode="legacy", cache=None, logging_callback=on_log) as client:
        # The upstream's first connection, then the figures from a settled process.
        await client.call_tool(
            "call_mcp_tool", {"server": "logs", "tool": "flood", "arguments": {"count": 1, "size": 10}}
        )
        pid = _serve_pid()
        before = _rss_kb(pid)
        peak = before
        done = anyio.Event()

        async def sample() -> None:
            nonlocal peak
            while not done.is_set():
                peak = max(peak, _rss_kb(pid))
                with anyio.move_on_after(0.5):
                    await done.wait()

        got["messages"], got["chars"], got["dropped_notices"] = 0, 0, []
        start = time.monotonic()
        async with anyio.create_task_group() as tg:
            tg.start_soon(sample)
            arguments = {"count": count, "size": size}
            result = await client.call_tool(
                "call_mcp_tool", {"server": "logs", "tool": "flood", "arguments": arguments}
            )
            done.set()
        elapsed = time.monotonic() - start
        after = _rss_kb(pid)
    print(f"result: {result.content[0].text if result.content else result}")
    print(f"{count:,} messages of {size:,} characters in {elapsed:.1f} s")
    print(f"host got {got['messages']:,} messages, {got['chars']:,} characters of data")
    print(f"drop notices: {got['dropped_notices']}")
    print(
        f"keen serve RSS: before {before / 1024:.0f} MB, peak {peak / 1024:.0f} MB, after {after / 1024:.0f} MB"
    )
    print(f"load average after: {os.getloadavg()}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--count", type=int, default=20_000)
    parser.add_argument("--size", type=int, default=1_000_000)
    parser.add_argument("--source", default=None)
    args = parser.parse_args()
    anyio.run(main, args.count, args.size, args.source)
