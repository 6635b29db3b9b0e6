"""Which stdio server starts first (docs/architecture.md "Servers and their states"): the one
whose last start took longest, as ``$KEEN_HOME/cache/start-times.json`` remembers it
(``keen.mcp.connection.start_times``), then those with no record, then those whose last start
reached its connect limit; the record forgets a server whose launch changed and holds no
secret of its config.
"""

from __future__ import annotations

import json
import math
import os
import stat
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import anyio.lowlevel
import pytest

from conftest import stdio_server
from keen.mcp import Manager, ServerState, ServerStatus
from keen.mcp.config.load import load_config
from keen.mcp.config.servers import StdioServerConfig
from keen.mcp.connection.start_times import KEY_NAME, MOST_BYTES, MOST_SERVERS, RECORD_NAME, StartTimes
from keen.mcp.connection.starts import StartSlots, StartTurn, order
from keen.trust import PinGuard

pytestmark = pytest.mark.anyio


def _stdio(path: Path, name: str) -> StdioServerConfig:
    server = load_config(path).servers[name]
    assert isinstance(server, StdioServerConfig)
    return server


async def _connect_order(path: Path) -> list[str]:
    """The order the servers of ``path`` connect in, one start at a time."""
    connected: list[str] = []

    def observe(status: ServerStatus) -> None:
        if status.state is ServerState.CONNECTED:
            connected.append(status.name)

    async with Manager(path, max_starting=1, trust=PinGuard()) as manager:
        manager.subscribe(observe)
        assert await manager.wait_ready(120)
        failed = {s.name: s.last_error for s in manager.servers() if s.state is not ServerState.CONNECTED}
        assert failed == {}
    return connected


async def test_a_remembered_slow_server_starts_before_faster_ones_asked_earlier(
    write_config: Callable[..., Path], keen_home: Path
) -> None:
    # In config order: one remembered quick, one never started, one remembered slow and one
    # whose last start timed out. One start at a time: the order they connect in is the order
    # of their turns.
    server = stdio_server("cpu_burn.py", "0", timeouts={"connect": 15})
    names = ["quick", "new", "slow", "timed_out"]
    path = write_config({name: {**server, "env": {"WHO": name}} for name in names})
    times = StartTimes()
    times.remember("quick", _stdio(path, "quick"), 0.2)
    times.remember("slow", _stdio(path, "slow"), 4.0)
    times.remember("timed_out", _stdio(path, "timed_out"), 15.3, timed_out=True)
    times.save()

    assert await _connect_order(path) == ["new", "slow", "quick", "timed_out"]


async def test_a_start_is_remembered_from_launch_to_its_tool_list(
    write_config: Callable[..., Path], keen_home: Path
) -> None:
    path = write_config(
        {
            "sleeper": stdio_server("cpu_burn.py", "0", "--sleep", "0.4"),
            "stuck": stdio_server("hang_init.py", timeouts={"connect": 0.5}),
            "closed_on": stdio_server("hang_init.py", timeouts={"connect": 60}),
        }
    )
    log = keen_home / "logs" / "closed_on.stderr.log"
    async with Manager(path, max_starting=1, trust=PinGuard()) as manager:
        for name in ("sleeper", "stuck"):
            await manager.wait_attempt(name, 60)
        with anyio.fail_after(60):  # the last one is launched (it says so on stderr), then Keen closes
            while not (log.exists() and "started" in log.read_text()):  # noqa: ASYNC110 (a file has no event)
                await anyio.sleep(0.05)
        assert manager.status("sleeper").state is ServerState.CONNECTED
        assert manager.status("stuck").state is not ServerState.CONNECTED
    record = json.loads((keen_home / "cache" / RECORD_NAME).read_text())["servers"]
    assert set(record) == {"sleeper", "stuck", "closed_on"}
    last = {name: StartTimes().last(name, _stdio(path, name)) for name in record}
    assert last["sleeper"] is not None and last["sleeper"] >= 0.4  # its own sleep is part of its start
    assert last["stuck"] is not None and last["stuck"] >= 0.5  # its connect limit: it timed out
    assert last["closed_on"] == math.inf  # launched, never finished
    # Those two go last, after a server with no record and one that finished.
    assert order(last["stuck"]) > order(last["sleeper"]) > order(None)
    assert order(last["closed_on"]) > order(last["sleeper"])

    # Stopped unfinished where a start of the same launch finished before: more likely
    # stopped early than hung, and the record of the finished one is kept.
    times = StartTimes()
    times.remember("sleeper", _stdio(path, "sleeper"), None)
    assert times.last("sleeper", _stdio(path, "sleeper")) == last["sleeper"]


