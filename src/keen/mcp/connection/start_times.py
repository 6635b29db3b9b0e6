"""How long each stdio server's last start took, remembered across runs.

The start bound lets the longest expected start in first (:mod:`keen.mcp.connection.starts`);
what a start is expected to take is what the same server's last start took. A start is timed
from its turn's grant (its launch follows at once) until its tool list is in, the span it
holds a turn and the span a caller waits for it. A start that reached a limit (its connect
limit at ``initialize``, its list limit while listing) is remembered as timed out, unfinished,
with how long it ran and the two limits then: expected to give nothing, unless either limit
was raised since (then it counts as merely long). One stopped after its launch before its tools were
listed (Keen closed first, the user stopped it) is remembered as unfinished too, endless,
unless a start of the same launch finished before: then it was more likely stopped early than
hung, and that record is kept. A start that failed any other way, or stopped before its
launch, says nothing of how long one takes: its record stays as it was.

The record is ``$KEEN_HOME/cache/start-times.json`` (docs/architecture.md "Files on disk"),
by server name, each with a digest of its launch definition (:func:`launch_key`): a changed
command, argument, ``cwd`` or set of environment variable names forgets it. No environment
value goes into the digest, nor a credential in the arguments that
:func:`keen.mcp.config.secrets.arg_secrets` finds or that repeats an environment value (a
rotated one keeps the record). A credential it misses (a short flag's value, a bare key, a
JSON argument) does go in: the digest is keyed (BLAKE2b's key) with 32 random bytes made for
this home and kept beside the record, ``start-times.key``, mode 0600 as the record is, so
the record alone cannot be used to guess an argument offline; only someone who can read
both files (the user, root) could. Read once, when the first start asks; written
at the Manager's close, merged with what another process wrote meanwhile (per server, the
start measured last wins), atomically, at
most :data:`MOST_SERVERS` entries (the least recently started dropped first). A record that
cannot be read or written only means starts go in the order asked.
"""

from __future__ import annotations

import errno
import json
import logging
import math
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

from keen import paths
from keen._digest import blake2b
from keen._fs import FileTooLarge, NotRegularFile, atomic_write_text, read_regular
from keen._redact import looks_secret
from keen.mcp.config.secrets import arg_secrets
from keen.mcp.config.servers import StdioServerConfig

__all__ = ["KEY_NAME", "MOST_BYTES", "MOST_SERVERS", "RECORD_NAME", "StartTimes", "launch_key"]

logger = logging.getLogger(__name__)

RECORD_NAME = "start-times.json"
"""The record's file name in ``$KEEN_HOME/cache``."""

KEY_NAME = "start-times.key"
"""The digests' key's file name, beside the record: 32 random bytes, mode 0600."""

_KEY_BYTES = 32

MOST_SERVERS = 2048
"""Servers the record keeps at most: about 220 kB of compact JSON with names of a dozen
characters (309 kB were it indented), read once per Manager."""

MOST_BYTES = 4_000_000
"""A record larger than this is not read (at :data:`MOST_SERVERS` entries it is far smaller)."""

_VERSION = 1
_HIDDEN = "\0secret\0"


def launch_key(config: StdioServerConfig, key: bytes) -> str:
    """A digest of what launches ``config``'s server: its command, arguments, ``cwd``,
    ``inherit_env`` and the names of its environment variables.

    Values that may be credentials are taken out of the arguments first (those the
    arguments' own words name, :func:`keen.mcp.config.secrets.arg_secrets`, and any
    environment value written into them), and environment values are left out entirely.
    Other words of the arguments go in: ``key`` (secret, random) keeps them from being
    guessed back from the digest by anyone without it.

    Args:
        config: the server's definition.
        key: BLAKE2b's key, at most 64 bytes (:data:`KEY_NAME`'s file).

    Returns:
        32 hex digits (BLAKE2b, 16 bytes).
    """
    hidden = sorted(
        {*arg_secrets(config.args), *(v for v in config.env.values() if looks_secret(v))},
        key=len,
        reverse=True,
    )
    args: list[str] = []
    for arg in config.args:
        for secret in hidden:
            arg = arg.replace(secret, _HIDDEN)
        args.append(arg)
    launch = [config.command, args, config.cwd, config.inherit_env, sorted(config.env)]
    data = json.dumps(launch).encode("utf-8", "surrogatepass")
    return blake2b(data, digest_size=16, key=key).hexdigest()


