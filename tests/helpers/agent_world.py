"""The agent tests' world: a runtime over real MCP servers and scripted models.

Servers: ``demo`` (keen-demo over stdio, started through a shim that records its pid so a
test can kill it, counts its launches, exits at once while ``<pidfile>.down`` exists and
hangs before its handshake while ``<pidfile>.hang`` exists), ``everything`` (the npm reference server), ``basic`` and ``booking``
(tests/servers). The scripted model is Keen's own ``scripted:`` provider reading a file
the test writes; :class:`Recording` keeps what each model call was sent.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio

from conftest import peer, stdio_server
from helpers.forkserver import launch_args
from keen.agent import Agent, Message, ModelEvent
from keen.agent.providers.scripted import ScriptedModel
from keen.mcp.types import ServerState
from keen.runtime import Runtime, open_runtime

_SHIM = (
    "import os, sys; open(sys.argv[1] + '.launches', 'a').write('x\\n'); "
    "os.path.exists(sys.argv[1] + '.down') and sys.exit('fatal: the demo server is down'); "
    "import time; os.path.exists(sys.argv[1] + '.hang') and time.sleep(60); "
    "open(sys.argv[1], 'w').write(str(os.getpid())); "
    "from keen.demo.server import main; main()"
)


@dataclass
class Recording:
    """A scripted model that also keeps each call's messages and tool names."""

    inner: ScriptedModel
    sent: list[tuple[list[Message], list[dict[str, Any]]]] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.inner.name

    async def stream(self, messages: list[Message], tools: list[dict[str, Any]]) -> AsyncIterator[ModelEvent]:
        self.sent.append((list(messages), list(tools)))
        async for event in self.inner.stream(messages, tools):
            yield event

    def tool_names(self, call: int) -> list[str]:
        return [t["name"] for t in self.sent[call][1]]

    def system(self, call: int) -> str:
        return self.sent[call][0][0].content


class Notices:
    """A turn view that keeps the notice lines (what one-shot prints on stderr)."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def text(self, delta: str) -> None: ...
    def tool_call(self, name: str, arguments: dict[str, Any]) -> None: ...
    def observation(self, obs: Any) -> None: ...

    def notice(self, line: str) -> None:
        self.lines.append(line)


@dataclass
class World:
    home: Path
    tmp: Path
    pidfile: Path

    @property
    def down(self) -> Path:
        """While this file exists the demo server refuses to start (exit 1, a line on stderr)."""
        return self.pidfile.with_name(self.pidfile.name + ".down")

    @property
    def hang(self) -> Path:
        """While this file exists the demo server hangs before its handshake (a minute)."""
        return self.pidfile.with_name(self.pidfile.name + ".hang")

    def launches(self) -> int:
        """How many times the demo server was started."""
        path = self.pidfile.with_name(self.pidfile.name + ".launches")
        return len(path.read_text().splitlines()) if path.exists() else 0

    def skill_md(self, server: str) -> str:
        return str(self.home / "skills" / f"mcp:{server}" / "SKILL.md")

    def schema(self, server: str, tool: str) -> str:
        return str(self.home / "skills" / f"mcp:{server}" / "schemas" / f"{tool}.json")

    def script(self, *answers: dict[str, Any]) -> Recording:
        path = self.tmp / f"script-{len(list(self.tmp.glob('script-*')))}.jsonl"
        path.write_text("".join(json.dumps(a) + "\n" for a in answers))
        return Recording(ScriptedModel(path))

    def server_entries(self, names: set[str]) -> dict[str, Any]:
        entries: dict[str, Any] = {
            "demo": {
                "transport": "stdio",
                "command": sys.executable,
                "args": launch_args("-c", _SHIM, str(self.pidfile)),
                "env": {"KEEN_HOME": str(self.home)},
                "trust_annotations": True,  # Keen's own demo server
            },
            # These worlds test the agent loop, not trust: each server is trusted for its
            # annotations (tests/untrusted/test_annotations.py covers the servers that are not).
            "everything": {
                "transport": "stdio",
                "command": peer("node", "mcp-server-everything"),
                "args": ["stdio"],
                "trust_annotations": True,
            },
            "basic": stdio_server("basic_stdio.py", trust_annotations=True),
            "booking": stdio_server("elicit_stdio.py", trust_annotations=True),
        }
        return {name: entry for name, entry in entries.items() if name in names}

    @property
    def config_path(self) -> Path:
        """The configs.json of a runtime opened with ``from_file=True``."""
        return self.home / "mcp" / "configs.json"

    @contextlib.asynccontextmanager
    async def runtime(
        self,
        *servers: str,
        elicitation: Any = None,
        timeouts: dict[str, float] | None = None,
        from_file: bool = False,
    ) -> AsyncIterator[Runtime]:
        """A runtime over ``servers`` (``timeouts``: every server's ``timeouts`` entry);
        ``from_file``: read from :attr:`config_path`, so :meth:`retime` can change an entry."""
        entries = self.server_entries(set(servers))
        for entry in entries.values():
            if timeouts is not None:
                entry["timeouts"] = timeouts
        config = {"version": 1, "servers": entries}
        source: dict[str, Any] = {"config": config}
        if from_file:
            self.config_path.parent.mkdir(parents=True, exist_ok=True)
            self.config_path.write_text(json.dumps(config))
            source = {"config_path": self.config_path}
        async with open_runtime(**source, wait=60, sync=True, elicitation=elicitation) as rt:
            for name in servers:
                status = rt.manager.status(name)
                assert status.state is ServerState.CONNECTED, status
            yield rt

    async def retime(self, rt: Runtime, server: str, timeouts: dict[str, float]) -> None:
        """Give ``server`` these ``timeouts`` from its next connection attempt on (its open
        session stays): a test's healthy start keeps a generous limit and only the attempt
        meant to time out gets a short one."""
        config = json.loads(self.config_path.read_text())
        config["servers"][server]["timeouts"] = timeouts
        self.config_path.write_text(json.dumps(config))
        assert await rt.manager.reload_server(server) == "changed"

    @contextlib.asynccontextmanager
    async def agent(self, rt: Runtime, model: Any, **options: Any) -> AsyncIterator[Agent]:
        options.setdefault("workspace", self.tmp)
        agent = Agent(rt, model, **options)
        try:
            yield agent
        finally:
            agent.close()


def call(name: str, **arguments: Any) -> dict[str, Any]:
    """One scripted tool call."""
    return {"name": name, "arguments": arguments}


def step(*calls: dict[str, Any], content: str = "") -> dict[str, Any]:
    """One scripted model answer: text and tool calls."""
    return {"content": content, "tool_calls": list(calls)}


MCP = "call_mcp_tool"


async def kill_demo(world: World, rt: Any) -> int:
    """SIGKILL the demo server and wait until the Manager has seen it go; returns its pid."""
    gone = anyio.Event()
    stop = rt.manager.subscribe(lambda s: gone.set() if s.state is not ServerState.CONNECTED else None)
    pid = int(world.pidfile.read_text())
    os.kill(pid, signal.SIGKILL)
    with anyio.fail_after(20):
        await gone.wait()
    stop()
    assert rt.manager.status("demo").state is ServerState.DISCONNECTED
    return pid