async def test_a_changed_launch_forgets_the_record(
    write_config: Callable[..., Path], keen_home: Path
) -> None:
    entry = stdio_server("cpu_burn.py", "0", env={"MODE": "a"})
    path = write_config({"one": entry})
    async with Manager(path, max_starting=1, trust=PinGuard()) as manager:
        assert await manager.wait_ready(120)
        assert manager.status("one").state is ServerState.CONNECTED
    assert StartTimes().last("one", _stdio(path, "one")) is not None

    changed: dict[str, dict[str, Any]] = {
        "another command": {**entry, "command": entry["command"] + "-other"},
        "another argument": {**entry, "args": [*entry["args"], "--sleep", "0"]},
        "another variable": {**entry, "env": {"MODE": "a", "DEBUG": "1"}},
        "another folder": {**entry, "cwd": str(keen_home)},
    }
    for why, new in changed.items():
        assert StartTimes().last("one", _stdio(write_config({"one": new}), "one")) is None, why
    # A value of a variable is not part of the launch: the record holds.
    assert (
        StartTimes().last("one", _stdio(write_config({"one": {**entry, "env": {"MODE": "b"}}}), "one"))
        is not None
    )


async def test_the_record_holds_no_secret_of_the_config(
    write_config: Callable[..., Path], keen_home: Path
) -> None:
    secrets = ("tok-env-4f9a1c2e7b", "key-arg-8d3e6b0a51", "pw-flag-2c7f9e1d44")

    def entry(env_secret: str, arg_secret: str, flag_secret: str) -> dict[str, Any]:
        server = stdio_server("cpu_burn.py", "0")
        return {
            **server,
            "args": [*server["args"], "--api-key", arg_secret, f"--password={flag_secret}"],
            "env": {"API_TOKEN": env_secret},
        }

    path = write_config({"private": entry(*secrets)})
    async with Manager(path, max_starting=1, trust=PinGuard()) as manager:
        assert await manager.wait_ready(120)
        assert manager.status("private").state is ServerState.CONNECTED
    text = (keen_home / "cache" / RECORD_NAME).read_text()
    assert "private" in text
    for secret in secrets:
        assert secret not in text
    # Its digest carries nothing of them either: other secrets give the same one.
    rotated = _stdio(
        write_config({"private": entry("tok-env-0000000000", "key-arg-111111", "pw-222222")}), "private"
    )
    assert StartTimes().launch_key(rotated) == StartTimes().launch_key(
        _stdio(write_config({"private": entry(*secrets)}), "private")
    )
    assert StartTimes().last("private", rotated) is not None


async def test_turns_go_to_the_longest_expected_start_first() -> None:
    slots = StartSlots(1)
    holder = await slots.turn(10.0)
    granted: list[str] = []

    async def wait(name: str, last: float | None, *, task_status: anyio.abc.TaskStatus[None]) -> None:
        task_status.started()  # the task goes on until turn() has queued it and yields
        turn: StartTurn = await slots.turn(10.0, last)
        granted.append(name)
        turn.end()

    queue = [
        ("timed_out", math.inf),
        ("unfinished", math.inf),
        ("quick", 0.1),
        ("new", None),
        ("slow", 3.0),
        ("middle", 1.0),
        ("slower_than_its_limit", 10.5),  # finished, past its connect limit: still the longest
    ]
    async with anyio.create_task_group() as tg:
        for name, last in queue:  # queued in this order, as a config lists them
            await tg.start(wait, name, last)
        assert slots.waiting == len(queue)
        holder.end()
    assert granted == ["new", "slower_than_its_limit", "slow", "middle", "quick", "timed_out", "unfinished"]


