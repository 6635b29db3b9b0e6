"""What an upstream server tells during a call reaches the host that made it (docs/serve.md).

server-everything's ``trigger-long-running-operation`` reports progress at each step; the
host (the SDK's ``Client``) asks for it with its own progress token. Before, ``keen serve``
relayed none of it: over HTTP every answer was one JSON body, and the upstream call had no
progress callback. A host that cancels its call cancels the upstream call
(``tests/servers/cancel_stdio.py`` says when it was).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from conftest import peer
from helpers import server_script
from helpers.forkserver import script_args
from helpers.loopback import wait_until
from helpers.serve import KeenServeProcess, PostsAnswered, connect, write_everything, write_upstream

pytestmark = [pytest.mark.anyio, pytest.mark.slow_file]

LONG = {
    "server": "everything",
    "tool": "trigger-long-running-operation",
    "arguments": {"duration": 0.3, "steps": 3},
}


def _waiter() -> dict[str, object]:
    """``tests/servers/cancel_stdio.py``: its ``wait`` tool writes when it starts and when it
    is cancelled to the file its arguments name (one per test, so one server serves all)."""
    return {
        "transport": "stdio",
        "command": sys.executable,
        "args": script_args(str(server_script("cancel_stdio"))),
    }


@pytest.fixture(scope="module")
def search(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KeenServeProcess]:
    """``keen serve --mode search`` over HTTP in front of server-everything and the waiter,
    shared by the module's HTTP tests (each opens its own host, session or principal)."""
    home = tmp_path_factory.mktemp("relay")
    everything = {"transport": "stdio", "command": peer("node", "mcp-server-everything"), "args": ["stdio"]}
    write_upstream(home, extra={"everything": everything, "c": _waiter()})
    with KeenServeProcess(home, ["--mode", "search"]) as proc:
        yield proc


async def _call_with_progress(client: object) -> tuple[str, list[tuple[float, float | None, str | None]]]:
    got: list[tuple[float, float | None, str | None]] = []

    async def progress(done: float, total: float | None, message: str | None) -> None:
        got.append((done, total, message))

    result = await client.call_tool("call_mcp_tool", LONG, progress_callback=progress)  # type: ignore[attr-defined]
    return result.content[0].text, got


@pytest.mark.parametrize("era", ["session", "stateless"])
async def test_progress_reaches_the_http_host(search: KeenServeProcess, era: str) -> None:
    async with connect(search, era) as client:
        text, got = await _call_with_progress(client)
        assert text.startswith("Long running operation completed")
        assert [(done, total) for done, total, _ in got] == [(1.0, 3.0), (2.0, 3.0), (3.0, 3.0)]
        # A call without a progress token is still one JSON answer, and nothing else arrives.
        plain = await client.call_tool("call_mcp_tool", LONG)
        assert plain.content[0].text.startswith("Long running operation completed")  # type: ignore[union-attr]


@pytest.mark.parametrize("era", ["session", "stateless"])
async def test_progress_reaches_the_stdio_host(tmp_path: Path, era: str) -> None:
    async with connect(
        "stdio", era, home=write_everything(tmp_path), serve_args=["--mode", "search"]
    ) as client:
        _, got = await _call_with_progress(client)
    assert [(done, total) for done, total, _ in got] == [(1.0, 3.0), (2.0, 3.0), (3.0, 3.0)]


@pytest.mark.parametrize(
    ("transport", "era"), [(t, e) for t in ("http", "stdio") for e in ("session", "stateless")]
)
async def test_a_host_that_cancels_its_call_cancels_the_upstream_call(
    tmp_path: Path, transport: str, era: str, request: pytest.FixtureRequest
) -> None:
    """Before, over HTTP the upstream call ran on to its end: a 2025-11-25 host's
    notifications/cancelled came in a POST of its own, which the stateless handler served
    apart from the call, and a 2026-07-28 host's closed connection went unnoticed."""
    mark = tmp_path / "mark"
    posts = PostsAnswered()
    if transport == "http":
        opened = connect(request.getfixturevalue("search"), era, posts=posts)
    else:
        write_upstream(tmp_path, extra={"c": _waiter()})
        opened = connect("stdio", era, home=tmp_path, serve_args=["--mode", "search"])
    async with opened as client:
        async with anyio.create_task_group() as tg:
            call = {"server": "c", "tool": "wait", "arguments": {"path": str(mark)}}
            tg.start_soon(client.call_tool, "call_mcp_tool", call)
            assert await anyio.to_thread.run_sync(wait_until, mark.exists, 30)
            tg.cancel_scope.cancel()
        assert await anyio.to_thread.run_sync(wait_until, lambda: mark.read_text() == "cancelled", 10)
        if transport == "http" and era == "session":
            # The cancelled call's POST is still answered (a 2026-07-28 host drops its
            # connection instead); the client closes once it has read the reply: one that
            # arrived after it closed made the SDK's HTTP client raise.
            assert await anyio.to_thread.run_sync(wait_until, posts.all_read, 10)
