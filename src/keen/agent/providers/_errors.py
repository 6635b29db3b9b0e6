"""One boundary from the providers' SDK exceptions to :class:`keen.agent.models.ModelError`.

Both official SDKs (``openai``, ``anthropic``) raise the same family of names
(``AuthenticationError``, ``RateLimitError``, ``APIStatusError``, ``APIConnectionError``);
they are matched by name so neither SDK is imported here. Messages never quote a key: the
key is registered with the process redactor when the model is built, and the text is
redacted again here.
"""

from __future__ import annotations

from keen._redact import redactor
from keen.agent.models import ModelAuthFailed, ModelError, ModelRateLimited, ModelUnreachable

__all__ = ["translate"]

_KEY_VARS = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY"}


def _names(exc: BaseException) -> set[str]:
    return {cls.__name__ for cls in type(exc).__mro__}


def _detail(exc: BaseException) -> str:
    body = getattr(exc, "body", None)
    message = ""
    if isinstance(body, dict):
        error = body.get("error", body)  # type: ignore[union-attr]
        if isinstance(error, dict):
            message = str(error.get("message", ""))  # type: ignore[union-attr]
    message = message or str(getattr(exc, "message", "") or exc)
    return redactor.redact(" ".join(message.split()))[:300]


def translate(exc: BaseException, *, provider: str, endpoint: str) -> ModelError:
    """The :class:`ModelError` for an SDK exception of ``provider`` talking to ``endpoint``."""
    names = _names(exc)
    status = getattr(exc, "status_code", None)
    detail = _detail(exc)
    where = f"{provider} at {endpoint}"
    if "AuthenticationError" in names or "PermissionDeniedError" in names:
        var = _KEY_VARS.get(provider, "the API key variable")
        return ModelAuthFailed(
            f"{where} refused the API key (HTTP {status}: {detail}); check {var} and that the key may use this model",
            provider=provider,
            status=status,
        )
    if "RateLimitError" in names:
        return ModelRateLimited(
            f"{where} is rate limiting requests (HTTP 429: {detail}); wait a minute and retry, or use another model",
            provider=provider,
            status=status,
        )
    if "NotFoundError" in names:
        return ModelError(
            f"{where} does not know this model or path (HTTP 404: {detail}); check --model and --base-url",
            provider=provider,
            status=status,
        )
    if "APIStatusError" in names:
        return ModelError(
            f"{where} failed the request (HTTP {status}: {detail}); retry later, or check --model and --base-url",
            provider=provider,
            status=status,
        )
    if "APITimeoutError" in names:
        return ModelUnreachable(
            f"{where} did not answer in time; check that it is up, then retry", provider=provider
        )
    if "APIConnectionError" in names:
        return ModelUnreachable(
            f"cannot connect to {where} ({detail}); check that the server is running and --base-url is right",
            provider=provider,
        )
    return ModelError(f"{where} failed: {type(exc).__name__}: {detail}", provider=provider)
