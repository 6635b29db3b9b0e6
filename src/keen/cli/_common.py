"""What every CLI command shares: consoles, logging, the error boundary, async runs.

Exit codes (the CLI contract): 0 success, 1 the tool returned ``isError``, 2 any Keen
error (message on stderr, no traceback). Set ``KEEN_DEBUG=1`` for tracebacks.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from collections.abc import Awaitable, Callable
from typing import Any, NoReturn, TypeVar

import typer
from rich.console import Console
from rich.text import Text

from keen._redact import RedactingFilter, redactor
from keen.cli._signals import Signalled, run_until_signal
from keen.cli._terminal import safe_json, terminal_text
from keen.errors import KeenError

__all__ = ["EXIT_KEEN_ERROR", "EXIT_TOOL_ERROR", "err", "fail", "out", "print_json", "run", "setup_logging"]

EXIT_TOOL_ERROR = 1
EXIT_KEEN_ERROR = 2

out = Console(soft_wrap=True)
err = Console(stderr=True, soft_wrap=True)

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
    err.print(Text.assemble(("error:", "bold red"), " ", terminal_text(message)))
    raise typer.Exit(code)


def run(fn: Callable[[], Awaitable[T]]) -> T:
    """Run an async command body; ``KeenError`` -> stderr + exit 2 (no traceback).

    Ctrl-C exits 130; SIGTERM and SIGHUP exit 143 and 129, after the servers were closed.
    """
    try:
        return run_until_signal(fn)
    except KeenError as exc:
        fail(exc.message)
    except KeyboardInterrupt:
        err.print("cancelled")
        raise typer.Exit(130) from None
    except Signalled as exc:
        with contextlib.suppress(OSError):  # after SIGHUP the terminal may be gone
            err.print(f"stopped by {exc}; MCP servers closed")
        raise typer.Exit(exc.exit_code) from None
    except BaseExceptionGroup as group:
        keen = _first_keen(group)
        if keen is not None:
            fail(keen.message)
        raise


def _first_keen(group: BaseExceptionGroup) -> KeenError | None:
    for exc in group.exceptions:
        if isinstance(exc, KeenError):
            return exc
        if isinstance(exc, BaseExceptionGroup) and (inner := _first_keen(exc)) is not None:
            return inner
    return None


def print_json(data: Any) -> None:
    """JSON on stdout, unstyled (for scripts); exact JSON, with terminal controls escaped."""
    sys.stdout.write(safe_json(data) + "\n")
    sys.stdout.flush()


def debug_enabled() -> bool:
    return os.environ.get("KEEN_DEBUG", "") not in ("", "0")
