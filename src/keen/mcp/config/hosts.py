"""Other MCP hosts' configuration files on this machine (``keen mcp import --detect``).

Where each host keeps its servers (the user's files, then the current directory's
project files):

==========================  ===============================================================
Claude Desktop              ``<config>/Claude/claude_desktop_config.json``
Claude Code                 ``~/.claude.json`` (user servers, and ``projects.<path>`` ones);
                            ``./.mcp.json``
Cursor                      ``~/.cursor/mcp.json``; ``./.cursor/mcp.json``
VS Code                     ``<config>/Code/User/settings.json`` (``mcp.servers``) and
                            ``<config>/Code/User/mcp.json``; ``./.vscode/mcp.json``
Windsurf                    ``~/.codeium/windsurf/mcp_config.json``
Gemini CLI                  ``~/.gemini/settings.json``; ``./.gemini/settings.json``
==========================  ===============================================================

``~`` is ``$HOME`` (``%USERPROFILE%`` on Windows); ``<config>`` is ``$XDG_CONFIG_HOME``
(default ``~/.config``) on Linux, ``~/Library/Application Support`` on macOS and
``%APPDATA%`` on Windows. Both come from the ``environ`` given, so a caller (and a test)
can point them at another home.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from keen.errors import ConfigError
from keen.mcp.config.importer import load_host_document, project_servers

__all__ = ["HostFile", "detect_host_files", "host_file_candidates"]


@dataclass(frozen=True)
class HostFile:
    """One host configuration file found on this machine.

    Attributes:
        host: the host's name (``Claude Desktop``, ``Claude Code``, ``Cursor``, ``VS Code``,
            ``Windsurf``, ``Gemini CLI``), with `` (project)`` for a current-directory file.
        path: the file.
        servers: the names of the servers it configures for the user (or the project).
        projects: Claude Code's project-scoped servers: ``{project path: [names]}``.
        error: why the file could not be read (then ``servers`` is empty), else ``""``.
    """

    host: str
    path: Path
    servers: list[str] = field(default_factory=lambda: list[str]())
    projects: dict[str, list[str]] = field(default_factory=lambda: dict[str, list[str]]())
    error: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "host": self.host,
            "path": str(self.path),
            "servers": self.servers,
            "projects": self.projects,
            "error": self.error,
        }


def host_file_candidates(
    environ: Mapping[str, str] | None = None, *, platform: str | None = None, cwd: Path | None = None
) -> list[tuple[str, Path]]:
    """``(host, path)`` for every place a host keeps MCP servers (module doc), found or not.

    Args:
        environ: where ``HOME``/``USERPROFILE``, ``XDG_CONFIG_HOME`` and ``APPDATA`` come
            from; default ``os.environ``.
        platform: ``sys.platform`` value deciding the config directory; default this one.
        cwd: the project directory for project files; default the current directory.
    """
    env = os.environ if environ is None else environ
    platform = platform or sys.platform
    home_value = env.get("HOME") or (env.get("USERPROFILE") if platform == "win32" else None)
    home = Path(home_value) if home_value else Path.home()
    if platform == "win32":
        config = Path(env["APPDATA"]) if env.get("APPDATA") else home / "AppData" / "Roaming"
    elif platform == "darwin":
        config = home / "Library" / "Application Support"
    else:
        config = Path(env["XDG_CONFIG_HOME"]) if env.get("XDG_CONFIG_HOME") else home / ".config"
    here = cwd or Path.cwd()
    return [
        ("Claude Desktop", config / "Claude" / "claude_desktop_config.json"),
        ("Claude Code", home / ".claude.json"),
        ("Cursor", home / ".cursor" / "mcp.json"),
        ("VS Code", config / "Code" / "User" / "settings.json"),
        ("VS Code", config / "Code" / "User" / "mcp.json"),
        ("Windsurf", home / ".codeium" / "windsurf" / "mcp_config.json"),
        ("Gemini CLI", home / ".gemini" / "settings.json"),
        ("Claude Code (project)", here / ".mcp.json"),
        ("Cursor (project)", here / ".cursor" / "mcp.json"),
        ("VS Code (project)", here / ".vscode" / "mcp.json"),
        ("Gemini CLI (project)", here / ".gemini" / "settings.json"),
    ]


def detect_host_files(
    environ: Mapping[str, str] | None = None, *, platform: str | None = None, cwd: Path | None = None
) -> list[HostFile]:
    """The host files that exist (arguments as :func:`host_file_candidates`), each with the
    names of the servers it holds. A file that cannot be read or parsed is listed with its
    ``error``; nothing raises. Values (commands, URLs, keys) are not read out."""
    found: list[HostFile] = []
    seen: set[Path] = set()
    for host, path in host_file_candidates(environ, platform=platform, cwd=cwd):
        resolved = path.resolve()
        if resolved in seen or not path.is_file():
            continue  # a project file in the home directory is the user file
        seen.add(resolved)
        try:
            data = load_host_document(path)
        except ConfigError as exc:
            found.append(HostFile(host, path, error=exc.message))
            continue
        projects: dict[str, list[str]] = {}
        for project, name, _ in project_servers(data):
            projects.setdefault(project, []).append(name)
        found.append(HostFile(host, path, _server_names(data), projects))
    return found


def _server_names(data: Any) -> list[str]:
    if not isinstance(data, dict):
        return []
    vscode = data.get("mcp")
    for servers in (
        data.get("mcpServers"),
        vscode.get("servers") if isinstance(vscode, dict) else None,
        data.get("servers") if "version" not in data else None,
    ):
        if isinstance(servers, dict):
            return [str(name) for name in servers]
    return []
