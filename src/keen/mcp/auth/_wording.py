"""How OAuth failures read: every message names the server and says what to do next.

SDK exceptions (``OAuthFlowError`` and kin, pydantic ``ValidationError`` for unreadable
answers) become :class:`~keen.errors.AuthFailed`; RFC 6749 error bodies are summarized as
``error: description``. Everything that might echo a secret goes through the redactor.
"""

from __future__ import annotations

import json
import logging

import httpx2
from mcp.client.auth import OAuthRegistrationError, OAuthTokenError
from pydantic import ValidationError

from keen._redact import redactor
from keen._text import one_line
from keen.errors import AuthFailed, Remedy
from keen.mcp.connection.translate import sign_in_message

__all__ = ["flow_error", "oauth_error_text", "short", "sign_in_message"]


def flow_error(
    server: str, exc: Exception, *, no_metadata: bool, discovery: list[str], config_name: str = "configs.json"
) -> AuthFailed:
    """The Keen error for a failed interactive flow; ``discovery`` lists ``"<url> -> HTTP <status>"``;
    ``config_name``: where the server's entry is, as the fixes name it."""
    if isinstance(exc, ValidationError):
        detail = short(str(exc.errors()[0].get("msg", "invalid")))
        return AuthFailed(
            f'the authorization server of MCP server "{server}" sent an answer Keen cannot read ({detail}); '
            "ask the server's operator, or retry later",
            server=server,
        )
    detail = redactor.redact(short(str(exc)))
    if no_metadata and not isinstance(exc, OAuthTokenError):
        tried = "; ".join(discovery[:4]) or "none answered"
        return AuthFailed(
            f'MCP server "{server}" asked for OAuth sign-in, but its OAuth metadata is missing or malformed '
            f"(tried: {tried}); the fallback failed too ({detail}). Check the server's url in {config_name}, "
            "or ask its operator whether it supports MCP OAuth",
            server=server,
        )
    if isinstance(exc, OAuthRegistrationError):
        return AuthFailed(
            f'the authorization server of MCP server "{server}" refused to register Keen as a client ({detail}); '
            'if it needs a pre-registered client, set "client_id" (and "client_secret") in the server\'s '
            f'"auth" in {config_name}',
            server=server,
        )
    if isinstance(exc, OAuthTokenError):
        return AuthFailed(
            f'the authorization server of MCP server "{server}" refused the token request ({detail})',
            server=server,
            remedy=Remedy.SIGN_IN,
        )
    return AuthFailed(
        f'OAuth sign-in for MCP server "{server}" failed: {detail}',
        server=server,
        remedy=Remedy.SIGN_IN,
    )


async def oauth_error_text(response: httpx2.Response) -> str:
    """``error (error_description)`` from an RFC 6749 error body, else ``HTTP <status>``; redacted."""
    await response.aread()
    text = f"HTTP {response.status_code}"
    try:
        body = json.loads(response.content)
    except ValueError:
        return text
    if isinstance(body, dict) and isinstance(body.get("error"), str):
        text = body["error"]
        if isinstance(body.get("error_description"), str):
            text += f": {body['error_description']}"
    return redactor.redact(short(text))


def short(text: str, limit: int = 300) -> str:
    """``text`` on one line, at most ``limit`` characters."""
    return one_line(text, limit)


class _DemoteFlowErrors(logging.Filter):
    """The SDK logs every failed flow as ``OAuth flow error`` with a traceback at ERROR; Keen
    re-raises each one as a worded Keen error that the caller reports, so the traceback is
    kept at DEBUG instead of reaching the user's terminal twice."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno >= logging.ERROR and record.getMessage() == "OAuth flow error":
            record.levelno, record.levelname = logging.DEBUG, "DEBUG"
        return True


logging.getLogger("mcp.client.auth.oauth2").addFilter(_DemoteFlowErrors())
