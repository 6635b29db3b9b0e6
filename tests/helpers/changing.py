"""The server whose tools change (``tests/servers/changing_server.py``) as a config entry over
stdio, or as a real process on a loopback port (streamable HTTP), plus bounded waits.

Typical use::

    with changing_http(tmp_path) as url:        # http://127.0.0.1:<port>/mcp
        write_config({"changing": {"url": url}})
    entry = changing_stdio("--legacy")          # Keen starts it
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio

__all__ = ["SCRIPT", "changing_http", "changing_stdio", "wait_until"]

SCRIPT = Path(__file__).resolve().parent.parent / "servers" / "changing_server.py"


def changing_stdio(*args: str) -> dict[str, Any]:
    """A configs.json entry that runs the changing server over stdio with ``args``."""
    return {"transport": "stdio", "command": sys.executable, "args": [str(SCRIPT), "stdio", *args]}


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextmanager
def changing_http(log_dir: Path, *args: str, timeout: float = 30.0) -> Iterator[str]:
    """Run the changing server over streamable HTTP on 127.0.0.1; yields its ``/mcp`` URL and
    stops it (terminate, then kill) on exit."""
    port = _free_port()
    log = log_dir / f"changing-{port}.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, str(SCRIPT), "http", "--port", str(port), *args],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + timeout
        while True:
            if proc.poll() is not None:
                raise AssertionError(f"changing server exited with {proc.returncode}: {log.read_text()}")
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    break
            except OSError as exc:
                if time.monotonic() > deadline:
                    raise AssertionError(
                        f"changing server did not listen within {timeout}s: {log.read_text()}"
                    ) from exc
                time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


async def wait_until(check: Callable[[], Any], what: str, timeout: float = 10.0) -> Any:
    """Poll ``check()`` every 20 ms until it returns something true; return that. Fails with
    ``what`` after ``timeout`` seconds (a generous bound, never a speed assertion)."""
    with anyio.move_on_after(timeout):
        while True:
            found = check()
            if found:
                return found
            await anyio.sleep(0.02)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")