class StartTimes:
    """The servers' last start times (module docstring); one per Manager.

    Args:
        path: the record; default ``$KEEN_HOME/cache/start-times.json`` as ``KEEN_HOME`` is now.
        clock: wall-clock seconds, to drop the least recently started servers first.
    """

    def __init__(self, path: Path | None = None, *, clock: Callable[[], float] = time.time) -> None:
        self.path = path or paths.keen_home() / "cache" / RECORD_NAME
        self._clock = clock
        self._read: dict[str, dict[str, Any]] | None = None
        self._new: dict[str, dict[str, Any]] = {}
        """What this process measured, by server: written at :meth:`save`."""
        self._key: bytes | None = None

    def launch_key(self, config: StdioServerConfig) -> str:
        """:func:`launch_key` with this home's key (made at the first call where there is none;
        one that cannot be read or made gives a key of this process only: no record matches)."""
        if self._key is None:
            self._key = _home_key(self.path.with_name(KEY_NAME))
        return launch_key(config, self._key)

    def last(self, name: str, config: StdioServerConfig) -> float | None:
        """Seconds ``name``'s last start took with this launch definition: ``math.inf`` when
        it did not finish (timed out, or stopped unfinished), ``None`` when unknown (never
        started, started otherwise, or the record unreadable). A start that timed out counts as
        as long as it ran when ``config`` raised its connect or list limit since."""
        entry = self._new.get(name) or self._entries().get(name)
        if entry is None or entry.get("launch") != self.launch_key(config):
            return None
        seconds = entry["seconds"]
        if seconds is None:
            return math.inf
        if not entry["finished"]:
            # Timed out: it will again unless a limit was raised since (then it counts as long).
            limits = entry.get("limits")
            now = (config.timeouts.connect, config.timeouts.list_tools)
            if limits is None or not any(new > old for new, old in zip(now, limits, strict=True)):
                return math.inf
        return seconds

    def remember(
        self, name: str, config: StdioServerConfig, seconds: float | None, *, timed_out: bool = False
    ) -> None:
        """Record that ``name``'s start, launched by ``config``, took ``seconds`` to its tool
        list; with ``timed_out``, that it reached a limit after ``seconds`` (unfinished);
        ``None``: it was stopped unfinished (kept only where no start of the same launch
        finished before)."""
        if seconds is None and self.last(name, config) not in (None, math.inf):
            return
        self._new[name] = {
            "launch": self.launch_key(config),
            "seconds": None if seconds is None else round(seconds, 3),
            "finished": seconds is not None and not timed_out,
            "at": round(self._clock()),
        }
        if timed_out and seconds is not None:  # the limits it reached one of
            self._new[name]["limits"] = [config.timeouts.connect, config.timeouts.list_tools]

    def save(self) -> None:
        """Write what was measured, merged into the record as it is on disk now; never raises
        (a record not written only means the next run orders starts as asked)."""
        if not self._new:
            return
        entries = self._load()
        for name, entry in self._new.items():
            # Another process may have measured the same server later (a keen chat while a
            # long-lived keen serve runs): the later measure wins, not the later writer; one
            # dated after now (a clock set wrong, a hand edit) would win for ever: it loses.
            there = _at(entries[name]) if name in entries else None
            if there is None or there <= _at(entry) or there > self._clock():
                entries[name] = entry
        if len(entries) > MOST_SERVERS:
            newest = sorted(entries.items(), key=lambda item: _at(item[1]), reverse=True)
            entries = dict(newest[:MOST_SERVERS])
        try:
            text = json.dumps({"version": _VERSION, "servers": entries}, separators=(",", ":"))
            atomic_write_text(self.path, text + "\n", mode=0o600, fsync=False)
        except OSError as exc:
            logger.debug("start times not written to %s: %r", self.path, exc)
            return
        self._read = entries
        self._new = {}

    def _entries(self) -> dict[str, dict[str, Any]]:
        if self._read is None:
            self._read = self._load()
        return self._read

    def _load(self) -> dict[str, dict[str, Any]]:
        try:
            data: Any = json.loads(read_regular(self.path, MOST_BYTES))
        except (OSError, ValueError, RecursionError) as exc:
            logger.debug("start times not read from %s: %r", self.path, exc)
            return {}
        if not isinstance(data, dict) or data.get("version") != _VERSION:  # pyright: ignore[reportUnknownMemberType]
            return {}
        servers: Any = data.get("servers")  # pyright: ignore[reportUnknownMemberType]
        if not isinstance(servers, dict):
            return {}
        entries: dict[str, dict[str, Any]] = {}
        for name, entry in cast("dict[Any, Any]", servers).items():
            valid = _valid(entry)
            if valid is not None:
                entries[str(name)] = valid
        return entries


