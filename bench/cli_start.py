"""CLI start-time benchmark: commands that touch no MCP server, against a bare interpreter.

``keen --version``, ``keen skills list``, ``keen skills show NAME`` and ``keen prompt``
read only local files, so their start is import cost plus a little work. Each is run
``--runs`` times as a fresh process (the installed ``keen`` entry point, in a temporary
KEEN_HOME holding one user skill and one generated ``mcp:`` skill), the commands taken in
turn within each round so a change in the machine's load touches them alike. Each row
prints the wall time and the CPU time of the process (user + system: on a shared machine
wall time also measures waiting for a core, CPU time does not) as min / median / max over
the runs, the median CPU as a ratio to ``python -c pass`` measured in the same run (the
floor) and the CPU beyond it; the load average before and after closes the block. The
target is <= 150 ms of wall time per command (median). The module count of ``import keen.paths`` and whether
``import keen.skills`` loads the MCP SDK are printed too (the layering the package map
promises, seen at run time).

Children run with Python's bytecode cache on (``PYTHONDONTWRITEBYTECODE`` removed from their
environment), as an installed Keen runs: where it is set, every run compiled the 24 Keen
modules ``keen skills list`` imports from source again (441 million instructions against
307 with their bytecode), which is not Keen's cost.

Usage: ``python bench/cli_start.py [--runs 15] [--json]``
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from _common import PYTHON, keen_home, median, print_block, verdict

__all__ = ["bench", "main"]

TARGET_S = 0.150
KEEN = shutil.which("keen", path=str(Path(PYTHON).parent)) or "keen"
COMMANDS: dict[str, list[str]] = {
    "python -c pass": [PYTHON, "-c", "pass"],
    "keen --version": [KEEN, "--version"],
    "keen skills list": [KEEN, "skills", "list"],
    "keen skills show notes": [KEEN, "skills", "show", "notes"],
    "keen prompt": [KEEN, "prompt"],
}


def _seed(home: Path) -> None:
    """One user skill and one generated-looking MCP skill (with its marker file)."""
    notes = home / "skills" / "notes"
    notes.mkdir(parents=True)
    (notes / "SKILL.md").write_text("---\nname: notes\ndescription: Keep short notes.\n---\nWrite notes.\n")
    mcp = home / "skills" / "mcp:demo"
    mcp.mkdir()
    (mcp / "SKILL.md").write_text(
        "---\nname: mcp:demo\ndescription: Time and unit conversion tools.\n---\n# demo\n"
    )
    (mcp / ".keen-generated-mcp.json").write_text(json.dumps({"managed_by": "keen-mcp", "server": "demo"}))


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _env() -> dict[str, str]:
    """The children's environment: this one (its KEEN_HOME) with the bytecode cache on."""
    return {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def _time(argv: list[str], runs: int) -> tuple[list[float], list[float]]:
    """Wall and CPU seconds of ``runs`` fresh processes."""
    wall: list[float] = []
    cpu: list[float] = []
    for _ in range(runs):
        cpu0 = _cpu()
        started = time.perf_counter()
        done = subprocess.run(argv, capture_output=True, check=False, env=_env())
        wall.append(time.perf_counter() - started)
        cpu.append(_cpu() - cpu0)
        if done.returncode != 0:
            raise SystemExit(f"cli_start: {' '.join(argv)} exited {done.returncode}: {done.stderr.decode()}")
    return wall, cpu


def _modules(statement: str) -> tuple[int, bool]:
    code = f"import sys; {statement}; print(len(sys.modules), 'mcp' in sys.modules)"
    done = subprocess.run([PYTHON, "-c", code], capture_output=True, text=True, check=True, env=_env())
    count, sdk = done.stdout.split()
    return int(count), sdk == "True"


def _stats(values: list[float]) -> dict[str, float]:
    return {"min": min(values), "median": median(values), "max": max(values)}


def bench(runs: int) -> dict[str, Any]:
    """Wall and CPU seconds per command (min, median, max), the load, and the import facts."""
    load_before = os.getloadavg()
    with keen_home() as home:
        _seed(home)
        for argv in COMMANDS.values():  # warm the OS file cache and .pyc files
            _time(argv, 1)
        times: dict[str, tuple[list[float], list[float]]] = {label: ([], []) for label in COMMANDS}
        for _ in range(runs):  # interleaved: each round runs every command once
            for label, argv in COMMANDS.items():
                wall, cpu = _time(argv, 1)
                times[label][0].extend(wall)
                times[label][1].extend(cpu)
    paths_count, _ = _modules("import keen.paths")
    bare_count, _ = _modules("pass")
    skills_count, skills_sdk = _modules("import keen.skills")
    return {
        "runs": runs,
        "load_average_before": load_before,
        "load_average_after": os.getloadavg(),
        "cpus": os.cpu_count(),
        "commands": {
            label: {
                "median_s": median(wall),
                "min_s": min(wall),
                "cpu_median_s": median(cpu),
                "wall_s": _stats(wall),
                "cpu_s": _stats(cpu),
            }
            for label, (wall, cpu) in times.items()
        },
        "modules": {
            "python -c pass": bare_count,
            "import keen.paths": paths_count,
            "import keen.skills": skills_count,
            "import keen.skills loads the MCP SDK": skills_sdk,
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    figures = bench(args.runs)
    if args.json:
        print(json.dumps(figures, indent=2))
        return
    floor = figures["commands"]["python -c pass"]["cpu_s"]["median"]

    def spread(f: dict[str, float]) -> str:
        return f"{f['min'] * 1000:6.1f} / {f['median'] * 1000:6.1f} / {f['max'] * 1000:6.1f}"

    rows = []
    for label, f in figures["commands"].items():
        line = f"wall {spread(f['wall_s'])} ms, CPU {spread(f['cpu_s'])} ms"
        if label != "python -c pass":
            cpu = f["cpu_s"]["median"]
            line += (
                f", CPU {cpu / floor:4.1f}x the interpreter, +{(cpu - floor) * 1000:.0f} ms"
                f"  {verdict(f['median_s'] <= TARGET_S)}"
            )
        rows.append((label, line))
    rows += [(label, str(value)) for label, value in figures["modules"].items()]
    before, after = figures["load_average_before"], figures["load_average_after"]
    print_block(
        f"CLI start (min / median / max of {figures['runs']} runs each, interleaved; target <= "
        f"{TARGET_S * 1000:.0f} ms wall, median)",
        rows,
        [
            f"python {sys.version.split()[0]}, {figures['cpus']} CPUs, load average (1/5/15 min) "
            f"{before[0]:.2f} {before[1]:.2f} {before[2]:.2f} before, {after[0]:.2f} {after[1]:.2f} {after[2]:.2f} after"
        ],
    )


if __name__ == "__main__":
    main()
