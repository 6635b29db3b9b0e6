"""Every secret a server's config holds goes to the redactor before anything can print it.

A stdio server's ``env`` values (after ``${VAR}`` expansion), an HTTP server's URL
userinfo and query values, its ``headers``, its API key (raw and as the header value
sent) and its OAuth ``client_secret``. Tokens Keen obtains later are registered where
they are stored (:mod:`keen.mcp.auth.store`). Values that are plainly configuration
(``info``, ``true``, numbers, file paths) are left alone: see
:func:`keen._redact.looks_secret`.
"""

from __future__ import annotations

from keen._redact import redactor, register_value, url_secrets
from keen.mcp.config import ApiKeyAuth, HttpServerConfig, OAuthAuth, StdioServerConfig

__all__ = ["register_server_secrets"]


def register_server_secrets(config: HttpServerConfig | StdioServerConfig) -> None:
    """Register every secret ``config`` carries with the process-wide redactor."""
    if isinstance(config, StdioServerConfig):
        for value in config.env.values():
            register_value(value)
        return
    for secret in url_secrets(config.url):
        redactor.add(secret)
    for value in config.headers.values():
        redactor.add(value)
        register_value(value)
    auth = config.auth
    if isinstance(auth, ApiKeyAuth):
        redactor.add(auth.key)
        redactor.add(auth.header_value())
    elif isinstance(auth, OAuthAuth):
        redactor.add(auth.client_secret)
