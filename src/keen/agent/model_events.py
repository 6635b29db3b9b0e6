"""The events of a model's answer (:mod:`keen.agent.models` re-exports them): :class:`TextDelta`
chunks, then one :class:`ModelDone` with the :class:`ToolCall` list and the :data:`StopReason`.

Apart from :mod:`keen.agent.models` so that a chat's first request (built from
:class:`~keen.agent.models.Message`) goes out before these classes are made: each frozen
dataclass compiles its methods as its module loads (docs/architecture.md "Prompt start").
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = ["STOP_REASONS", "ModelDone", "ModelEvent", "StopReason", "TextDelta", "ToolCall"]

StopReason = Literal["end", "tool_calls", "length", "context", "content_filter", "refusal", "pause"]
"""Why a model call ended, in both APIs' terms (OpenAI ``finish_reason``; Anthropic
``stop_reason``):

- ``end``: the answer is complete (``stop``; ``end_turn``, ``stop_sequence``);
- ``tool_calls``: it asks for tool calls (``tool_calls``; ``tool_use``);
- ``length``: cut at the output token limit, so incomplete (``length``; ``max_tokens``);
- ``context``: the conversation filled the model's context window, so incomplete, and
  sending more would not help (Anthropic ``model_context_window_exceeded``);
- ``content_filter``: the provider's filter withheld the rest (``content_filter``);
- ``refusal``: the model declined to go on (``refusal``);
- ``pause``: the provider paused a long turn; sending it back continues it (``pause_turn``).
"""
STOP_REASONS: tuple[StopReason, ...] = (
    "end",
    "tool_calls",
    "length",
    "context",
    "content_filter",
    "refusal",
    "pause",
)
"""Every :data:`StopReason`, in that order."""


@dataclass(frozen=True)
class ToolCall:
    """One tool call the model proposed: ``id`` (the provider's, echoed in the result),
    the tool ``name`` as offered, and its JSON ``arguments`` (a dict, possibly empty).

    ``unparsed`` is the arguments' text as the model sent it when that was not a JSON
    object (then ``arguments`` is ``{}``): the call goes to the harness with that text, so
    its validate gate refuses it and says why, and the history sends ``{}`` back in the
    call's place (an API accepts only an object there)."""

    id: str
    name: str
    arguments: dict[str, Any]
    unparsed: str | None = None


@dataclass(frozen=True)
class TextDelta:
    """A chunk of the model's answer, in arrival order."""

    text: str


@dataclass(frozen=True)
class ModelDone:
    """The end of one model call: the whole ``content``, its ``tool_calls``, ``usage``
    (``prompt_tokens``, ``completion_tokens``; as the provider reported them, or counted
    locally by the scripted model) and why it ended (``stop``, :data:`StopReason`)."""

    content: str
    tool_calls: list[ToolCall] = field(default_factory=lambda: list[ToolCall]())
    usage: dict[str, int] = field(default_factory=lambda: dict[str, int]())
    stop: StopReason = "end"


ModelEvent = TextDelta | ModelDone
