"""Live-refresh benchmark: how long a tool change takes to reach Keen, and what a flood costs.

The MCP SDK's own server (``tests/servers/changing_server.py``) over stdio, once in the
2026-07-28 era (the change arrives on ``subscriptions/listen``) and once handshake-only
(``notifications/tools/list_changed``). Each round adds or removes a tool through a call
(the server announces the change right after), and times, from the call's return:

- ``event``: the Manager's ``ToolsChanged`` (re-listed, diffed, observers told);
- ``skill``: the regenerated skill on disk (``LiveSkills`` wrote it atomically).

Then a flood: ``flood(1000)`` sends 1,000 notices; the server counts the tools/list
requests it answered until they stop. Target: the skill follows within 1 s (p99), and a
flood costs at most one re-list per ``refresh_interval`` (0.5 s) while it lasts, plus the
leading and the trailing one.

"While it lasts" is while notices reach Keen, from the call's start to the last notice's
arrival (counted by the session's ``ListWatch``, read every 10 ms), not while the ``flood``
call runs. In the
handshake era the notices go out on the call's own channel before its result, so the two
windows match. A ``subscriptions/listen`` stream is a stream of its own (MCP 2026-07-28,
"Subscriptions": it "delivers notifications until the client cancels it"; the only order
it sets is within a subscription, the acknowledgment first, "defined per subscription ID and
not per channel" on stdio), nothing orders its events with the call's result: the SDK
server buffers them and writes them from the listen request's task, so most arrive after
the call has returned (the bare SDK client sees the same).

Usage: ``python bench/refresh_latency.py [--rounds 30] [--json]``
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import anyio

from _common import PYTHON, keen_home, percentiles, print_block, verdict, write_config
from keen.mcp import Manager
from keen.mcp.listing.changes import ToolsChanged
from keen.mcpskills.live import LiveSkills
from keen.mcpskills.sync import SyncEntry
from keen.trust import PinGuard

__all__ = ["bench", "main"]

SERVER = str(Path(__file__).resolve().parent.parent / "tests" / "servers" / "changing_server.py")
TARGET_MS = 1000.0
INTERVAL = 0.5


async def _lists(manager: Manager) -> int:
    result = await manager.call_tool("bench", "stats", {}, validate=False)
    return int(json.loads(result.text)["lists"])


async def _era(legacy: bool, rounds: int) -> dict[str, Any]:
    with keen_home() as home:
        args = [SERVER, "stdio", *(["--legacy"] if legacy else [])]
        config = write_config(home, {"bench": {"command": PYTHON, "args": args}})
        events: list[float] = []
        synced: list[float] = []
        written = [anyio.Event()]

        def on_event(_change: ToolsChanged) -> None:
            events.append(time.perf_counter())

        def on_synced(_change: ToolsChanged, _entry: SyncEntry | None) -> None:
            synced.append(time.perf_counter())
            written[0].set()

        async with Manager(config, refresh_interval=INTERVAL, trust=PinGuard()) as manager:
            await manager.wait_ready(60)
            version = manager.status("bench").protocol_version
            manager.subscribe_changes(on_event)
            event_ms: list[float] = []
            skill_ms: list[float] = []
            async with LiveSkills(manager, skills_root=home / "skills", on_synced=on_synced):
                for i in range(rounds):
                    op = "add" if i % 2 == 0 else "remove"
                    n_events, n_synced = len(events), len(synced)
                    written[0] = anyio.Event()
                    await manager.call_tool("bench", "mutate", {"op": op, "name": "probe"}, validate=False)
                    start = time.perf_counter()
                    with anyio.fail_after(30):
                        await written[0].wait()
                    event_ms.append((events[n_events] - start) * 1000)
                    skill_ms.append((synced[n_synced] - start) * 1000)
                    await anyio.sleep(INTERVAL)  # past the debounce window: each round starts clean
            before = await _lists(manager)
            watch = manager._connections["bench"].watch  # pyright: ignore[reportPrivateUsage]
            assert watch is not None, "the bench server is connected"
            arrivals: list[float] = []  # when the notice count grew (10 ms resolution)

            async def follow_notices() -> None:
                seen = watch.notices
                while True:
                    await anyio.sleep(0.01)
                    if watch.notices != seen:
                        seen = watch.notices
                        arrivals.append(time.perf_counter())

            notices_before = watch.notices
            async with anyio.create_task_group() as tg:
                tg.start_soon(follow_notices)
                start = time.perf_counter()
                await manager.call_tool("bench", "flood", {"count": 1000}, validate=False)
                call_s = time.perf_counter() - start
                counts = [await _lists(manager)]
                while len(counts) < 3 or counts[-1] != counts[-3]:
                    await anyio.sleep(0.4)
                    counts.append(await _lists(manager))
                tg.cancel_scope.cancel()
            relists = counts[-1] - before
            notices = watch.notices - notices_before
            # The first arrival is seen up to 10 ms late: the window starts at the call instead.
            flood_s = (arrivals[-1] if arrivals else start) - start
    return {
        "era": version,
        "event_ms": percentiles(event_ms),
        "skill_ms": percentiles(skill_ms),
        "flood_notices": notices,
        "flood_call_seconds": call_s,
        "flood_seconds": flood_s,
        "flood_relists": relists,
        # The first notice re-lists at once, the last one's trailing re-list comes after it,
        # and in between at most one per interval while the notices arrive.
        "flood_relists_bound": int(2 + flood_s / INTERVAL),
    }


async def bench(rounds: int) -> list[dict[str, Any]]:
    return [await _era(False, rounds), await _era(True, rounds)]


def _fmt(p: dict[str, float]) -> str:
    return f"p50 {p['p50']:.1f}  p90 {p['p90']:.1f}  p99 {p['p99']:.1f}  max {p['max']:.1f} ms"


def main() -> None:
    parser = argparse.ArgumentParser(description="Live-refresh latency and flood cost.")
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    results = anyio.run(bench, args.rounds)
    if args.json:
        print(json.dumps(results, indent=2))
        return
    for r in results:
        rows = [
            ("change -> event", _fmt(r["event_ms"])),
            (
                "change -> skill on disk",
                f"{_fmt(r['skill_ms'])}  {verdict(r['skill_ms']['p99'] <= TARGET_MS)}",
            ),
            (
                "flood of 1,000 notices",
                f"{r['flood_relists']} re-lists, {r['flood_notices']} notices over "
                f"{r['flood_seconds']:.2f} s (the call {r['flood_call_seconds']:.2f} s) "
                f"(bound {r['flood_relists_bound']}) {verdict(r['flood_relists'] <= r['flood_relists_bound'])}",
            ),
        ]
        print_block(f"live refresh, MCP {r['era']} over stdio ({args.rounds} rounds)", rows)
        print()


if __name__ == "__main__":
    main()
