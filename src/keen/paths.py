"""Where Keen keeps its files (docs/architecture.md "Files on disk").

Every path derives from ``KEEN_HOME`` (default ``~/.keen``), read at call time so
tests and the demo can point it at a temporary directory.
"""

from __future__ import annotations

import functools
import os
import sys
from pathlib import Path

__all__ = [
    "WINDOWS_COLON",
    "auth_dir",
    "child",
    "keen_home",
    "logs_dir",
    "mcp_config_path",
    "pins_dir",
    "sessions_dir",
    "skill_dir_name",
    "skill_dir_spellings",
    "skills_config_path",
    "skills_dir",
]

WINDOWS_COLON = "_"
"""How a ``:`` of a skill name is spelled in its directory name on Windows, whose file
systems do not allow ``:`` in a name (``mcp:github`` -> ``mcp_github``)."""


def keen_home() -> Path:
    """``$KEEN_HOME`` if set and non-empty, else ``~/.keen``."""
    value = os.environ.get("KEEN_HOME")
    if value:
        return _home(value, None, None)
    return _home(None, os.environ.get("HOME"), os.environ.get("USERPROFILE"))


@functools.lru_cache(maxsize=64)
def _under(home: Path, *parts: str) -> Path:
    return home.joinpath(*parts)


@functools.lru_cache(maxsize=16)
def _home(value: str | None, home: str | None, profile: str | None) -> Path:
    # Built once per value of the variables it depends on (``~`` is HOME, USERPROFILE on
    # Windows): every pin lookup, log and skill path of every call starts here.
    del home, profile  # the cache key only: Path.home() reads them
    return Path(value).expanduser() if value else Path.home() / ".keen"


_CHILD = getattr(Path, "_make_child_relpath", None)


def child(parent: Path, name: str) -> Path:
    """``parent / name`` for ``name`` a single entry name (no separator, not ``.`` or
    ``..``: an ``os.scandir`` entry's name, ``SKILL.md``), the same path object.

    pathlib's own join for the entries of a listed directory (what ``Path.iterdir``
    uses), where one exists: ``parent / name`` parses ``name`` as a path and joins the
    parts again, about 1.8 µs on CPython 3.11 against 0.5, twice per skill at every start
    (``keen.skills.discover.scan`` and the store's rows). Elsewhere, ``parent / name``.
    Any other ``name`` (``a/b``, ``.``, empty) would make a path unlike ``parent / name``.
    """
    if _CHILD is None:
        return parent / name
    return _CHILD(parent, name)


def mcp_config_path() -> Path:
    """``$KEEN_HOME/mcp/configs.json`` (docs/architecture.md "Configuration")."""
    return _under(keen_home(), "mcp", "configs.json")


def auth_dir() -> Path:
    """``$KEEN_HOME/mcp/auth``: OAuth tokens, one 0600 file per server."""
    return _under(keen_home(), "mcp", "auth")


def pins_dir() -> Path:
    """``$KEEN_HOME/mcp/pins``: pinned tool definitions, one 0600 file per server."""
    return _under(keen_home(), "mcp", "pins")


def logs_dir() -> Path:
    """``$KEEN_HOME/logs``: stdio servers' stderr, one file per server."""
    return _under(keen_home(), "logs")


def skills_dir() -> Path:
    """``$KEEN_HOME/skills``: user-written and generated skills side by side."""
    return _under(keen_home(), "skills")


def skills_config_path() -> Path:
    """``$KEEN_HOME/skills/config.json``: ``{"is_enabled": {name: bool}}``."""
    return _under(keen_home(), "skills", "config.json")


def sessions_dir() -> Path:
    """``$KEEN_HOME/sessions``: one JSONL event log per agent session."""
    return _under(keen_home(), "sessions")


def skill_dir_name(name: str, platform: str | None = None) -> str:
    """The directory name, in ``skills_dir()``, of the skill called ``name``.

    The name itself, except on Windows (``platform == "win32"``), where ``:`` is not allowed
    in a file name and is spelled ``_`` (:data:`WINDOWS_COLON`): ``mcp:github`` ->
    ``mcp_github``. The skill's name (its SKILL.md frontmatter ``name``) stays ``mcp:github``.

    Args:
        name: a skill name (letters, digits, ``_ . : -``).
        platform: a ``sys.platform`` value; default this machine's.
    """
    if (platform or sys.platform) == "win32":
        return name.replace(":", WINDOWS_COLON)
    return name


def skill_dir_spellings(name: str) -> list[str]:
    """Every directory name a reader accepts for the skill ``name``: this platform's first,
    then the other's (a skills directory copied between Windows and POSIX still reads)."""
    first = skill_dir_name(name)
    return [
        first,
        *(other for other in dict.fromkeys((name, skill_dir_name(name, "win32"))) if other != first),
    ]
