"""Instructions and allocations per call under callgrind: ``keen serve``'s pipeline,
``Manager.call_tool`` and the library's ``Gateway.call`` (approved with ``allow_all``, the
server pinned on its first call) against the raw SDK, the paths of ``bench/call_cpu.py``
and the library's.

CPU time on a shared machine moves by tens of percent between runs; the instructions the
client process runs per call hardly move (a few thousand in 1.7 million, from how the event
loop's iterations fall; up to 15,000 between runs at times), so two versions of Keen are compared by them. Each path runs in
its own process under ``valgrind --tool=callgrind`` (the servers are other processes, not
counted), with instrumentation switched on (``callgrind_control -i on``) only around
``--calls`` calls after 50 untimed ones. Printed per call: the instructions and their ratio
to the SDK's call, and how many objects were allocated (pymalloc's ``_PyObject_Malloc``)
and how many of them the cyclic collector tracks (``_PyObject_GC_Link``), from callgrind's
call counts.

``--canned`` answers ``tools/call`` at once with a result the server sent before (the
session's ``call_tool`` replaced after the warm-up): what is left is Keen's own code per
call, without the SDK's or the transport's, for changes too small to see beside them.

Known bias: keen serve's event lines format their date once a wall-clock second; under
valgrind's slowdown that is about once a call (about 11,600 instructions a real run does
not have).

Usage: ``python bench/call_grind.py [--calls 300] [--paths sdk,manager,gateway,serve] [--canned]``
(needs ``valgrind``; a run takes a minute or two).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import anyio
from mcp.client.stdio import StdioServerParameters, stdio_client

from _common import DEMO_SERVER, PYTHON, keen_home, print_block
from call_cpu import ARGUMENTS, TOOL, served_demo
from keen.gateway import Gateway, allow_all
from keen.mcp.connection.sdk_private import negotiate_auto
from mcp import ClientSession

__all__ = ["main", "measure"]

PATHS = ("sdk", "manager", "gateway", "serve")
_COUNTED = {"allocations": "_PyObject_Malloc", "tracked": "_PyObject_GC_Link"}


async def _child(path: str, calls: int, canned: bool) -> None:
    """One path's calls in this process (run under callgrind by :func:`measure`)."""
    with keen_home() as home, tempfile.TemporaryFile("w+", dir=home) as errlog:
        async with AsyncExitStack() as stack:
            manager, served = await served_demo(stack, home)
            params = StdioServerParameters(command=PYTHON, args=DEMO_SERVER, env=dict(os.environ))
            read, write = await stack.enter_async_context(stdio_client(params, errlog=errlog))
            session = await stack.enter_async_context(ClientSession(read, write))
            await negotiate_auto(session)
            await session.list_tools()

            async def sdk() -> None:
                assert not (await session.call_tool(TOOL, ARGUMENTS)).is_error

            async def keen_manager() -> None:
                assert not (await manager.call_tool("bench", TOOL, ARGUMENTS)).is_error

            gateway = Gateway(manager, approval=allow_all)  # the library's call, approved by the host

            async def keen_gateway() -> None:
                assert not (await gateway.call("bench", TOOL, ARGUMENTS)).is_error

            async def keen_serve() -> None:
                obs = await served.router.call("bench", TOOL, ARGUMENTS, caller="bench")
                assert not obs.is_error, obs.text

            call: Callable[[], Awaitable[None]] = {
                "sdk": sdk,
                "manager": keen_manager,
                "gateway": keen_gateway,
                "serve": keen_serve,
            }[path]
            for _ in range(50):
                await call()
            if canned:
                target = session if path == "sdk" else manager._connections["bench"].session  # pyright: ignore[reportPrivateUsage]
                assert target is not None
                answer = await target.call_tool(TOOL, ARGUMENTS, allow_input_required=True)

                async def at_once(*args: Any, **kwargs: Any) -> Any:
                    return answer

                target.call_tool = at_once  # type: ignore[method-assign]
                for _ in range(50):
                    await call()
            _instrument("on")
            for _ in range(calls):
                await call()
            _instrument("off")


