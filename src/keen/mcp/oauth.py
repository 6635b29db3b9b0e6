"""Public face of Keen's MCP OAuth (seeds/003 "OAuth"); the parts live in :mod:`keen.mcp.auth`.

``from keen.mcp.oauth import create_oauth_auth, FileTokenStore, authorize_interactively,
classify_auth_failure, oauth_auth_factory`` is all the Manager and the CLI need.
"""

from __future__ import annotations

from keen.mcp.auth import (
    AUTHORIZATION_TIMEOUT,
    AuthFactory,
    AuthMetadata,
    FileTokenStore,
    KeenOAuthProvider,
    SignInResult,
    TokenStore,
    authorize_interactively,
    classify_auth_failure,
    create_oauth_auth,
    default_open_browser,
    oauth_auth_factory,
    redirect_uri,
)

__all__ = [
    "AUTHORIZATION_TIMEOUT",
    "AuthFactory",
    "AuthMetadata",
    "FileTokenStore",
    "KeenOAuthProvider",
    "SignInResult",
    "TokenStore",
    "authorize_interactively",
    "classify_auth_failure",
    "create_oauth_auth",
    "default_open_browser",
    "oauth_auth_factory",
    "redirect_uri",
]
