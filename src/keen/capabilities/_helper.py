"""Helper threads for the parts of a search that can run beside the calling thread.

A new request's search spends most of its time in two places that leave Python's GIL
free: encoding the query (ONNX Runtime's ``run``) and the product of the query vector
with every view's vector (``np.vecdot``, bound by memory). With a second CPU free, the
keyword and word-vector signals (which do not need the query's transformer vector) run on
a helper while the calling thread encodes, and half of the views' product runs on a
helper while the calling thread does the other half. Each value is computed by the same
operations on the same data either way, so the scores are the same bits.

On a machine whose CPUs are all busy a helper thread may not be scheduled for several
milliseconds: the calling thread never waits for work no helper has started, it takes the
work back and does it itself (:func:`beside`), so the wait is bounded by a helper's share
(about 1.5 ms of CPU at 4,310 tools) and the cost is the hand-over (about 0.3 ms of CPU a
search; docs/search.md, "Signals beside the encoder").
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    import numpy as np

__all__ = ["HELPERS", "SPLIT_ROWS", "beside", "dot_halves", "helpers"]

T = TypeVar("T")

HELPERS = 2
"""Helper threads per process: two searches at once (``keen serve``'s hosts) each find one
free, and neither waits for the other's."""
SPLIT_ROWS = 8192
"""Products over fewer rows run whole on the calling thread: below 12.6 MB of float32 rows
of 384 (about 2,000 tools' views; 342 tools have 1,251 rows) the product takes about a
millisecond or less, not enough for handing half of it over to be worth it."""

_pool: ThreadPoolExecutor | None = None
_lock = threading.Lock()


def _forget_in_child() -> None:
    """A forked child has none of its parent's threads: it starts helpers of its own (the
    parent's pool, whose workers are gone, would run nothing in parallel, and its lock may
    have been held by another of the parent's threads at the fork)."""
    global _pool, _lock
    _pool, _lock = None, threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_in_child)


def helpers() -> ThreadPoolExecutor:
    """The process's helper threads (started on first use)."""
    global _pool
    with _lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(max_workers=HELPERS, thread_name_prefix="keen-search")
        return _pool


def beside(work: Callable[[], T]) -> Callable[[], T]:
    """Start ``work`` on a helper thread; the function returned gives its result: the
    helper's, waited for, when a helper has started it, else ``work()`` run on the calling
    thread (the queued call cancelled first, so it runs once). Exceptions are ``work``'s.
    Once the interpreter is shutting down (no new threads: an ``atexit`` handler's search)
    ``work`` runs on the calling thread.

    ``work`` must be safe to run twice (a search's parts compute values and write only
    their own output, the same bits each time): when the system cannot start a new thread,
    the executor raises after queueing the call, which a helper already running may then
    run as well as the calling thread."""
    try:
        future = helpers().submit(work)
    except RuntimeError:  # after interpreter shutdown, or no new thread could be started
        return work

    def result() -> T:
        if future.cancel():  # no helper took it yet: the CPUs are busy, do it here
            return work()
        return future.result()

    return result


def dot_halves(matrix: np.ndarray, vector: np.ndarray) -> np.ndarray:
    """``np.vecdot(matrix, vector)`` (one float32 dot product per row, no BLAS threads), the
    first half of the rows on a helper thread when ``matrix`` has :data:`SPLIT_ROWS` rows
    or more: each row's product is computed alone, so the result is the same bits as one
    ``vecdot`` over all rows. ``matrix``: ``(n, d)``; ``vector``: ``(d,)``; returns ``(n,)``."""
    import numpy as np

    if len(matrix) < SPLIT_ROWS:
        return np.vecdot(matrix, vector)
    half = len(matrix) // 2
    out = np.empty(len(matrix), dtype=np.result_type(matrix, vector))
    first = beside(lambda: np.vecdot(matrix[:half], vector, out=out[:half]))
    np.vecdot(matrix[half:], vector, out=out[half:])
    first()
    return out
