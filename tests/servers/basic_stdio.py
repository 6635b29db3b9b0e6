"""A well-behaved stdio MCP server for tests (official SDK ``MCPServer``).

Usage: ``python basic_stdio.py [--tools N] [--name NAME] [--instructions TEXT] [--sleep-log PATH]``

Tools: ``echo(text)``, ``add(a, b)``, ``fail(message)`` (an ``isError`` result carrying
``message``), ``sleep(seconds)``, ``die()`` (writes ``fatal: die called`` to stderr, then
``os._exit(1)`` mid-call), ``env(name)`` (an environment variable's value, ``""`` if unset),
``cwd()``, ``pid()``; ``--tools N`` adds ``extra_0000`` ... ``extra_{N-1}``, each with a
~200-character description and a two-field schema, for size and paging tests.
``--sleep-log PATH``: ``sleep`` writes a line to PATH as it starts, so a test can wait until a
call is in flight upstream instead of guessing how long that takes.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.utilities.logging import configure_logging
from mcp_types import ToolAnnotations


def _extra_tool(index: int) -> Callable[[str, int], str]:
    def extra(query: str, limit: int = 10) -> str:
        return f"extra_{index:04d}:{query}:{limit}"

    return extra


def build(
    n_extra_tools: int = 0,
    name: str = "basic-stdio",
    instructions: str | None = None,
    sleep_log: str | None = None,
) -> MCPServer:
    server = MCPServer(name, instructions=instructions, version="1.0.0")

    @server.tool(description="Return the text unchanged.", annotations=ToolAnnotations(read_only_hint=True))
    def echo(text: str) -> str:
        return text

    @server.tool(description="Add two integers.", annotations=ToolAnnotations(read_only_hint=True))
    def add(a: int, b: int) -> int:
        return a + b

    @server.tool(description="Fail on purpose: an isError result whose text is the message.")
    def fail(message: str) -> str:
        raise ToolError(message)

    @server.tool(description="Sleep for the given number of seconds, then return 'slept <seconds>'.")
    async def sleep(seconds: float) -> str:
        if sleep_log is not None:
            await anyio.Path(sleep_log).write_text(f"sleep {seconds}\n", encoding="utf-8")
        await anyio.sleep(seconds)
        return f"slept {seconds}"

    @server.tool(description="Crash the server process mid-call (exit code 1).")
    def die() -> str:
        sys.stderr.write("fatal: die called\n")
        sys.stderr.flush()
        os._exit(1)

    @server.tool(description="Value of an environment variable, empty if unset.")
    def env(name: str) -> str:
        return os.environ.get(name, "")

    @server.tool(description="The server process's working directory.")
    def cwd() -> str:
        return os.getcwd()

    @server.tool(description="The server's process id.")
    def pid() -> int:
        return os.getpid()

    filler = "Generated tool for size and pagination tests. " * 5
    for index in range(n_extra_tools):
        server.add_tool(_extra_tool(index), name=f"extra_{index:04d}", description=f"{filler}Number {index}.")
    return server


Options = tuple[int, str, str | None, str | None]
""":func:`build`'s arguments, as a command line gives them."""

COMMON = ((), ("--tools", "2"))
"""The command lines most tests start this server with. A fork of the tests' warm process
(``tests/helpers/forkserver.py``) finds their servers made there (:func:`made_once`) and runs
its copy of one: registering the tools (the SDK builds pydantic models for each) was most of
this server's CPU, and a suite run starts it 160 times, 140 of them with one of these."""


def options(argv: list[str]) -> Options:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tools", type=int, default=0, help="extra generated tools")
    parser.add_argument("--name", default="basic-stdio")
    parser.add_argument("--instructions", default=None)
    parser.add_argument("--sleep-log", default=None, help="sleep writes a line here as it starts")
    args = parser.parse_args(argv)
    return (args.tools, args.name, args.instructions, args.sleep_log)


def made_once() -> dict[Options, MCPServer]:
    """The servers of the :data:`COMMON` command lines, for a warm process to make before it forks."""
    return {options(list(argv)): build(*options(list(argv))) for argv in COMMON}


def main() -> None:
    chosen = options(sys.argv[1:])
    warm: dict[Options, MCPServer] = getattr(sys.modules.get("_keen_test_forkserver"), "basic_stdio", {})
    made = warm.get(chosen)
    if made is None:
        build(*chosen).run("stdio")
        return
    # What making a server does besides (the SDK's logging set up), which the warm process undid.
    configure_logging(made.settings.log_level)
    made.run("stdio")


if __name__ == "__main__":
    main()
