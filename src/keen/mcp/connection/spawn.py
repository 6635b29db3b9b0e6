"""Start stdio servers so that they die with Keen, even when Keen is killed with SIGKILL.

The SDK starts each server in a new session (its own process group) and, on a clean
shutdown or a cancellation, closes its stdin, then terminates and kills that group. A
SIGKILL to Keen runs none of that: the server is re-parented to PID 1 and, unless it
exits when its stdin closes, runs on. On Linux Keen therefore starts the server through
a launcher that asks the kernel for ``PR_SET_PDEATHSIG`` (SIGKILL when the parent dies;
prctl(2)) and then ``exec``s the real command in the same process, so the server's PID,
environment and pipes are its own: util-linux's ``setpriv --pdeathsig KILL`` when it is
installed (a few hundred microseconds), else a few lines of Python (``LAUNCHER``, about
20 ms of CPU per server start on a small machine).

What remains (docs in README "Stopping servers"): the signal reaches the server process
only; its own children (``npx`` starts ``node``) are left to notice that their stdin
closed, which MCP servers do (the stdio transport ends on EOF). Other platforms get no
death signal: there a server that ignores EOF outlives a SIGKILLed Keen.

A server starts with a minimal environment (:func:`server_environment`), as the MCP SDK's
``get_default_environment()`` gives one: Keen's own secrets (``OPENAI_API_KEY``,
``KEEN_SERVE_TOKEN``, cloud keys) are not a server's to read. Its entry's ``env`` and
``inherit_env`` add what it needs (README "Configure servers").
"""

from __future__ import annotations

import errno
import functools
import os
import secrets
import shutil
import subprocess
import sys
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, TextIO

from keen._redact import register_value
from keen.mcp.config.secrets import secret_name
from keen.mcp.connection._orphans import SPAWN_VAR, orphans_stopped

if TYPE_CHECKING:
    from keen.mcp.config.servers import StdioServerConfig

__all__ = [
    "LAUNCHER",
    "PASSED_ENV",
    "beside_keen",
    "server_command",
    "server_environment",
    "stdio_transport",
]

PASSED_ENV = (
    "HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER", "TMPDIR", "TZ", "LANG", "LANGUAGE",
    "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "ALL_PROXY",
    "http_proxy", "https_proxy", "no_proxy", "all_proxy",
    "SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "NODE_EXTRA_CA_CERTS",
    "KEEN_HOME",
)  # fmt: skip
"""Variables every stdio server gets from Keen's environment when they are set, with every
``LC_*`` one and the SDK's own list (``mcp.client.stdio.DEFAULT_INHERITED_ENV_VARS``: on
Windows ``APPDATA``, ``SYSTEMROOT``, ``USERPROFILE`` and the rest). None of them is a secret:
who the user is, where programs are, the locale and time zone, the proxies to go through and
the certificate authorities that go with them (file paths), and Keen's own home (README
"Files"): a server shipped with Keen (``keen-demo-server``, whose notes are kept there)
follows the KEEN_HOME of the Keen that starts it, as every command does."""

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
    the user's command rather than the launcher; ``FileNotFoundError`` or
    ``NotADirectoryError`` naming ``cwd`` when that is no directory.
    """
    if cwd and not os.path.isdir(cwd):
        # Before the command is looked up in it: its error would blame the command.
        missing = not os.path.exists(cwd)
        code = errno.ENOENT if missing else errno.ENOTDIR
        raise (FileNotFoundError if missing else NotADirectoryError)(code, os.strerror(code), cwd)
    if not sys.platform.startswith("linux") or not sys.executable:
        return command, args
    resolved = _resolve(command, env=env, cwd=cwd)
    setpriv = _setpriv()
    if setpriv is not None:
        return setpriv, ["--pdeathsig", "KILL", "--", resolved, *args]
    return sys.executable, ["-I", "-S", "-c", LAUNCHER, str(os.getpid()), resolved, command, *args]


@functools.cache
def _setpriv() -> str | None:
    """util-linux ``setpriv`` if it is installed and knows ``--pdeathsig`` (2.33 and later)."""
    path = shutil.which("setpriv")
    if path is None:
        return None
    try:
        helped = subprocess.run(
            [path, "--help"], capture_output=True, text=True, timeout=5, check=False, stdin=subprocess.DEVNULL
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return path if "--pdeathsig" in helped.stdout else None


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


def server_environment(cfg: StdioServerConfig, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment a stdio server starts with: the :data:`PASSED_ENV` variables (and
    ``LC_*``) of ``environ`` (default ``os.environ``), then what the entry's ``inherit_env``
    names (``true``: all of ``environ``), then the entry's ``env``.

    Inherited values are registered with the redactor as ``env`` values are, so a server
    that quotes one in its stderr or an error does not print it (:mod:`keen.mcp.config.secrets`).
    """
    source = os.environ if environ is None else environ
    env = _passed(source)
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        register_value(env.get(name))  # a proxy URL's user:password, should a server quote it
    inherit = cfg.inherit_env
    names = list(source) if inherit is True else [] if inherit is False else inherit
    for name in names:
        value = source.get(name)
        if value is not None:
            # Named one by one, each may be a credential; passed wholesale (``true``), only
            # those whose names say so: registering USER=root or LANG=C.UTF-8 would blank
            # those words out of every later message of the process.
            if inherit is not True or secret_name(name):
                register_value(value)
            env[name] = value
    env.update(cfg.env)
    return env


