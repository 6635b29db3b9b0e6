"""A stdio server's stderr, copied into ``logs/<server>.stderr.log`` with secrets redacted.

The server writes into a pipe, never into the log file itself: a thread reads the pipe,
redacts every line with the process-wide redactor (the server's own ``env`` values are
registered before it starts) and appends it to the log. The log of one run is capped
(``MAX_RUN_BYTES``; a note says so), lines are cut at ``MAX_LINE_BYTES``, and the last
lines stay in memory for error messages (:meth:`StderrCopy.tail`), which first drains
whatever the server has written so far, so a message quotes what preceded a crash.

The log is Keen's, not the server's: mode 0600 in a 0700 folder, opened without following
a symlink (one planted at its path is removed, never written through), and control
characters are written as escapes (``\\x1b``), so ``cat`` or ``tail -f`` on it cannot
drive the terminal (:func:`keen._terminal.terminal_text`).
"""

from __future__ import annotations

import collections
import contextlib
import errno
import logging
import os
import select
import stat
import sys
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import TextIO

import anyio

from keen._redact import redactor
from keen._terminal import terminal_text

__all__ = ["MAX_LOG_BYTES", "MAX_RUN_BYTES", "StderrCopy"]

logger = logging.getLogger("keen.mcp")

MAX_LOG_BYTES = 1_000_000
"""A log file larger than this when a server starts is deleted first."""
MAX_RUN_BYTES = 4_000_000
"""At most this much of one run's stderr is written to the log; the rest is dropped."""
MAX_LINE_BYTES = 16_384
_TAIL_LINES = 20
_POLL = 0.1
_FINISH_WAIT = 1.0
_APPEND = os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)


