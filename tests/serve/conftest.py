"""Fixtures for ``keen serve`` tests: one HTTP server per module, fresh callers per test."""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp.client.client import Client

from helpers.serve import KeenServeProcess, basic_in_memory, connect, in_process, write_upstream

TOKENS = [f"test-token-{i:03d}-{'x' * 8}" for i in range(200)]


@pytest.fixture(scope="module")
def serve_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("serve-home")
    write_upstream(home)
    return home


@pytest.fixture(scope="module")
def http_server(serve_home: Path) -> Iterator[KeenServeProcess]:
    """``keen serve --mode extension`` over HTTP with 200 bearer tokens (one principal each)."""
    with KeenServeProcess(serve_home, env={"KEEN_SERVE_TOKENS": ",".join(TOKENS)}) as proc:
        yield proc


_tokens = itertools.cycle(TOKENS)


@pytest.fixture(params=["http", "stdio"])
def transport(request: pytest.FixtureRequest) -> str:
    """How ``new_caller`` reaches ``keen serve``: ``http`` (the module's process), ``stdio``
    (a process per caller) or, where a module asks for it, ``memory`` (``keen serve``'s
    server in this process per caller, over the SDK's memory streams: the same session as
    over stdio, without a process and its start; ``helpers.serve.in_process``; its
    ``basic`` upstream in this process too, ``helpers.serve.basic_in_memory``)."""
    return str(request.param)


@pytest.fixture(params=["session", "stateless"])
def era(request: pytest.FixtureRequest) -> str:
    return str(request.param)


Caller = Callable[[], contextlib.AbstractAsyncContextManager[Client]]


@pytest.fixture
def new_caller(transport: str, era: str, serve_home: Path, request: pytest.FixtureRequest) -> Caller:
    """Opens a fresh caller: a new session (session era), a new bearer principal (stateless
    era over HTTP), a new ``keen serve`` process (stdio) or server (memory)."""
    if transport == "memory":
        request.getfixturevalue("monkeypatch").setenv("KEEN_HOME", str(serve_home))

    @contextlib.asynccontextmanager
    async def open_caller() -> AsyncIterator[Client]:
        if transport == "memory":
            # The upstream in this process too: the caller's server is what is under test.
            transports = basic_in_memory()
            async with in_process(serve_home, era, mode="extension", transports=transports) as (_, client):
                yield client
        elif transport == "stdio":
            async with connect("stdio", era, home=serve_home) as client:
                yield client
        else:
            server: Any = request.getfixturevalue("http_server")
            async with connect(server, era, token=next(_tokens)) as client:
                yield client

    return open_caller
