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


async def _read_all(chunks: list[bytes]) -> list[str]:
    read_fd, write_fd = os.pipe()

    def write() -> None:
        with os.fdopen(write_fd, "wb") as pipe:
            for chunk in chunks:
                pipe.write(chunk)

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    try:
        return [line async for line in StdinLines(read_fd)]
    finally:
        writer.join(30)
        os.close(read_fd)


async def test_lines_come_out_whole_across_chunks() -> None:
    lines = await _read_all([b'{"a":', b' 1}\n{"b"', b": 2}\n\n", b"\xff tail"])
    assert lines == ['{"a": 1}\n', '{"b": 2}\n', "\n", "\ufffd tail"]


async def test_a_line_past_the_limit_is_dropped_with_a_warning_and_the_next_is_read(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Unbounded, a host's line without an end took the process's memory."""
    read_fd, write_fd = os.pipe()
    chunks = [b'{"small": 1}\n', b"x" * 300_000, b"y" * 300_000 + b"\n", b'{"after": 2}\n', b"z" * 1_000]

    def write() -> None:
        with os.fdopen(write_fd, "wb") as pipe:
            for chunk in chunks:
                pipe.write(chunk)

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    try:
        with caplog.at_level("WARNING", logger="keen.serve"):
            lines = [line async for line in StdinLines(read_fd, limit=200_000)]
    finally:
        writer.join(30)
        os.close(read_fd)
    assert lines == ['{"small": 1}\n', '{"after": 2}\n', "z" * 1_000]
    assert [r.getMessage() for r in caplog.records] == [
        "the host sent a message of more than 200,000 bytes, more than keen serve reads of one message: it was "
        "dropped, and its request gets no answer"
    ]
