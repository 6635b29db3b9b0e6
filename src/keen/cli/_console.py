"""What the CLI needs before (or without) typer: consoles, logging, exit codes, plain errors.

``keen prompt`` runs without importing typer (:mod:`keen.cli._prompt`), so what it shares
with every other command lives here; :mod:`keen.cli._common` re-exports each name, and
``from keen.cli._common import ...`` keeps working everywhere else.
"""

from __future__ import annotations

import contextlib
import errno
import os
import sys
import time
from collections.abc import Callable
from typing import IO, TYPE_CHECKING, Any, NoReturn, TypeVar, cast

if TYPE_CHECKING:
    from rich.console import Console

__all__ = [
    "EXIT_KEEN_ERROR",
    "EXIT_TOOL_ERROR",
    "STARTED",
    "debug_enabled",
    "err",
    "fail",
    "guarded",
    "guarded_reader",
    "keen_home_problem",
    "out",
    "print_error",
    "print_json",
    "real_console",
    "setup_logging",
]

STARTED = time.monotonic()
"""When this process began to run Keen's CLI (its first import): what "a second after start" counts from."""

EXIT_TOOL_ERROR = 1
EXIT_KEEN_ERROR = 2

T = TypeVar("T")


class _LazyConsole:
    """A rich ``Console`` built on first use: importing rich costs ~20 ms that
    ``keen --version`` and other quiet paths need not pay.

    Emoji codes are off: Keen's own texts use none, and the CLI prints servers' text (tool
    and skill names) that may hold one (a tool named ``x:smile:y`` prints as such).
    """

    def __init__(self, *, stderr: bool) -> None:
        self._stderr = stderr
        self._console: Console | None = None

    def real(self) -> Console:
        """The rich ``Console`` itself (built now if needed), for APIs that need the object."""
        if self._console is None:
            from rich.console import Console

            self._console = Console(stderr=self._stderr, soft_wrap=True, emoji=False)
        return self._console

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real(), name)


def real_console(console: Console) -> Console:
    """``console`` as a real rich ``Console`` (``out`` and ``err`` are built lazily): what
    ``rich.live.Live`` needs, since it enters the console as a context manager."""
    return console.real() if isinstance(console, _LazyConsole) else console


out = cast("Console", _LazyConsole(stderr=False))
err = cast("Console", _LazyConsole(stderr=True))


def setup_logging(verbose: bool) -> None:
    """stderr logging through the redaction filter: debug with ``-v``, warnings otherwise
    (:func:`keen.cli._logging.setup_logging`, where ``logging`` is imported: a command that
    logs nothing, ``keen prompt``, need not import it).

    The SDK logs transport faults (e.g. a server printing garbage) itself; Keen reports
    them in the server's status, so SDK records are muted unless verbose.
    """
    from keen.cli._logging import setup_logging as set_up

    set_up(verbose)


def keen_home_problem(exc: OSError) -> str | None:
    """``KEEN_HOME`` when ``exc`` is about a path inside it (a file where a folder must be, no
    permission), else None (any other OS error stays an internal one)."""
    from keen import paths

    if not exc.filename or not isinstance(exc, (NotADirectoryError, FileExistsError, PermissionError)):
        return None
    home = os.path.abspath(paths.keen_home())
    where = os.path.abspath(os.fsdecode(exc.filename))
    return home if where == home or where.startswith(home + os.sep) else None


def print_error(message: str) -> None:
    """``error: <message>`` on stderr, the message literal and escaped (it may quote a server)."""
    from rich.text import Text

    from keen.cli._terminal import terminal_text

    err.print(Text.assemble(("error:", "bold red"), " ", terminal_text(message)))


def print_json(data: Any) -> None:
    """JSON on stdout, unstyled (for scripts); exact JSON, with terminal controls escaped."""
    from keen.cli._terminal import safe_json

    sys.stdout.write(safe_json(data) + "\n")
    sys.stdout.flush()


def debug_enabled() -> bool:
    return os.environ.get("KEEN_DEBUG", "") not in ("", "0")


class _Pacified:
    """A stream whose ``flush`` ignores a closed pipe, as click's ``PacifyFlushWrapper``:
    ``keen prompt | head -1`` then exits 1 without a traceback at interpreter exit."""

    def __init__(self, wrapped: IO[str]) -> None:
        self._wrapped = wrapped

    def flush(self) -> None:
        try:
            self._wrapped.flush()
        except OSError as exc:
            if exc.errno != errno.EPIPE:
                raise

    def __getattr__(self, name: str) -> Any:
        return getattr(self._wrapped, name)


def fail(message: str, code: int = EXIT_KEEN_ERROR) -> NoReturn:
    """``error: <message>`` on stderr and exit ``code`` (as ``keen.cli._common.fail``, for a
    command run without typer; a ``SystemExit``, which click passes on unchanged, so both
    paths exit alike)."""
    print_error(message)
    raise SystemExit(code)


