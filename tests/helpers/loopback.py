"""Servers started on 127.0.0.1 for the tests and the benchmarks: a free port, waiting until
a process listens, stopping it (SIGTERM, then SIGKILL), whether a process is still alive,
waiting for a condition another process brings about, and Debian's ``redis-server``.

Free of pytest, so ``bench/serve_load.py`` imports it too (it puts ``tests/`` on
``sys.path``). Failures raise ``RuntimeError`` with what the process logged.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

__all__ = ["alive", "free_port", "redis_server", "stop", "wait_listening", "wait_until"]


def alive(pid: int) -> bool:
    """Whether process ``pid`` still runs. A zombie (state Z in ``/proc/<pid>/stat``, read
    after the last ``)`` so a name with spaces cannot shift it) is dead: it only waits to be
    reaped. Without ``/proc``, ``kill(pid, 0)`` answers."""
    stat = Path(f"/proc/{pid}/stat")
    if stat.parent.parent.exists():
        try:
            return stat.read_text().rsplit(")", 1)[1].split()[0] != "Z"
        except (OSError, IndexError):
            return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def wait_until(predicate: Callable[[], bool], timeout: float) -> bool:
    """Poll ``predicate`` (every 50 ms) until it holds or ``timeout`` seconds pass; its last
    answer. For what another process does (a file it writes, a process it stops), where
    there is no event to wait on."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()


def free_port() -> int:
    """A port nobody listens on right now (bind 0, read it, release it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_listening(
    port: int,
    proc: subprocess.Popen[bytes],
    what: str,
    *,
    timeout: float = 30.0,
    log: Callable[[], str] = str,
) -> None:
    """Return once something accepts connections on 127.0.0.1:``port``. Raises RuntimeError
    (with ``log()``, e.g. the process's output) when ``proc`` exits first or ``timeout``
    seconds pass."""
    deadline = time.monotonic() + timeout
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with {proc.returncode}: {log()}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what} did not listen on 127.0.0.1:{port} within {timeout:g} s: {log()}")
        time.sleep(0.05)


def stop(proc: subprocess.Popen[bytes], *, group: bool = False, grace: float = 10.0) -> None:
    """SIGTERM ``proc`` (its whole process group when ``group``: it was started with
    ``start_new_session=True``), SIGKILL after ``grace`` seconds; returns once it is gone."""
    if proc.poll() is not None:
        return

    def send(sig: int) -> None:
        with contextlib.suppress(ProcessLookupError):
            if group:
                os.killpg(proc.pid, sig)
            else:
                proc.send_signal(sig)

    send(signal.SIGTERM)
    try:
        proc.wait(grace)
    except subprocess.TimeoutExpired:
        send(signal.SIGKILL)
        proc.wait(10)


@contextlib.contextmanager
def redis_server(workdir: Path) -> Iterator[str]:
    """A throwaway ``redis-server`` (Debian's package; ``make test`` and ``make bench``
    install it when missing) on a free port, no persistence. Yields
    ``redis://127.0.0.1:<port>/0``; stopped on exit."""
    binary = shutil.which("redis-server") or "/usr/bin/redis-server"
    if not Path(binary).exists():
        raise RuntimeError(
            "redis-server is not installed; run `make test` or `make bench` (they install Debian's redis-server)"
        )
    port = free_port()
    proc = subprocess.Popen(
        [
            *(binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"),
            *("--dir", str(workdir), "--daemonize", "no", "--loglevel", "warning"),
        ],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_listening(port, proc, "redis-server", timeout=15)
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        stop(proc)
