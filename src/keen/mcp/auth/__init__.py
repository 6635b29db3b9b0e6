"""MCP-standard OAuth for Streamable HTTP servers (MCP 2025-11-25 "Authorization").

* :mod:`~keen.mcp.auth.store`: the ``TokenStore`` interface and the 0600 ``FileTokenStore``.
* :mod:`~keen.mcp.auth.provider`: ``create_oauth_auth``, the SDK ``OAuthClientProvider`` with
  Keen's background/interactive modes, scope policy and error wording.
* :mod:`~keen.mcp.auth.callback`: the loopback listener for the browser redirect.
* :mod:`~keen.mcp.auth.connect`: ``authorize_interactively`` (``keen mcp connect``) and the
  Manager's ``oauth_auth_factory``.
* :mod:`~keen.mcp.auth.classify`: ``classify_auth_failure`` (``auth_required`` vs ``auth_failed``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from keen._lazy import exports_from, lazy_module_attrs

# Lazy: the token store (read at every start to register saved secrets) must not load the
# MCP SDK that the callback listener and the OAuth provider need.
if TYPE_CHECKING:
    from keen.mcp.auth.callback import CALLBACK_PATH, DEFAULT_CALLBACK_PORT, CallbackListener, redirect_uri
    from keen.mcp.auth.classify import classify_auth_failure
    from keen.mcp.auth.connect import SignInResult, authorize_interactively, oauth_auth_factory
    from keen.mcp.auth.provider import (
        AUTHORIZATION_TIMEOUT,
        CLIENT_NAME,
        KeenOAuthProvider,
        OpenBrowser,
        ShowUrl,
        create_oauth_auth,
        default_open_browser,
    )
    from keen.mcp.auth.store import AuthMetadata, FileTokenStore, TokenStore
    from keen.mcp.config.servers import AuthFactory

__all__ = [
    "AUTHORIZATION_TIMEOUT",
    "CALLBACK_PATH",
    "CLIENT_NAME",
    "DEFAULT_CALLBACK_PORT",
    "AuthFactory",
    "AuthMetadata",
    "CallbackListener",
    "FileTokenStore",
    "KeenOAuthProvider",
    "OpenBrowser",
    "ShowUrl",
    "SignInResult",
    "TokenStore",
    "authorize_interactively",
    "classify_auth_failure",
    "create_oauth_auth",
    "default_open_browser",
    "oauth_auth_factory",
    "redirect_uri",
]

_EXPORTS = {
    **exports_from(
        "keen.mcp.auth.callback",
        ("CALLBACK_PATH", "DEFAULT_CALLBACK_PORT", "CallbackListener", "redirect_uri"),
    ),
    **exports_from("keen.mcp.auth.classify", ("classify_auth_failure",)),
    **exports_from(
        "keen.mcp.auth.connect", ("SignInResult", "authorize_interactively", "oauth_auth_factory")
    ),
    **exports_from(
        "keen.mcp.auth.provider",
        (
            "AUTHORIZATION_TIMEOUT",
            "CLIENT_NAME",
            "KeenOAuthProvider",
            "OpenBrowser",
            "ShowUrl",
            "create_oauth_auth",
            "default_open_browser",
        ),
    ),
    **exports_from("keen.mcp.auth.store", ("AuthMetadata", "FileTokenStore", "TokenStore")),
    **exports_from("keen.mcp.config.servers", ("AuthFactory",)),
}

__getattr__, __dir__ = lazy_module_attrs(__name__, _EXPORTS)