def _instrument(state: str) -> None:
    """Switch callgrind's counting in this process on or off; blocking on purpose: nothing of
    the event loop runs meanwhile (its cost, the same for every path, is in the window)."""
    subprocess.run(["callgrind_control", "-i", state, str(os.getpid())], check=True, capture_output=True)


def _call_counts(out: Path) -> Counter[str]:
    """Calls of each function in a callgrind output file (its ``calls=`` lines, by callee)."""
    names: dict[str, str] = {}
    counts: Counter[str] = Counter()
    callee = ""
    with out.open(encoding="utf-8", errors="replace") as f:
        for line in f:
            if line.startswith(("fn=", "cfn=")):
                found = re.match(r"c?fn=\((\d+)\)(?: (.*))?", line.strip())
                if found is not None:
                    if found.group(2):
                        names[found.group(1)] = found.group(2)
                    if line.startswith("cfn="):
                        callee = found.group(1)
            elif line.startswith("calls="):
                counts[callee] += int(line.split()[0][len("calls=") :])
    by_name: Counter[str] = Counter()
    for key, count in counts.items():
        by_name[names.get(key, key)] += count
    return by_name


def measure(path: str, calls: int, canned: bool) -> dict[str, float]:
    """Run ``path``'s calls under callgrind; per call: ``instructions``, ``allocations``, ``tracked``."""
    with tempfile.TemporaryDirectory(prefix="keen-grind-") as tmp:
        out = Path(tmp) / "callgrind.out"
        command = [
            "valgrind",
            "--tool=callgrind",
            "--instr-atstart=no",
            "--dump-instr=no",
            f"--callgrind-out-file={out}",
            sys.executable,
            __file__,
            "--child",
            path,
            "--calls",
            str(calls),
            *(["--canned"] if canned else []),
        ]
        run = subprocess.run(command, capture_output=True, text=True, check=False)
        collected = re.search(r"Collected : (\d+)", run.stderr)
        if run.returncode != 0 or collected is None:
            raise RuntimeError(f"{path}: valgrind failed ({run.returncode}):\n{run.stderr[-2000:]}")
        counts = _call_counts(out)
    figures = {"instructions": int(collected.group(1)) / calls}
    figures.update({key: counts[name] / calls for key, name in _COUNTED.items()})
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description="Instructions and allocations per call under callgrind.")
    parser.add_argument("--calls", type=int, default=300, help="calls counted per path (default 300)")
    parser.add_argument(
        "--paths", default=",".join(PATHS), help="comma-separated: sdk, manager, gateway, serve"
    )
    parser.add_argument(
        "--canned", action="store_true", help="tools/call answered at once (Keen's code alone)"
    )
    parser.add_argument("--child", choices=PATHS, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        anyio.run(_child, args.child, args.calls, args.canned)
        return
    if shutil.which("valgrind") is None or shutil.which("callgrind_control") is None:
        sys.exit("call_grind.py needs valgrind (callgrind and callgrind_control) on PATH")
    paths = [p for p in args.paths.split(",") if p]
    if unknown := [p for p in paths if p not in PATHS]:
        sys.exit(f"unknown paths {unknown}; pick from {PATHS}")
    figures = {path: measure(path, args.calls, args.canned) for path in paths}
    base = figures.get("sdk", {}).get("instructions")

    def row(path: str) -> str:
        fig = figures[path]
        # With tools/call canned the SDK's path is next to nothing: no ratio to it then.
        ratio = f"  x{fig['instructions'] / base:.3f}" if base and path != "sdk" and not args.canned else ""
        return (
            f"{fig['instructions'] / 1000:,.1f} K instructions{ratio}; "
            f"{fig['allocations']:.0f} allocated, {fig['tracked']:.0f} tracked by the collector"
        )

    print_block(
        "Keen instructions per call (bench/call_grind.py)",
        [
            (
                "server / tool",
                f"demo over stdio / {TOOL}" + ("; tools/call answered at once" if args.canned else ""),
            ),
            ("calls", f"{args.calls} per path, under callgrind (client process only)"),
            *((name, row(name)) for name in paths),
        ],
    )


if __name__ == "__main__":
    main()
