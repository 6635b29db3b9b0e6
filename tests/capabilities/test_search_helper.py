"""The search's helper threads: the same numbers as on the calling thread, and a forked
child gets helpers of its own."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

from keen.capabilities._helper import HELPERS, SPLIT_ROWS, beside, dot_halves, helpers


@pytest.mark.parametrize("rows", [1, SPLIT_ROWS - 1, SPLIT_ROWS, 2 * SPLIT_ROWS + 1])
def test_the_split_product_is_one_vecdot_bit_for_bit(rows: int) -> None:
    rng = np.random.default_rng(rows)
    matrix = rng.standard_normal((rows, 384)).astype(np.float32)
    vector = rng.standard_normal(384).astype(np.float32)
    out = dot_halves(matrix, vector)
    assert out.dtype == np.float32
    assert np.array_equal(out, np.vecdot(matrix, vector))


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork only")
def test_a_forked_child_splits_products_with_helpers_of_its_own() -> None:
    from keen.capabilities import _helper

    rng = np.random.default_rng(0)
    matrix = rng.standard_normal((2 * SPLIT_ROWS, 16)).astype(np.float32)
    vector = rng.standard_normal(16).astype(np.float32)
    expected = dot_halves(matrix, vector)  # the parent's helpers are running now
    parent_pool = helpers()
    read, write = os.pipe()
    # Forked while another thread of the parent could hold the pool's lock: held here.
    with _helper._lock:
        pid = os.fork()
    if pid == 0:  # pragma: no cover - the child reports through the pipe
        os.close(read)
        signal.alarm(20)  # a child stuck on the parent's lock or pool dies: no answer
        pool = helpers()
        # The parent's pool has no threads here: work submitted to it would never run.
        on = pool.submit(lambda: threading.current_thread().name).result(timeout=10)
        same = np.array_equal(dot_halves(matrix, vector), expected)
        answer = f"{pool is not parent_pool} {on.startswith('keen-search')} {same}"
        os.write(write, answer.encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        answer = pipe.read()
    os.waitpid(pid, 0)
    assert answer == b"True True True"


def test_work_no_helper_has_started_runs_on_the_calling_thread_once() -> None:
    release = threading.Event()
    started = threading.Barrier(HELPERS + 1)

    def hold() -> None:
        started.wait(timeout=10)
        release.wait(timeout=10)

    busy = [helpers().submit(hold) for _ in range(HELPERS)]
    started.wait(timeout=10)  # every helper is inside hold(): none can take more work
    ran: list[int] = []
    try:
        result = beside(lambda: ran.append(threading.get_ident()) or "done")
        assert result() == "done"
    finally:
        release.set()
        for future in busy:
            future.result(timeout=10)
    assert ran == [threading.get_ident()]
    # Once every helper is inside a later call, the cancelled one has left the queue: it
    # must not have run after all.
    met = threading.Barrier(HELPERS)
    for later in [helpers().submit(met.wait, 10) for _ in range(HELPERS)]:
        later.result(timeout=10)
    assert len(ran) == 1


def test_work_a_helper_started_gives_its_result_and_its_exception() -> None:
    started = threading.Event()

    def name() -> str:
        started.set()
        return threading.current_thread().name

    def fail() -> None:
        started.set()
        raise LookupError("no such term")

    result = beside(name)
    assert started.wait(timeout=10)  # a helper runs it: the result is the helper's
    assert result().startswith("keen-search")
    started.clear()
    failed = beside(fail)
    assert started.wait(timeout=10)
    with pytest.raises(LookupError, match="no such term"):
        failed()


def test_a_search_at_interpreter_exit_does_its_work_itself(tmp_path: Path) -> None:
    script = tmp_path / "late.py"
    script.write_text(
        "import atexit\n"
        "import numpy as np\n"
        "from keen.capabilities._helper import SPLIT_ROWS, beside, dot_halves\n"
        "matrix = np.ones((2 * SPLIT_ROWS, 4), dtype=np.float32)\n"
        "vector = np.ones(4, dtype=np.float32)\n"
        "dot_halves(matrix, vector)  # the helpers are running\n"
        "@atexit.register\n"
        "def late() -> None:  # after threading's shutdown: no new helper work\n"
        "    print(float(dot_halves(matrix, vector).sum()), beside(lambda: 'here')())\n",
        encoding="utf-8",
    )
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [str(float(2 * SPLIT_ROWS * 4)), "here"]