async def test_starts_asked_in_one_go_are_ordered_among_themselves() -> None:
    # Nothing waits and nothing runs: the first asked would have gone straight in before the
    # others were queued.
    slots = StartSlots(1)
    granted: list[str] = []

    async def wait(name: str, last: float | None) -> None:
        turn = await slots.turn(10.0, last)
        granted.append(name)
        await anyio.lowlevel.checkpoint()
        turn.end()

    async with anyio.create_task_group() as tg:
        for name, last in [("quick", 0.1), ("slow", 2.0)]:
            tg.start_soon(wait, name, last)
    assert granted == ["slow", "quick"]


class CountingSlots(StartSlots):
    """Start slots that count their looks at the starts in flight."""

    looks = 0

    def look(self) -> None:
        self.looks += 1
        super().look()


async def test_a_waiter_woken_to_look_before_it_waits_looks_at_its_pace() -> None:
    # The looker leaves in the very tick a newcomer (at the top of the queue) is still at
    # turn()'s first yield: the newcomer is woken to take over the looks before it waits.
    slots = CountingSlots(1, grow=True, cpu_busy=lambda: None, cpus=2, trees=lambda pids: {})
    holder = await slots.turn(10.0)
    looker_scope = anyio.CancelScope()

    async def looker(*, task_status: anyio.abc.TaskStatus[None]) -> None:
        with looker_scope:
            task_status.started()
            await slots.turn(10.0, 1.0)

    async def newcomer() -> None:
        (await slots.turn(10.0, None)).end()

    async with anyio.create_task_group() as tg:
        await tg.start(looker)
        with anyio.fail_after(10):
            while slots.looks < 1:  # noqa: ASYNC110 (it is the looker once it has looked)
                await anyio.sleep(0.01)
        tg.start_soon(newcomer)  # it queues and yields once, in the next tick
        looker_scope.cancel()  # the looker leaves in that same tick, waking the newcomer
        before = slots.looks
        for _ in range(100):  # it looks once every LOOK seconds, not at each turn of the loop
            await anyio.lowlevel.checkpoint()
        assert slots.looks - before < 50
        holder.end()


async def test_a_waiter_left_when_the_looker_and_the_one_it_woke_stop_together_is_looked_for() -> None:
    # Two waiters stopped in one tick (an aclose, a reload): the looker, and the waiter it
    # woke to take over the looks as it left. The third waiter takes them over.
    slots = CountingSlots(1, grow=True, cpu_busy=lambda: None, cpus=2, trees=lambda pids: {})
    holder = await slots.turn(10.0)
    scopes = {name: anyio.CancelScope() for name in "ABC"}

    async def waiter(name: str, *, task_status: anyio.abc.TaskStatus[None]) -> None:
        with scopes[name]:
            task_status.started()
            await slots.turn(10.0, 1.0)

    async with anyio.create_task_group() as tg:
        for name in "ABC":
            await tg.start(waiter, name)
        with anyio.fail_after(10):
            while slots.looks < 1:  # noqa: ASYNC110 (A is the looker once it has looked)
                await anyio.sleep(0.01)
        scopes["A"].cancel()
        scopes["B"].cancel()
        before = slots.looks
        with anyio.fail_after(10):
            while slots.looks == before:  # noqa: ASYNC110 (C looks once it has taken the looks over)
                await anyio.sleep(0.01)
        assert slots.waiting == 1
        holder.end()


def _record(path: Path, servers: dict[str, Any], huge: str = "") -> None:
    text = json.dumps({"version": 1, "servers": servers})
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text.replace('"HUGE"', huge))


async def test_a_corrupt_record_entry_is_dropped_never_raised(
    write_config: Callable[..., Path], keen_home: Path
) -> None:
    path = write_config({"one": stdio_server("cpu_burn.py", "0")})
    config = _stdio(path, "one")
    key = StartTimes().launch_key(config)
    record = keen_home / "cache" / RECORD_NAME
    huge = "1" + "0" * 400  # an integer no float holds
    bad_seconds: list[Any] = [float("nan"), float("inf"), -1, True, "5", [1], "HUGE"]
    for seconds in bad_seconds:
        _record(record, {"one": {"launch": key, "seconds": seconds, "finished": True, "at": 1}}, huge)
        times = StartTimes()
        assert times.last("one", config) is None, seconds
        times.remember("one", config, None)  # consults the record too
    # Over MOST_SERVERS entries, one with an 'at' no float holds: save() sorts them by it.
    others = {f"x{i}": {"launch": "0", "seconds": 1, "finished": True, "at": 1} for i in range(MOST_SERVERS)}
    _record(record, {"one": {"launch": key, "seconds": 1, "finished": True, "at": "HUGE"}, **others}, huge)
    times = StartTimes()
    times.remember("new", config, 1.0)
    times.save()
    assert StartTimes().last("new", config) == 1.0

    # The Manager reads it as it starts its servers: the server connects, nothing raises.
    _record(record, {"one": {"launch": key, "seconds": "HUGE", "finished": True, "at": 1}}, huge)
    async with Manager(path, max_starting=1, trust=PinGuard()) as manager:
        assert await manager.wait_ready(120)
        assert manager.status("one").state is ServerState.CONNECTED


