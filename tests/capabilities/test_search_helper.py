"""The search's helper threads: the same numbers as on the calling thread, and a forked
child gets helpers of its own."""

from __future__ import annotations

import os

import numpy as np
import pytest

from keen.capabilities._helper import SPLIT_ROWS, dot_halves


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
    rng = np.random.default_rng(0)
    matrix = rng.standard_normal((2 * SPLIT_ROWS, 16)).astype(np.float32)
    vector = rng.standard_normal(16).astype(np.float32)
    expected = dot_halves(matrix, vector)  # the parent's helpers are running now
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child reports through the pipe
        os.close(read)
        same = np.array_equal(dot_halves(matrix, vector), expected)
        os.write(write, b"same" if same else b"different")
        os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        # A child that reused the parent's pool would wait for workers it does not have.
        answer = pipe.read()
    os.waitpid(pid, 0)
    assert answer == b"same"
