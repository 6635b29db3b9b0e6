"""Running ``keen`` as a user would, for the CLI tests: in-process or as a real process.

``Home.keen(...)`` runs the command in this process with typer's ``CliRunner`` (the same
``app`` the console script runs, env and stdin isolated: stdin is not a terminal), which
costs no interpreter start. ``Home.keen_process(...)`` runs the installed console script
as its own process (:data:`KEEN`: forked from the worker's warm process, so it skips the
imports), so the entry point itself, its error boundary and real process exits stay
covered; :data:`REAL_KEEN` starts a new interpreter where that start is under test.
"""

from __future__ import annotations

import json
import logging
import os
import select
import subprocess
import sys
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from helpers.forkserver import forked

__all__ = ["KEEN", "REAL_KEEN", "FreshRun", "Home", "Run", "fresh_keen", "make_home", "read_until"]

_SCRIPT = Path(sys.executable).with_name("keen")
REAL_KEEN: list[str] = (
    [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-c", "from keen.cli import main; main()"]
)
"""The console script started as a new interpreter: for tests of its own start (a terminal
needs none: the fork server's launcher hands the child its terminal, ``helpers.chat_tmux``)."""
KEEN: list[str] = forked(str(_SCRIPT)) if _SCRIPT.exists() else REAL_KEEN
"""The console script run in a fork of a warm process (``tests/helpers/forkserver.py``):
the same script, streams, environment, signals and exit status, without the imports."""
RUN_TIMEOUT = 60


@dataclass(frozen=True)
class Run:
    args: tuple[str, ...]
    code: int
    stdout: str
    stderr: str

    def json(self) -> Any:
        return json.loads(self.stdout)

    def __str__(self) -> str:
        return (
            f"keen {' '.join(self.args)} -> {self.code}\n--- stdout\n{self.stdout}\n--- stderr\n{self.stderr}"
        )


@dataclass(frozen=True)
class Home:
    """A KEEN_HOME (and a HOME that must stay untouched) for CLI runs."""

    keen_home: Path
    home: Path

    @property
    def config_path(self) -> Path:
        return self.keen_home / "mcp" / "configs.json"

    def write(self, servers: dict[str, Any]) -> None:
        self.config_path.parent.mkdir(parents=True, exist_ok=True)
        self.config_path.write_text(json.dumps({"version": 1, "servers": servers}, indent=2))

    def _ours(self, columns: int = 250) -> dict[str, str]:
        return {
            "KEEN_HOME": str(self.keen_home),
            "HOME": str(self.home),
            "COLUMNS": str(columns),
            "NO_COLOR": "1",
        }

    def env(self, columns: int = 250) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("KEEN_")}
        env.update(self._ours(columns))
        return env

    def keen(self, *args: str, columns: int = 250, env: dict[str, str] | None = None) -> Run:
        """Run ``keen ARGS`` in this process (CliRunner), on a terminal ``columns`` wide, with
        ``env`` on top of this home's variables (every other ``KEEN_*`` unset)."""
        from keen.cli import _common, app

        unset: dict[str, str | None] = {k: None for k in os.environ if k.startswith("KEEN_")}
        root = logging.getLogger()
        handlers, level = root.handlers[:], root.level
        # The consoles read COLUMNS and NO_COLOR when built: build them for this run's env.
        for console in (_common.out, _common.err):
            console._console = None  # type: ignore[attr-defined]
        try:
            result = CliRunner().invoke(app, list(args), env={**unset, **self._ours(columns), **(env or {})})
        finally:
            root.handlers[:], root.level = handlers, level  # setup_logging replaced them
        run = Run(tuple(args), result.exit_code, result.stdout, result.stderr)
        if result.exception is not None and not isinstance(result.exception, SystemExit):
            raise AssertionError(f"{run}\nraised {result.exception!r}") from result.exception
        return run

    def keen_many(self, *commands: Sequence[str]) -> list[Run]:
        """Several in-process runs, one after the other (CliRunner swaps sys.stdout)."""
        return [self.keen(*args) for args in commands]

    def keen_process(
        self,
        *args: str,
        env: dict[str, str] | None = None,
        cwd: Path | None = None,
        stdin: str | None = None,
        timeout: float = RUN_TIMEOUT,
    ) -> Run:
        """Run the installed ``keen`` console script in a subprocess, with ``env`` on top of
        this home's variables, in ``cwd``, given ``stdin`` (closed when ``None``)."""
        proc = subprocess.run(
            [*KEEN, *args],
            env={**self.env(), **(env or {})},
            cwd=cwd,
            input=stdin,
            stdin=subprocess.DEVNULL if stdin is None else None,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        run = Run(tuple(args), proc.returncode, proc.stdout, proc.stderr)
        assert "Traceback" not in run.stderr + run.stdout, str(run)
        assert "internal error" not in run.stderr, str(run)
        return run

    def keen_processes(self, *commands: Sequence[str]) -> list[Run]:
        """Several console-script runs in parallel (each pays an interpreter start)."""
        with ThreadPoolExecutor(max_workers=3) as pool:
            return list(pool.map(lambda args: self.keen_process(*args), commands))


def make_home(root: Path) -> Home:
    home = Home(root / "keen-home", root / "user-home")
    home.keen_home.mkdir(parents=True)
    home.home.mkdir()
    return home


def read_until(fd: int, needle: bytes, timeout: float) -> bytes:
    """What a terminal (a pty's master ``fd``) shows until ``needle`` appears, at most ``timeout`` s."""
    seen = b""
    deadline = time.monotonic() + timeout
    while needle not in seen and time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.2)
        if ready:
            try:
                seen += os.read(fd, 4096)
            except OSError:
                break
    return seen


# The console script's entry point in a new interpreter (the fork server's children start
# with everything imported), reporting on its last stderr line its exit code, which of the
# watched modules it imported, and Keen's CLI modules.
_FRESH = """
import json, sys
from keen.cli import main
sys.argv = ["keen", *sys.argv[1:]]
try:
    main()
except SystemExit as exc:
    code = exc.code
else:
    code = 0
watched = ("typer", "rich", "mcp", "pydantic", "logging", "yaml")
cli = sorted(m for m in sys.modules if m.startswith("keen.cli."))
report = {"code": code, "loaded": [m for m in watched if m in sys.modules], "cli": cli}
print(json.dumps(report), file=sys.stderr)
"""


@dataclass(frozen=True)
class FreshRun:
    """What :func:`fresh_keen` saw: the exit code, which of typer, rich, mcp, pydantic,
    logging and yaml were imported, the ``keen.cli.*`` modules imported (sorted), and the
    output (stderr ends with the report line)."""

    code: int | str | None
    loaded: frozenset[str]
    cli: list[str]
    stdout: str
    stderr: str


def fresh_keen(env: dict[str, str], *args: str) -> FreshRun:
    """``keen ARGS`` through its entry point in a new interpreter, with ``env``: what a
    command imports can only be seen from a cold start."""
    done = subprocess.run(
        [sys.executable, "-c", _FRESH, *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    report = json.loads(done.stderr.strip().splitlines()[-1])
    return FreshRun(report["code"], frozenset(report["loaded"]), report["cli"], done.stdout, done.stderr)