def test_a_record_that_is_no_regular_file_is_not_read(
    keen_home: Path, write_config: Callable[..., Path]
) -> None:
    config = _stdio(write_config({"one": stdio_server("cpu_burn.py", "0")}), "one")
    good = json.dumps(
        {
            "version": 1,
            "servers": {
                "one": {"launch": StartTimes().launch_key(config), "seconds": 2, "finished": True, "at": 1}
            },
        }
    )
    target = keen_home / "elsewhere.json"
    target.write_text(good)
    record = keen_home / "cache" / RECORD_NAME
    record.parent.mkdir(parents=True, exist_ok=True)
    record.symlink_to(target)
    assert StartTimes().last("one", config) is None
    record.unlink()
    record.write_text(good + " " * MOST_BYTES)
    assert StartTimes().last("one", config) is None
    record.unlink()

    # A FIFO: opened to read, it would wait for a writer, the event loop with it.
    os.mkfifo(record)
    read: list[float | None] = []
    reader = threading.Thread(target=lambda: read.append(StartTimes().last("one", config)), daemon=True)
    reader.start()
    reader.join(30)
    blocked = reader.is_alive()
    if blocked:  # release the old code's reader
        os.close(os.open(record, os.O_WRONLY | os.O_NONBLOCK))
        reader.join(30)
    assert not blocked
    assert read == [None]


async def test_a_start_that_finished_past_its_connect_limit_goes_first_not_last(
    write_config: Callable[..., Path], keen_home: Path
) -> None:
    # Its initialize is answered at once, its tools/list after longer than its connect limit:
    # it finished, the longest start known, and goes first among the known ones next time.
    limit = 0.3
    path = write_config(
        {
            "slow_lister": stdio_server(
                "cpu_burn.py",
                "0",
                "--list-sleep",
                str(limit * 2),
                timeouts={"connect": limit, "list_tools": 60},
            ),
            "stuck": stdio_server("hang_init.py", timeouts={"connect": limit}),
        }
    )
    async with Manager(path, max_starting=1, trust=PinGuard()) as manager:
        for name in ("slow_lister", "stuck"):
            await manager.wait_attempt(name, 60)
        assert manager.status("slow_lister").state is ServerState.CONNECTED
        assert manager.status("stuck").state is not ServerState.CONNECTED
    record = json.loads((keen_home / "cache" / RECORD_NAME).read_text())["servers"]
    assert record["slow_lister"]["finished"] is True
    assert record["stuck"]["finished"] is False
    slow = StartTimes().last("slow_lister", _stdio(path, "slow_lister"))
    assert slow is not None and limit * 2 <= slow < math.inf
    stuck = StartTimes().last("stuck", _stdio(path, "stuck"))
    assert order(slow) < order(slow / 2) < order(stuck)

    # A connect limit raised past the time it timed out after: that start counts as merely long.
    raised = _stdio(write_config({"stuck": stdio_server("hang_init.py", timeouts={"connect": 60})}), "stuck")
    assert StartTimes().last("stuck", raised) == record["stuck"]["seconds"]


def test_two_processes_saving_keep_the_later_measure(
    write_config: Callable[..., Path], keen_home: Path
) -> None:
    config = _stdio(write_config({"one": stdio_server("cpu_burn.py", "0")}), "one")
    times = [100.0, 300.0]  # a keen serve measured it first (and closes at 300)...
    long_lived = StartTimes(clock=lambda: times.pop(0) if len(times) > 1 else times[0])
    long_lived.remember("one", config, 9.0)
    later = StartTimes(clock=lambda: 200.0)  # ...a keen chat measured it later and closed first
    later.remember("one", config, 1.0)
    later.remember("two", config, 2.0)
    later.save()
    long_lived.save()  # the keen serve closes last
    assert StartTimes().last("one", config) == 1.0
    assert StartTimes().last("two", config) == 2.0


