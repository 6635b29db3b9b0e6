"""Driving a real terminal program under tmux: type keys, read the screen, wait with a deadline.

Each :class:`Tmux` runs its own tmux server on a private socket (``tmux -L <name>``, no
user config), so tests never see each other's panes, and :meth:`Tmux.kill` ends the server
and every process in it. ``remain-on-exit`` keeps a pane whose program ended, so a test can
read its last screen and its exit status.

Reading the screen costs a tmux client process (about 4 ms of CPU); polling it ten times a
second while a test waits on the program was most of these tests' CPU. ``pipe-pane`` copies
what the program writes to a file, and :meth:`Tmux.wait_for` reads the screen again only
when that file has grown (a ``stat``, no process), or after :data:`RECHECK` seconds at most.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import tempfile
import time
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest

__all__ = ["Tmux", "tmux_binary"]

WAIT = 60.0
"""Default seconds to wait for something to appear on the screen."""
RECHECK = 1.0
"""Seconds after which :meth:`Tmux.wait_for` reads the screen again though the program wrote
nothing new (tmux updates the screen before it copies the output, so this is a backstop)."""


def tmux_binary() -> str:
    """The tmux executable; fails the test with the fix when it is missing."""
    path = shutil.which("tmux")
    if path is None:
        pytest.fail(
            "tmux is not installed; run `make test` (it installs Debian's tmux) or apt-get install tmux"
        )
    return path


class Tmux:
    """One tmux server with one window running ``argv``.

    Args:
        argv: the program and its arguments.
        env: the program's whole environment.
        cwd: its working directory.
        width, height: the terminal size in cells.
    """

    def __init__(
        self,
        argv: Sequence[str],
        *,
        env: Mapping[str, str],
        cwd: Path,
        width: int = 160,
        height: int = 50,
    ) -> None:
        self.socket = f"keen-test-{uuid.uuid4().hex[:12]}"
        self.binary = tmux_binary()
        self.env = dict(env)
        # The tmux server takes its environment (TERM aside) from the first client.
        self._tmux(
            "-f", "/dev/null", "new-session", "-d", "-s", "t", "-x", str(width), "-y", str(height),
            "-c", str(cwd), "--", *argv,
        )  # fmt: skip
        self.socket_path = self._tmux("display-message", "-p", "-t", "t", "#{socket_path}").strip()
        self._tmux("set-option", "-t", "t", "remain-on-exit", "on")
        self._tmux("set-option", "-t", "t", "history-limit", "20000")
        self._folder = tempfile.mkdtemp(prefix="keen-tmux-")
        self.output = Path(self._folder) / "output"
        """Everything the program writes to the terminal from here on (``pipe-pane``)."""
        self.output.touch()
        self._tmux("pipe-pane", "-t", "t", "-o", f"cat >> {shlex.quote(str(self.output))}")

    def _tmux(self, *args: str) -> str:
        proc = subprocess.run(
            [self.binary, "-L", self.socket, *args],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
        if proc.returncode != 0:
            raise AssertionError(f"tmux {' '.join(args)} failed: {proc.stderr.strip()}")
        return proc.stdout

    def send(self, *keys: str) -> None:
        """Press keys by tmux name (``Enter``, ``C-c``, ``C-d``, ``Up``)."""
        self._tmux("send-keys", "-t", "t", *keys)

    def type(self, text: str, *, enter: bool = True) -> None:
        """Type ``text`` literally, then Enter unless ``enter`` is False."""
        self._tmux("send-keys", "-t", "t", "-l", text)
        if enter:
            self.send("Enter")

    def screen(self, *, history: bool = True) -> str:
        """The pane's text (with its scroll-back when ``history``), wrapped lines joined."""
        args = ["capture-pane", "-p", "-J", "-t", "t"]
        if history:
            args += ["-S", "-"]
        return self._tmux(*args)

    def wait_for(self, pattern: str, *, timeout: float = WAIT, after: int = 0) -> re.Match[str]:
        """Poll the screen until the regex ``pattern`` matches (in the text past offset ``after``).

        Raises:
            AssertionError: not within ``timeout`` seconds; the message holds the screen.
        """
        regex = re.compile(pattern, re.MULTILINE)
        deadline = time.monotonic() + timeout
        while True:
            written = self._written()  # before the read: output after it makes a new read
            text = self.screen()
            match = regex.search(text, after)
            if match is not None:
                return match
            now = time.monotonic()
            if now > deadline:
                raise AssertionError(f"{pattern!r} not on the screen after {timeout:g} s:\n{text}")
            self._wait_output(written, min(deadline, now + RECHECK))

    def _written(self) -> int:
        try:
            return os.stat(self.output).st_size
        except FileNotFoundError:
            return 0

    def _wait_output(self, written: int, until: float) -> None:
        """Return once the program wrote past ``written`` bytes, or at ``until``."""
        while self._written() == written and time.monotonic() < until:
            time.sleep(0.02)  # a stat every 20 ms: no process, no screen read

    def mark(self) -> int:
        """An offset into :meth:`screen` for ``wait_for(after=...)``: the start of the last
        line with text (the line being typed on), so what follows it is new."""
        text = self.screen().rstrip()
        return text.rfind("\n") + 1

    def count(self, pattern: str) -> int:
        """How many times ``pattern`` occurs on the screen (scroll-back included)."""
        return len(re.findall(pattern, self.screen(), re.MULTILINE))

    def exit_status(self, *, timeout: float = WAIT) -> int:
        """Wait for the program to end; its exit status."""
        deadline = time.monotonic() + timeout
        dead_since: float | None = None
        while True:
            parts = self._tmux("display-message", "-p", "-t", "t", "#{pane_dead} #{pane_dead_status}").split()
            if parts and parts[0] == "1":
                if len(parts) > 1:
                    return int(parts[1])
                # tmux marks the pane dead a moment before it records the status: an empty
                # status then is not a 0 (a refusal's exit 1 read as success under load).
                if dead_since is None:
                    dead_since = time.monotonic()
                elif time.monotonic() - dead_since > 2.0:
                    return 0
            elif dead_since is not None:
                dead_since = None
            if time.monotonic() > deadline:
                raise AssertionError(f"the program did not exit within {timeout:g} s:\n{self.screen()}")
            time.sleep(0.1)

    def kill(self) -> None:
        """End the tmux server and everything running in it (safe to call twice)."""
        subprocess.run(
            [self.binary, "-L", self.socket, "kill-server"],
            env=self.env,
            capture_output=True,
            timeout=10,
            check=False,
        )
        if self.socket_path:  # kill-server leaves the socket file behind
            Path(self.socket_path).unlink(missing_ok=True)
        shutil.rmtree(self._folder, ignore_errors=True)