def _home_key(path: Path) -> bytes:
    """The key in ``path``, made (random, mode 0600) where there is none.

    A new key is written to a file of its own and then linked in at ``path``, which fails
    where one is there already: no process reads a key half written, and processes making
    one at the same time all end with the one that was linked first. A file there of
    another length, or that is not a regular file, is damaged: it is replaced. Where the key
    can be neither read nor made (a read-only home, a full disk), this process uses a key of
    its own: no record matches, and nothing is raised.
    """
    for _ in range(2):
        try:
            key = read_regular(path, _KEY_BYTES)
            if len(key) == _KEY_BYTES:
                return key
            damaged = True
        except FileNotFoundError:
            damaged = False
        except (FileTooLarge, NotRegularFile):
            damaged = True
        except OSError as exc:
            if exc.errno != errno.ELOOP:  # a symlink there: damaged as well
                logger.debug("start-times key not read from %s: %r", path, exc)
                break
            damaged = True
        try:
            if damaged:
                path.unlink(missing_ok=True)
            path.parent.mkdir(parents=True, exist_ok=True)
            key = os.urandom(_KEY_BYTES)
            _link_new(path, key)
        except FileExistsError:
            continue  # another process linked its key first: read it
        except OSError as exc:
            logger.debug("start-times key not made at %s: %r", path, exc)
            break
        return key
    return os.urandom(_KEY_BYTES)


def _link_new(path: Path, data: bytes) -> None:
    """Write ``data`` to a new file beside ``path`` (0600), then link it in at ``path``.

    Raises:
        FileExistsError: ``path`` exists.
        OSError: the file could not be written whole or linked.
    """
    part = path.with_name(f".{path.name}.{os.getpid()}.{os.urandom(4).hex()}")
    fd = os.open(part, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
    try:
        try:
            written = os.write(fd, data)
        finally:
            os.close(fd)
        if written != len(data):
            raise OSError(errno.ENOSPC, f"{len(data) - written} bytes of the key not written", str(part))
        os.link(part, path)
    finally:
        part.unlink(missing_ok=True)


def _valid(entry: Any) -> dict[str, Any] | None:
    """``entry`` as :meth:`StartTimes.remember` writes it, or ``None`` when any field is not:
    a record edited by hand or by another version is dropped entry by entry, never raises."""
    if not isinstance(entry, dict):
        return None
    entry = cast("dict[str, Any]", entry)
    launch, seconds, finished, at = (entry.get(k) for k in ("launch", "seconds", "finished", "at"))
    if not isinstance(launch, str) or not isinstance(finished, bool):
        return None
    if seconds is None:
        if finished:
            return None
    elif (seconds := _number(seconds)) is None:
        return None
    if (at := _number(at)) is None:
        return None
    valid: dict[str, Any] = {
        "launch": launch,
        "seconds": seconds,
        "finished": finished,
        "at": int(at) if at.is_integer() else at,
    }
    limits = entry.get("limits")
    if isinstance(limits, list):
        numbers = [_number(n) for n in cast("list[Any]", limits)]
        if len(numbers) == 2 and None not in numbers:
            valid["limits"] = numbers
    return valid


def _number(value: Any) -> float | None:
    """``value`` as a finite, non-negative number of seconds; ``None`` for anything else (a
    bool, a string, NaN, an infinity, an integer too large for a float)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if math.isfinite(number) and number >= 0 else None


def _at(entry: dict[str, Any]) -> float:
    return entry["at"]
