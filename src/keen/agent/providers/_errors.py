"""One boundary from the providers' SDK exceptions to :class:`keen.agent.models.ModelError`.

Both official SDKs (``openai``, ``anthropic``) raise the same family of names
(``AuthenticationError``, ``RateLimitError``, ``APIStatusError``, ``APIConnectionError``);
they are matched by name so neither SDK is imported here. Messages never quote a key: the
key is registered with the process redactor when the model is built, and the text is
redacted again here.

An error may also arrive inside a stream that began with HTTP 200 (Anthropic's ``error``
event, e.g. ``overloaded_error``; OpenAI's ``data: {"error": ...}``): its error ``type``
stands for the status it would have had (:func:`status_of`), so it is retried and worded
like that status.
"""

from __future__ import annotations

import email.utils
import json
import shlex
import sys
import time
from typing import Any

from keen._redact import redactor
from keen._text import one_line, shorten
from keen.agent.models import (
    ModelAuthFailed,
    ModelError,
    ModelNotConfigured,
    ModelRateLimited,
    ModelUnreachable,
)

__all__ = ["is_model_failure", "missing_sdk", "names_of", "retry_after", "status_of", "translate"]

_SDKS = {"openai": "openai>=3.50,<4", "anthropic": "anthropic>=2.10,<3"}
"""Each provider's SDK as pyproject's extras require it."""


def missing_sdk(provider: str) -> ModelNotConfigured:
    """The error for a provider whose SDK is not installed, with commands that install it into
    the Python that runs Keen (Keen is not on PyPI: ``pip install 'keen-code[openai]'`` fails)."""
    python = shlex.quote(sys.executable or "python")
    return ModelNotConfigured(
        f"the {provider} SDK is not installed in the Python that runs Keen; run: {python} -m pip install "
        f"'{_SDKS[provider]}' (or, in Keen's clone: pip install '.[{provider}]')",
        provider=provider,
    )


_KEY_VARS = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY"}

_TYPE_STATUS = {
    "overloaded_error": 529,
    "rate_limit_error": 429,
    "rate_limit_exceeded": 429,
    "api_error": 500,
    "server_error": 500,
}
"""An in-stream error's ``type`` (or ``code``) -> the HTTP status it stands for."""


_HTTP_STACK = ("httpx", "httpx2", "httpcore", "httpcore2", "h11")
"""The SDKs' HTTP layers: the ``anthropic`` SDK lets their errors out of a stream unwrapped
(a connection dropped mid-answer raises ``httpx.RemoteProtocolError``)."""


def names_of(exc: BaseException) -> set[str]:
    """The class names ``exc`` is matched by; an HTTP-layer error also counts as the SDK's
    ``APIConnectionError``."""
    names = {cls.__name__ for cls in type(exc).__mro__}
    if type(exc).__module__.split(".")[0] in _HTTP_STACK:
        names.add("APIConnectionError")  # what the SDK would have wrapped it as
    return names


def is_model_failure(exc: BaseException, provider: str) -> bool:
    """Whether ``exc`` is the provider's failure to translate: an exception of its SDK, or
    of the HTTP layer under it, or an event of its stream that is not JSON (the SDKs let
    ``json.JSONDecodeError`` out of a 200 response's stream); anything else (a bug, a
    cancellation) goes on as it is."""
    root = type(exc).__module__.split(".")[0]
    return root == provider or root in _HTTP_STACK or isinstance(exc, json.JSONDecodeError)


def _error_body(exc: BaseException) -> dict[str, Any]:
    body = getattr(exc, "body", None)
    if not isinstance(body, dict):
        return {}
    error = body.get("error", body)  # type: ignore[union-attr]
    return error if isinstance(error, dict) else {}  # type: ignore[return-value]


def _detail(exc: BaseException) -> str:
    message = str(_error_body(exc).get("message", ""))
    message = message or str(getattr(exc, "message", "") or exc)
    return one_line(redactor.redact(message), 300)


def _not_a_stream(exc: json.JSONDecodeError, provider: str, where: str) -> ModelError:
    """A 200 response whose event stream is not JSON, or ends in the middle of an object:
    what the provider sent (a proxy's page, a cut event) is named, redacted and cut short."""
    sent = redactor.redact(" ".join(exc.doc.split()))
    sample = shorten(sent, 80)
    cut = exc.pos >= len(exc.doc.rstrip()) or exc.msg.startswith("Unterminated")
    what = "ended in the middle of an event" if cut else "sent an event that is not JSON"
    base = "http://host:port/v1" if provider == "openai" else "https://api.anthropic.com"
    return ModelError(
        f"{where} answered HTTP 200 but its stream {what} ({exc.msg}: {sample!r}); the answer is "
        f"incomplete: send your message again, and if it persists check --base-url (the API's base, "
        f"like {base})",
        provider=provider,
    )


