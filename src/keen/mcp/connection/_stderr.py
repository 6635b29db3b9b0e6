"""A stdio server's stderr, copied into ``logs/<server>.stderr.log`` with secrets redacted.

The server writes into a pipe, never into the log file itself. The event loop watches the
pipe's read end (``loop.add_reader``: epoll on Linux, kqueue on macOS, so no thread, no
polling and no limit on the descriptor's number, as ``select()`` has at 1024); when it is
readable, what it holds is read, every line redacted with the process-wide redactor (the
server's own ``env`` values are registered before it starts) and appended to the log. Where
the loop cannot watch a pipe (Windows' proactor, a loop other than asyncio's), a thread
does the same with blocking reads. The log of one run is capped
(``MAX_RUN_BYTES``; a note says so), lines are cut at ``MAX_LINE_BYTES``, and the last
lines stay in memory for error messages (:meth:`StderrCopy.tail`), which first drains
whatever the server has written so far, so a message quotes what preceded a crash.

The log is Keen's, not the server's: mode 0600 in a 0700 folder, opened without following
a symlink (one planted at its path is removed, never written through), and control
characters are written as escapes (``\\x1b``), so ``cat`` or ``tail -f`` on it cannot
drive the terminal (:func:`keen._terminal.terminal_text`).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import errno
import logging
import os
import stat
import sys
import threading
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
_FINISH_WAIT = 1.0
_CHUNK = 65536
_CHUNKS_PER_WAKE = 16  # a server that writes without pause cannot hold the event loop
_APPEND = os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)


class StderrCopy:
    """Copy a child's stderr from a pipe to ``path``, redacted; use as an async context.

    ``errlog`` (valid inside the context) is the pipe's write end to hand to the child.
    On exit, our copy of the write end is closed and the copy goes on until end of file
    (the child and its children have exited) or ``_FINISH_WAIT`` seconds.
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
        self._loop: asyncio.AbstractEventLoop | None = None
        self._ended: anyio.Event | None = None
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
        # The SDK hands errlog to the subprocess, so it must be a real file descriptor.
        self.errlog = os.fdopen(write_fd, "w", encoding="utf-8")
        loop = _watching_loop()
        if loop is not None:
            os.set_blocking(read_fd, False)
            try:
                loop.add_reader(read_fd, self._readable)
            except NotImplementedError:
                os.set_blocking(read_fd, True)
            else:
                self._loop, self._ended = loop, anyio.Event()
                return
        self._thread = threading.Thread(target=self._run, name=f"keen-stderr-{self.server}", daemon=True)
        self._thread.start()

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self.errlog is not None:
            self.errlog.close()
        self._stop.set()
        thread, ended = self._thread, self._ended
        with anyio.CancelScope(shield=True):
            if thread is not None:
                await anyio.to_thread.run_sync(thread.join, _FINISH_WAIT + 1)
            elif ended is not None and not self._eof:
                # The server has been stopped: its last lines are in the pipe, or a
                # grandchild still holds the write end (then give up after a while).
                with anyio.move_on_after(_FINISH_WAIT):
                    await ended.wait()
        with self._lock:
            self._unwatch()
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
            if self._thread is None:  # the blocking reader of the fallback thread copies on its own
                self._drain(_CHUNKS_PER_WAKE)
            return [line for line in self._tail if line.strip()][-lines:]

    def _readable(self) -> None:
        # In the event loop, whenever the pipe holds something (or its write ends are all closed).
        with self._lock:
            self._drain(_CHUNKS_PER_WAKE)
            if self._eof:
                self._unwatch()

    def _unwatch(self) -> None:
        # Caller holds the lock. Once, before the descriptor is closed.
        loop, self._loop = self._loop, None
        if loop is not None and not loop.is_closed():
            loop.remove_reader(self._read_fd)
        if self._ended is not None:
            self._ended.set()

    def _run(self) -> None:
        # The fallback: a thread blocked in read() until the server writes or all write ends close.
        try:
            while not self._eof:
                try:
                    data = os.read(self._read_fd, _CHUNK)
                except OSError:
                    return
                with self._lock:
                    self._consume(data)
        finally:
            with self._lock:
                if self._stop.is_set() and self._read_fd >= 0:
                    # The context has ended: nothing will read the pipe again.
                    os.close(self._read_fd)
                    self._read_fd = -1

    def _drain(self, chunks: int) -> None:
        # Caller holds the lock. Non-blocking: copies what the pipe holds now, at most
        # ``chunks`` reads (the loop calls again while more is there).
        for _ in range(chunks):
            if self._eof or self._read_fd < 0:
                return
            try:
                data = os.read(self._read_fd, _CHUNK)
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


def _watching_loop() -> asyncio.AbstractEventLoop | None:
    """The running asyncio loop when it can watch a pipe (not on Windows, whose proactor
    loop cannot; not under another async library), else ``None``."""
    if sys.platform == "win32":
        return None
    try:
        return asyncio.get_running_loop()
    except RuntimeError:  # no asyncio loop in this thread (trio)
        return None


_made: set[Path] = set()
"""Log folders this process made or found and set to 0700: every server's start checked its
folder again, two system calls and their path handling each, for one folder."""


def _log_folder(folder: Path) -> None:
    """Make ``folder`` (0700) unless this process did already; an older Keen's 0755 is made 0700."""
    if folder in _made:
        return
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    if stat.S_IMODE(folder.stat().st_mode) & 0o077:
        with contextlib.suppress(OSError):  # an older Keen made it 0755; one not ours stays
            folder.chmod(0o700)
    _made.add(folder)


def _open_log(path: Path) -> TextIO | None:
    """``path`` opened for appending: 0600 in a 0700 folder, a symlink never followed, a log
    past ``MAX_LOG_BYTES`` started afresh. ``None`` (the server runs without a log file; its
    last lines stay in memory for errors) when it cannot be opened."""
    try:
        try:
            _log_folder(path.parent)
            return _open_in(path)
        except FileNotFoundError:
            _made.discard(path.parent)  # removed since this process made it: make it again
            _log_folder(path.parent)
            return _open_in(path)
    except OSError as exc:
        logger.warning("cannot open the stderr log %s: %s; the server runs without it", path, exc)
        return None


def _open_in(path: Path) -> TextIO:
    """``path`` opened for appending in its (existing) folder: see :func:`_open_log`."""
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
    if hasattr(os, "fchmod"):
        os.fchmod(fd, 0o600)  # a log an older Keen created 0644
    return os.fdopen(fd, "a", encoding="utf-8")
