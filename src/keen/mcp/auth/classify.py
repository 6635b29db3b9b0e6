"""Map an OAuth server's failure to ``auth_required`` or ``auth_failed``.

The rule (docs/architecture.md "Servers and their states"): no usable sign-in and a
challenge -> :class:`~keen.errors.AuthRequired` (state ``auth_required``, remedy
:attr:`~keen.errors.Remedy.SIGN_IN`); a saved sign-in that the server rejected, or that could not be
renewed -> :class:`~keen.errors.AuthFailed` (state ``auth_failed``).
"""

from __future__ import annotations

import httpx2
from mcp.client.auth import OAuthFlowError

from keen._redact import redactor
from keen.errors import AuthFailed, AuthRequired, Remedy, exception_chain
from keen.mcp.auth.provider import KeenOAuthProvider
from keen.mcp.connection.translate import AUTH_STATUSES, auth_status_error

__all__ = ["classify_auth_failure"]


def classify_auth_failure(
    error: BaseException | None = None,
    *,
    server: str,
    auth: httpx2.Auth | None = None,
    status_code: int | None = None,
    has_token: bool | None = None,
) -> AuthRequired | AuthFailed | None:
    """The auth error behind a failed connection or call, or None if it was not about auth.

    Looks, in order, at: an ``AuthRequired``/``AuthFailed`` inside ``error`` (exception groups
    and causes are searched; the OAuth provider raises these inside the transport's task
    group); the failure a :class:`KeenOAuthProvider` ``auth`` recorded (a background step-up
    is recorded, not raised); an SDK ``OAuthFlowError``; finally the HTTP ``status_code``
    the caller observed (401/403), mapped by :func:`keen.mcp.connection.translate.auth_status_error`
    with ``has_token`` (default: what ``auth`` knows). Messages are redacted and end with
    the next step.
    """
    for exc in exception_chain(error):
        if isinstance(exc, AuthRequired | AuthFailed):
            return exc
    provider = auth if isinstance(auth, KeenOAuthProvider) else None
    if provider is not None and provider.failure is not None:
        return provider.failure
    for exc in exception_chain(error):
        if isinstance(exc, OAuthFlowError):
            return AuthFailed(
                redactor.redact(f'OAuth sign-in for MCP server "{server}" failed: {exc}'),
                server=server,
                remedy=Remedy.SIGN_IN,
            )
    if status_code in AUTH_STATUSES:
        token = has_token if has_token is not None else (provider.has_token if provider else False)
        return auth_status_error(server, status_code, auth="oauth", has_token=token)
    return None
