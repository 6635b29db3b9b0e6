"""The CLI's logging: stderr, each record redacted and escaped for the terminal.

Apart from :mod:`keen.cli._console` so that importing it does not import :mod:`logging`
(with ``threading``, ``traceback``, ``string`` and ``weakref``: about 16 million
instructions, ``bench/prompt_start.py``): ``keen prompt`` without typer sets logging up at
the first record a Keen module logs (:func:`keen._log.before_first_record`), and a prompt
built without trouble logs none.
"""

from __future__ import annotations

import logging
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from keen._redact import RedactingFilter

__all__ = ["setup_logging"]


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
        from keen._redact import redactor
        from keen.cli._terminal import terminal_text

        # Tracebacks quote server text too: redact and escape the whole record, not just msg.
        return terminal_text(redactor.redact(super().format(record)))


class _RedactingFilter(logging.Filter):
    """:class:`keen._redact.RedactingFilter`, made at the first record: the redactor's
    patterns cost about 5 ms of CPU to import and compile, which a command that logs
    nothing (``keen prompt``, a chat's first turn) need not pay."""

    def __init__(self) -> None:
        super().__init__()
        self._filter: RedactingFilter | None = None

    def filter(self, record: logging.LogRecord) -> bool:
        if self._filter is None:
            from keen._redact import RedactingFilter

            self._filter = RedactingFilter()
        return self._filter.filter(record)


def setup_logging(verbose: bool) -> None:
    """stderr logging through the redaction filter: debug with ``-v``, warnings otherwise.

    The SDK logs transport faults (e.g. a server printing garbage) itself; Keen reports
    them in the server's status, so SDK records are muted unless verbose.
    """
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_Formatter(verbose))
    handler.addFilter(_RedactingFilter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.DEBUG if verbose else logging.WARNING)
    for noisy in ("mcp", "httpx2", "httpcore2", "httpx", "httpcore"):
        logging.getLogger(noisy).setLevel(logging.DEBUG if verbose else logging.CRITICAL)
