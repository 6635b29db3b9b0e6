"""What every CLI command shares: consoles, logging, the error boundary, async runs.

Exit codes (the CLI contract): 0 success, 1 the tool returned ``isError``, 2 any Keen
error (message on stderr, no traceback). Set ``KEEN_DEBUG=1`` for tracebacks.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import sys
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar, cast

import typer
from typer.core import TyperCommand, TyperGroup

from keen._redact import RedactingFilter, redactor
from keen.cli._wording import describe
from keen.errors import KeenError, find_keen_error

if TYPE_CHECKING:
    from rich.console import Console

__all__ = [
    "EXIT_KEEN_ERROR",
    "EXIT_TOOL_ERROR",
    "STARTED",
    "KeenCommand",
    "KeenGroup",
    "err",
    "fail",
    "json_object",
    "out",
    "print_json",
    "real_console",
    "run",
    "setup_logging",
    "typer_app",
]

STARTED = time.monotonic()
"""When this process began to run Keen's CLI (its first import): what "a second after start" counts from."""

EXIT_TOOL_ERROR = 1
EXIT_KEEN_ERROR = 2


class _LazyConsole:
    """A rich ``Console`` built on first use: importing rich costs ~20 ms that
    ``keen --version`` and other quiet paths need not pay."""

    def __init__(self, *, stderr: bool) -> None:
        self._stderr = stderr
        self._console: Console | None = None

    def real(self) -> Console:
        """The rich ``Console`` itself (built now if needed), for APIs that need the object."""
        if self._console is None:
            from rich.console import Console

            self._console = Console(stderr=self._stderr, soft_wrap=True)
        return self._console

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real(), name)


def real_console(console: Console) -> Console:
    """``console`` as a real rich ``Console`` (``out`` and ``err`` are built lazily): what
    ``rich.live.Live`` needs, since it enters the console as a context manager."""
    return console.real() if isinstance(console, _LazyConsole) else console


out = cast("Console", _LazyConsole(stderr=False))
err = cast("Console", _LazyConsole(stderr=True))

T = TypeVar("T")


class _Formatter(logging.Formatter):
    def __init__(self, verbose: bool) -> None:
        super().__init__("%(levelname)s %(name)s: %(message)s")
        self.verbose = verbose

    def formatException(self, ei: Any) -> str:
        # Tracebacks only in verbose mode; the message already says what went wrong.
        return super().formatException(ei) if self.verbose else ""

    def format(self, record: logging.LogRecord) -> str:
        if not self.verbose:
            record.exc_info = None
            record.exc_text = None
        from keen.cli._terminal import terminal_text

        # Tracebacks quote server text too: redact and escape the whole record, not just msg.
        return terminal_text(redactor.redact(super().format(record)))


def setup_logging(verbose: bool) -> None:
    """stderr logging through the redaction filter: debug with ``-v``, warnings otherwise.

    The SDK logs transport faults (e.g. a server printing garbage) itself; Keen reports
    them in the server's status, so SDK records are muted unless verbose.
    """
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_Formatter(verbose))
    handler.addFilter(RedactingFilter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.DEBUG if verbose else logging.WARNING)
    for noisy in ("mcp", "httpx2", "httpcore2", "httpx", "httpcore"):
        logging.getLogger(noisy).setLevel(logging.DEBUG if verbose else logging.CRITICAL)


def fail(message: str, code: int = EXIT_KEEN_ERROR) -> NoReturn:
    """Print ``message`` on stderr, literally and escaped (it may quote a server), and exit with ``code``."""
    from rich.text import Text

    from keen.cli._terminal import terminal_text

    err.print(Text.assemble(("error:", "bold red"), " ", terminal_text(message)))
    raise typer.Exit(code)