def test_the_launch_digest_is_keyed_per_home_and_private(
    write_config: Callable[..., Path], keen_home: Path, tmp_path: Path
) -> None:
    # A credential no rule finds (a short flag's value) stays in the digest: without this
    # home's key, a guess of it cannot be checked against the record.
    server = stdio_server("cpu_burn.py", "0")
    config = _stdio(write_config({"one": {**server, "args": [*server["args"], "-t", "s3cr3t-0d9f"]}}), "one")

    def saved(record: Path) -> str:
        times = StartTimes(record)
        times.remember("one", config, 1.0)
        times.save()
        assert stat.S_IMODE(record.stat().st_mode) == 0o600
        return json.loads(record.read_text())["servers"]["one"]["launch"]

    here, elsewhere = keen_home / "cache" / RECORD_NAME, tmp_path / "other-home" / "cache" / RECORD_NAME
    digest = saved(here)
    assert saved(elsewhere) != digest  # another home, another key
    key = here.with_name(KEY_NAME)
    assert stat.S_IMODE(key.stat().st_mode) == 0o600
    assert saved(here) == digest  # the key is kept: the record holds across runs
    assert StartTimes().last("one", config) == 1.0


@pytest.mark.parametrize("damage", ["short", "long", "symlink", "empty"])
def test_a_damaged_key_is_replaced_and_then_kept(
    write_config: Callable[..., Path], keen_home: Path, tmp_path: Path, damage: str
) -> None:
    # A key file of another length (an editor's newline, a write cut short) or a symlink is
    # replaced once, by a key the next runs read: the record holds again from that run on.
    config = _stdio(write_config({"one": stdio_server("cpu_burn.py", "0")}), "one")
    record = keen_home / "cache" / RECORD_NAME
    key = record.with_name(KEY_NAME)
    key.parent.mkdir(parents=True, exist_ok=True)
    if damage == "symlink":
        (tmp_path / "elsewhere").write_bytes(os.urandom(32))
        key.symlink_to(tmp_path / "elsewhere")
    else:
        key.write_bytes({"short": os.urandom(16), "long": os.urandom(32) + b"\n", "empty": b""}[damage])
    first = StartTimes(record)
    first.remember("one", config, 2.5)
    first.save()
    assert not key.is_symlink() and len(key.read_bytes()) == 32
    assert stat.S_IMODE(key.stat().st_mode) == 0o600
    assert StartTimes(record).last("one", config) == 2.5  # a new process, the same key
    assert not [p.name for p in key.parent.iterdir() if p.name.startswith(f".{KEY_NAME}.")]  # no part left


def test_a_measure_dated_in_the_future_does_not_outlive_the_next(
    write_config: Callable[..., Path], keen_home: Path
) -> None:
    # A run whose clock was set to 2100 saved its measure; the next runs' measures replace it.
    config = _stdio(write_config({"one": stdio_server("cpu_burn.py", "0")}), "one")
    wrong = StartTimes(clock=lambda: 4_102_444_800.0)  # 2100-01-01
    wrong.remember("one", config, 30.0)
    wrong.save()
    later = StartTimes()
    later.remember("one", config, 2.0)
    later.save()
    assert StartTimes().last("one", config) == 2.0


def test_a_start_that_reached_its_list_limit_goes_last_until_a_limit_is_raised(
    write_config: Callable[..., Path], keen_home: Path
) -> None:
    # It timed out while listing, after fewer seconds than its connect limit: still a timeout.
    def config(list_tools: float) -> StdioServerConfig:
        entry = stdio_server("cpu_burn.py", "0", timeouts={"connect": 15, "list_tools": list_tools})
        return _stdio(write_config({"one": entry}), "one")

    times = StartTimes()
    times.remember("one", config(5), 6.2, timed_out=True)
    times.save()
    assert StartTimes().last("one", config(5)) == math.inf
    assert order(StartTimes().last("one", config(5))) > order(3.0)
    assert StartTimes().last("one", config(30)) == 6.2  # its list limit raised since
