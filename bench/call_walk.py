"""Walk one tool call's arguments through Keen's code, files entered and climbs back up.

An agent (``keen.agent.Agent`` on an open runtime, ``ask`` mode, an approval prompt that says yes)
runs one ``call_mcp_tool`` call to a tool that is not read-only on an in-process FastMCP
server (the SDK's in-memory transport). Everything ``Agent._run_call`` runs in Keen's own
source (``src/keen``) is recorded with ``sys.setprofile``:

- a **stop** is one Keen function (or method) entered: a coroutine resumed after an
  ``await`` is not a new stop, and comprehensions and lambdas are not counted;
- a **file entered** is a stop in another file than the stop before it (``entered`` per file
  says how often the walk came into it);
- a **climb back up** is a stop whose module is above the module of the stop before it (the
  shared leaves left out) in the import graph (it imports that module, directly or not): the
  walk went down a layer and comes back up to carry on; a **callback** is the worst kind, a
  lower layer calling a function of a higher one (the callee imports its caller);
- the walk enters the MCP layer (``keen.mcp``), the skills, the event log's file writing and
  the shared leaves (``keen.paths``, ``keen._redact``...) but does not follow them: each
  function entered there from above is one stop.

Only frames on ``_run_call``'s own stack count (the Manager's owner tasks running beside it
do not). Usage: ``python bench/call_walk.py [--json] [--stops]``.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path
from types import FrameType
from typing import Any

import anyio
import grimp
from fastmcp import FastMCP
from mcp.types import ToolAnnotations

from _common import keen_home, write_config
from keen.trust import PinGuard

__all__ = ["main", "walk"]

SRC = Path(__file__).resolve().parent.parent / "src"
_DOORS = ("keen.mcp", "keen.skills", "keen.mcpskills", "keen.harness.events")
_LEAVES = {"keen.errors", "keen.paths", "keen._fs", "keen._redact", "keen._text", "keen._lazy", "keen.tokens"}
_SKIP = {"<listcomp>", "<dictcomp>", "<setcomp>", "<genexpr>", "<lambda>", "<module>"}


def _module(path: str) -> str:
    rel = Path(path).resolve().relative_to(SRC).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _below(module: str) -> bool:
    """The MCP layer and the shared leaves: the walk enters them, it does not follow them."""
    return module.startswith(_DOORS) or module in _LEAVES


def _server() -> FastMCP:
    server = FastMCP("notes")

    @server.tool(description="Add a note.", annotations=ToolAnnotations(read_only_hint=False))
    def add_note(title: str, body: str) -> str:
        return f"added {title}: {len(body)} characters"

    return server


async def walk() -> dict[str, Any]:
    """Run the call once untraced (warm caches), then once traced; the traced walk's figures."""
    from keen.agent import Agent
    from keen.agent.loop import TurnResult, _Quiet  # pyright: ignore[reportPrivateUsage]
    from keen.agent.models import ToolCall
    from keen.capabilities import capability_id
    from keen.mcp import Manager, in_memory_transport
    from keen.runtime import open_runtime

    graph = grimp.build_graph("keen")
    keen_src = str(SRC / "keen")
    with keen_home() as home:
        config = write_config(home, {"notes": {"transport": "stdio", "command": "unused-in-memory"}})
        manager = Manager(
            config, transports={"notes": in_memory_transport(_server()._mcp_server)}, trust=PinGuard()
        )
        async with open_runtime(manager=manager, wait=30) as rt:

            async def yes(request: Any) -> str:
                return "yes"

            class _Model:
                name = "walk"

            agent = Agent(rt, _Model(), mode="ask", approval_prompt=yes, workspace=home)  # type: ignore[arg-type]
            agent.harness.requested.append(capability_id("tool", "add_note", "notes"))
            agent._begin()  # pyright: ignore[reportPrivateUsage]
            arguments = {"server": "notes", "tool": "add_note", "arguments": {"title": "t", "body": "b"}}

            async def once() -> None:
                result = TurnResult("", ok=False, steps=0)
                await agent._run_call(ToolCall("c1", "call_mcp_tool", arguments), _Quiet(), result, [])  # pyright: ignore[reportPrivateUsage]
                assert result.tool_calls[-1]["outcome"] == "ok", result.tool_calls

            await once()
            stops: list[tuple[str, str, str | None]] = []  # (module, function, caller module)
            seen: set[int] = set()
            alive: list[FrameType] = []  # keeps ids unique while tracing
            root: list[FrameType] = []

            def on_stack(frame: FrameType) -> bool:
                f: FrameType | None = frame
                while f is not None:
                    if root and f is root[0]:
                        return True
                    f = f.f_back
                return False

            def profile(frame: FrameType, event: str, arg: Any) -> None:
                if event != "call" or not frame.f_code.co_filename.startswith(keen_src):
                    return
                if frame.f_code.co_name == "_run_call" and not root:
                    root.append(frame)
                if id(frame) in seen or frame.f_code.co_name in _SKIP or not on_stack(frame):
                    return
                seen.add(id(frame))
                alive.append(frame)
                caller = frame.f_back
                while caller is not None and not caller.f_code.co_filename.startswith(keen_src):
                    caller = caller.f_back
                if caller is not None and _below(_module(caller.f_code.co_filename)):
                    return  # the walk stops at the MCP layer's and the leaves' doors
                stops.append(
                    (
                        _module(frame.f_code.co_filename),
                        frame.f_code.co_qualname,
                        _module(caller.f_code.co_filename) if caller is not None else None,
                    )
                )

            sys.setprofile(profile)
            try:
                await once()
            finally:
                sys.setprofile(None)
    entered: Counter[str] = Counter()
    previous = None
    climbs: list[str] = []
    callbacks: list[str] = []
    walked = None  # the last stop outside the shared leaves
    for module, function, caller in stops:
        if module not in _LEAVES:
            if walked and module != walked and graph.chain_exists(importer=module, imported=walked):
                climbs.append(f"{walked} -> {module}.{function}")
            walked = module
        if module != previous:
            entered[module] += 1
        previous = module
        if caller and caller != module and graph.chain_exists(importer=module, imported=caller):
            callbacks.append(f"{caller} -> {module}.{function}")
    return {
        "stops": len(stops),
        "files": len(entered),
        "climbs": len(climbs),
        "entered": dict(entered.most_common()),
        "climbs_list": climbs,
        "callbacks": len(callbacks),
        "callbacks_list": callbacks,
        "walk": [f"{m}.{f}" for m, f, _ in stops],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument("--stops", action="store_true", help="list every stop")
    args = parser.parse_args()
    figures = anyio.run(walk)
    if args.json:
        print(json.dumps(figures, indent=2))
        return
    print(
        f"stops: {figures['stops']} in {figures['files']} files; climbs back up: {figures['climbs']}"
        f" (of which callbacks into a higher layer: {figures['callbacks']})"
    )
    for module, count in figures["entered"].items():
        print(f"  {count:3d}  {module}")
    for climb in figures["climbs_list"]:
        print(f"  climb: {climb}")
    for callback in figures["callbacks_list"]:
        print(f"  callback: {callback}")
    if args.stops:
        for stop in figures["walk"]:
            print(f"  {stop}")


if __name__ == "__main__":
    main()
