"""Start stdio servers so that they die with Keen, even when Keen is killed with SIGKILL.

The SDK starts each server in a new session (its own process group) and, on a clean
shutdown or a cancellation, closes its stdin, then terminates and kills that group. A
SIGKILL to Keen runs none of that: the server is re-parented to PID 1 and, unless it
exits when its stdin closes, runs on. On Linux Keen therefore starts the server through
a few lines of Python that ask the kernel for ``PR_SET_PDEATHSIG`` (SIGKILL when the
parent dies; prctl(2)) and then ``exec`` the real command in the same process, so the
server's PID, arguments, environment and pipes are its own.

What remains (docs in README "Stopping servers"): the signal reaches the server process
only; its own children (``npx`` starts ``node``) are left to notice that their stdin
closed, which MCP servers do (the stdio transport ends on EOF). Other platforms get no
death signal: there a server that ignores EOF outlives a SIGKILLed Keen.
"""

from __future__ import annotations

import errno
import os
import shutil
import sys

__all__ = ["LAUNCHER", "server_command"]

LAUNCHER = (
    "import ctypes,os,signal,sys\n"
    "try:\n"
    "    ctypes.CDLL(None,use_errno=True).prctl(1,signal.SIGKILL)\n"  # PR_SET_PDEATHSIG = 1
    "except Exception:\n"
    "    pass\n"
    "if os.getppid()!=int(sys.argv[1]):\n"  # Keen died before prctl took effect
    "    os._exit(1)\n"
    "os.execv(sys.argv[2],sys.argv[3:])\n"
)
"""Run as ``python -I -S -c LAUNCHER <keen pid> <resolved path> <argv0> <args...>``."""


def server_command(
    command: str, args: list[str], *, env: dict[str, str], cwd: str | None
) -> tuple[str, list[str]]:
    """The ``(command, args)`` to spawn for a stdio server: on Linux the death-signal launcher
    around the resolved executable, elsewhere ``(command, args)`` unchanged.

    Raises ``FileNotFoundError`` or ``PermissionError`` (as spawning the command would) when
    the command is not found on ``env``'s PATH or is not executable, so the error still names
    the user's command rather than the launcher.
    """
    if not sys.platform.startswith("linux") or not sys.executable:
        return command, args
    resolved = _resolve(command, env=env, cwd=cwd)
    return sys.executable, ["-I", "-S", "-c", LAUNCHER, str(os.getpid()), resolved, command, *args]


def _resolve(command: str, *, env: dict[str, str], cwd: str | None) -> str:
    if os.sep in command:
        path = command if os.path.isabs(command) or not cwd else os.path.join(cwd, command)
        if not os.path.exists(path):
            raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), command)
        if os.path.isdir(path) or not os.access(path, os.X_OK):
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), command)
        return os.path.abspath(path)
    found = shutil.which(command, path=env.get("PATH", os.defpath))
    if found is None:
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), command)
    return found
