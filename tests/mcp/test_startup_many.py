"""Many stdio servers starting at once (docs/architecture.md "Servers and their states"):
the Manager starts at most ``max_starting`` at a time (by default one per CPU, more while
starts prove quick: ``keen.mcp.connection.starts``), the others wait their turn, and each
server's ``timeouts.connect`` runs from its own launch, not from the start of discovery.

``test_many_cpu_hungry_servers_all_connect`` is an end-to-end test of the whole claim: 24
real subprocess servers that each need a CPU for a while before answering ``initialize``,
with the default start bound, on a time scale a fifth of the real one (0.3 s each against a
3 s connect limit, the ratio of 1.5 s against the default 15 s). The CPUs they need are lock
files, as many as the bound's base counts CPUs (``cpu_burn.py --cpus``): the servers queue for
them as CPU-bound starts share real CPUs, without burning 7 s of real CPU, and without load
from outside the test stretching a start past its limit (it did, burning real CPU, at a load
of 3 on two CPUs).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable, Collection
from pathlib import Path
from typing import Any

import anyio
import pytest

from conftest import stdio_server
from keen.mcp import Manager, ServerState
from keen.mcp.config.defaults import TIMEOUT_ENV, default_max_starting
from keen.mcp.connection.cpu_use import ProcessTrees, TreeUse, process_trees
from keen.mcp.connection.starts import GROWTH, LOOK, QUICK_MOST, QUICK_SHARE, StartSlots, StartTurn
from keen.trust import PinGuard

pytestmark = [pytest.mark.anyio, pytest.mark.slow_file]


def burners(count: int, seconds: float, *args: str, **extra: Any) -> dict[str, Any]:
    return {f"burn{i:02d}": stdio_server("cpu_burn.py", str(seconds), *args, **extra) for i in range(count)}


@pytest.mark.timeout(240)
async def test_many_cpu_hungry_servers_all_connect(
    write_config: Callable[..., Path], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # End to end, with the default start bound: all started at once on a 2-CPU machine, 24
    # servers of 1.5 s each took 18 s of wall time and most missed the default 15 s limit.
    # Scaled by a fifth (module docstring): all at once, 24 x 0.3 s on 2 CPUs is 3.6 s > 3 s.
    monkeypatch.setenv(TIMEOUT_ENV, "3")
    cpus = tmp_path / "cpus"
    cpus.mkdir()
    for i in range(default_max_starting()):
        (cpus / f"cpu{i}").touch()
    path = write_config(burners(24, 0.3, "--cpus", str(cpus)))
    # The lock files stand for CPUs: a server waiting for one, or holding one, stands for a
    # start on a CPU or in its queue, which is what the bound reads of a real start's
    # processes. So their processes read as working all the time (else, asleep on the files,
    # they would rightly be set aside).
    slots = StartSlots(default_max_starting(), grow=True, trees=_always_working)
    began = time.monotonic()
    async with Manager(path, start_slots=slots, trust=PinGuard()) as manager:
        assert await manager.wait_ready(200)
        took = time.monotonic() - began
        failed = {s.name: s.last_error for s in manager.servers() if s.state is not ServerState.CONNECTED}
        assert not failed
        assert all(manager.list_tools(s.name)[0].name == "ping" for s in manager.servers())
    print(f"\n24 servers x 0.3 s each, max_starting={default_max_starting()}: all connected in {took:.1f} s")


def _always_working(pids: Collection[int]) -> dict[int, TreeUse]:
    """Every process on a CPU or in its queue since the machine started."""
    now = time.monotonic_ns()
    return dict.fromkeys(pids, (now, 0))


async def test_a_queued_servers_time_limit_runs_from_its_own_launch(
    write_config: Callable[..., Path],
) -> None:
    # One at a time, 5 starts of 1.2 s each are more than 5 s in all: a limit counted from the
    # start of discovery would fail the last ones. Each waits its 1.2 s asleep rather than
    # burning CPU, and its own 5 s limit leaves it 3.8 s for the rest of its start (an
    # interpreter, a handshake): a 2 s limit over 0.5 s asleep failed a start at a load of 20
    # on two CPUs.
    sleepers = {
        f"slow{i}": stdio_server("cpu_burn.py", "0", "--sleep", "1.2", timeouts={"connect": 5})
        for i in range(5)
    }
    path = write_config(sleepers)
    async with Manager(path, max_starting=1, trust=PinGuard()) as manager:
        assert await manager.wait_ready(60)
        assert {s.name: s.last_error for s in manager.servers() if s.state is not ServerState.CONNECTED} == {}
        launched = sorted(s.last_connected_at for s in manager.servers() if s.last_connected_at)
    assert (launched[-1] - launched[0]).total_seconds() > 4 * 1.2  # they did take turns


async def test_a_server_waiting_its_turn_stops_at_once(
    write_config: Callable[..., Path], keen_home: Path
) -> None:
    # Two servers that never answer, one start slot: whichever started holds it for 60 s.
    stuck = stdio_server("hang_init.py", timeouts={"connect": 60})
    path = write_config({"one": stuck, "two": stuck})
    logs = [keen_home / "logs" / f"{name}.stderr.log" for name in ("one", "two")]
    async with Manager(path, max_starting=1, trust=PinGuard()) as manager:
        with anyio.fail_after(20):  # one of them is up (it says so on stderr)
            while not any(log.exists() and "started" in log.read_text() for log in logs):  # noqa: ASYNC110 (a file has no event)
                await anyio.sleep(0.05)
        began = time.monotonic()
    assert time.monotonic() - began < 30  # neither waited out the 60 s (a loaded machine stretches the rest)
    errors = sorted(manager.status(name).last_error for name in ("one", "two"))
    assert [("waiting for its turn" in e) for e in errors].count(True) == 1, errors


async def test_wait_attempt_waits_for_a_server_waiting_its_turn(write_config: Callable[..., Path]) -> None:
    # Each start takes 0.3 s asleep (no CPU): burn01 waits for burn00's turn to end.
    path = write_config(burners(2, 0, "--sleep", "0.3"))
    async with Manager(path, max_starting=1, trust=PinGuard()) as manager:
        status = await manager.wait_attempt("burn01")
        assert status.state is ServerState.CONNECTED, status.last_error
        # A server that is not connecting is answered at once.
        assert (await manager.wait_attempt("burn01", 0.01)).state is ServerState.CONNECTED


async def test_quick_starts_overlap_past_one_per_cpu(
    write_config: Callable[..., Path], tmp_path: Path
) -> None:
    # Quick servers first: each that ends within its quick share (0.75 s at most, QUICK_MOST,
    # whatever its 200 s limit) grows the default bound; then servers that hold before
    # answering, each touching its own ``.held`` file: more of them hold at once than one per
    # CPU, as the bound grew, or as the holding ones read asleep and were set aside (a loaded
    # machine may make the quick ones slow). A fixed bound of one per CPU never lets that happen.
    base = default_max_starting()
    quick = {
        f"a{i:02d}": stdio_server("cpu_burn.py", "0", timeouts={"connect": 200}) for i in range(2 * base)
    }
    holds = [tmp_path / f"hold{i:02d}" for i in range(base + 1)]
    for hold in holds:
        hold.touch()
    held = {
        f"b{i:02d}": stdio_server("cpu_burn.py", "0", "--hold", str(hold), timeouts={"connect": 200})
        for i, hold in enumerate(holds)
    }
    path = write_config(quick | held)
    marks = [hold.with_name(hold.name + ".held") for hold in holds]
    async with Manager(path, trust=PinGuard()) as manager:
        try:
            with anyio.fail_after(60):  # at one per CPU it never comes: the test fails here
                while sum(mark.exists() for mark in marks) <= base:  # noqa: ASYNC110 (a file has no event)
                    await anyio.sleep(0.05)
        finally:
            for hold in holds:
                hold.unlink()
        assert await manager.wait_ready(60)
        assert {s.name: s.last_error for s in manager.servers() if s.state is not ServerState.CONNECTED} == {}


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


async def test_the_bound_grows_with_quick_starts_and_halves_with_a_slow_one() -> None:
    clock = _Clock()
    slots = StartSlots(2, grow=True, clock=clock)
    limit = 10.0  # quick within 0.5 s
    first = [await slots.turn(limit) for _ in range(2)]
    clock.now += limit * QUICK_SHARE / 2
    for turn in first:
        turn.end()
    assert slots.bound == 4
    turns = [await slots.turn(limit) for _ in range(4)]  # four at once, none waits
    assert slots.running == 4
    clock.now += limit * QUICK_SHARE * 2
    turns[0].end()  # slow: the bound halves, never below the base
    assert slots.bound == 2
    for turn in turns[1:]:
        turn.end()
    assert slots.bound == 2
    for _ in range(20):
        (await slots.turn(limit)).end()
    assert slots.bound == 2 * GROWTH  # capped


async def test_a_fixed_bound_does_not_grow() -> None:
    clock = _Clock()
    slots = StartSlots(2, clock=clock)
    for _ in range(5):
        (await slots.turn(10.0)).end()
    assert slots.bound == 2


async def test_a_start_past_its_quick_share_holds_the_rest_to_the_base() -> None:
    # A costly start already running is not shared out among cheap ones let in past the base.
    clock = _Clock()
    slots = StartSlots(2, grow=True, clock=clock, cpu_busy=lambda: 1.0)  # it works the CPUs
    for _ in range(4):
        (await slots.turn(10.0)).end()
    assert slots.bound == 6
    costly = await slots.turn(10.0)
    clock.now += 1.0  # past its 0.5 s
    second = await slots.turn(10.0)  # within the base: let in
    got: list[object] = []
    async with anyio.create_task_group() as tg:

        async def third() -> None:
            got.append(await slots.turn(10.0))

        tg.start_soon(third)
        await anyio.wait_all_tasks_blocked()
        assert got == [] and slots.running == 2  # waits, although the bound is 6
        costly.end()
        await anyio.wait_all_tasks_blocked()
        assert len(got) == 1
    second.end()


async def test_starts_waiting_with_the_cpus_idle_no_longer_hold_the_rest_back() -> None:
    # Two servers hanging at initialize, their processes not read (never launched() here),
    # hold both turns past their quick share. With the CPUs idle they are set aside and the
    # waiters go in; with the CPUs busy they keep their turns.
    for busy, let_in in ((0.0, True), (1.0, False)):
        clock = _Clock()
        slots = StartSlots(2, grow=True, clock=clock, cpu_busy=lambda busy=busy: busy, cpus=2)
        hanging = [await slots.turn(10.0) for _ in range(2)]
        clock.now += 1.0  # past their 0.5 s
        got: list[StartTurn] = []
        # Real time: the CPUs' share is read over it, and a look more than 0.25 s after the
        # one before is stale (a loaded machine's late wake-up). Let in: waited for as long as
        # a loaded machine takes to give two looks in a row; kept out: over a window of several.
        with anyio.move_on_after(60 if let_in else LOOK * 40):
            got.append(await slots.turn(10.0))
            got.append(await slots.turn(10.0))
        assert (len(got) == 2) is let_in, (busy, got)
        assert slots.running == 2  # the two let in, or the two hanging still holding their turns
        for turn in hanging:
            turn.end()  # set aside: their end neither grows nor shrinks the bound
        assert slots.bound == 2
        for turn in got:
            turn.end()
        assert slots.running == 0


async def test_a_turn_given_up_while_waiting_leaves_the_queue() -> None:
    slots = StartSlots(1)
    first = await slots.turn(10.0)
    with anyio.move_on_after(0.05):
        await slots.turn(10.0)
    first.end()
    assert slots.running == 0
    (await slots.turn(10.0)).end()


async def test_a_long_connect_limit_does_not_make_a_slow_start_quick() -> None:
    # A limit raised for a slow first `uvx` install (120 s) would count a 3 s start as quick
    # by its share alone (6 s); a start is quick within 0.75 s at most.
    clock = _Clock()
    slots = StartSlots(2, grow=True, clock=clock)
    turn = await slots.turn(120.0)
    clock.now += 3.0
    turn.end()
    assert slots.bound == 2
    turn = await slots.turn(120.0)
    clock.now += QUICK_MOST / 2
    turn.end()
    assert slots.bound == 3


class _Processes:
    """What each process has done: the bound's reader of the servers' processes."""

    def __init__(self) -> None:
        self.use: dict[int, TreeUse] = {}

    def work(self, pid: int, seconds: float) -> None:
        ran, waited = self.use.get(pid, (0, 0))
        self.use[pid] = (ran + int(seconds * 1e9), waited)

    def __call__(self, pids: Collection[int]) -> dict[int, TreeUse]:
        return {pid: self.use[pid] for pid in pids if pid in self.use}


async def test_a_start_asleep_gives_its_turn_back_and_takes_it_again_when_it_works() -> None:
    clock, procs = _Clock(), _Processes()
    slots = StartSlots(2, grow=True, clock=clock, trees=procs, cpu_busy=lambda: 1.0)
    first, second = await slots.turn(10.0), await slots.turn(10.0)  # quick within 0.5 s
    first.launched(101)
    second.launched(102)
    got: list[StartTurn] = []
    async with anyio.create_task_group() as tg:

        async def third() -> None:
            got.append(await slots.turn(10.0))

        tg.start_soon(third)
        await anyio.wait_all_tasks_blocked()
        clock.now = 0.1  # both start up: on a CPU, or queued for one, a third of the time and more
        procs.work(101, 0.03)
        procs.work(102, 0.1)
        slots.look()
        assert (slots.running, slots.asleep, got) == (2, 0, [])
        clock.now = 0.2  # the first sleeps (a server waiting on the network); the second works
        procs.work(102, 0.1)
        slots.look()
        await anyio.wait_all_tasks_blocked()
        assert len(got) == 1 and (slots.running, slots.asleep) == (2, 1)
        assert slots.bound == 3  # it used 0.03 s of CPU before it slept: cheap, one more at once
    clock.now = 0.3  # the first works again: it takes its turn back, over the bound
    procs.work(101, 0.05)
    procs.work(102, 0.1)
    slots.look()
    assert (slots.running, slots.asleep) == (3, 0)
    first.end()  # judged when set aside: its end does not move the bound
    assert slots.bound == 3
    second.end()  # 0.3 s of wall time: quick
    assert slots.bound == 4
    got[0].end()
    assert slots.running == slots.asleep == 0


async def test_a_start_that_slept_after_a_costly_start_up_halves_the_bound() -> None:
    clock, procs = _Clock(), _Processes()
    slots = StartSlots(1, grow=True, clock=clock, trees=procs, cpu_busy=lambda: 1.0)
    for _ in range(3):
        (await slots.turn(10.0)).end()
    assert slots.bound == 4
    costly = await slots.turn(10.0)
    costly.launched(7)
    clock.now = 1.0
    procs.work(7, 0.8)  # 0.8 s of CPU (past its 0.5 s), then it waits on the network
    slots.look()
    clock.now = 1.5
    slots.look()
    assert (slots.running, slots.asleep, slots.bound) == (0, 1, 2)
    costly.end()
    assert slots.bound == 2


def test_a_launchers_reading_counts_its_childs_cpu() -> None:
    # As ``npx`` or ``uvx`` start the server as their child: the parent only waits for it.
    child = (
        "import sys, time\n"
        "end = time.process_time() + 0.2\n"
        "while time.process_time() < end:\n"
        "    pass\n"
        "print('burnt', flush=True)\n"
        "sys.stdin.read()\n"
    )
    launcher = f"import subprocess, sys; subprocess.run([sys.executable, '-c', {child!r}])"
    with subprocess.Popen(
        [sys.executable, "-c", launcher], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    ) as parent:
        assert parent.stdout is not None and parent.stdin is not None
        assert parent.stdout.readline() == "burnt\n"
        use = process_trees([parent.pid, 2**22 + 1])  # the second is no process: left out
        parent.stdin.close()
    assert list(use) == [parent.pid]
    ran, _ = use[parent.pid]
    assert ran >= 0.2e9  # the child's CPU: the launcher alone used far less


# Work done in pieces that end: children run one after another (a launcher's install steps,
# a compiler), or short threads. Each piece burns 20 ms of CPU, so the pieces alive at any
# look hold 20 ms at most: counted by them alone, such work read as next to nothing, asleep.
# The worker does its pieces between the test's two looks, on a line from the test, and says
# when they are over: what the reading must hold is their CPU time, however long a loaded
# machine makes them take (a share of wall time, as the start bound reads it, is not the
# test's to assert: a process starved on a saturated machine has its run-queue wait counted
# only once it gets a CPU, proc(5) schedstat).
_PIECE_COUNT, _PIECE_CPU = 10, 0.02
_BURN = f"import time\nend = time.process_time() + {_PIECE_CPU}\nwhile time.process_time() < end:\n    pass\n"
_PIECE = {
    "children": f"subprocess.run([sys.executable, '-c', {_BURN!r}])",
    "threads": f"t = threading.Thread(target=exec, args=({_BURN!r},))\n    t.start()\n    t.join()",
}
_PIECES = {
    name: "import subprocess, sys, threading\nsys.stdin.readline()\n"
    f"for _ in range({_PIECE_COUNT}):\n    {piece}\nprint('done', flush=True)\nsys.stdin.read()\n"
    for name, piece in _PIECE.items()
}


@pytest.mark.parametrize("pieces", sorted(_PIECES))
def test_work_done_in_pieces_that_end_reads_as_working(pieces: str) -> None:
    with subprocess.Popen(
        [sys.executable, "-c", _PIECES[pieces]], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    ) as worker:
        assert worker.stdin is not None and worker.stdout is not None
        try:
            trees = ProcessTrees()  # one reader, kept between looks as the start bound keeps it
            before = trees([worker.pid])[worker.pid]
            worker.stdin.write("go\n")
            worker.stdin.flush()
            assert worker.stdout.readline() == "done\n"  # every piece has ended
            after = trees([worker.pid])[worker.pid]
        finally:
            worker.kill()
    # /proc/PID/stat gives the ended pieces' time in clock ticks: each of its four fields
    # (proc(5) 14-17) may lose up to one.
    lost = 4 / os.sysconf("SC_CLK_TCK")
    assert (after[0] - before[0]) / 1e9 >= _PIECE_COUNT * _PIECE_CPU - lost, (pieces, before, after)


async def test_servers_hanging_at_initialize_hold_no_turn_while_the_cpus_read_busy(
    write_config: Callable[..., Path],
) -> None:
    # Two servers hanging at initialize take both turns of a bound of two, for a 200 s limit.
    # The machine reads busy (other work on it), so the CPUs' idle share never sets them aside:
    # their own processes, read asleep, do, and the third server gets its turn.
    hang = stdio_server("hang_init.py", timeouts={"connect": 200})
    quick = stdio_server("cpu_burn.py", "0", timeouts={"connect": 200})
    path = write_config({"hang0": hang, "hang1": hang, "quick": quick})
    slots = StartSlots(2, grow=True, cpu_busy=lambda: 1.0, cpus=2)
    async with Manager(path, start_slots=slots, trust=PinGuard()) as manager:
        with anyio.fail_after(100):  # else it waits out their 200 s
            status = await manager.wait_attempt("quick")
        assert status.state is ServerState.CONNECTED, status.last_error
        assert [manager.status(f"hang{i}").state for i in range(2)] == [ServerState.CONNECTING] * 2
