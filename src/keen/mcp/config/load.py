"""Reading configs.json, or another host's ``{"mcpServers": ...}`` object given in code.

Above :mod:`keen.mcp.config.servers` (configs.json's own shape and its validation) and
:mod:`keen.mcp.config.importer` (other hosts' shape, converted as ``keen mcp import`` does,
each converted entry validated by ``servers``): the importer and the model form no circle.
"""

from __future__ import annotations

import contextlib
import logging
import os
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from keen._fs import BOM, link_target
from keen.errors import ConfigError
from keen.mcp.config.servers import MCPConfig, config_file, declared_kinds, read_json, validate_config

__all__ = ["load_config", "parse_config", "warn_if_others_read_secrets"]

logger = logging.getLogger(__name__)


def load_config(
    path: Path, *, environ: dict[str, str] | None = None, strict: bool = True, warn_readable: bool = True
) -> MCPConfig:
    """Read and validate configs.json (docs/architecture.md "Configuration").

    Args:
        path: the file, or a symlink to it; a missing or empty file is an empty config (a
            UTF-8 byte order mark at its start is skipped).
        environ: the variables ``${VAR}`` expands from; default ``os.environ``.
        strict: raise for the first invalid server entry; with ``False`` each invalid entry
            goes to :attr:`MCPConfig.invalid` instead and the other servers load (what
            :class:`~keen.mcp.Manager` does: one broken server never breaks the others).
        warn_readable: warn of a file other users can read that holds a credential written
            in clear (:func:`warn_if_others_read_secrets`); ``False`` for an edit, which
            writes the file 0600 and then warns only if it did not.

    Returns:
        The validated config, servers in file order.

    Raises:
        ConfigError: unreadable (a symlink to nothing or a loop of them too) or invalid
            (with ``strict=False``: only a file that cannot be used at all), with ``path``,
            ``server``, ``field``, ``line`` and ``column`` where they apply; the message says
            what to fix.
    """
    # A symlink to nothing read as a missing file: `keen mcp list` said "no servers" while
    # the user's servers sat in a dotfiles folder moved away; an edit refuses it (config_file).
    file = config_file(path)
    try:
        text = file.read_text(encoding="utf-8")
    except FileNotFoundError:
        return MCPConfig.model_construct()  # nothing to validate (servers.py's defer_build)
    except UnicodeDecodeError as exc:
        # PowerShell's `>` writes UTF-16: "codec can't decode byte 0xff" names no fix.
        utf16 = " (it looks like UTF-16)" if exc.object[:2] in (b"\xff\xfe", b"\xfe\xff") else ""
        raise ConfigError(
            f"cannot read {path}: it is not UTF-8 text{utf16}, byte {exc.object[exc.start]:#04x} at offset "
            f"{exc.start}; save it as UTF-8",
            path=str(path),
        ) from exc
    except NotADirectoryError as exc:
        raise ConfigError(
            f"cannot read {path}: a folder on its path is a file; fix the path "
            "(with the default one, $KEEN_HOME and its mcp folder must be folders)",
            path=str(path),
        ) from exc
    except OSError as exc:
        raise ConfigError(
            f"cannot read {path}: {exc.strerror or exc}; it must be a file you can read", path=str(path)
        ) from exc
    # The byte order mark Windows Notepad writes at the start of UTF-8 is no part of the JSON.
    text = text.removeprefix(BOM)
    if not text.strip():
        return MCPConfig.model_construct()  # an empty file (`touch configs.json`): as a missing one
    config = parse_config(text, source=str(path), environ=environ, strict=strict)
    if warn_readable:
        _warn(path, file, text)
    return config


_WARNED: set[str] = set()
"""The files :func:`warn_if_others_read_secrets` warned about: once a process (a command may
load configs.json several times)."""


def warn_if_others_read_secrets(path: Path) -> None:
    """Warn once a process when other users may read configs.json and it holds credentials
    written in clear (README "Configure servers").

    Keen writes the file 0600, but one written by hand (or by a dotfiles tool) may be 0644:
    every user of the machine could read its keys. The warning (the logger) names the servers
    and fields (:func:`keen.mcp.config.secrets.secrets_in_clear`), never a value, and both
    fixes. :func:`load_config` calls it; an edit calls it once it has saved the file, so a
    file it wrote 0600 gets no advice that is out of date.

    Args:
        path: configs.json, or a symlink to it; a file that cannot be read or parsed is left
            to the reader that will say why.
    """
    try:
        file = link_target(path)
        text = file.read_text(encoding="utf-8").removeprefix(BOM)
    except (OSError, UnicodeDecodeError):
        return
    with contextlib.suppress(ConfigError):
        _warn(path, file, text)


