"""configs.json's servers without its validation models, when that very text validated before.

Validating configs.json imports pydantic and builds its models: about 250 ms of CPU with
292 servers, which ``keen chat`` would spend before its first model request only to learn
the servers' names and whether each is enabled. After a full validation
(:func:`keen.mcp.config.load_config`) found every entry valid, :func:`remember_valid`
records a digest of the text it validated; while the text stays the same, :func:`known_servers`
reads the names and ``enabled`` flags with ``json`` alone. The file is validated in full
later all the same (the Manager loads it when the servers start): this is only what a
prompt needs, early.

A text whose digest is not recorded (new, edited, never validated, or one whose validation
found a broken entry) is not read here: the caller validates it first, so a broken
configuration gives the same error as ever, before anything else happens. Text with
``${VAR}`` is never recorded, as its meaning depends on the environment; the digest covers
Keen's version and the validation rules' module, so an upgrade validates again.

The record is ``$KEEN_HOME/cache/configs-valid.json``: the digest and nothing of the file.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from keen import paths
from keen._digest import sha256
from keen._fs import BOM, atomic_write_json, leads_nowhere
from keen._version import __version__

if TYPE_CHECKING:
    from keen.mcp.config.servers import MCPConfig

__all__ = ["known_servers", "remember_valid", "trust_settings"]

_RECORD = "configs-valid.json"


def _record_path() -> Path:
    return paths.keen_home() / "cache" / _RECORD


def _digest(path: Path, text: str) -> str | None:
    """The record's key for ``text`` read from ``path``, or None when it may not be recorded."""
    # A ${VAR} makes its validity the environment's; JSON may also spell "$" or "{" as an
    # escape ("\u0024{VAR}"), which the validation decodes and expands all the same.
    lowered = text.lower()
    if "${" in text or "\\u0024" in lowered or "\\u007b" in lowered:
        return None
    try:
        rules = (Path(__file__).with_name("servers.py")).stat()
    except OSError:
        return None
    seed = f"{__version__}\0{rules.st_size}:{rules.st_mtime_ns}\0{path.absolute()}\0"
    return sha256(seed.encode() + text.encode("utf-8", "surrogatepass")).hexdigest()


def _servers(text: str) -> list[tuple[str, bool]] | None:
    """Names and ``enabled`` flags of configs.json's text read as plain JSON, in file order;
    None when it is not plainly that shape (the validation says what it is)."""
    entries = _entries(text)
    if entries is None:
        return None
    out: list[tuple[str, bool]] = []
    for name, entry in entries.items():
        enabled: Any = entry.get("enabled", True)
        if not isinstance(enabled, bool):
            return None  # "true", 1...: as the validation reads them, not guessed here
        out.append((name, enabled))
    return out


def _entries(text: str) -> dict[str, Mapping[str, Any]] | None:
    """configs.json's server entries, read as plain JSON; None when it is not plainly that
    shape (the validation says what it is)."""
    try:
        raw: Any = json.loads(text)
    except ValueError:
        return None
    if not isinstance(raw, dict):
        return None
    servers: Any = raw.get("servers", {})  # pyright: ignore[reportUnknownMemberType]
    if not isinstance(servers, dict):
        return None
    out: dict[str, Mapping[str, Any]] = {}
    for name, entry in servers.items():  # pyright: ignore[reportUnknownVariableType]
        if not isinstance(entry, Mapping):
            return None
        out[str(name)] = entry  # pyright: ignore[reportUnknownArgumentType]
    return out


def _validated_text(path: Path) -> str | None:
    """The text of configs.json at ``path`` when a full validation of the same text found
    every entry valid (module doc); ``""`` for a missing or empty file; None when it must be
    validated first: never recorded, changed since, or unreadable."""
    try:
        text = path.read_text(encoding="utf-8").removeprefix(BOM)  # as load_config reads it
    except FileNotFoundError:
        # A symlink to nothing (the file's, or a folder's on its way) is no missing file:
        # load_config says what is wrong with it.
        return None if leads_nowhere(path) else ""
    except (OSError, UnicodeDecodeError):
        return None
    if not text.strip():
        return ""
    key = _digest(path, text)
    if key is None:
        return None
    try:
        record = json.loads(_record_path().read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):  # damaged: validate, as with no record
        return None
    if not isinstance(record, dict) or record.get("digest") != key:  # pyright: ignore[reportUnknownMemberType]
        return None
    return text


def known_servers(path: Path) -> list[tuple[str, bool]] | None:
    """Each server of configs.json at ``path`` and whether it is enabled, in file order,
    read without validating, when a full validation of the same text found every entry
    valid (module doc); ``[]`` for a missing or empty file (no servers).

    Returns:
        ``None`` when the text must be validated first: never recorded, changed since, or
        unreadable.
    """
    text = _validated_text(path)
    if text is None:
        return None
    return _servers(text) if text else []


_PINNING = frozenset({"quarantine", "warn", "off"})


def trust_settings(path: Path) -> dict[str, tuple[bool, str | None]] | None:
    """Each server's ``trust_annotations`` and ``pinning`` (``None``: its transport's
    default, never ``off``) in configs.json at ``path``, read without validating when a full
    validation of the same text found every entry valid (module doc); ``{}`` for a missing
    or empty file. Only literal JSON values are read here: any other spelling the validation
    accepts (``"true"``, ``1``) is left to it, so both readers give one answer.

    Returns:
        ``None`` when the text must be validated first (see :func:`known_servers`), or when
        a value is not a literal boolean or policy name.
    """
    text = _validated_text(path)
    if not text:
        return None if text is None else {}
    entries = _entries(text)
    if entries is None:
        return None
    out: dict[str, tuple[bool, str | None]] = {}
    for name, entry in entries.items():
        trusting: Any = entry.get("trust_annotations", False)
        pinning: Any = entry.get("pinning")
        if not isinstance(trusting, bool) or not (pinning is None or pinning in _PINNING):
            return None
        out[name] = (trusting, pinning)
    return out


def remember_valid(path: Path, config: MCPConfig) -> bool:
    """Record configs.json at ``path`` as valid when ``config``, its full validation
    (:func:`keen.mcp.config.load_config`), found every entry valid. The text recorded is the
    one validated (:attr:`MCPConfig.source_text`), not the file read again: an edit made
    since is never vouched for.

    Returns:
        Whether it was recorded. Never raises: a cache that cannot be written only means
        the next start validates first.
    """
    text = config.source_text
    if config.invalid or not text:
        return False
    key = _digest(path, text)
    servers = [(name, entry.enabled) for name, entry in config.servers.items()]
    if key is None or _servers(text) != servers:
        return False
    record = _record_path()
    try:
        if json.loads(record.read_text(encoding="utf-8")).get("digest") == key:
            return True
    except (OSError, ValueError, AttributeError, RecursionError):
        pass
    try:
        record.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_json(record, {"digest": key}, fsync=False)
    except OSError:
        return False
    return True
