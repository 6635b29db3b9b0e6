"""CLI start-time benchmark: commands that touch no MCP server, against a bare interpreter.

``keen --version``, ``keen skills list``, ``keen skills show NAME`` and ``keen prompt``
read only local files, so their start is import cost plus a little work. Each is run
``--runs`` times as a fresh process (the installed ``keen`` entry point, in a temporary
KEEN_HOME holding one user skill and one generated ``mcp:`` skill); the figure is the
median wall time, shown with the minimum, the median CPU time of the process (user + system:
on a shared machine wall time also measures waiting for a core, CPU time does not) and
beside ``python -c pass`` (the floor). The target is <= 150 ms per command. The module count of ``import keen.paths`` and whether
``import keen.skills`` loads the MCP SDK are printed too (the layering the package map
promises, seen at run time).

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


def _time(argv: list[str], runs: int) -> tuple[list[float], list[float]]:
    """Wall and CPU seconds of ``runs`` fresh processes."""
    wall: list[float] = []
    cpu: list[float] = []
    for _ in range(runs):
        cpu0 = _cpu()
        started = time.perf_counter()
        done = subprocess.run(argv, capture_output=True, check=False)
        wall.append(time.perf_counter() - started)
        cpu.append(_cpu() - cpu0)
        if done.returncode != 0:
            raise SystemExit(f"cli_start: {' '.join(argv)} exited {done.returncode}: {done.stderr.decode()}")
    return wall, cpu


def _modules(statement: str) -> tuple[int, bool]:
    code = f"import sys; {statement}; print(len(sys.modules), 'mcp' in sys.modules)"
    done = subprocess.run([PYTHON, "-c", code], capture_output=True, text=True, check=True)
    count, sdk = done.stdout.split()
    return int(count), sdk == "True"


def bench(runs: int) -> dict[str, Any]:
    """Median and minimum seconds per command, and the import facts."""
    with keen_home() as home:
        _seed(home)
        for argv in COMMANDS.values():  # warm the OS file cache and .pyc files
            _time(argv, 1)
        times = {label: _time(argv, runs) for label, argv in COMMANDS.items()}
    paths_count, _ = _modules("import keen.paths")
    bare_count, _ = _modules("pass")
    skills_count, skills_sdk = _modules("import keen.skills")
    return {
        "runs": runs,
        "commands": {
            label: {"median_s": median(wall), "min_s": min(wall), "cpu_median_s": median(cpu)}
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
    floor = figures["commands"]["python -c pass"]["median_s"]
    rows = []
    for label, f in figures["commands"].items():
        line = (
            f"{f['median_s'] * 1000:6.1f} ms median, {f['min_s'] * 1000:6.1f} ms min, "
            f"{f['cpu_median_s'] * 1000:6.1f} ms CPU"
        )
        if label != "python -c pass":
            line += f", +{(f['median_s'] - floor) * 1000:.0f} ms over python  {verdict(f['median_s'] <= TARGET_S)}"
        rows.append((label, line))
    rows += [(label, str(value)) for label, value in figures["modules"].items()]
    print_block(
        f"CLI start ({figures['runs']} runs each, target <= {TARGET_S * 1000:.0f} ms)",
        rows,
        [f"python {sys.version.split()[0]}, load average {os.getloadavg()[0]:.2f}"],
    )


if __name__ == "__main__":
    main()