def guarded(fn: Callable[[], T], *, set_up_logging: bool = True) -> T:
    """``fn()`` behind the CLI's one error boundary: every command's, through
    :class:`keen.cli._common.KeenGroup`, and ``keen prompt``'s and ``keen chat -p``'s when
    they run without typer. A Keen error (alone, or inside anyio's exception groups) is its
    message on stderr and exit 2; Ctrl-C exits 130; SIGTERM/SIGHUP their codes; a closed
    stdout 1; ``KEEN_HOME`` that cannot be used says so. ``set_up_logging``: set logging up
    as the root command does (a command run without typer has no root command)."""
    from keen.errors import KeenError, find_keen_error

    if set_up_logging:
        setup_logging(False)
    try:
        return fn()
    except KeenError as exc:
        from keen.cli._wording import describe

        _home_behind(exc)
        fail(describe(exc))
    except KeyboardInterrupt:
        err.print("cancelled")
        raise SystemExit(130) from None
    except OSError as exc:
        if exc.errno == errno.EPIPE:
            sys.stdout = _Pacified(sys.stdout)  # type: ignore[assignment]
            sys.stderr = _Pacified(sys.stderr)  # type: ignore[assignment]
            raise SystemExit(1) from None
        if (home := keen_home_problem(exc)) is None:
            raise
        _unusable_home(exc, home)
    except BaseExceptionGroup as group:
        keen = find_keen_error(group)
        if keen is None:
            if group.subgroup(KeyboardInterrupt) is not None:  # Ctrl-C raised inside a task group
                err.print("cancelled")
                raise SystemExit(130) from None
            # KEEN_HOME unusable inside a session's task group (its sessions/ a file, say):
            # it was an "internal error" there, and its message anywhere else.
            for leaf in _leaves(group):
                if isinstance(leaf, OSError) and (home := keen_home_problem(leaf)) is not None:
                    _unusable_home(leaf, home)
            raise
        from keen.cli._wording import describe

        _home_behind(keen)
        fail(describe(keen))
    except Exception as exc:
        # keen.cli._signals is imported by a command that ran a session; if it never was,
        # nothing was signalled.
        signalled = getattr(sys.modules.get("keen.cli._signals"), "Signalled", None)
        if signalled is None or not isinstance(exc, signalled):
            raise
        with contextlib.suppress(OSError):  # after SIGHUP the terminal may be gone
            err.print(f"stopped by {exc}; MCP servers closed")
        raise SystemExit(int(getattr(exc, "exit_code", EXIT_KEEN_ERROR))) from None


def _home_behind(exc: BaseException) -> None:
    """Say that ``KEEN_HOME`` cannot be used when a skills root inside it cannot be used as a
    folder (a :class:`~keen.errors.SkillError` with its ``folder``, from the OS error behind
    it). An error about one file there (an unreadable ``config.json`` or pin file) keeps its
    own words: "KEEN_HOME must be a folder you can write" sent the user to the wrong fix."""
    from keen.errors import SkillError

    cause = exc.__cause__
    if (
        isinstance(exc, SkillError)
        and exc.folder is not None
        and isinstance(cause, OSError)
        and (home := keen_home_problem(cause)) is not None
    ):
        _unusable_home(cause, home)


def _unusable_home(exc: OSError, home: str) -> NoReturn:
    # "File exists" (mkdir) and "Not a directory" (a path through it) both mean a file
    # stands where Keen keeps a folder: say that.
    why = "a file where Keen keeps a folder" if isinstance(exc, FileExistsError) else exc.strerror or exc
    fail(
        f"cannot use {exc.filename}: {why}; KEEN_HOME ({home}) must be a "
        "folder you can write (unset KEEN_HOME to use ~/.keen)"
    )


def _leaves(group: BaseExceptionGroup[BaseException]) -> list[BaseException]:
    """Every exception in ``group`` and in the groups it holds, depth first."""
    found: list[BaseException] = []
    for exc in group.exceptions:
        found += _leaves(exc) if isinstance(exc, BaseExceptionGroup) else [exc]
    return found


def guarded_reader(fn: Callable[[], object]) -> None:
    """``fn()`` as a command run without typer that only reads and prints (``keen prompt``,
    ``keen skills list`` and ``show``): behind :func:`guarded`, with the collector paused and
    logging set up only at the first record a Keen module logs.

    What such a process makes (modules, classes, what it prints) lives until it exits, so
    the collector's walks over it would free next to nothing (:mod:`keen._gcfreeze`; it is
    never resumed: the process ends with the command). A run without trouble logs nothing,
    so logging is not even imported (:mod:`keen._log`).
    """
    from keen._gcfreeze import pause_collection
    from keen._log import before_first_record

    pause_collection()
    if "logging" in sys.modules:
        setup_logging(False)
    else:
        before_first_record(lambda: setup_logging(False))
    guarded(fn, set_up_logging=False)
