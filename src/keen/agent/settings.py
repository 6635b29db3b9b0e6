"""``$KEEN_HOME/config.toml``: defaults for ``keen chat`` (model, base URL, permission mode).

The file is optional; every key is too::

    model = "openai:gpt-4.1-mini"        # provider:name, as --model takes it
    base_url = "http://127.0.0.1:11434/v1"  # an OpenAI-compatible server (Ollama, vLLM, ...)
    mode = "ask"                           # read-only | ask | auto
    model_timeout = 600                    # seconds the model may stay silent (the SDKs' default)

    [mcp]                                  # every MCP server's defaults (keen.mcp.config.defaults)
    timeout = 30

API keys are never read from this file (nor written anywhere by Keen): they come from the
providers' usual environment variables, ``OPENAI_API_KEY`` and ``ANTHROPIC_API_KEY``. A key
found in the file is refused with an error that says so, before it can be used or logged.
Command-line options win over the file.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast, get_args

from keen import paths
from keen._record import FrozenRecord
from keen.capabilities import PermissionMode
from keen.errors import KeenError

__all__ = ["MODES", "ChatSettings", "SettingsError", "base_url_problem", "load_settings", "settings_path"]

MODES: tuple[str, ...] = get_args(PermissionMode)
_KEYS = {"model", "base_url", "mode"}
_NUMBERS = {"model_timeout"}


class SettingsError(KeenError):
    """``config.toml`` cannot be read or holds a bad value (``path`` names the file)."""

    code = "settings_error"

    def __init__(self, message: str, *, path: Path) -> None:
        super().__init__(message)
        self.path = path


class ChatSettings(FrozenRecord):
    """What ``keen chat`` runs with. ``model``: ``provider:name`` or None (not chosen yet);
    ``base_url``: an OpenAI-compatible endpoint or None; ``mode``: the permission mode;
    ``model_timeout``: seconds the model may stay silent (before its answer begins, and
    between two of its chunks) before the request fails, None for the provider SDK's own.
    A frozen dataclass (:mod:`keen._record`: made on ``keen chat``'s way to its first
    request, where the decorator would compile its methods at every start)."""

    model: str | None
    base_url: str | None
    mode: PermissionMode
    model_timeout: float | None

    _fields = ("model", "base_url", "mode", "model_timeout")
    __match_args__ = _fields

    def __init__(
        self,
        model: str | None = None,
        base_url: str | None = None,
        mode: PermissionMode = "ask",
        model_timeout: float | None = None,
    ) -> None:
        self._set(model=model, base_url=base_url, mode=mode, model_timeout=model_timeout)

    def override(self, **values: Any) -> ChatSettings:
        """A copy with the given non-None values (command-line options) replacing these.

        Raises:
            TypeError: a name that is not a field, as :func:`dataclasses.replace` raises it.
        """
        return self._replace(**{k: v for k, v in values.items() if v is not None})


def base_url_problem(url: str) -> str | None:
    """What is wrong with a model endpoint's base URL, worded to follow its name (``--base-url``,
    ``base_url``), or None when it is an ``http``/``https`` URL with a host.

    Without its scheme (``localhost:11434/v1``, the usual slip) the SDKs could not connect
    and Keen said so three times over, "check that the server is running", of a server that
    was running.
    """
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(url.strip())
        scheme, host = parts.scheme.lower(), parts.hostname
    except ValueError:  # an unclosed [IPv6 bracket
        scheme, host = "", None
    if scheme in ("http", "https") and host:
        return None
    import os

    from keen._redact import redact_url, redactor

    example = "http://127.0.0.1:11434/v1"
    if not any(mark in url for mark in ".:/"):
        # No address has none of these, a pasted API key has none: never echo it back.
        return f"is not an http:// or https:// URL with a host (its value, shown nowhere, looks like a key); write it whole, e.g. {example}"
    for variable in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY"):  # a key that has a dot in it, too
        redactor.add(os.environ.get(variable, "").strip())
    # Shown with a key in it (user:key@host) redacted, read as the URL it was meant to be.
    shown = redactor.redact(redact_url(url))
    if "://" not in url:
        example = redactor.redact(redact_url(f"http://{url.strip()}"))
        shown = example.removeprefix("http://")
    return f"{shown!r} is not an http:// or https:// URL with a host; write it whole, e.g. {example}"


def settings_path() -> Path:
    """``$KEEN_HOME/config.toml``."""
    return paths.keen_home() / "config.toml"


def load_settings(path: Path | None = None) -> ChatSettings:
    """Read ``config.toml`` (module doc); a missing file gives the defaults.

    Raises:
        SettingsError: the file is not TOML, has an unknown key, a value of the wrong type,
            an unknown mode, or an API key.
    """
    path = path or settings_path()
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return ChatSettings()
    except (OSError, UnicodeDecodeError) as exc:
        raise SettingsError(f"cannot read {path}: {exc}", path=path) from exc
    import tomllib  # only with a file to parse: a chat without one builds its prompt without it

    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise SettingsError(f"{path} is not valid TOML ({exc}); fix it or delete it", path=path) from exc
    keyish = [k for k in data if "key" in k.lower() or "token" in k.lower() or "secret" in k.lower()]
    if keyish:
        raise SettingsError(
            f"{path} holds {', '.join(sorted(keyish))}: Keen never reads API keys from a file; remove it "
            "and set OPENAI_API_KEY or ANTHROPIC_API_KEY in the environment instead",
            path=path,
        )
    unknown = sorted(set(data) - _KEYS - _NUMBERS - {"mcp"})  # [mcp]: keen.mcp.config.defaults
    if unknown:
        raise SettingsError(
            f"{path}: unknown key(s) {', '.join(unknown)}; the keys are model, base_url, mode, "
            "model_timeout and the [mcp] table",
            path=path,
        )
    for key in _NUMBERS & set(data):
        value = data[key]
        if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
            raise SettingsError(
                f"{path}: {key} must be a number of seconds above 0, not {value!r}", path=path
            )
    for key in _KEYS & set(data):
        if not isinstance(data[key], str) or not data[key]:
            raise SettingsError(f"{path}: {key} must be a non-empty string", path=path)
    problem = base_url_problem(data["base_url"]) if "base_url" in data else None
    if problem:
        raise SettingsError(f"{path}: base_url {problem}", path=path)
    mode = data.get("mode", "ask")
    if mode not in MODES:
        raise SettingsError(f"{path}: mode must be one of {', '.join(MODES)}, not {mode!r}", path=path)
    timeout = data.get("model_timeout")
    return ChatSettings(
        model=data.get("model"),
        base_url=data.get("base_url"),
        mode=cast(PermissionMode, mode),
        model_timeout=None if timeout is None else float(timeout),
    )