def _warn(path: Path, file: Path, text: str) -> None:
    """:func:`warn_if_others_read_secrets` of ``file`` (``path``, or the file its symlink
    points to), whose ``text`` is read already; raises ConfigError for ``text`` that is no JSON."""
    if os.name == "nt" or str(file) in _WARNED:
        return  # Windows: the file's ACL, not these mode bits, says who may read it
    try:
        mode = stat.S_IMODE(file.stat().st_mode)
    except OSError:
        return
    if not mode & 0o044 or not text.strip():
        return
    from keen._terminal import shell_word, terminal_text
    from keen.mcp.config.secrets import secrets_in_clear

    found = secrets_in_clear(read_json(text, source=str(path)))
    if not found:
        return
    _WARNED.add(str(file))
    # repr escapes what a terminal would act on in a name; name_start cut each field's at one.
    where = "; ".join(f"server {server!r} {terminal_text(field, one_line=True)}" for server, field in found)
    logger.warning(
        "%s can be read by other users (mode %04o) and holds credentials written in clear (%s); "
        "run chmod 600 %s, or put each value in an environment variable and write ${VAR} in its place "
        '(README "Configure servers")',
        terminal_text(str(path), one_line=True),
        mode,
        where,
        shell_word(str(path)),
    )


def parse_config(
    data: str | Mapping[str, Any],
    *,
    source: str = "configs.json",
    environ: Mapping[str, str] | None = None,
    strict: bool = True,
) -> MCPConfig:
    """Validate configs.json (the rules: :mod:`keen.mcp.config.servers`).

    Args:
        data: the file's text, or its parsed object. Besides the configs.json shape, an
            object ``{"mcpServers": {...}}`` (the shape Claude Desktop, Claude Code and Cursor
            use, and ``fastmcp.Client`` takes) is converted as ``keen mcp import`` converts it,
            so ``Manager(config=parse_config({"mcpServers": {...}}))`` works; what the
            conversion drops (Keen's own ``trust_annotations``, ``inherit_env`` and
            ``pinning``, another host's ``autoApprove``) is logged as a warning: give those in
            configs.json's shape.
        source: how to name the file in messages.
        environ: the variables ``${VAR}`` expands from; default ``os.environ``.
        strict: raise for the first invalid server entry; with ``False`` each invalid entry
            (in the ``mcpServers`` shape too: one its conversion refuses) goes to
            :attr:`MCPConfig.invalid` and the rest load.

    Returns:
        The validated config.

    Raises:
        ConfigError: invalid JSON or (``strict``) an invalid entry; the message names the
            field and the fix.
    """
    raw: Any = read_json(data, source=source) if isinstance(data, str) else data
    if isinstance(raw, Mapping) and "mcpServers" in raw:
        if isinstance(data, str):
            # In the file Keen reads, another host's shape is a mistake with a known fix.
            raise ConfigError(
                f"{source}: this is another host's {{\"mcpServers\": ...}} file, not Keen's configs.json; "
                f"move it aside and convert it: mv {source} {source}.hosts && keen mcp import {source}.hosts",
                path=source,
                field="mcpServers",
            )
        raw, refused = _from_mcp_servers(raw, source=source, strict=strict)
        config = validate_config(raw, source=source, environ=environ, strict=strict)
        # An entry the conversion refused is one invalid server, as an invalid configs.json
        # entry is: with strict=False the others load.
        for name, (message, entry) in refused.items():
            config.invalid[name] = message
            config.invalid_kinds[name] = declared_kinds(entry)
        return config
    config = validate_config(raw, source=source, environ=environ, strict=strict)
    # A fresh object, validated from this very text: what remember_valid may record.
    return config.from_text(data) if isinstance(data, str) else config


def _from_mcp_servers(
    raw: Mapping[str, Any], *, source: str, strict: bool
) -> tuple[dict[str, Any], dict[str, tuple[str, Any]]]:
    """``{"mcpServers": {...}}`` as configs.json data, and each refused entry's message and
    entry by name; with ``strict`` a refused entry is a ConfigError."""
    # Imported for this shape only: reading configs.json (every session) needs none of it.
    from keen.mcp.config.importer import OWN_SETTING_FIX, import_mcp_servers

    result = import_mcp_servers(dict(raw), source=source)
    # What the conversion dropped (Keen's own settings such as trust_annotations, another
    # host's autoApprove) would otherwise vanish without a word: say it, as keen mcp import does.
    # A dict given in code is no file `keen mcp add-json` edits: its author writes the fix.
    in_code = 'give it in configs.json\'s shape, {"version": 1, "servers": {...}}, in the config you pass'
    for name, note in result.notes:
        logger.warning("%s: server %r: %s", source, name, note.replace(OWN_SETTING_FIX, in_code))
    refused: dict[str, tuple[str, Any]] = {}
    entries = raw["mcpServers"] if isinstance(raw["mcpServers"], Mapping) else {}
    for name, reason in result.refused:
        message = f"{source}: server {name!r}: {reason}"
        if strict:
            raise ConfigError(message, path=source, server=name)
        refused[name] = (message, entries.get(name))
    return {"version": 1, "servers": result.servers}, refused
