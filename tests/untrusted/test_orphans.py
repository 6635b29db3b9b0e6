"""No orphans: SIGTERM, SIGHUP and SIGKILL to ``keen`` mid-call.

The hostile server ignores SIGTERM, SIGHUP and SIGINT and keeps running after its stdin
closes: the worst case for a client. After SIGTERM (exit 143) and SIGHUP (exit 129) Keen
has closed the session and stopped the server; after SIGKILL the kernel's death signal
(Linux ``PR_SET_PDEATHSIG``) stops it.
"""

from __future__ import annotations

import json
import os
import pty
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import server_script
from helpers.cli import read_until
from helpers.forkserver import forked
from helpers.hostile import hostile_entry
from helpers.loopback import alive, wait_until
from keen._terminal import STILL_STOPPING
from keen.mcp.connection.spawn import _setpriv

pytestmark = [
    pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals"),
    pytest.mark.e2e,
    pytest.mark.slow_file,
]

_CODE = (
    "import sys\n"
    "from keen.mcp.connection import _stdio\n"
    "_stdio.PROCESS_TERMINATION_TIMEOUT = _stdio.FORCE_KILL_TIMEOUT = 0.2\n"
    "from keen.cli import main\n"
    "main()"
)
"""``keen``, with the waits of a server's stop lowered from 2 s each to 0.2 s: the server
here outwaits both (it ignores EOF and SIGTERM), so each test waited them out, 4 s, before
the SIGKILL that ends it. The escalation is the same, only shorter."""
REAL_KEEN = [sys.executable, "-c", _CODE]
"""``keen`` as a new interpreter: SIGKILL cannot be forwarded, so the process killed must
be keen itself for the kernel's death signal to be what stops its server."""
KEEN = forked("-c", _CODE)
"""``keen`` forked from the worker's warm process (``tests/helpers/forkserver.py``): keen's
signal handling and exit status are under test, not its interpreter's start (about 3 s of
CPU each). The process started is the launcher, which forwards SIGTERM and SIGHUP to keen
and ends with keen's exit status, keen on its standard streams (a terminal included)."""


def _default_sigint() -> None:
    # A shell's Ctrl-C reaches a foreground child with SIGINT's default disposition (a test
    # runner's worker may ignore it, and an ignored signal stays ignored across exec).
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _start_call(
    tmp_path: Path, keen: list[str] = KEEN, **more: object
) -> tuple[subprocess.Popen[bytes], int]:
    """``keen mcp call h hang`` (run by ``keen``) in flight against a server that ignores
    signals and EOF (``more``: more of the server's spec)."""
    home = tmp_path / "keen-home"
    (home / "mcp").mkdir(parents=True)
    pidfile = tmp_path / "server.pid"
    spec = {
        "tools": [{"name": "hang", "inputSchema": {"type": "object"}}],
        "hang_on_call": ["hang"],
        "stderr_on_call": "call started",
        "ignore_eof": True,
        "ignore_signals": True,
        "pidfile": str(pidfile),
        **more,
    }
    config = {"version": 1, "servers": {"h": hostile_entry(tmp_path / "spec.json", spec)}}
    (home / "mcp" / "configs.json").write_text(json.dumps(config))
    env = {**os.environ, "KEEN_HOME": str(home)}
    proc = subprocess.Popen(
        [*keen, "mcp", "call", "h", "hang", "--yes"],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        preexec_fn=_default_sigint,
    )
    log = home / "logs" / "h.stderr.log"
    # A bound, not a pause: a new interpreter's keen under load 19 needed more than 30 s.
    started = wait_until(lambda: log.exists() and "call started" in log.read_text(), 90)
    if not started:
        proc.kill()
        pytest.fail(f"the call never reached the server: {proc.communicate(timeout=10)}")
    return proc, int(pidfile.read_text())


@pytest.mark.parametrize(("signum", "code"), [(signal.SIGTERM, 143), (signal.SIGHUP, 129)])
def test_sigterm_and_sighup_close_the_server_and_exit_128_plus_n(
    tmp_path: Path, signum: int, code: int
) -> None:
    proc, server = _start_call(tmp_path)
    try:
        proc.send_signal(signum)
        _out, err = proc.communicate(timeout=30)
        assert proc.returncode == code, err
        assert b"stopped by" in err
        assert not alive(server), "the stdio server outlived keen"
    finally:
        if alive(server):
            os.kill(server, signal.SIGKILL)


