"""``keen serve``'s stdin reader (:mod:`keen.serve._stdin`) on a real pipe: lines come out
whole and in order, undecodable bytes replaced, and a line past the bound is dropped, a
request among them answered with an error (through the SDK's stdio transport). That a
long line is read in time linear in its size is a figure ``bench/large_result.py
--transports host`` prints (a test asserted CPU time under 8 s for 40 MB)."""

from __future__ import annotations

import json
import os
import threading
from typing import Any

import anyio
import pytest
from mcp.server.mcpserver import Context, MCPServer
from pydantic import BaseModel

from helpers.serve import INITIALIZE
from keen.serve._stdin import StdinLines, host_streams, oversized_answer_id, oversized_request_id

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
    "the host sent a message of more than 100 bytes, more than keen serve reads of one message: it is dropped"
)


def no_id(size: int) -> str:
    return f"the dropped message ({size:,} bytes) shows no request id in its first or last bytes: it gets no answer"


@pytest.mark.parametrize(
    ("chunks", "kept", "warnings"),
    [
        # A line of the limit passes, its newline not counted; one byte more is dropped.
        ([b"a" * 100, b"\nok\n"], ["a" * 100 + "\n", "ok\n"], []),
        ([b"a" * 101, b"\nok\n"], ["ok\n"], [WARNING, no_id(101)]),
        # Past the limit in the read that also brings its newline.
        ([b"a" * 99, b"b" * 51 + b"\nok\n"], ["ok\n"], [WARNING, no_id(150)]),
        ([b"a" * 150 + b"\nok\n"], ["ok\n"], [WARNING, no_id(150)]),
        # Dropped across reads, its newline the last byte of one; an unterminated tail dropped.
        ([b"a" * 101, b"x\n", b"ok\n"], ["ok\n"], [WARNING, no_id(102)]),
        ([b"ok\n", b"a" * 101, b"bbb"], ["ok\n"], [WARNING]),
        (
            [b"a" * 90, b"a" * 60 + b"\nccccc\n", b"d" * 200 + b"\n"],
            ["ccccc\n"],
            [WARNING, no_id(150), WARNING, no_id(200)],
        ),
    ],
)
async def test_a_line_past_the_limit_is_dropped_whatever_the_reads(
    chunks: list[bytes], kept: list[str], warnings: list[str], caplog: pytest.LogCaptureFixture
) -> None:
    """Unbounded, a host's line without an end took the process's memory."""
    with caplog.at_level("WARNING", logger="keen.serve"):
        assert await _read_all(chunks, limit=100) == kept
    assert [r.getMessage() for r in caplog.records] == warnings


ARGS = '"params":{"name":"echo","arguments":{"text":"' + "x" * 3000 + '","id":99}}'


@pytest.mark.parametrize(
    ("message", "request_id"),
    [
        # The Python SDK's order, and the TypeScript SDK's (id last).
        ('{"jsonrpc":"2.0","id":7,"method":"tools/call",' + ARGS + "}", 7),
        ("{" + '"method":"tools/call",' + ARGS + ',"jsonrpc":"2.0","id":"a\\"b"}', 'a"b'),
        ('{ "jsonrpc" : "2.0" , "method" : "tools/call" , ' + ARGS + ' , "id" : -3 }\r', -3),
        # Not a request: no method (an answer), no id (a notification), or an id that is not one.
        ('{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"' + "x" * 3000 + '"}]}}', None),
        ('{"jsonrpc":"2.0","method":"notifications/message",' + ARGS + "}", None),
        ('{"jsonrpc":"2.0","id":true,"method":"tools/call",' + ARGS + "}", None),
        ('{"jsonrpc":"2.0","id":null,"method":"tools/call",' + ARGS + "}", None),
        ('{"jsonrpc":"2.0","id":1.5,"method":"tools/call",' + ARGS + "}", None),
        # An "id" only inside the arguments, or in a string, is not the request's.
        ('{"jsonrpc":"2.0","method":"tools/call",' + ARGS + "}", None),
        ('{"jsonrpc":"2.0","method":"tools/call","note":",\\"id\\":5",' + ARGS + "}", None),
        ('[{"jsonrpc":"2.0","id":7,"method":"tools/call",' + ARGS + "}]", None),
        # A member named twice: the last counts, as the SDK's parser reads it; an escaped name.
        ('{"jsonrpc":"2.0","id":1,"method":"tools/call","id":2,' + ARGS + "}", 2),
        ('{"jsonrpc":"2.0","\\u0069d":5,"method":"tools/call",' + ARGS + "}", 5),
        # A lone surrogate: no id an answer could carry (its JSON could not be written).
        ('{"jsonrpc":"2.0","id":"\\ud800","method":"tools/call",' + ARGS + "}", None),
        # A member cut by the end of what is kept is not read.
        ('{"jsonrpc":"2.0","method":"tools/call","pad":"' + "p" * 968 + '","id":12345,' + ARGS + "}", None),
    ],
)
def test_the_id_of_a_request_too_long_to_read_is_found_at_its_ends(message: str, request_id: Any) -> None:
    data = message.encode()
    assert len(data) > 2 * 1024  # neither end holds the whole message
    assert oversized_request_id(data[:1024], data[-1024:]) == request_id


