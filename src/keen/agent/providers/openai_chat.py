"""OpenAI-compatible Chat Completions through the official ``openai`` SDK (the ``openai`` extra).

``base_url`` points it at any compatible server: Ollama (``http://127.0.0.1:11434/v1``),
vLLM, LM Studio, llama.cpp's server, OpenRouter. The key is ``OPENAI_API_KEY``; a server
given by ``base_url`` may need none (a placeholder is sent, which local servers ignore).
Streaming with ``stream_options.include_usage`` (OpenAI API reference, "Chat Completions:
streaming"): content deltas as they arrive, tool-call fragments joined by ``index`` (a new
``id`` at an index in use starts another call, as some compatible servers stream them), and
the choice's ``finish_reason`` as the :data:`~keen.agent.models.StopReason` (``refusal``
when the model refused in the delta's ``refusal`` field, which is shown as its answer). A stream that
ends without one was cut (a dropped connection, a proxy's timeout): that is an error, not a
complete answer. Retries are Keen's (:mod:`keen.agent.providers._retry`).
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any

from keen._redact import redactor
from keen.agent.models import (
    Message,
    ModelDone,
    ModelError,
    ModelEvent,
    ModelNotConfigured,
    StopReason,
    TextDelta,
)
from keen.agent.providers._errors import missing_sdk
from keen.agent.providers._retry import Attempt, Retry, with_retries
from keen.agent.providers._sdk_client import LazySdkClient
from keen.agent.providers._shapes import openai_messages, openai_tools, tool_call

__all__ = ["OpenAIChat"]

DEFAULT_ENDPOINT = "https://api.openai.com/v1"
_LOCAL_PLACEHOLDER_KEY = "keen-no-key"
_STOPS: dict[str, StopReason] = {
    "stop": "end",
    "tool_calls": "tool_calls",
    "function_call": "tool_calls",
    "length": "length",
    "content_filter": "content_filter",
}
"""finish_reason -> StopReason; another value (some compatible servers send their own) is ``end``."""


class OpenAIChat:
    """A Chat Completions model (see :class:`keen.agent.models.Model`).

    Args:
        model: the model name (``gpt-4.1-mini``, ``llama3.1``, ...).
        base_url: an OpenAI-compatible endpoint; default OpenAI's.
        max_retries: Keen's retries for connection errors, 408, 409, 429 and 5xx
            (:class:`~keen.agent.providers._retry.Retry`; the SDK's own are off).
        timeout: seconds the endpoint may stay silent (before its answer begins, and between
            two chunks of it) before the request fails; None: the SDK's own (600 s).

    Raises:
        ModelNotConfigured: the ``openai`` package is missing, or no key and no ``base_url``.
    """

    def __init__(
        self, model: str, *, base_url: str | None = None, max_retries: int = 2, timeout: float | None = None
    ) -> None:
        if importlib.util.find_spec("openai") is None:
            raise missing_sdk("openai")
        key = os.environ.get("OPENAI_API_KEY", "").strip()
        if not key and base_url is None:
            raise ModelNotConfigured(
                "OPENAI_API_KEY is not set; export it (Keen never stores keys), or pass --base-url for a local "
                "OpenAI-compatible server",
                provider="openai",
            )
        redactor.add(key)
        self.name = f"openai:{model}"
        self.model = model
        self.endpoint = base_url or DEFAULT_ENDPOINT
        self.retry = Retry(retries=max_retries)
        options: dict[str, Any] = {"api_key": key or _LOCAL_PLACEHOLDER_KEY, "base_url": base_url}
        self._sdk = LazySdkClient("openai", "AsyncOpenAI", options, timeout=timeout)

    @property
    def _client(self) -> Any:
        """The SDK's client, built at the first request (:class:`LazySdkClient`)."""
        return self._sdk.get()

    async def aclose(self) -> None:
        """Close the SDK client's connections (in the event loop that used them), if one was built."""
        await self._sdk.aclose()

    def stream(self, messages: list[Message], tools: list[dict[str, Any]]) -> AsyncIterator[ModelEvent]:
        """Stream one completion (see :class:`keen.agent.models.Model`)."""
        request: dict[str, Any] = {
            "model": self.model,
            "messages": openai_messages(messages),
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if tools:
            request["tools"] = openai_tools(tools)
        return with_retries(
            lambda progress: self._attempt(request, progress),
            self.retry,
            provider="openai",
            endpoint=self.endpoint,
        )

    async def _attempt(self, request: dict[str, Any], progress: Attempt) -> AsyncGenerator[ModelEvent, None]:
        content: list[str] = []
        calls: list[dict[str, str]] = []
        at_index: dict[Any, int] = {}
        usage: dict[str, int] = {}
        finish: str | None = None
        refused = False
        stream: Any = await self._client.chat.completions.create(**request)
        progress.began = True
        # Closed here, not by the garbage collector, when the turn is cancelled mid-stream.
        async with stream:
            async for chunk in stream:
                if chunk.usage is not None:
                    usage = {
                        "prompt_tokens": int(chunk.usage.prompt_tokens or 0),
                        "completion_tokens": int(chunk.usage.completion_tokens or 0),
                    }
                for choice in chunk.choices or []:
                    finish = choice.finish_reason or finish
                    delta = choice.delta
                    if delta is None:
                        continue
                    # A refusal comes in its own field, not as content (finish_reason stays "stop").
                    refusal = getattr(delta, "refusal", None)
                    text = (delta.content or "") + (refusal or "")
                    refused = refused or bool(refusal)
                    if text:
                        content.append(text)
                        yield TextDelta(text)
                    for part in delta.tool_calls or []:
                        at = at_index.get(part.index)
                        named = part.function is not None and bool(part.function.name)
                        if at is None or (
                            named and part.id and calls[at]["id"] and part.id != calls[at]["id"]
                        ):
                            # A new call: a new index, or a new id with a function name at an index
                            # in use (Ollama streams every parallel call at index 0,
                            # ollama/ollama#15457). A new id without a name is the same call: some
                            # servers give its argument chunks another id (poolsideai/pool#9).
                            calls.append({"id": "", "name": "", "arguments": ""})
                            at = at_index[part.index] = len(calls) - 1
                        slot = calls[at]
                        if part.id and not slot["id"]:
                            slot["id"] = part.id
                        if part.function is not None:
                            slot["name"] += part.function.name or ""
                            slot["arguments"] += part.function.arguments or ""
        if finish is None:
            raise ModelError(
                f"the answer from openai at {self.endpoint} ended before the model finished it (no "
                "finish_reason; the connection was cut); send your message again",
                provider="openai",
            )
        tool_calls = [
            tool_call(slot["id"] or f"call_{n}", slot["name"], slot["arguments"])
            for n, slot in enumerate(calls)
        ]
        stop: StopReason = "refusal" if refused else _STOPS.get(finish, "end")
        yield ModelDone("".join(content), tool_calls, usage, stop)
