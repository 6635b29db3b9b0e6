"""Where OAuth sign-ins are kept: one 0600 file per server, behind an interface.

Token and registration persistence stay separate from generated
skills and MCP metadata, behind an interface so the store can move from files to a
keychain later. The default, :class:`FileTokenStore`, writes
``$KEEN_HOME/mcp/auth/<server>.json`` (docs/architecture.md "Files on disk") atomically with mode
0600 in a 0700 directory. Shape (version 1)::

    {"version": 1, "server": "github",
     "resource_url": "https://api.example.com/mcp",      # the URL the tokens were issued for
     "tokens": {"access_token": "...", "token_type": "Bearer", "expires_in": 3600,
                "scope": "repo", "refresh_token": "...", "expires_at": 1767225600.0},
     "client_info": {...RFC 7591 registration, or the CIMD client id...},
     "protected_resource": {...RFC 9728 metadata...},
     "authorization_server": {...RFC 8414 metadata...},
     "pending_scope": "repo admin:org"}                  # asked for by a step-up challenge

``expires_at`` is absolute (epoch seconds) so a later process knows when the token
dies; :meth:`FileTokenStore.get_tokens` turns it back into a remaining ``expires_in``.
Every secret read or written is registered with :data:`keen._redact.redactor`.
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, ValidationError

from keen import paths
from keen._fs import atomic_write_json
from keen._redact import redactor
from keen.errors import AuthFailed, Remedy

# The SDK's models are imported where a token is read: every start registers the saved
# secrets (register_saved_secrets), which must not load the whole MCP SDK.
if TYPE_CHECKING:
    from mcp.shared.auth import OAuthClientInformationFull, OAuthToken

__all__ = ["AuthMetadata", "FileTokenStore", "TokenStore", "register_saved_secrets"]

logger = logging.getLogger(__name__)

_VERSION = 1


class AuthMetadata(BaseModel):
    """What a sign-in learned besides tokens: the resource URL the tokens belong to, the
    discovered RFC 9728 / RFC 8414 metadata (raw JSON objects, so refresh after a restart
    goes to the right token endpoint), and scopes a step-up challenge asked for.

    Stored as top-level fields of the server's auth file, beside ``tokens`` and ``client_info``.
    """

    model_config = ConfigDict(frozen=True)

    resource_url: str | None = None
    protected_resource: dict[str, Any] | None = None
    authorization_server: dict[str, Any] | None = None
    pending_scope: str | None = None


@runtime_checkable
class TokenStore(Protocol):
    """One server's OAuth state. The first four methods are the SDK's ``TokenStorage``
    protocol (``mcp.client.auth.TokenStorage``); the rest are Keen's.

    ``has_tokens()`` is synchronous so a factory can report it without awaiting.
    ``clear()`` forgets everything (tokens, registration, metadata) for a fresh sign-in.
    """

    server: str

    async def get_tokens(self) -> OAuthToken | None: ...

    async def set_tokens(self, tokens: OAuthToken) -> None: ...

    async def get_client_info(self) -> OAuthClientInformationFull | None: ...

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None: ...

    async def get_metadata(self) -> AuthMetadata: ...

    async def set_metadata(self, metadata: AuthMetadata) -> None: ...

    async def clear(self) -> None: ...

    def has_tokens(self) -> bool: ...


class FileTokenStore:
    """``<directory>/<server>.json`` (default directory ``$KEEN_HOME/mcp/auth``, read at call time).

    Reads are cheap (one small file) and done on every call, so two processes see each
    other's refreshes. Writes are read-modify-write under a lock, atomic (temp file +
    ``os.replace``) and 0600. A file that is not valid JSON or has the wrong shape raises
    :class:`~keen.errors.AuthFailed` naming the file and the fix (``keen mcp connect``,
    which replaces it); it is never overwritten silently by a partial update.
    """

    def __init__(self, server: str, directory: Path | None = None) -> None:
        self.server = server
        self._directory = directory
        self._lock = threading.Lock()

    @property
    def path(self) -> Path:
        return (self._directory or paths.auth_dir()) / f"{self.server}.json"

    # -- the SDK's TokenStorage ----------------------------------------------------------------------

    async def get_tokens(self) -> OAuthToken | None:
        raw = self._read().get("tokens")
        if not raw:
            return None
        data = dict(raw)
        expires_at = data.pop("expires_at", None)
        if isinstance(expires_at, int | float):
            data["expires_in"] = max(0, int(expires_at - time.time()))
        from mcp.shared.auth import OAuthToken

        tokens = self._model(OAuthToken, data, "tokens")
        redactor.add(tokens.access_token)
        redactor.add(tokens.refresh_token)
        return tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        redactor.add(tokens.access_token)
        redactor.add(tokens.refresh_token)
        data = tokens.model_dump(mode="json", exclude_none=True)
        if tokens.expires_in is not None:
            data["expires_at"] = time.time() + int(tokens.expires_in)
        self._update(lambda record: record.__setitem__("tokens", data))

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        raw = self._read().get("client_info")
        if not raw:
            return None
        from mcp.shared.auth import OAuthClientInformationFull

        info = self._model(OAuthClientInformationFull, raw, "client_info")
        redactor.add(info.client_secret)
        return info

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        redactor.add(client_info.client_secret)
        data = client_info.model_dump(mode="json", exclude_none=True)
        self._update(lambda record: record.__setitem__("client_info", data))

    # -- Keen's additions ----------------------------------------------------------------------------

    async def get_metadata(self) -> AuthMetadata:
        record = self._read()
        fields = {key: record.get(key) or None for key in AuthMetadata.model_fields}  # "" and {}: unset
        return self._model(AuthMetadata, fields, "metadata")

    async def set_metadata(self, metadata: AuthMetadata) -> None:
        def apply(record: dict[str, Any]) -> None:
            for key, value in metadata.model_dump(mode="json").items():
                if value is None:
                    record.pop(key, None)
                else:
                    record[key] = value

        self._update(apply)

    async def clear(self) -> None:
        with self._lock, contextlib.suppress(FileNotFoundError):
            self.path.unlink()

    def has_tokens(self) -> bool:
        """Whether an access token is saved (the file may still be unusable: that shows on use)."""
        try:
            return bool(self._read().get("tokens"))
        except AuthFailed:
            return True

    # -- file access ---------------------------------------------------------------------------------

    def _read(self) -> dict[str, Any]:
        path = self.path
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return {}
        except (OSError, UnicodeDecodeError) as exc:
            raise self._unreadable(f"cannot read it: {exc.__class__.__name__}") from None
        try:
            record = json.loads(text)
        except json.JSONDecodeError as exc:
            raise self._unreadable(f"invalid JSON at line {exc.lineno}, column {exc.colno}") from None
        if not isinstance(record, dict):
            raise self._unreadable("it is not a JSON object")
        if record.get("version") != _VERSION:
            raise self._unreadable(f"unsupported version {record.get('version')!r}")
        return record

    def _update(self, change: Any) -> None:
        with self._lock:
            record = self._read() or {"version": _VERSION, "server": self.server}
            change(record)
            directory = self.path.parent
            directory.mkdir(parents=True, exist_ok=True, mode=0o700)
            atomic_write_json(self.path, record, mode=0o600)

    def _model(self, model: Any, data: Any, field: str) -> Any:
        try:
            return model.model_validate(data)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(part) for part in first["loc"]) or "(value)"
            raise self._unreadable(f'field "{field}.{where}" is invalid') from None

    def _unreadable(self, why: str) -> AuthFailed:
        # Never quote file contents: they hold tokens.
        return AuthFailed(
            f'the saved sign-in for MCP server "{self.server}" at {self.path} is unusable ({why}); '
            "signing in again replaces the file",
            server=self.server,
            remedy=Remedy.SIGN_IN,
        )


def register_saved_secrets(directory: Path | None = None) -> None:
    """Register every token and client secret saved under ``directory`` (default
    ``$KEEN_HOME/mcp/auth``) with the redactor, also those of servers not connected now:
    text a model reads (a copy of a token in a workspace file) is redacted with them."""
    folder = directory or paths.auth_dir()
    try:
        files = sorted(folder.glob("*.json"))
    except OSError:
        return
    for file in files:
        try:
            record = FileTokenStore(file.stem, folder)._read()  # pyright: ignore[reportPrivateUsage]
        except AuthFailed:
            continue
        tokens, client = record.get("tokens"), record.get("client_info")
        for part, keys in ((tokens, ("access_token", "refresh_token")), (client, ("client_secret",))):
            if isinstance(part, dict):
                for key in keys:
                    value = part.get(key)  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
                    if isinstance(value, str):
                        redactor.add(value)