async def test_a_request_dropped_for_its_size_is_answered_and_the_session_goes_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Before, the host's request got no answer: it waited out its own time limit."""
    server = MCPServer("sized")

    @server.tool()
    def echo(text: str) -> str:
        return text

    lowlevel = server._lowlevel_server  # pyright: ignore[reportPrivateUsage]
    big = "y" * 20_000
    messages = [
        INITIALIZE,
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        # The TypeScript SDK's order: the id after the arguments.
        {
            "method": "tools/call",
            "params": {"name": "echo", "arguments": {"text": big}},
            "jsonrpc": "2.0",
            "id": 2,
        },
        {
            "jsonrpc": "2.0",
            "id": 3,
            "method": "tools/call",
            "params": {"name": "echo", "arguments": {"text": "ok"}},
        },
    ]
    in_read, in_write = os.pipe()
    out_read, out_write = os.pipe()
    os.write(in_write, b"".join(json.dumps(m).encode() + b"\n" for m in messages))  # within the pipe's buffer
    received = b""
    try:
        with (
            os.fdopen(out_write, "w", encoding="utf-8") as stdout,
            caplog.at_level("WARNING", logger="keen.serve"),
        ):
            async with (
                host_streams(StdinLines(in_read, limit=10_000), anyio.wrap_file(stdout)) as (read, write),
                anyio.create_task_group() as tg,
            ):
                tg.start_soon(lowlevel.run, read, write, lowlevel.create_initialization_options())
                # Read in this task (a thread blocked in a read could not be cancelled).
                with anyio.fail_after(30):
                    while received.count(b"\n") < 3:
                        await anyio.wait_readable(out_read)
                        received += os.read(out_read, 65536)
                os.close(in_write)  # the host's end: the session ends
                in_write = -1
    finally:
        for fd in (in_read, out_read, in_write):
            if fd >= 0:
                os.close(fd)
    answers = {answer["id"]: answer for answer in map(json.loads, received.splitlines())}
    size = len(json.dumps(messages[2]).encode())
    assert answers[2]["error"] == {
        "code": -32600,
        "message": f"this request is {size:,} bytes, more than the 10,000 keen serve reads of one message: it was "
        "not run; send less in one request (a file's path or a URL rather than its content)",
    }
    assert answers[3]["result"]["content"] == [{"type": "text", "text": "ok"}]
    assert [r.getMessage() for r in caplog.records] == [WARNING.replace(" 100 ", " 10,000 ")]


async def test_the_host_closing_stdin_after_a_dropped_request_ends_the_session_cleanly() -> None:
    """The session's write stream closes as its read stream ends: an answer still on its way
    to it is left, not raised (which ended keen serve with an internal error)."""
    server = MCPServer("sized")
    lowlevel = server._lowlevel_server  # pyright: ignore[reportPrivateUsage]
    big = {
        "jsonrpc": "2.0",
        "id": 2,
        "method": "tools/call",
        "params": {"name": "x", "arguments": {"t": "z" * 300}},
    }
    for _ in range(5):  # the order of the two ends varies from run to run
        in_read, in_write = os.pipe()
        out_read, out_write = os.pipe()
        os.write(in_write, b"".join(json.dumps(m).encode() + b"\n" for m in (INITIALIZE, big)))
        os.close(in_write)
        try:
            with os.fdopen(out_write, "w", encoding="utf-8") as stdout, anyio.fail_after(30):
                async with host_streams(StdinLines(in_read, limit=100), anyio.wrap_file(stdout)) as (
                    read,
                    write,
                ):
                    await lowlevel.run(read, write, lowlevel.create_initialization_options())
            written = os.read(out_read, 65536)
        finally:
            os.close(in_read)
            os.close(out_read)
        assert json.loads(written.splitlines()[0])["id"] == 1