class StderrCopy:
    """Copy a child's stderr from a pipe to ``path``, redacted; use as an async context.

    ``errlog`` (valid inside the context) is the pipe's write end to hand to the child.
    On exit, our copy of the write end is closed and the thread copies until end of
    file (the child and its children have exited) or ``_FINISH_WAIT`` seconds.
    """

    def __init__(self, path: Path, server: str) -> None:
        self.path = path
        self.server = server
        self._lock = threading.Lock()
        self._tail: collections.deque[str] = collections.deque(maxlen=_TAIL_LINES)
        self._partial = b""
        self._written = 0
        self._capped = False
        self._eof = False
        self._stop = threading.Event()
        self._read_fd = -1
        self._log: TextIO | None = None
        self._thread: threading.Thread | None = None
        self.errlog: TextIO | None = None

    # -- context --------------------------------------------------------------------------------

    async def __aenter__(self) -> StderrCopy:
        self._start()
        return self

    def _start(self) -> None:
        self._log = _open_log(self.path)
        if self._log is not None:
            self._log.write(f"--- keen: starting {self.server} at {datetime.now(UTC).isoformat()}\n")
            self._log.flush()
        read_fd, write_fd = os.pipe()
        self._read_fd = read_fd
        if sys.platform != "win32":
            os.set_blocking(read_fd, False)
        # The SDK hands errlog to the subprocess, so it must be a real file descriptor.
        self.errlog = os.fdopen(write_fd, "w", encoding="utf-8")
        self._thread = threading.Thread(target=self._run, name=f"keen-stderr-{self.server}", daemon=True)
        self._thread.start()

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self.errlog is not None:
            self.errlog.close()
        self._stop.set()
        thread = self._thread
        if thread is not None:
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(thread.join, _FINISH_WAIT + 1)
        with self._lock:
            self._flush_partial()
            if self._log is not None:
                self._log.close()
                self._log = None
            if self._read_fd >= 0 and (thread is None or not thread.is_alive()):
                os.close(self._read_fd)
                self._read_fd = -1

    # -- reading ----------------------------------------------------------------------------------

    def tail(self, lines: int = 5) -> list[str]:
        """The last ``lines`` non-blank lines of this run (redacted), after copying what is pending."""
        with self._lock:
            self._drain()
            return [line for line in self._tail if line.strip()][-lines:]

    def _run(self) -> None:
        try:
            self._copy()
        finally:
            if self._stop.is_set():
                # The context has ended: nothing will read the pipe again (a grandchild may
                # still hold its write end, which is why the copy gave up).
                with self._lock:
                    if self._read_fd >= 0:
                        os.close(self._read_fd)
                        self._read_fd = -1

    def _copy(self) -> None:
        deadline: float | None = None
        while True:
            if self._stop.is_set() and deadline is None:
                deadline = _now() + _FINISH_WAIT
            if deadline is not None and _now() > deadline:
                return
            if sys.platform == "win32":  # no select() on pipes: plain blocking reads
                data = os.read(self._read_fd, 65536)
                with self._lock:
                    self._consume(data)
            else:
                try:
                    ready, _, _ = select.select([self._read_fd], [], [], _POLL)
                except (OSError, ValueError):
                    return
                if ready:
                    with self._lock:
                        self._drain()
            if self._eof:
                return

    def _drain(self) -> None:
        # Caller holds the lock. Non-blocking: copies whatever the pipe holds now.
        while not self._eof and self._read_fd >= 0:
            try:
                data = os.read(self._read_fd, 65536)
            except BlockingIOError:
                return
            except OSError:
                self._eof = True
                return
            self._consume(data)

    def _consume(self, data: bytes) -> None:
        if not data:
            self._eof = True
            self._flush_partial()
            return
        *lines, self._partial = (self._partial + data).split(b"\n")
        while len(self._partial) > MAX_LINE_BYTES:
            lines.append(self._partial[:MAX_LINE_BYTES])
            self._partial = self._partial[MAX_LINE_BYTES:]
        for raw in lines:
            self._line(raw)

    def _flush_partial(self) -> None:
        if self._partial:
            self._line(self._partial)
            self._partial = b""

    def _line(self, raw: bytes) -> None:
        text = redactor.redact(raw[:MAX_LINE_BYTES].decode("utf-8", "replace").rstrip("\r"))
        self._tail.append(text)
        if self._log is None or self._capped:
            return
        size = len(text) + 1
        try:
            if self._written + size > MAX_RUN_BYTES:
                self._capped = True
                self._log.write(
                    f"--- keen: this run's stderr passed {MAX_RUN_BYTES} bytes; the rest is not logged\n"
                )
            else:
                self._log.write(terminal_text(text) + "\n")
                self._written += size
            self._log.flush()
        except (OSError, ValueError) as exc:
            logger.debug("server %s: cannot write its stderr log: %s", self.server, exc)
            self._capped = True


def _now() -> float:
    return time.monotonic()


def _open_log(path: Path) -> TextIO | None:
    """``path`` opened for appending: 0600 in a 0700 folder, a symlink never followed, a log
    past ``MAX_LOG_BYTES`` started afresh. ``None`` (the server runs without a log file; its
    last lines stay in memory for errors) when it cannot be opened."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        if stat.S_IMODE(path.parent.stat().st_mode) & 0o077:
            with contextlib.suppress(OSError):  # an older Keen made it 0755; one not ours stays
                path.parent.chmod(0o700)
        with contextlib.suppress(FileNotFoundError):
            info = path.lstat()
            if stat.S_ISLNK(info.st_mode) or not stat.S_ISREG(info.st_mode) or info.st_size > MAX_LOG_BYTES:
                path.unlink()
        try:
            fd = os.open(path, _APPEND, 0o600)
        except OSError as exc:
            if exc.errno != errno.ELOOP:
                raise
            path.unlink()  # a symlink planted since the check above
            fd = os.open(path, _APPEND | os.O_EXCL, 0o600)
    except OSError as exc:
        logger.warning("cannot open the stderr log %s: %s; the server runs without it", path, exc)
        return None
    if hasattr(os, "fchmod"):
        os.fchmod(fd, 0o600)  # a log an older Keen created 0644
    return os.fdopen(fd, "a", encoding="utf-8")
