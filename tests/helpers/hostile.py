"""Helpers for the untrusted-server tests: a hostile raw JSON-RPC stdio server, a loopback
listener that counts connections and never answers, the CLI in a subprocess, and a grep
over every file under a directory.

``tests/servers/hostile_stdio.py`` documents the spec keys a hostile server takes.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from helpers import cli as _cli
from helpers import server_script

__all__ = [
    "KEEN",
    "CliRun",
    "Listener",
    "counting_listener",
    "files_containing",
    "hostile_entry",
    "keen_cli",
    "keen_env",
    "keen_here",
]

KEEN: list[str] = _cli.KEEN
"""``keen`` as a process (forked from a warm process: see ``tests/helpers/cli.py``)."""


def hostile_entry(spec_path: Path, spec: dict[str, Any], **extra: Any) -> dict[str, Any]:
    """Write ``spec`` to ``spec_path`` and return a configs.json stdio entry running the hostile server."""
    spec_path.write_text(json.dumps(spec), encoding="utf-8")
    entry: dict[str, Any] = {
        "transport": "stdio",
        "command": sys.executable,
        "args": [str(server_script("hostile_stdio")), str(spec_path)],
    }
    entry.update(extra)
    return entry


@dataclass
class Listener:
    """A TCP listener on 127.0.0.1 that accepts, counts and holds connections, never answering."""

    port: int
    connections: int = 0
    _held: list[socket.socket] = field(default_factory=lambda: list[socket.socket]())

    def url(self, path: str = "/schema.json") -> str:
        return f"http://127.0.0.1:{self.port}{path}"


@contextmanager
def counting_listener() -> Iterator[Listener]:
    """Yield a :class:`Listener`; any connection to it is counted (a fetch must count zero)."""
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    server.settimeout(0.1)
    listener = Listener(port=server.getsockname()[1])
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            listener.connections += 1
            listener._held.append(conn)

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield listener
    finally:
        stop.set()
        thread.join(5)
        for conn in listener._held:
            conn.close()
        server.close()


@dataclass(frozen=True)
class CliRun:
    args: tuple[str, ...]
    code: int
    stdout: str
    stderr: str

    @property
    def output(self) -> str:
        return self.stdout + self.stderr

    def __str__(self) -> str:
        return (
            f"keen {' '.join(self.args)} -> {self.code}\n--- stdout\n{self.stdout}\n--- stderr\n{self.stderr}"
        )


def keen_env(keen_home: Path, env: dict[str, str] | None = None) -> dict[str, str]:
    """The environment :func:`keen_cli` runs ``keen`` with."""
    full_env = {**os.environ, "KEEN_HOME": str(keen_home), "HOME": str(keen_home.parent), **(env or {})}
    full_env.pop("KEEN_DEBUG", None)
    return full_env


def keen_cli(
    *args: str,
    keen_home: Path,
    env: dict[str, str] | None = None,
    timeout: float = 60,
    cwd: Path | None = None,
) -> CliRun:
    """Run the ``keen`` console script with ``KEEN_HOME`` (stdin closed, no terminal) in ``cwd``."""
    proc = subprocess.run(
        [*KEEN, *args],
        env=keen_env(keen_home, env),
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=timeout,
        check=False,
    )
    return CliRun(
        tuple(args),
        proc.returncode,
        proc.stdout.decode("utf-8", "replace"),
        proc.stderr.decode("utf-8", "replace"),
    )


def keen_here(*args: str, keen_home: Path) -> CliRun:
    """Run ``keen ARGS`` in this process (typer's ``CliRunner``, the same ``app`` the console
    script runs; stdin is not a terminal) with ``KEEN_HOME``, ``HOME`` as :func:`keen_cli`
    sets them: for what a command says and writes, where its process is not under test. It
    costs no process, and the search model and vector cache are the worker's (built once)."""
    run = _cli.Home(keen_home, keen_home.parent).keen(*args)
    return CliRun(tuple(args), run.code, run.stdout, run.stderr)


def files_containing(root: Path, needle: str) -> list[Path]:
    """Every regular file under ``root`` (symlinks followed once) whose bytes contain ``needle``."""
    found: list[Path] = []
    raw = needle.encode("utf-8")
    for dirpath, _dirs, files in os.walk(root, followlinks=False):
        for name in files:
            path = Path(dirpath) / name
            try:
                if raw in path.read_bytes():
                    found.append(path)
            except OSError:
                continue
    return found