@functools.cache
def _safe_names() -> frozenset[str]:
    from mcp.client.stdio import DEFAULT_INHERITED_ENV_VARS

    return frozenset({*PASSED_ENV, *DEFAULT_INHERITED_ENV_VARS})


_passed_cache: tuple[dict[Any, Any], dict[str, str]] | None = None
"""``os.environ``'s raw data when :func:`_passed` last read it, and what it found."""


def _passed(source: Mapping[str, str]) -> dict[str, str]:
    """The :data:`PASSED_ENV` (and ``LC_*``) variables of ``source``, as a new dict.

    For ``os.environ`` the filtered copy is kept and reused while the environment is the
    same: decoding and testing every variable took 0.1-0.3 ms per server start. Sameness is
    one comparison of the environment's raw data with the copy taken then (a dict of bytes,
    compared in C), so a variable set, changed or removed since is seen at the next start.
    """
    global _passed_cache
    raw: Any = getattr(source, "_data", None) if source is os.environ else None
    cached = _passed_cache
    if raw is not None and cached is not None and cached[0] == raw:
        return dict(cached[1])
    safe = _safe_names()
    # A bash function exported to the environment ("BASH_FUNC_x%%=() { ...}") is skipped, as
    # the SDK skips one: it would run in any shell the server starts.
    env = {k: v for k, v in source.items() if (k in safe or k.startswith("LC_")) and not v.startswith("()")}
    if isinstance(raw, dict):
        _passed_cache = (dict(raw), env)  # pyright: ignore[reportUnknownArgumentType]
    return dict(env)


def beside_keen(command: str, env: dict[str, str]) -> str:
    """``command``, or its absolute path when it is a bare name that ``env``'s PATH does not
    find but that is installed beside the Python running Keen (its virtualenv's ``bin``, a
    pipx venv): ``keen-demo-server``, or a server pip-installed with Keen, works from a shell
    without that venv activated and from a host that starts ``keen serve`` by its full path."""
    if os.sep in command or (os.altsep and os.altsep in command) or not sys.executable:
        return command
    if shutil.which(command, path=env.get("PATH", os.defpath)) is not None:
        return command
    return shutil.which(command, path=os.path.dirname(sys.executable)) or command


def stdio_transport(
    cfg: StdioServerConfig, errlog: TextIO, launched: Callable[[int], None] | None = None
) -> Any:
    """The stdio transport for ``cfg``, started through :func:`server_command` (so on Linux
    the server dies with Keen) with :func:`server_environment`; the server's stderr goes to
    ``errlog`` (a real file), and ``launched`` is given its process id once it is started
    (where Keen starts it itself). On Linux, the process is started off the event loop and watched
    without a thread (:mod:`keen.mcp.connection._stdio`; elsewhere the SDK's ``stdio_client``), and what
    the server daemonized is stopped with it (:mod:`keen.mcp.connection._orphans`)."""
    from mcp.client.stdio import StdioServerParameters

    from keen.mcp.connection._stdio import spawned_stdio_client

    token = secrets.token_hex(8)
    env = {**server_environment(cfg), SPAWN_VAR: token}
    command, args = server_command(beside_keen(cfg.command, env), list(cfg.args), env=env, cwd=cfg.cwd)
    params = StdioServerParameters(
        command=command, args=args, env=env, cwd=cfg.cwd, encoding_error_handler="replace"
    )
    client = spawned_stdio_client(params, errlog, launched, stall_limit=cfg.timeouts.call_tool)
    return orphans_stopped(client, token)
