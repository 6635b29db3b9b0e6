"""Start a test server script in a fork of a warm process: ``python -S launch.py SOCKET SCRIPT [ARGS]``.

Every stdio test server written with the MCP SDK spends about a second of CPU importing it;
the suite starts hundreds. This launcher (standard library only, run with ``-S``) hands its
standard streams, environment, working directory and arguments to the fork server listening
on ``SOCKET`` (:mod:`tests.helpers.forkserver`, SDK already imported), which forks a child
that runs ``SCRIPT`` as ``__main__`` on those streams. The launcher stays the process the
client started: it forwards the signals a client sends (SIGTERM, SIGINT, SIGHUP, SIGQUIT,
SIGUSR1, SIGUSR2) to the child and ends as the child ended (same exit code, or killed by the
same signal). If the launcher is killed outright, the fork server sees its connection close
and kills the child.
"""

from __future__ import annotations

import array
import contextlib
import fcntl
import json
import os
import signal
import socket
import sys

FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2)


def main() -> None:
    path, script, *args = sys.argv[1:]
    if script == "-u":  # an xdist worker: execnet's `-u -c BOOTSTRAP` (it writes unbuffered itself)
        script, *args = args
    try:
        # The fork server holds this file's lock exclusively while it warms up (it is
        # started without waiting for it): wait for it to listen.
        with open(os.path.join(os.path.dirname(path), "warming"), "rb") as warming:
            fcntl.flock(warming, fcntl.LOCK_SH)
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        conn.connect(path)
    except OSError as exc:
        sys.exit(
            f"launch.py: the test fork server at {path} is not running ({exc}); it ends with its pytest run"
        )
    request = json.dumps({"script": script, "args": args, "env": dict(os.environ), "cwd": os.getcwd()})
    fds = array.array("i", [0, 1, 2])
    conn.sendmsg([request.encode() + b"\n"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, fds)])
    reader = conn.makefile("rb")
    child = int(json.loads(reader.readline())["pid"])

    def forward(signum: int, _frame: object) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(child, signum)

    for signum in FORWARDED:
        signal.signal(signum, forward)
    line = reader.readline()
    status = json.loads(line) if line else {"signal": int(signal.SIGKILL)}
    if "signal" in status:
        signum = int(status["signal"])
        if signum not in (signal.SIGKILL, signal.SIGSTOP):  # those two have no handler to reset
            signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)
    os._exit(int(status.get("code", 1)))


if __name__ == "__main__":
    main()
