"""What an upstream server tells during a call reaches the host that made it (issue 28, item 2).

server-everything's ``trigger-long-running-operation`` reports progress at each step; the
host (the SDK's ``Client``) asks for it with its own progress token. Before, ``keen serve``
relayed none of it: over HTTP every answer was one JSON body, and the upstream call had no
progress callback.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import peer
from helpers.serve import KeenServeProcess, connect, write_upstream

pytestmark = pytest.mark.anyio

LONG = {
    "server": "everything",
    "tool": "trigger-long-running-operation",
    "arguments": {"duration": 0.3, "steps": 3},
}


def _home(tmp: Path) -> Path:
    everything = {"transport": "stdio", "command": peer("node", "mcp-server-everything"), "args": ["stdio"]}
    write_upstream(tmp, extra={"everything": everything})
    return tmp


@pytest.fixture(scope="module")
def search(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KeenServeProcess]:
    with KeenServeProcess(_home(tmp_path_factory.mktemp("relay")), ["--mode", "search"]) as proc:
        yield proc


async def _call_with_progress(client: object) -> tuple[str, list[tuple[float, float | None, str | None]]]:
    got: list[tuple[float, float | None, str | None]] = []

    async def progress(done: float, total: float | None, message: str | None) -> None:
        got.append((done, total, message))

    result = await client.call_tool("call_tool", LONG, progress_callback=progress)  # type: ignore[attr-defined]
    return result.content[0].text, got


@pytest.mark.parametrize("era", ["session", "stateless"])
async def test_progress_reaches_the_http_host(search: KeenServeProcess, era: str) -> None:
    async with connect(search, era) as client:
        text, got = await _call_with_progress(client)
        assert text.startswith("Long running operation completed")
        assert [(done, total) for done, total, _ in got] == [(1.0, 3.0), (2.0, 3.0), (3.0, 3.0)]
        # A call without a progress token is still one JSON answer, and nothing else arrives.
        plain = await client.call_tool("call_tool", LONG)
        assert plain.content[0].text.startswith("Long running operation completed")  # type: ignore[union-attr]


@pytest.mark.parametrize("era", ["session", "stateless"])
async def test_progress_reaches_the_stdio_host(tmp_path: Path, era: str) -> None:
    async with connect("stdio", era, home=_home(tmp_path), serve_args=["--mode", "search"]) as client:
        _, got = await _call_with_progress(client)
    assert [(done, total) for done, total, _ in got] == [(1.0, 3.0), (2.0, 3.0), (3.0, 3.0)]
