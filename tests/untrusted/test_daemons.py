"""A server that double-forks a daemon does not leave it running (Linux).

The hostile server forks, calls ``setsid`` and forks again; the daemon ignores SIGTERM,
SIGHUP and SIGINT and its stdin. Stopping the server's process group (what the SDK does)
cannot reach it, and without a subreaper the kernel hands it to PID 1. Keen is a child
subreaper, so the daemon is re-parented to Keen, and stopping the server stops it too:
after ``keen mcp call`` and ``keen chat -p`` exit, and when ``keen serve`` is stopped.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from helpers.hostile import hostile_entry, keen_cli
from helpers.loopback import alive, wait_until
from helpers.serve import KeenServeProcess

pytestmark = [
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_CHILD_SUBREAPER is Linux's"),
    pytest.mark.e2e,
]


@contextmanager
def _daemonizing_home(tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    """A KEEN_HOME whose one server ``h`` daemonizes at start; kills a surviving daemon after."""
    home = tmp_path / "keen-home"
    (home / "mcp").mkdir(parents=True)
    pidfile = tmp_path / "daemon.pid"
    spec = {"tools": [{"name": "ok", "inputSchema": {"type": "object"}}], "daemon_pidfile": str(pidfile)}
    config = {"version": 1, "servers": {"h": hostile_entry(tmp_path / "spec.json", spec)}}
    (home / "mcp" / "configs.json").write_text(json.dumps(config))
    try:
        yield home, pidfile
    finally:
        if pidfile.exists() and alive(pid := int(pidfile.read_text())):
            os.kill(pid, signal.SIGKILL)


def _daemon(pidfile: Path) -> int:
    assert wait_until(pidfile.exists, 30), "the server never daemonized"
    return int(pidfile.read_text())


@pytest.mark.parametrize("front", ["call", "chat"])
def test_the_daemon_is_stopped_with_the_server(tmp_path: Path, front: str) -> None:
    with _daemonizing_home(tmp_path) as (home, pidfile):
        if front == "call":
            run = keen_cli("mcp", "call", "h", "ok", "--yes", keen_home=home)
        else:
            script = tmp_path / "answers.jsonl"
            script.write_text(json.dumps({"content": "nothing to do"}) + "\n")
            run = keen_cli("chat", "-p", "hi", "--model", f"scripted:{script}", "--yes", keen_home=home)
        assert run.code == 0, str(run)
        daemon = _daemon(pidfile)
        assert wait_until(lambda: not alive(daemon), 5), "the server's daemon outlived keen"


def test_keen_serve_stops_the_daemon_when_it_stops(tmp_path: Path) -> None:
    with _daemonizing_home(tmp_path) as (home, pidfile), KeenServeProcess(home) as proc:
        daemon = _daemon(pidfile)
        assert alive(daemon)
        proc.stop()
        assert proc.proc is not None and proc.proc.returncode == 143, proc.log()  # SIGTERM
        assert wait_until(lambda: not alive(daemon), 5), "the server's daemon outlived keen serve"


_REAPER = """
import os, subprocess, sys, time
from keen.mcp.connection import _orphans

assert _orphans.become_subreaper()
ours = subprocess.Popen(["true"], start_new_session=True)  # Keen's own, waited for later
mine = subprocess.Popen(["true"])
# A child that double-forks a short-lived grandchild into a session of its own, then exits.
subprocess.run([sys.executable, "-c", "import os\\nif os.fork() == 0:\\n os.setsid()\\n if os.fork() == 0:\\n  os._exit(0)\\n os._exit(0)\\nos.wait()"], check=True)
deadline = time.monotonic() + 10
while time.monotonic() < deadline:
    zombies = [c for c in _orphans._children() if c.state == "Z"]
    if len(zombies) == 3:
        break
    time.sleep(0.02)
print(len(zombies), _orphans.reap_adopted(), ours.wait(), mine.wait(), flush=True)
"""


def test_adopted_zombies_are_reaped_and_keens_own_children_are_left_to_their_owner() -> None:
    """The orphan exits by itself: as Keen's adopted child it would stay a zombie unless
    Keen reaps it, and Keen must not reap the children it waits for itself."""
    done = subprocess.run([sys.executable, "-c", _REAPER], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["3", "1", "0", "0"], done.stdout
