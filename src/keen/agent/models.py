"""The model provider interface: one streaming call, neutral messages, and the model errors.

A :class:`Model` turns a neutral history (:class:`Message`) plus MCP-shaped tool
definitions (``{"name", "description", "inputSchema"}``, what
:meth:`keen.harness.Harness.begin_step` returns) into a stream of :data:`ModelEvent`:
:class:`TextDelta` chunks as they arrive, then one :class:`ModelDone` with the whole
answer, its tool calls, why the model stopped (:data:`StopReason`) and token usage. Each
provider adapter (``keen.agent.providers``)
translates to and from its API's shapes (OpenAI Chat Completions, Anthropic Messages).

Errors (a :class:`ModelError` subtree of :class:`keen.errors.KeenError`)::

    ModelError                  the provider failed the call (HTTP error, bad answer)
    ├── ModelNotConfigured      no such provider, missing API key, missing SDK extra, bad spec
    ├── ModelAuthFailed         the provider refused the key (HTTP 401/403)
    ├── ModelRateLimited        HTTP 429, after Keen's bounded retries
    ├── ModelUnreachable        connection refused, DNS, timeout
    └── ScriptExhausted         a ``scripted:`` model has no answer left

Each message says what to do next; the CLI prints it as is.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol

from keen._lazy import exports_from, lazy_module_attrs
from keen.errors import KeenError

if TYPE_CHECKING:
    from keen.agent.model_events import STOP_REASONS, ModelDone, ModelEvent, StopReason, TextDelta, ToolCall

__all__ = [
    "STOP_REASONS",
    "Message",
    "Model",
    "ModelAuthFailed",
    "ModelDone",
    "ModelError",
    "ModelEvent",
    "ModelNotConfigured",
    "ModelRateLimited",
    "ModelUnreachable",
    "Role",
    "ScriptExhausted",
    "StopReason",
    "TextDelta",
    "ToolCall",
    "close_model",
]

Role = Literal["system", "user", "assistant", "tool"]


def _no_tool_calls() -> list[ToolCall]:
    return []


@dataclass
class Message:
    """One message of the neutral history.

    Attributes:
        role: ``system``, ``user``, ``assistant`` (may carry ``tool_calls``) or ``tool``
            (the observation for ``tool_call_id``; ``name`` is the tool's).
        content: the text.
        kind: what the agent uses the message for: ``""`` (conversation),
            ``skill_activation`` (retained across compaction), ``tool_traffic`` (a turn's
            tool calls and results, replaced by a short record when the turn ends) or
            ``compacted`` (that record).
        is_error: a ``tool`` message reporting a failed or refused call (Anthropic's
            ``tool_result.is_error``; other APIs read it from the text).
    """

    role: Role
    content: str
    tool_calls: list[ToolCall] = field(default_factory=_no_tool_calls)
    tool_call_id: str | None = None
    name: str | None = None
    kind: str = ""
    is_error: bool = False


class Model(Protocol):
    """A chat model behind one streaming call.

    Attributes:
        name: ``provider:model`` as the user chose it (e.g. ``openai:gpt-4.1-mini``).
    """

    name: str

    def stream(self, messages: list[Message], tools: list[dict[str, Any]]) -> AsyncIterator[ModelEvent]:
        """Stream one model call.

        Args:
            messages: the history, first the system message.
            tools: MCP-shaped tool definitions (``name``, ``description``, ``inputSchema``).

        Yields:
            :class:`TextDelta` chunks, then exactly one :class:`ModelDone`.

        Raises:
            ModelError: the provider failed the call (subclasses say why).
        """
        ...


async def close_model(model: Model) -> None:
    """Close a model's HTTP connections when it has any (``aclose``); call it in the event
    loop that used the model, before that loop ends."""
    aclose = getattr(model, "aclose", None)
    if aclose is not None:
        await aclose()


class ModelError(KeenError):
    """The model provider failed a call. ``provider``: ``openai``, ``anthropic`` or
    ``scripted``; ``status``: the HTTP status when there was one."""

    code = "model_error"

    def __init__(self, message: str, *, provider: str = "", status: int | None = None) -> None:
        super().__init__(message)
        self.provider = provider
        self.status = status


class ModelNotConfigured(ModelError):
    """The model cannot be used as chosen (unknown provider, missing key or SDK extra)."""

    code = "model_not_configured"


class ModelAuthFailed(ModelError):
    """The provider refused the API key (HTTP 401 or 403)."""

    code = "model_auth_failed"


class ModelRateLimited(ModelError):
    """The provider answered HTTP 429 after Keen's bounded retries."""

    code = "model_rate_limited"


class ModelUnreachable(ModelError):
    """The provider's endpoint could not be reached (refused, DNS, timeout)."""

    code = "model_unreachable"


class ScriptExhausted(ModelError):
    """A ``scripted:`` model was asked for more answers than its file holds."""

    code = "script_exhausted"


# The answer's events are made once a model answers: their module (three frozen dataclasses,
# about 10 million instructions to make) loads at first use, after a chat's first request
# is out (docs/architecture.md "Prompt start").
__getattr__, __dir__ = lazy_module_attrs(
    __name__,
    exports_from(
        "keen.agent.model_events",
        ("STOP_REASONS", "ModelDone", "ModelEvent", "StopReason", "TextDelta", "ToolCall"),
    ),
)
