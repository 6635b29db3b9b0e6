"""Where the suite's CPU goes, by test file: ``TESTS_CPU_LOG=DIR pytest -p helpers.cputime ...``,
then ``python tests/helpers/cputime.py DIR``.

Each pytest process (an xdist worker, or pytest alone) writes to ``DIR`` the CPU of each
test: its own and that of the child processes it waited for (``getrusage``), measured
around the test's whole protocol, so a module-scoped fixture counts in the file of the test
that set it up or tore it down. Its collection is one more line. The tests' fork server
(``tests/helpers/forkserver.py``) writes the CPU of each child it forked (an xdist worker
included, whose lines here are its own), with the test it was started for when the process
that asked passed pytest's variables on, else the worker and the time, which name the test
running on that worker then. Processes that leave their parent (a tmux server) are counted
by neither: measure the whole run in a CPU cgroup for the total.
"""

from __future__ import annotations

import json
import os
import resource
import sys
import time
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

__all__ = ["report"]

_LOG = os.environ.get("TESTS_CPU_LOG")
_rows: list[dict[str, Any]] = []


def _cpu() -> float:
    return _own() + _children()


def _own() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    return own.ru_utime + own.ru_stime


def _children() -> float:
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return children.ru_utime + children.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_collection(session: pytest.Session) -> Iterator[None]:
    before = _cpu()
    yield
    _rows.append({"test": "(collection)", "file": "(collection)", "cpu": _cpu() - before})


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    start, own, children = time.time(), _own(), _children()
    yield
    children = _children() - children
    _rows.append(
        {
            "test": item.nodeid,
            "file": item.nodeid.split("::")[0],
            "cpu": _own() - own + children,
            "children": children,
            "start": start,
            "end": time.time(),
            "worker": os.environ.get("PYTEST_XDIST_WORKER", ""),
        }
    )


def pytest_sessionfinish(session: pytest.Session) -> None:
    if _LOG is None:
        return
    name = os.environ.get("PYTEST_XDIST_WORKER", "main")
    rows = [*_rows, {"test": "(process total)", "file": "(process total)", "cpu": _cpu()}]
    with open(os.path.join(_LOG, f"pytest-{name}-{os.getpid()}.jsonl"), "w") as log:
        log.writelines(json.dumps(row) + "\n" for row in rows)


def report(folder: Path, top: int = 30) -> str:
    """The files by CPU-s (their tests' processes and the fork server's children for them)."""
    tests: list[dict[str, Any]] = []
    totals: dict[str, float] = defaultdict(float)
    for path in folder.glob("pytest-*.jsonl"):
        for row in map(json.loads, path.read_text().splitlines()):
            if "start" in row:
                tests.append(row)
            else:
                totals[row["file"]] += row["cpu"]
    own: dict[str, float] = defaultdict(float)
    waited: dict[str, float] = defaultdict(float)
    forked: dict[str, float] = defaultdict(float)
    kinds: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    by_id = {row["test"]: row["file"] for row in tests}
    for row in tests:
        own[row["file"]] += row["cpu"]
        waited[row["file"]] += row.get("children", 0.0)
    unattributed = 0.0
    workers = {
        int(path.stem.rsplit("-", 1)[1]): path.stem.split("-")[1] for path in folder.glob("pytest-*.jsonl")
    }
    children: dict[int, dict[str, Any]] = {}
    for path in folder.glob("forkserver-*.jsonl"):
        for row in map(json.loads, path.read_text().splitlines()):
            if not (row["script"] == "-c" and "sys.stdin.readline()" in row["args"][0]):
                children[row["pid"]] = row  # not an xdist worker: its own lines count it

    def on_worker(worker: str, when: float) -> str | None:
        for test in tests:
            if test["worker"] == worker and test["start"] <= when <= test["end"]:
                return test["file"]
        return None

    def file_of(row: dict[str, Any], depth: int = 0) -> str | None:
        if row["test"]:
            return by_id.get(row["test"].rsplit(" (", 1)[0])
        for parent in row["parents"]:
            if parent in workers:
                return on_worker(workers[parent], row["start"])
            if parent in children and depth < 8:
                return file_of(children[parent], depth + 1)
        if row["worker"]:
            return on_worker(row["worker"], row["start"])
        return None

    for row in children.values():
        file = file_of(row)
        if file is None:
            unattributed += row["cpu"]
            continue
        forked[file] += row["cpu"]
        script = row["script"] + (" " + row["args"][0] if row["script"] == "keen" and row["args"] else "")
        kinds[file][script].append(row["cpu"])
    files = sorted(own.keys() | forked.keys(), key=lambda f: -(own[f] + forked[f]))
    lines = [
        f"{'CPU-s':>7} {'tests':>7} {'(their':>7} {'forked':>7}  file  (forked children: what, count, CPU-s)",
        f"{'':>7} {'':>7} {'procs)':>7}",
    ]
    for file in files[:top]:
        what = ", ".join(
            f"{name} x{len(cpus)} {sum(cpus):.1f}"
            for name, cpus in sorted(kinds[file].items(), key=lambda kv: -sum(kv[1]))[:3]
        )
        lines.append(
            f"{own[file] + forked[file]:7.1f} {own[file]:7.1f} {waited[file]:7.1f} {forked[file]:7.1f}  {file}  {what}"
        )
    all_forked = [cpu for k in kinds.values() for cpus in k.values() for cpu in cpus]
    by_kind: dict[str, list[float]] = defaultdict(list)
    for k in kinds.values():
        for name, cpus in k.items():
            by_kind[name].extend(cpus)
    lines.append(
        f"files: {len(files)}; tests' processes {sum(own.values()):.1f} CPU-s (the processes they started"
        f" and waited for: {sum(waited.values()):.1f}), forked children"
        f" {sum(all_forked):.1f} CPU-s in {len(all_forked)} runs, unattributed forked {unattributed:.1f},"
        f" collections {totals['(collection)']:.1f},"
        f" pytest processes in total {totals['(process total)']:.1f}"
    )
    lines.append(
        "forked children by kind: "
        + ", ".join(
            f"{name} x{len(cpus)} {sum(cpus):.1f}"
            for name, cpus in sorted(by_kind.items(), key=lambda kv: -sum(kv[1]))[:12]
        )
    )
    return "\n".join(lines)


if __name__ == "__main__":
    print(report(Path(sys.argv[1]), int(sys.argv[2]) if len(sys.argv) > 2 else 30))