def status_of(exc: BaseException) -> int | None:
    """The HTTP status an SDK exception stands for: its response's, or for an error sent
    inside a 200 stream, the status its error type means (None: no status, e.g. refused)."""
    status = getattr(exc, "status_code", None)
    if isinstance(status, int) and status >= 400:
        return status
    error = _error_body(exc)
    for key in ("type", "code"):
        if (mapped := _TYPE_STATUS.get(str(error.get(key, "")))) is not None:
            return mapped
    return status if isinstance(status, int) else None


def retry_after(exc: BaseException) -> float | None:
    """Seconds the provider asked to wait before retrying (``retry-after-ms``, or
    ``retry-after`` in seconds or as an HTTP date), or None when it did not say."""
    response = getattr(exc, "response", None)
    headers: Any = getattr(response, "headers", None)
    if headers is None:
        return None
    try:
        return max(0.0, float(headers.get("retry-after-ms")) / 1000)
    except (TypeError, ValueError):
        pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    parsed = email.utils.parsedate_tz(value)
    return None if parsed is None else max(0.0, email.utils.mktime_tz(parsed) - time.time())


def translate(
    exc: BaseException,
    *,
    provider: str,
    endpoint: str,
    tries: int = 1,
    wait: float | None = None,
    began: bool = False,
) -> ModelError:
    """The :class:`ModelError` for an SDK exception of ``provider`` talking to ``endpoint``.

    Args:
        exc: the SDK's exception (of the last attempt).
        provider: ``openai`` or ``anthropic``.
        endpoint: the base URL, named in the message.
        tries: how many attempts were made (said when more than one).
        wait: the provider's retry-after when it was too long to wait for.
        began: the provider's answer had begun (a broken connection broke its stream).
    """
    names = names_of(exc)
    status = status_of(exc)
    detail = _detail(exc)
    where = f"{provider} at {endpoint}"
    if isinstance(exc, json.JSONDecodeError):
        return _not_a_stream(exc, provider, where)
    how = f"HTTP {status}" if getattr(exc, "status_code", None) == status else f"HTTP {status}, in its stream"
    tried = f"; Keen tried {tries} times" if tries > 1 else ""
    if "AuthenticationError" in names or "PermissionDeniedError" in names or status in (401, 403):
        var = _KEY_VARS.get(provider, "the API key variable")
        return ModelAuthFailed(
            f"{where} refused the API key ({how}: {detail}); check {var} and that the key may use this model",
            provider=provider,
            status=status,
        )
    if status == 429:
        later = (
            f"it asks to wait {wait:.0f} s: send your message again after that, or use another model"
            if wait is not None
            else "wait a minute and send your message again, or use another model"
        )
        return ModelRateLimited(
            f"{where} is rate limiting requests ({how}: {detail}){tried}; {later}",
            provider=provider,
            status=status,
        )
    if status == 529:
        return ModelError(
            f"{where} is overloaded ({how}: {detail}){tried}; try again in a few minutes, or use another model",
            provider=provider,
            status=status,
        )
    if status == 404 or "NotFoundError" in names:
        return ModelError(
            f"{where} does not know this model or path ({how}: {detail}); check --model and --base-url",
            provider=provider,
            status=status,
        )
    if status is not None and status >= 500:
        return ModelError(
            f"{where} failed the request ({how}: {detail}){tried}; try again later, or check --model and --base-url",
            provider=provider,
            status=status,
        )
    if "APIStatusError" in names:
        return ModelError(
            f"{where} refused the request ({how}: {detail}); check --model and --base-url",
            provider=provider,
            status=status,
        )
    if began and names & {"APIConnectionError", "APITimeoutError"}:
        return ModelUnreachable(
            f"the connection to {where} broke during the answer ({detail}){tried}; send your message again",
            provider=provider,
        )
    if "APITimeoutError" in names:
        return ModelUnreachable(
            f"{where} did not answer in time{tried}; check that it is up, then retry (a slow model may need"
            " a longer model_timeout in config.toml)",
            provider=provider,
        )
    if "APIConnectionError" in names:
        return ModelUnreachable(
            f"cannot connect to {where} ({detail}){tried}; check that the server is running and --base-url is right",
            provider=provider,
        )
    return ModelError(f"{where} failed: {type(exc).__name__}: {detail}", provider=provider)
