"""Test helpers: paths and parameters for the misbehaving stdio servers in ``tests/servers``.

Import as ``from helpers import stdio_params, stdio_entry`` (pytest puts ``tests/`` on
``sys.path``); HTTP servers are in :mod:`helpers.http_servers`.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from helpers.forkserver import script_args

if TYPE_CHECKING:  # imported where used: the xdist controller imports this package (the fork
    # server's module) before it starts the fork server, and the MCP SDK cost it 1 s of CPU
    from mcp.client.stdio import StdioServerParameters

__all__ = ["SERVERS_DIR", "server_script", "stdio_entry", "stdio_params"]

SERVERS_DIR = Path(__file__).resolve().parent.parent / "servers"


def server_script(name: str) -> Path:
    """Absolute path of ``tests/servers/<name>.py``; ``FileNotFoundError`` if there is none."""
    path = SERVERS_DIR / f"{name}.py"
    if not path.is_file():
        raise FileNotFoundError(
            f"no test server {name!r}; have: {sorted(p.stem for p in SERVERS_DIR.glob('*.py'))}"
        )
    return path


def stdio_params(
    name: str, *args: str, env: dict[str, str] | None = None, cwd: str | Path | None = None
) -> StdioServerParameters:
    """SDK parameters that run ``tests/servers/<name>.py`` with this interpreter."""
    from mcp.client.stdio import StdioServerParameters

    return StdioServerParameters(
        command=sys.executable, args=script_args(str(server_script(name)), *args), env=env, cwd=cwd
    )


def stdio_entry(
    name: str,
    *args: str,
    env: dict[str, str] | None = None,
    cwd: str | Path | None = None,
    timeouts: dict[str, float] | None = None,
) -> dict[str, Any]:
    """A Keen configs.json server entry (stdio) for ``tests/servers/<name>.py``."""
    entry: dict[str, Any] = {
        "transport": "stdio",
        "command": sys.executable,
        "args": script_args(str(server_script(name)), *args),
    }
    if env:
        entry["env"] = dict(env)
    if cwd is not None:
        entry["cwd"] = str(cwd)
    if timeouts:
        entry["timeouts"] = dict(timeouts)
    return entry
