"""A provider SDK's async client, built at the first request.

Importing a provider's SDK costs hundreds of ms of CPU (``bench/prompt_start.py`` prints
it): the client is made when the model is first asked, after the session's system prompt
is built, never when the model is chosen. The SDK's own retries are off: Keen retries
(:mod:`keen.agent.providers._retry`).
"""

from __future__ import annotations

import importlib
from typing import Any

from keen.agent.providers._errors import missing_sdk

__all__ = ["CONNECT_TIMEOUT", "LazySdkClient"]

CONNECT_TIMEOUT = 5.0
"""Seconds at most to open a connection to the model's endpoint."""


class LazySdkClient:
    """``<provider>.<client_class>(**options, max_retries=0)``, made on first :meth:`get`.

    Args:
        provider: the SDK's package name (``"openai"``, ``"anthropic"``).
        client_class: its async client class (``"AsyncOpenAI"``, ``"AsyncAnthropic"``).
        options: the client's keyword arguments (API key, base URL).
        timeout: seconds the endpoint may stay silent (``model_timeout``), ``None`` for the
            SDK's own; connecting gets at most :data:`CONNECT_TIMEOUT` of it, so a long
            ``model_timeout`` for a slow model does not also wait that long on a host that
            does not answer.

    Raises (from :meth:`get`):
        ModelNotConfigured: the SDK is not installed, or does not import.
    """

    def __init__(
        self, provider: str, client_class: str, options: dict[str, Any], *, timeout: float | None = None
    ) -> None:
        self._provider = provider
        self._class = client_class
        self._options = options
        self._timeout = timeout
        self._client: Any = None

    def get(self) -> Any:
        """The client, made now if it was not yet."""
        if self._client is None:
            try:
                module = importlib.import_module(self._provider)
            except ImportError as exc:  # installed but broken: said as a missing SDK is
                raise missing_sdk(self._provider) from exc
            options = dict(self._options)
            if (
                self._timeout is not None
            ):  # the SDK's Timeout (httpx's): a bare float is the connect timeout too
                options["timeout"] = module.Timeout(
                    self._timeout, connect=min(CONNECT_TIMEOUT, self._timeout)
                )
            self._client = getattr(module, self._class)(**options, max_retries=0)
        return self._client

    async def aclose(self) -> None:
        """Close the client's connections (in the event loop that used them), if one was made."""
        if self._client is not None:
            await self._client.close()
