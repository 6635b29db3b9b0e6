"""``keen serve``'s stdin reader (:mod:`keen.serve._stdin`) on a real pipe: lines come out
whole and in order, undecodable bytes replaced, and a line past the bound is dropped. That a
long line is read in time linear in its size is a figure ``bench/large_result.py
--transports host`` prints (a test asserted CPU time under 8 s for 40 MB)."""

from __future__ import annotations

import os
import threading

import pytest

from keen.serve._stdin import StdinLines

pytestmark = pytest.mark.anyio


async def _read_all(chunks: list[bytes], limit: int | None = None) -> list[str]:
    read_fd, write_fd = os.pipe()

    def write() -> None:
        with os.fdopen(write_fd, "wb") as pipe:
            for chunk in chunks:
                pipe.write(chunk)

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    try:
        lines = StdinLines(read_fd) if limit is None else StdinLines(read_fd, limit=limit)
        return [line async for line in lines]
    finally:
        writer.join(30)
        os.close(read_fd)


async def test_lines_come_out_whole_across_chunks() -> None:
    lines = await _read_all([b'{"a":', b' 1}\n{"b"', b": 2}\n\n", b"\xff tail"])
    assert lines == ['{"a": 1}\n', '{"b": 2}\n', "\n", "\ufffd tail"]


WARNING = (
    "the host sent a message of more than 100 bytes, more than keen serve reads of one message: it was dropped, "
    "and its request gets no answer"
)


@pytest.mark.parametrize(
    ("chunks", "kept", "dropped"),
    [
        # A line of the limit passes, its newline not counted; one byte more is dropped.
        ([b"a" * 100, b"\nok\n"], ["a" * 100 + "\n", "ok\n"], 0),
        ([b"a" * 101, b"\nok\n"], ["ok\n"], 1),
        # Past the limit in the read that also brings its newline.
        ([b"a" * 99, b"b" * 51 + b"\nok\n"], ["ok\n"], 1),
        ([b"a" * 150 + b"\nok\n"], ["ok\n"], 1),
        # Dropped across reads, its newline the last byte of one; an unterminated tail dropped.
        ([b"a" * 101, b"x\n", b"ok\n"], ["ok\n"], 1),
        ([b"ok\n", b"a" * 101, b"bbb"], ["ok\n"], 1),
        ([b"a" * 90, b"a" * 60 + b"\nccccc\n", b"d" * 200 + b"\n"], ["ccccc\n"], 2),
    ],
)
async def test_a_line_past_the_limit_is_dropped_whatever_the_reads(
    chunks: list[bytes], kept: list[str], dropped: int, caplog: pytest.LogCaptureFixture
) -> None:
    """Unbounded, a host's line without an end took the process's memory."""
    with caplog.at_level("WARNING", logger="keen.serve"):
        assert await _read_all(chunks, limit=100) == kept
    assert [r.getMessage() for r in caplog.records] == [WARNING] * dropped
