"""OpenAI-compatible Chat Completions through the official ``openai`` SDK (``keen-code[openai]``).

``base_url`` points it at any compatible server: Ollama (``http://127.0.0.1:11434/v1``),
vLLM, LM Studio, llama.cpp's server, OpenRouter. The key is ``OPENAI_API_KEY``; a server
given by ``base_url`` may need none (a placeholder is sent, which local servers ignore).
Streaming with ``stream_options.include_usage`` (OpenAI API reference, "Chat Completions:
streaming"): content deltas as they arrive, tool-call fragments joined by ``index``.
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator
from typing import Any

from keen._redact import redactor
from keen.agent.models import Message, ModelDone, ModelEvent, ModelNotConfigured, TextDelta, ToolCall
from keen.agent.providers._errors import translate
from keen.agent.providers._shapes import openai_messages, openai_tools

__all__ = ["OpenAIChat", "parse_arguments"]

DEFAULT_ENDPOINT = "https://api.openai.com/v1"
_LOCAL_PLACEHOLDER_KEY = "keen-no-key"


def parse_arguments(raw: str) -> dict[str, Any]:
    """A tool call's JSON arguments; text that is not a JSON object is kept under
    ``_unparsed_arguments`` so the harness's validate gate refuses it with a reason."""
    if not raw.strip():
        return {}
    try:
        value = json.loads(raw)
    except json.JSONDecodeError:
        return {"_unparsed_arguments": raw}
    return value if isinstance(value, dict) else {"_unparsed_arguments": raw}  # type: ignore[return-value]


class OpenAIChat:
    """A Chat Completions model (see :class:`keen.agent.models.Model`).

    Args:
        model: the model name (``gpt-4.1-mini``, ``llama3.1``, ...).
        base_url: an OpenAI-compatible endpoint; default OpenAI's.
        max_retries: the SDK's retries for connection errors, 408, 409, 429 and 5xx.

    Raises:
        ModelNotConfigured: the ``openai`` package is missing, or no key and no ``base_url``.
    """

    def __init__(self, model: str, *, base_url: str | None = None, max_retries: int = 2) -> None:
        try:
            import openai
        except ImportError as exc:
            raise ModelNotConfigured(
                "the openai SDK is not installed; run: pip install 'keen-code[openai]'", provider="openai"
            ) from exc
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
        self._client = openai.AsyncOpenAI(
            api_key=key or _LOCAL_PLACEHOLDER_KEY, base_url=base_url, max_retries=max_retries
        )

    async def aclose(self) -> None:
        """Close the SDK client's connections (in the event loop that used them)."""
        await self._client.close()

    async def stream(self, messages: list[Message], tools: list[dict[str, Any]]) -> AsyncIterator[ModelEvent]:
        """Stream one completion (see :class:`keen.agent.models.Model`)."""
        request: dict[str, Any] = {
            "model": self.model,
            "messages": openai_messages(messages),
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if tools:
            request["tools"] = openai_tools(tools)
        content: list[str] = []
        calls: dict[int, dict[str, str]] = {}
        usage: dict[str, int] = {}
        try:
            stream: Any = await self._client.chat.completions.create(**request)
            async for chunk in stream:
                if chunk.usage is not None:
                    usage = {
                        "prompt_tokens": int(chunk.usage.prompt_tokens or 0),
                        "completion_tokens": int(chunk.usage.completion_tokens or 0),
                    }
                for choice in chunk.choices or []:
                    delta = choice.delta
                    if delta is None:
                        continue
                    if delta.content:
                        content.append(delta.content)
                        yield TextDelta(delta.content)
                    for part in delta.tool_calls or []:
                        slot = calls.setdefault(part.index, {"id": "", "name": "", "arguments": ""})
                        if part.id:
                            slot["id"] = part.id
                        if part.function is not None:
                            slot["name"] += part.function.name or ""
                            slot["arguments"] += part.function.arguments or ""
        except Exception as exc:
            if type(exc).__module__.split(".")[0] != "openai":
                raise
            raise translate(exc, provider="openai", endpoint=self.endpoint) from None
        tool_calls = [
            ToolCall(slot["id"] or f"call_{index}", slot["name"], parse_arguments(slot["arguments"]))
            for index, slot in sorted(calls.items())
        ]
        yield ModelDone("".join(content), tool_calls, usage)