def test_a_second_ctrl_c_lets_the_first_ones_stop_finish(tmp_path: Path) -> None:
    """Before, asyncio raised KeyboardInterrupt into the shutdown the first Ctrl-C began: keen
    printed "unhandled exception during asyncio.run() shutdown" and, with this server (it
    outwaits EOF and SIGTERM), waited for ever on a stop that no longer ran, the server
    alive. ``keen`` with the stop's own waits (2 s each): the second Ctrl-C comes within them."""
    proc, server = _start_call(
        tmp_path, [sys.executable, "-c", "from keen.cli import main; main()"], stderr_at_eof="stdin closed"
    )
    log = tmp_path / "keen-home" / "logs" / "h.stderr.log"
    try:
        proc.send_signal(signal.SIGINT)
        # The server says when its stdin closes: the stop has begun.
        assert wait_until(lambda: "stdin closed" in log.read_text(), 30), log.read_text()
        proc.send_signal(signal.SIGINT)
        _out, err = proc.communicate(timeout=60)
        assert proc.returncode == 130, err
        assert err.splitlines(keepends=True) == [STILL_STOPPING, b"cancelled\n"], err
        assert not alive(server), "the stdio server outlived keen"
    finally:
        if proc.poll() is None:
            proc.kill()
        if alive(server):
            os.kill(server, signal.SIGKILL)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux-only")
def test_sigkill_takes_the_server_down_with_keen(tmp_path: Path) -> None:
    proc, server = _start_call(tmp_path, REAL_KEEN)
    try:
        proc.kill()
        proc.communicate(timeout=10)
        assert wait_until(lambda: not alive(server), 10), "the stdio server outlived a SIGKILLed keen"
    finally:
        if alive(server):
            os.kill(server, signal.SIGKILL)


_PARENT = """
import os, subprocess, sys, time
from keen.mcp.connection import spawn as _spawn
if sys.argv[3] == "python":
    _spawn._setpriv = lambda: None  # force the Python launcher
cmd, args = _spawn.server_command(sys.executable, [sys.argv[1], sys.argv[2]], env=dict(os.environ), cwd=None)
proc = subprocess.Popen([cmd, *args], stdin=subprocess.PIPE, start_new_session=True)
print(proc.pid, cmd, flush=True)
time.sleep(120)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux-only")
@pytest.mark.parametrize("launcher", ["setpriv", "python"])
def test_each_launcher_execs_in_place_and_dies_with_its_parent(tmp_path: Path, launcher: str) -> None:
    if launcher == "setpriv" and _setpriv() is None:
        pytest.skip("util-linux setpriv with --pdeathsig is not installed")
    pidfile = tmp_path / "server.pid"
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"ignore_eof": True, "ignore_signals": True, "pidfile": str(pidfile)}))
    parent = subprocess.Popen(
        [sys.executable, "-c", _PARENT, str(server_script("hostile_stdio")), str(spec), launcher],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert parent.stdout is not None
        pid_text, used = parent.stdout.readline().split()
        assert wait_until(pidfile.exists, 15) and wait_until(lambda: pidfile.read_text().strip() != "", 5)
        server = int(pidfile.read_text())
        assert server == int(pid_text)  # exec'd in place: the PID Keen holds is the server's
        assert ("setpriv" in used) == (launcher == "setpriv")
        parent.kill()
        parent.wait(10)
        assert wait_until(lambda: not alive(server), 10), "the server outlived its SIGKILLed parent"
    finally:
        parent.kill()
        if pidfile.exists() and pidfile.read_text().strip() and alive(int(pidfile.read_text())):
            os.kill(int(pidfile.read_text()), signal.SIGKILL)


@pytest.mark.parametrize("answer", ["yes", "SIGTERM"])
def test_the_approval_question_answers_and_yields_to_sigterm(tmp_path: Path, answer: str) -> None:
    home = tmp_path / "keen-home"
    (home / "mcp").mkdir(parents=True)
    pidfile = tmp_path / "server.pid"
    spec = {
        "tools": [{"name": "ok", "inputSchema": {"type": "object"}}],
        "ignore_eof": True,
        "ignore_signals": True,
        "pidfile": str(pidfile),
    }
    config = {"version": 1, "servers": {"h": hostile_entry(tmp_path / "spec.json", spec)}}
    (home / "mcp" / "configs.json").write_text(json.dumps(config))
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [*KEEN, "mcp", "call", "h", "ok"],
        env={**os.environ, "KEEN_HOME": str(home)},
        stdin=slave,
        stdout=subprocess.PIPE,
        stderr=slave,
    )
    os.close(slave)
    try:
        prompt = read_until(master, b"Approve?", 60)
        assert b"Approve?" in prompt, prompt
        server = int(pidfile.read_text())
        if answer == "yes":
            os.write(master, b"y\n")
            out, _ = proc.communicate(timeout=30)
            assert proc.returncode == 0 and out.strip() == b"ok"
        else:
            # "Approve?" was printed by the thread that reads the answer, so the command
            # already awaits that thread: the signal lands while Keen waits for the answer.
            proc.send_signal(signal.SIGTERM)
            proc.communicate(timeout=30)
            assert proc.returncode == 143
        assert wait_until(lambda: not alive(server), 10)
    finally:
        proc.kill()
        os.close(master)
        if pidfile.exists() and pidfile.read_text().strip() and alive(int(pidfile.read_text())):
            os.kill(int(pidfile.read_text()), signal.SIGKILL)
