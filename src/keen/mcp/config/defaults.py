"""Defaults for every MCP server: the ``[mcp]`` table of ``$KEEN_HOME/config.toml`` and the
``KEEN_MCP_TIMEOUT`` environment variable (docs/architecture.md "Configuration").

::

    [mcp]
    timeout = 30        # seconds each server has to start and answer initialize (default 15)
    max_starting = 4    # stdio servers started at once (default: one per CPU, more while starts are quick)

``KEEN_MCP_TIMEOUT`` (seconds) wins over the file, and a server's own ``timeouts.connect`` in
configs.json wins over both. The other keys of config.toml are ``keen chat``'s
(``keen.agent.settings``).
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from keen import paths
from keen.errors import ConfigError

__all__ = [
    "BUILTIN_CONNECT_TIMEOUT",
    "DEFAULT_REFRESH_INTERVAL",
    "TIMEOUT_ENV",
    "McpDefaults",
    "default_connect_timeout",
    "default_max_starting",
    "load_defaults",
    "more_time_advice",
    "split_advice",
]

BUILTIN_CONNECT_TIMEOUT = 15.0
DEFAULT_REFRESH_INTERVAL = 0.5
"""Seconds: at most one re-list per server per interval, however many notices arrive (here,
not in ``keen.mcp.listing.watch``, so the Manager's signature needs no MCP SDK import)."""
TIMEOUT_ENV = "KEEN_MCP_TIMEOUT"
_KEYS = ("timeout", "max_starting")
_MORE_TIME = "to give it more time, "


@dataclass(frozen=True)
class McpDefaults:
    """``timeout``: the connect limit a server without its own ``timeouts.connect`` gets;
    ``max_starting``: how many stdio servers start at once (``None``: one per CPU, more while
    starts are quick: :mod:`keen.mcp.connection.starts`)."""

    timeout: float = BUILTIN_CONNECT_TIMEOUT
    max_starting: int | None = None


_cache: dict[tuple[Any, ...], McpDefaults] = {}


def load_defaults(home: Path | None = None) -> McpDefaults:
    """The defaults from ``KEEN_MCP_TIMEOUT`` and config.toml's ``[mcp]`` table (module doc).

    Read again whenever the file or the variable changed (cached by the file's stat data).

    Raises:
        ConfigError: the variable is not a positive number of seconds, or the file is not
            TOML or its ``[mcp]`` table holds an unknown key or a bad value; the message says
            what to set.
    """
    path = (home or paths.keen_home()) / "config.toml"
    env = os.environ.get(TIMEOUT_ENV, "").strip()
    try:
        st = path.stat()
        key: tuple[Any, ...] = (str(path), st.st_mtime_ns, st.st_size, st.st_ino, env)
    except OSError:
        key = (str(path), None, env)
    found = _cache.get(key)
    if found is None:
        found = _read(path, env)
        _cache.clear()
        _cache[key] = found
    return found


def default_connect_timeout() -> float:
    """The connect time limit of a server whose entry sets none (:func:`load_defaults`)."""
    return load_defaults().timeout


def default_max_starting() -> int:
    """How many stdio servers start at once: config.toml's ``[mcp] max_starting``, else the
    CPUs this process may use (at least 2)."""
    configured = load_defaults().max_starting
    if configured is not None:
        return configured
    count = getattr(os, "process_cpu_count", os.cpu_count)()
    return max(2, count or 2)


def more_time_advice(phase: str, config: str = "configs.json") -> str:
    """The sentence a timed-out server's error ends with: how to give it more time
    (``phase``: ``connect`` or ``list_tools``, the ``timeouts`` field that ran out; ``config``:
    where the server's entry is, as messages name it: a config given in code is no
    configs.json)."""
    every = f" or {TIMEOUT_ENV}" if phase == "connect" else ""
    return f'{_MORE_TIME}raise "timeouts.{phase}" in {config}{every}'


def split_advice(message: str) -> tuple[str, str]:
    """``message`` less its :func:`more_time_advice` ending, and that ending (``""`` when it
    has none): a listing that cuts long errors keeps the advice whole."""
    head, found, advice = message.rpartition("; " + _MORE_TIME)
    return (head, _MORE_TIME + advice) if found else (message, "")


def _read(path: Path, env: str) -> McpDefaults:
    table = _mcp_table(path)
    unknown = sorted(set(table) - set(_KEYS))
    if unknown:
        raise ConfigError(
            f"{path}: unknown key(s) {', '.join(unknown)} in [mcp]; the keys are {', '.join(_KEYS)}",
            path=str(path),
        )
    timeout = table.get("timeout", BUILTIN_CONNECT_TIMEOUT)
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0:
        raise ConfigError(
            f"{path}: [mcp] timeout must be a positive number of seconds, like timeout = 30", path=str(path)
        )
    starting = table.get("max_starting")
    if starting is not None and (isinstance(starting, bool) or not isinstance(starting, int) or starting < 0):
        raise ConfigError(
            f"{path}: [mcp] max_starting must be a whole number (0: no bound), like max_starting = 4",
            path=str(path),
        )
    if env:
        try:
            timeout = float(env)
        except ValueError:
            timeout = 0.0
        if not timeout > 0 or timeout == float("inf"):
            raise ConfigError(
                f"{TIMEOUT_ENV}={env!r} is not a positive number of seconds; set it like "
                f"{TIMEOUT_ENV}=30, or unset it",
                field=TIMEOUT_ENV,
            )
    return McpDefaults(timeout=float(timeout), max_starting=starting)


def _mcp_table(path: Path) -> dict[str, Any]:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (FileNotFoundError, NotADirectoryError):
        # No file, or KEEN_HOME is not a folder: the command's own check of KEEN_HOME says
        # what to do about that, in its words.
        return {}
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read {path}: {exc}; check its permissions", path=str(path)) from exc
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path} is not valid TOML ({exc}); fix it or delete it", path=str(path)) from exc
    table = data.get("mcp", {})
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: mcp must be a table ([mcp] with timeout = 30 under it)", path=str(path))
    return table
