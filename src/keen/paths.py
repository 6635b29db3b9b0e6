"""Where Keen keeps its files (docs/architecture.md "Files on disk").

Every path derives from ``KEEN_HOME`` (default ``~/.keen``), read at call time so
tests and the demo can point it at a temporary directory.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = [
    "auth_dir",
    "keen_home",
    "logs_dir",
    "mcp_config_path",
    "pins_dir",
    "sessions_dir",
    "skills_config_path",
    "skills_dir",
]


def keen_home() -> Path:
    """``$KEEN_HOME`` if set and non-empty, else ``~/.keen``."""
    value = os.environ.get("KEEN_HOME")
    return Path(value).expanduser() if value else Path.home() / ".keen"


def mcp_config_path() -> Path:
    """``$KEEN_HOME/mcp/configs.json`` (docs/architecture.md "Configuration")."""
    return keen_home() / "mcp" / "configs.json"


def auth_dir() -> Path:
    """``$KEEN_HOME/mcp/auth``: OAuth tokens, one 0600 file per server."""
    return keen_home() / "mcp" / "auth"


def pins_dir() -> Path:
    """``$KEEN_HOME/mcp/pins``: pinned tool definitions, one 0600 file per server."""
    return keen_home() / "mcp" / "pins"


def logs_dir() -> Path:
    """``$KEEN_HOME/logs``: stdio servers' stderr, one file per server."""
    return keen_home() / "logs"


def skills_dir() -> Path:
    """``$KEEN_HOME/skills``: user-written and generated skills side by side."""
    return keen_home() / "skills"


def skills_config_path() -> Path:
    """``$KEEN_HOME/skills/config.json``: ``{"is_enabled": {name: bool}}``."""
    return skills_dir() / "config.json"


def sessions_dir() -> Path:
    """``$KEEN_HOME/sessions``: one JSONL event log per agent session."""
    return keen_home() / "sessions"