class KeenGroup(TyperGroup):
    """The CLI's one error boundary, wrapped around every command of every group.

    A ``KeenError`` (alone, or inside the exception groups anyio raises) becomes its
    message on stderr and exit code 2, with no traceback; Ctrl-C exits 130.
    """

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        if ctx.parent is None:
            # -v/--verbose is a root option; accept it after the subcommand too (before any `--`).
            end = args.index("--") if "--" in args else len(args)
            flags = [a for a in args[1:end] if a in ("-v", "--verbose")]
            if flags:
                rest = [a for i, a in enumerate(args) if not (0 < i < end and a in ("-v", "--verbose"))]
                args = ["--verbose", *rest]
        return super().parse_args(ctx, args)

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except KeenError as exc:
            fail(describe(exc))
        except KeyboardInterrupt:
            err.print("cancelled")
            raise typer.Exit(130) from None
        except OSError as exc:
            # KEEN_HOME pointing at a file, or a folder Keen cannot write: say so, not "internal".
            if (home := _keen_home_problem(exc)) is None:
                raise
            fail(
                f"cannot use {exc.filename}: {exc.strerror or exc}; KEEN_HOME ({home}) must be a "
                "folder you can write (unset KEEN_HOME to use ~/.keen)"
            )
        except BaseExceptionGroup as group:
            keen = find_keen_error(group)
            if keen is None:
                if group.subgroup(KeyboardInterrupt) is not None:  # Ctrl-C raised inside a task group
                    err.print("cancelled")
                    raise typer.Exit(130) from None
                raise
            fail(describe(keen))
        except Exception as exc:
            # click's NoSuchOption (typer may vendor click: matched by name): for --json, said
            # plainly instead of "No such option": this command prints no data.
            context = getattr(exc, "ctx", None)
            option = getattr(exc, "option_name", "")
            if type(exc).__name__ == "NoSuchOption" and context is not None:
                if option == "--json":
                    fail(f"`{context.command_path}` has no --json: it prints no data, only what it did")
                if context.command_path.endswith("mcp add"):
                    # `keen mcp add x npx -y pkg`: the server's own options need the `--` first.
                    fail(
                        f"{option} is not an option of keen mcp add; put the server's command after --: "
                        "keen mcp add NAME -- COMMAND [ARGS...]"
                    )
            # keen.cli._signals is imported by run(); if it never was, nothing was signalled.
            signalled = getattr(sys.modules.get("keen.cli._signals"), "Signalled", None)
            if signalled is None or not isinstance(exc, signalled):
                raise
            with contextlib.suppress(OSError):  # after SIGHUP the terminal may be gone
                err.print(f"stopped by {exc}; MCP servers closed")
            raise typer.Exit(int(getattr(exc, "exit_code", EXIT_KEEN_ERROR))) from None


def _keen_home_problem(exc: OSError) -> str | None:
    """``KEEN_HOME`` when ``exc`` is about a path inside it (a file where a folder must be, no
    permission), else None (any other OS error stays an internal one)."""
    from keen import paths

    if not exc.filename or not isinstance(exc, (NotADirectoryError, FileExistsError, PermissionError)):
        return None
    home = os.path.abspath(paths.keen_home())
    where = os.path.abspath(os.fsdecode(exc.filename))
    return home if where == home or where.startswith(home + os.sep) else None


_USAGE_ARG = re.compile(r"([\[{])([a-z_][a-z0-9_]*)([\]}])(\.\.\.)?")


class KeenCommand(TyperCommand):
    """A command whose usage line names its arguments as its help text does (``SERVER``,
    ``[ARGS]...``), where typer writes ``{server}``."""

    def collect_usage_pieces(self, ctx: Any) -> list[str]:
        return [_usage_piece(piece) for piece in super().collect_usage_pieces(ctx)]


def _usage_piece(piece: str) -> str:
    found = _USAGE_ARG.fullmatch(piece)
    if found is None:
        return piece
    name = found[2].upper()
    return (f"[{name}]" if found[1] == "[" else name) + (found[4] or "")


class _KeenTyper(typer.Typer):
    """``typer.Typer`` whose commands are :class:`KeenCommand` unless told otherwise."""

    def command(self, name: str | None = None, *, cls: Any = None, **options: Any) -> Any:
        return super().command(name, cls=cls or KeenCommand, **options)


def typer_app(help: str, **options: Any) -> typer.Typer:
    """A command group with Keen's error boundary (:class:`KeenGroup`) and house defaults."""
    options.setdefault("no_args_is_help", True)
    options.setdefault("cls", KeenGroup)
    options.setdefault("add_completion", False)  # a group or command built alone (keen.cli.COMMANDS)
    return _KeenTyper(help=help, **options)


def run(fn: Callable[[], Awaitable[T]]) -> T:
    """Run an async command body; errors reach :class:`KeenGroup`.

    SIGTERM and SIGHUP cancel it like Ctrl-C (the servers are closed first); the boundary
    exits 143 or 129.
    """
    from keen.cli._signals import run_until_signal

    return run_until_signal(fn)


def json_object(text: str, what: str, example: str) -> dict[str, Any]:
    """``text`` parsed as one JSON object, or exit 2 saying where the JSON breaks (``what``
    names the value, ``example`` shows one that works)."""
    import json

    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        fail(
            f"{what} is not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg}); pass an object "
            f"like {example}"
        )
    if not isinstance(value, dict):
        fail(f"{what} must be a JSON object like {example}")
    return cast("dict[str, Any]", value)


def print_json(data: Any) -> None:
    """JSON on stdout, unstyled (for scripts); exact JSON, with terminal controls escaped."""
    from keen.cli._terminal import safe_json

    sys.stdout.write(safe_json(data) + "\n")
    sys.stdout.flush()


def debug_enabled() -> bool:
    return os.environ.get("KEEN_DEBUG", "") not in ("", "0")