RESULT = '"result":{"action":"accept","content":{"text":"' + "x" * 3000 + '"}}'


@pytest.mark.parametrize(
    ("message", "answer_id"),
    [
        # The Python SDK's order, and the TypeScript SDK's (the result first).
        ('{"jsonrpc":"2.0","id":7,' + RESULT + "}", 7),
        ("{" + RESULT + ',"jsonrpc":"2.0","id":"k-1"}', "k-1"),
        ('{"jsonrpc":"2.0","id":8,"error":{"code":-1,"message":"' + "e" * 3000 + '"}}', 8),
        # A request, a notification, or a message whose first compound member is no answer's.
        ('{"jsonrpc":"2.0","id":7,"method":"tools/call",' + ARGS + "}", None),
        ('{"jsonrpc":"2.0","method":"notifications/message",' + ARGS + "}", None),
        ('{"jsonrpc":"2.0","id":7,' + ARGS + ',"method":"tools/call"}', None),
        ('{"jsonrpc":"2.0","id":7,' + ARGS + "}", None),
        ('{"jsonrpc":"2.0","id":true,' + RESULT + "}", None),
        ('[{"jsonrpc":"2.0","id":7,' + RESULT + "}]", None),
    ],
)
def test_the_id_of_an_answer_too_long_to_read_is_found_at_its_ends(message: str, answer_id: Any) -> None:
    data = message.encode()
    assert len(data) > 2 * 1024  # neither end holds the whole message
    assert oversized_answer_id(data[:1024], data[-1024:]) == answer_id
    if answer_id is not None:
        assert oversized_request_id(data[:1024], data[-1024:]) is None


class _Note(BaseModel):
    text: str


async def test_a_hosts_answer_dropped_for_its_size_fails_the_request_it_answers_at_once() -> None:
    """Before, keen serve's own request to the host (a relayed elicitation or sampling) waited
    out its time limit when the host's answer was too large to read."""
    server = MCPServer("asks")

    @server.tool()
    async def ask(ctx: Context) -> str:
        try:
            answer = await ctx.elicit("What note?", _Note)
        except Exception as exc:  # the host's error, as the tool sees it
            return f"failed: {exc}"
        return f"answered: {answer.action}"

    lowlevel = server._lowlevel_server  # pyright: ignore[reportPrivateUsage]
    initialize = {**INITIALIZE, "params": {**INITIALIZE["params"], "capabilities": {"elicitation": {}}}}
    opening = [
        initialize,
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "ask", "arguments": {}}},
    ]
    in_read, in_write = os.pipe()
    out_read, out_write = os.pipe()
    os.write(in_write, b"".join(json.dumps(m).encode() + b"\n" for m in opening))
    received: list[dict[str, Any]] = []
    pending = b""

    async def next_message() -> dict[str, Any]:
        nonlocal pending
        while b"\n" not in pending:
            await anyio.wait_readable(out_read)
            pending += os.read(out_read, 65536)
        line, pending = pending.split(b"\n", 1)
        received.append(json.loads(line))
        return received[-1]

    try:
        with os.fdopen(out_write, "w", encoding="utf-8") as stdout:
            async with (
                host_streams(StdinLines(in_read, limit=10_000), anyio.wrap_file(stdout)) as (read, write),
                anyio.create_task_group() as tg,
            ):
                tg.start_soon(lowlevel.run, read, write, lowlevel.create_initialization_options())
                with anyio.fail_after(30):  # the SDK's own wait for the host's answer is longer
                    while (asked := await next_message()).get("method") != "elicitation/create":
                        pass
                    answer = {
                        "jsonrpc": "2.0",
                        "id": asked["id"],
                        "result": {"action": "accept", "content": {"text": "z" * 20_000}},
                    }
                    size = len(json.dumps(answer).encode())
                    await anyio.to_thread.run_sync(os.write, in_write, json.dumps(answer).encode() + b"\n")
                    while (done := await next_message()).get("id") != 2:
                        pass
                os.close(in_write)
                in_write = -1
    finally:
        for fd in (in_read, out_read, in_write):
            if fd >= 0:
                os.close(fd)
    text = done["result"]["content"][0]["text"]
    assert text == (
        f"failed: the host's answer was {size:,} bytes, more than the 10,000 keen serve reads of one message:"
        " it was dropped"
    ), done
