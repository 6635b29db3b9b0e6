"""Anthropic Messages through the official ``anthropic`` SDK (the ``anthropic`` extra).

The key is ``ANTHROPIC_API_KEY``. Streaming events (Anthropic API reference, "Streaming
Messages"): ``message_start`` carries the input tokens, ``content_block_start`` opens a
``text`` or ``tool_use`` block, ``content_block_delta`` adds ``text_delta`` or
``input_json_delta`` (partial JSON of a tool's input), ``message_delta`` the output tokens
and the ``stop_reason`` (as the :data:`~keen.agent.models.StopReason`). A stream that ends
without a stop reason was cut: that is an error, not a complete answer. Retries are Keen's
(:mod:`keen.agent.providers._retry`), including an ``overloaded_error`` inside the stream.
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
from keen.agent.providers._shapes import anthropic_messages, anthropic_tools, tool_call

__all__ = ["AnthropicMessages"]

DEFAULT_ENDPOINT = "https://api.anthropic.com"
_LOCAL_PLACEHOLDER_KEY = "keen-no-key"
MAX_TOKENS = 4096
_STOPS: dict[str, StopReason] = {
    "end_turn": "end",
    "stop_sequence": "end",
    "tool_use": "tool_calls",
    "max_tokens": "length",
    "model_context_window_exceeded": "context",
    "refusal": "refusal",
    "pause_turn": "pause",
}
"""stop_reason -> StopReason; a value added to the API later is ``end``."""


class AnthropicMessages:
    """A Messages API model (see :class:`keen.agent.models.Model`).

    Args:
        model: the model name (e.g. ``claude-sonnet-4-5``).
        base_url: another endpoint speaking the Messages API; default Anthropic's.
        max_retries: Keen's retries for connection errors, 408, 409, 429, 5xx and 529
            (:class:`~keen.agent.providers._retry.Retry`; the SDK's own are off).
        timeout: seconds the endpoint may stay silent (before its answer begins, and between
            two chunks of it) before the request fails; None: the SDK's own (600 s).

    Raises:
        ModelNotConfigured: the ``anthropic`` package is missing, or ``ANTHROPIC_API_KEY`` is
            unset and no ``base_url`` is given (a local server needs no key, as for OpenAI).
    """

    def __init__(
        self, model: str, *, base_url: str | None = None, max_retries: int = 2, timeout: float | None = None
    ) -> None:
        if importlib.util.find_spec("anthropic") is None:
            raise missing_sdk("anthropic")
        key = os.environ.get("ANTHROPIC_API_KEY", "").strip()
        if not key and base_url is None:
            raise ModelNotConfigured(
                "ANTHROPIC_API_KEY is not set; export it (Keen never stores keys), or pass --base-url for a "
                "local Anthropic-compatible server",
                provider="anthropic",
            )
        redactor.add(key)
        self.name = f"anthropic:{model}"
        self.model = model
        self.endpoint = base_url or DEFAULT_ENDPOINT
        self.retry = Retry(retries=max_retries)
        # README "Chat with a model": a local --base-url needs no key; the SDK sends one anyway.
        options: dict[str, Any] = {"api_key": key or _LOCAL_PLACEHOLDER_KEY, "base_url": base_url}
        self._sdk = LazySdkClient("anthropic", "AsyncAnthropic", options, timeout=timeout)

    @property
    def _client(self) -> Any:
        """The SDK's client, built at the first request (:class:`LazySdkClient`)."""
        return self._sdk.get()

    async def aclose(self) -> None:
        """Close the SDK client's connections (in the event loop that used them), if one was built."""
        await self._sdk.aclose()

    def stream(self, messages: list[Message], tools: list[dict[str, Any]]) -> AsyncIterator[ModelEvent]:
        """Stream one message (see :class:`keen.agent.models.Model`)."""
        system, history = anthropic_messages(messages)
        request: dict[str, Any] = {
            "model": self.model,
            "max_tokens": MAX_TOKENS,
            "messages": history,
            "stream": True,
        }
        if system:
            request["system"] = system
        if tools:
            request["tools"] = anthropic_tools(tools)
        return with_retries(
            lambda progress: self._attempt(request, progress),
            self.retry,
            provider="anthropic",
            endpoint=self.endpoint,
        )

    async def _attempt(self, request: dict[str, Any], progress: Attempt) -> AsyncGenerator[ModelEvent, None]:
        content: list[str] = []
        blocks: dict[int, dict[str, str]] = {}
        usage = {"prompt_tokens": 0, "completion_tokens": 0}
        stop: str | None = None
        stream: Any = await self._client.messages.create(**request)
        progress.began = True
        # Closed here, not by the garbage collector, when the turn is cancelled mid-stream.
        async with stream:
            async for event in stream:
                kind = event.type
                if kind == "message_start":
                    usage["prompt_tokens"] = int(event.message.usage.input_tokens or 0)
                elif kind == "content_block_start" and event.content_block.type == "tool_use":
                    block = event.content_block
                    blocks[event.index] = {"id": block.id, "name": block.name, "json": ""}
                elif kind == "content_block_delta":
                    delta = event.delta
                    if delta.type == "text_delta":
                        content.append(delta.text)
                        yield TextDelta(delta.text)
                    elif delta.type == "input_json_delta" and event.index in blocks:
                        blocks[event.index]["json"] += delta.partial_json
                elif kind == "message_delta":
                    stop = event.delta.stop_reason or stop
                    if event.usage is not None:
                        usage["completion_tokens"] = int(event.usage.output_tokens or 0)
        if stop is None:
            raise ModelError(
                f"the answer from anthropic at {self.endpoint} ended before the model finished it (no "
                "stop_reason; the connection was cut); send your message again",
                provider="anthropic",
            )
        tool_calls = [tool_call(b["id"], b["name"], b["json"]) for _, b in sorted(blocks.items())]
        yield ModelDone("".join(content), tool_calls, usage, _STOPS.get(stop, "end"))
