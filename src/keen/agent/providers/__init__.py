"""Model providers behind :class:`keen.agent.models.Model`, chosen by ``provider:name``.

- ``openai:NAME``: Chat Completions via the ``openai`` SDK; with ``base_url``, any
  OpenAI-compatible server (Ollama, vLLM, LM Studio, llama.cpp, OpenRouter).
- ``anthropic:NAME``: Messages via the ``anthropic`` SDK.
- ``scripted:FILE``: answers replayed from a JSON-lines file (tests, demos, benchmarks).

The SDKs are optional extras and are imported only when their provider is opened.
"""

from __future__ import annotations

from pathlib import Path

from keen.agent.models import Model, ModelNotConfigured

__all__ = ["PROVIDERS", "open_model"]

PROVIDERS = ("openai", "anthropic", "scripted")


def open_model(spec: str, *, base_url: str | None = None, timeout: float | None = None) -> Model:
    """The model named by ``spec`` (``provider:name``).

    Args:
        spec: ``openai:NAME``, ``anthropic:NAME`` or ``scripted:FILE``.
        base_url: the provider's endpoint, for an OpenAI- or Anthropic-compatible server.
        timeout: seconds the provider may stay silent (before its answer begins, and between
            two chunks of it) before a request fails; None: the provider SDK's own (600 s).

    Raises:
        ModelNotConfigured: an unknown provider, an empty name, a missing key or SDK extra,
            an unreadable or malformed script.
    """
    provider, sep, name = spec.partition(":")
    if not sep or not name.strip() or provider not in PROVIDERS:
        raise ModelNotConfigured(
            f"unknown model {spec!r}; use provider:name with provider one of {', '.join(PROVIDERS)} "
            "(e.g. openai:gpt-4.1-mini, anthropic:claude-sonnet-4-5, scripted:answers.jsonl)"
        )
    if provider == "openai":
        from keen.agent.providers.openai_chat import OpenAIChat

        return OpenAIChat(name, base_url=base_url, timeout=timeout)
    if provider == "anthropic":
        from keen.agent.providers.anthropic_messages import AnthropicMessages

        return AnthropicMessages(name, base_url=base_url, timeout=timeout)
    from keen.agent.providers.scripted import ScriptedModel

    return ScriptedModel(Path(name).expanduser())
