"""The server whose tools change (``tests/servers/changing_server.py``) as a config entry over
stdio, or as a real process on a loopback port (streamable HTTP), plus bounded waits.

Typical use::

    with changing_http(tmp_path) as url:        # http://127.0.0.1:<port>/mcp
        write_config({"changing": {"url": url}})
    entry = changing_stdio("--legacy")          # Keen starts it
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio

from helpers.forkserver import script_args
from helpers.loopback import free_port, stop, wait_listening

__all__ = ["SCRIPT", "changing_http", "changing_stdio", "wait_until"]

SCRIPT = Path(__file__).resolve().parent.parent / "servers" / "changing_server.py"


def changing_stdio(*args: str) -> dict[str, Any]:
    """A configs.json entry that runs the changing server over stdio with ``args``."""
    return {"transport": "stdio", "command": sys.executable, "args": script_args(str(SCRIPT), "stdio", *args)}


@contextmanager
def changing_http(log_dir: Path, *args: str, timeout: float = 30.0, port: int | None = None) -> Iterator[str]:
    """Run the changing server over streamable HTTP on 127.0.0.1 (``port``, default a free
    one: pass the same port again to restart it); yields its ``/mcp`` URL and stops it
    (terminate, then kill) on exit. Forked from the worker's warm process
    (``helpers.forkserver``): the server is what the tests talk to, not a process under test."""
    port = port or free_port()
    log = log_dir / f"changing-{port}.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, *script_args(str(SCRIPT), "http", "--port", str(port), *args)],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        wait_listening(port, proc, "changing server", timeout=timeout, log=log.read_text)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        stop(proc)


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
