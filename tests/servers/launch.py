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

# The C modules under the standard library's socket, signal and json: this process starts
# once per forked server (hundreds a run), and those three modules (enum, re, selectors and
# the rest they import) were two thirds of its CPU (33 ms a start against 13).
import _json
import _signal  # pyright: ignore[reportMissingImports]  # no stub; the C half of `signal`
import _socket
import fcntl
import os
import sys

FORWARDED = (
    _signal.SIGTERM,
    _signal.SIGINT,
    _signal.SIGHUP,
    _signal.SIGQUIT,
    _signal.SIGUSR1,
    _signal.SIGUSR2,
)


def _string(text: str) -> str:
    return _json.encode_basestring_ascii(text)


def _request(script: str, args: list[str], worker: bool) -> bytes:
    """The fork server's request as one JSON line: script, args, environment, working
    directory, and whether it is an xdist worker's."""
    env = ",".join(f"{_string(k)}:{_string(v)}" for k, v in os.environ.items())
    return (
        f'{{"script":{_string(script)},"args":[{",".join(map(_string, args))}],'
        f'"env":{{{env}}},"cwd":{_string(os.getcwd())},"worker":{"true" if worker else "false"}}}\n'
    ).encode("ascii")


class _Lines:
    """The fork server's replies, one JSON object of one int per line (``{"pid": 12}``,
    ``{"code": 0}``, ``{"signal": 9}``: ``forkserver.serve``), read as ``(key, value)``."""

    def __init__(self, conn: _socket.socket) -> None:
        self.conn = conn
        self.buffer = b""

    def next(self) -> tuple[str, int] | None:
        while b"\n" not in self.buffer:
            more = self.conn.recv(4096)  # retried after a forwarded signal's handler (PEP 475)
            if not more:
                return None
            self.buffer += more
        line, _, self.buffer = self.buffer.partition(b"\n")
        key, _, value = line.decode().strip("{} ").partition(":")
        return key.strip().strip('"'), int(value)


def main() -> None:
    path, script, *args = sys.argv[1:]
    worker = script == "-u"  # an xdist worker: execnet's `-u -c BOOTSTRAP` (it writes unbuffered itself)
    if worker:
        script, *args = args
    try:
        # The fork server holds this file's lock exclusively while it warms up (it is
        # started without waiting for it): wait for it to listen.
        with open(os.path.join(os.path.dirname(path), "warming"), "rb") as warming:
            fcntl.flock(warming, fcntl.LOCK_SH)
        conn = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
        conn.connect(path)
    except OSError as exc:
        sys.exit(
            f"launch.py: the test fork server at {path} is not running ({exc}); it ends with its pytest run"
        )
    fds = b"".join(fd.to_bytes(4, sys.byteorder) for fd in (0, 1, 2))  # three C ints
    conn.sendmsg([_request(script, args, worker)], [(_socket.SOL_SOCKET, _socket.SCM_RIGHTS, fds)])
    replies = _Lines(conn)
    started = replies.next()
    if started is None or started[0] != "pid":
        sys.exit(f"launch.py: the test fork server at {path} did not start {script}")
    child = started[1]

    def forward(signum: int, _frame: object) -> None:
        try:  # noqa: SIM105 - contextlib.suppress: its import alone is 5 ms of this process's 15
            os.kill(child, signum)
        except ProcessLookupError:
            pass

    for signum in FORWARDED:
        _signal.signal(signum, forward)
    key, value = replies.next() or ("signal", _signal.SIGKILL)
    if key == "signal":
        if value not in (_signal.SIGKILL, _signal.SIGSTOP):  # those two have no handler to reset
            _signal.signal(value, _signal.SIG_DFL)
        os.kill(os.getpid(), value)
    os._exit(value if key == "code" else 1)


if __name__ == "__main__":
    main()
