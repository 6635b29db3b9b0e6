"""``keen chat`` in a real terminal (tmux) for the ``tests/agent/test_repl_tmux*.py`` files.

Each session runs the installed ``keen chat`` (forked from the worker's warm process, as
``helpers.cli.KEEN``: the pane's process is the launcher, which hands keen the terminal as
its standard streams, forwards the SIGINT a Ctrl-C sends and ends as keen ends; the terminal,
not keen's interpreter start, is what these tests show) with a scripted model (``--model scripted:FILE``,
one JSON line per model call), a private ``KEEN_HOME`` and the FastMCP server
``tests/servers/chat_tools.py`` over stdio, types with ``tmux send-keys`` and reads the
screen with ``capture-pane``. Waits are bounded (:data:`helpers.tmux.WAIT`); each tmux
server is killed when :func:`chat_sessions` ends, which also ends keen and its MCP servers.
The tests are split into files by what they show (commands, questions, interrupts,
crashes) so that ``pytest -n --dist loadfile`` spreads them over its workers.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from conftest import SERVERS
from helpers.cli import KEEN
from helpers.forkserver import forked, script_args
from helpers.tmux import Tmux

__all__ = ["PROMPT", "SECRET", "Chat", "call", "chat_server", "chat_sessions", "say", "search"]

PROMPT = r"^keen>"

_SKEWED = """
import os, time
from keen.mcp.connection import reconnect

def _clock(path=os.environ.pop("CHAT_TEST_CLOCK")):
    try:
        with open(path) as skew:
            return time.monotonic() + float(skew.read() or 0)
    except (OSError, ValueError):
        return time.monotonic()

reconnect.Reconnector.__init__.__kwdefaults__["clock"] = _clock
from keen.cli import main
main()
"""
"""``keen`` whose reconnect back-off runs on a clock the test moves on: monotonic time plus
the seconds written in the file ``$CHAT_TEST_CLOCK`` (``Reconnector`` takes a clock)."""


def call(tool: str, **arguments: Any) -> dict[str, Any]:
    """A scripted model answer that calls ``chat``'s ``tool`` through call_mcp_tool."""
    return {"content": "", "tool_calls": [{"name": "call_mcp_tool", "arguments": {"server": "chat", "tool": tool, "arguments": arguments}}]}  # fmt: skip


def search(query: str) -> dict[str, Any]:
    return {"content": "", "tool_calls": [{"name": "search_tools", "arguments": {"query": query}}]}


def say(text: str) -> dict[str, Any]:
    return {"content": text}


class Chat:
    """A ``keen chat`` session under tmux and the files around it; with ``clock`` (a file),
    its reconnect back-off runs on a clock the test moves on (:meth:`advance`)."""

    def __init__(
        self,
        root: Path,
        script: list[dict[str, Any]],
        servers: dict[str, Any],
        *,
        model: list[str] | None = None,
        env: dict[str, str] | None = None,
        clock: Path | None = None,
    ) -> None:
        self.root = root
        self.keen_home = root / "keen-home"
        self.notes = root / "notes.txt"
        config = self.keen_home / "mcp" / "configs.json"
        config.parent.mkdir(parents=True)
        config.write_text(json.dumps({"version": 1, "servers": servers}))
        script_path = root / "script.jsonl"
        script_path.write_text("".join(json.dumps(line) + "\n" for line in script))
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(root / "home"),
            "KEEN_HOME": str(self.keen_home),
            "LANG": "C.UTF-8",
            "LC_ALL": "C.UTF-8",
            **(env or {}),
        }
        (root / "home").mkdir()
        model = model or ["--model", f"scripted:{script_path}"]
        keen = KEEN
        self.clock = clock
        if clock is not None:  # reconnect windows pass when the test says (:meth:`advance`)
            clock.write_text("0")
            env["CHAT_TEST_CLOCK"] = str(clock)
            keen = forked("-c", _SKEWED)
        self.tmux = Tmux([*keen, "chat", *model], env=env, cwd=root)
        self._again = ([*keen, "chat", *model], env)

    def again(self, *args: str) -> None:
        """Start ``keen chat`` once more after this session ended, in the same directory
        and KEEN_HOME, with ``args`` added (``--resume``); :attr:`tmux` is the new terminal."""
        argv, env = self._again
        self.tmux.kill()
        self.tmux = Tmux([*argv, *args], env=env, cwd=self.root)

    def advance(self, seconds: float) -> None:
        """Move the session's reconnect clock on by ``seconds`` (a session made with ``clock``)."""
        assert self.clock is not None, "made without a clock"
        self.clock.write_text(str(float(self.clock.read_text()) + seconds))

    def ready(self, servers: int = 1) -> None:
        """Wait for the prompt and for background discovery to report."""
        self.tmux.wait_for(PROMPT)
        self.tmux.wait_for(rf"MCP ready: {servers} of \d+ servers connected")

    def idle(self) -> None:
        """Wait until the last line on the screen is an empty prompt (the REPL waits for input)."""
        self.tmux.wait_for(r"^keen>[ \t]*\s*\Z")

    def leave(self) -> int:
        """At an empty prompt, press Ctrl-D; the exit status.

        Waits for the prompt first: between prompts the terminal is in cooked mode, where the
        line discipline takes a Ctrl-D as end-of-file and the REPL never sees it.
        """
        self.idle()
        self.tmux.send("C-d")
        return self.tmux.exit_status()

    def send(self, text: str) -> int:
        """At an empty prompt, type a line and press Enter; returns the screen offset of the
        prompt line (for ``wait_for(after=...)``)."""
        self.idle()
        mark = self.tmux.mark()
        self.tmux.type(text)
        return mark

    def sessions(self) -> list[dict[str, Any]]:
        """Every event of the session logs."""
        events: list[dict[str, Any]] = []
        for path in sorted((self.keen_home / "sessions").glob("*.jsonl")):
            events += [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        return events


SECRET = "sk-test-5b1e0c7a9d3f4e21"
"""A key in the chat server's env (configs.json): Keen must never show or store it."""


def chat_server(notes: Path) -> dict[str, Any]:
    return {
        "transport": "stdio",
        "command": sys.executable,
        # Forked from the worker's warm process (tests/helpers/forkserver.py): the server is
        # not what these tests watch, keen chat on a terminal is.
        "args": script_args(str(SERVERS / "chat_tools.py")),
        "env": {"CHAT_TOOLS_LOG": str(notes), "SERVICE_TOKEN": SECRET},
        # The suite's own server, trusted for its annotations: these tests are about the REPL.
        "trust_annotations": True,
    }


@contextlib.contextmanager
def chat_sessions(root: Path) -> Iterator[Callable[..., Chat]]:
    """A maker of :class:`Chat` sessions in ``root`` (``script``, ``broken=True`` adds a
    server whose command does not exist, ``model``/``env`` as :class:`Chat` takes them);
    every session's tmux server is killed on exit."""
    chats: list[Chat] = []

    def make(script: list[dict[str, Any]], *, broken: bool = False, **options: Any) -> Chat:
        servers = {"chat": chat_server(root / "notes.txt")}
        if broken:
            servers["broken"] = {"transport": "stdio", "command": str(root / "no-such-server")}
        chat = Chat(root, script, servers, **options)
        chats.append(chat)
        return chat

    try:
        yield make
    finally:
        for chat in chats:
            chat.tmux.kill()
