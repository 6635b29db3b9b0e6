"""Answers that did not finish: what the turn loop says instead of passing them off as complete.

A model call can end before its answer is whole (:data:`keen.agent.models.StopReason`):
cut at the output token limit (``length``), stopped because the conversation filled the
model's context window (``context``), stopped by the provider's content filter
(``content_filter``) or refused (``refusal``). The turn then ends with ``ok=False`` and
:data:`UNFINISHED`'s reason as its error, the text kept as the (incomplete) answer. Tool
calls of such an answer never run: a call cut mid-arguments may parse and still not be
what the model meant. Each gets a "not run" result (:func:`not_run`), as every tool call
needs one in the history; after ``length`` the turn goes on, so the model can send them
again, smaller. ``pause`` (Anthropic's ``pause_turn``) is not unfinished: the loop sends the
answer back and the model goes on.
"""

from __future__ import annotations

from typing import Any

from keen.agent.compaction import CallRecord
from keen.agent.models import Message, ToolCall

__all__ = ["CANCELLED", "CUT_CALLS", "UNFINISHED", "answer_pending", "not_run"]

UNFINISHED: dict[str, str] = {
    "length": (
        "the answer was cut off at the model's output token limit, so it is incomplete; "
        "ask for a shorter answer, or to go on from where it stopped"
    ),
    "context": (
        "the conversation filled the model's context window, so the answer is incomplete; "
        "start a new keen chat session, or ask for less at once"
    ),
    "content_filter": "the provider's content filter stopped the answer, so it is incomplete; rephrase the request",
    "refusal": "the model refused to answer (stop reason: refusal); rephrase the request, or start a new session",
}
"""Stop reason -> why the turn's answer is not taken for a complete one (the turn's error)."""

CUT_CALLS = "the model's answer was cut off at its output token limit; its tool calls were not run"
"""The user's line when an answer with tool calls was cut (the turn goes on)."""

_NOT_RUN = (
    "Not run: your answer did not finish (cut at a token limit, filtered or refused), "
    "so this call may be incomplete; send it again, with shorter arguments or the work split "
    "into smaller calls"
)


def not_run(call: ToolCall) -> tuple[Message, CallRecord, dict[str, Any]]:
    """A call of an unfinished answer, answered without running: its history message, its
    compaction record and its :class:`~keen.agent.loop.TurnResult` entry (gate ``model``)."""
    message = Message(
        "tool", _NOT_RUN, tool_call_id=call.id, name=call.name, kind="tool_traffic", is_error=True
    )
    record = CallRecord(call.name, call.arguments, "denied", _NOT_RUN)
    entry = {
        "name": call.name,
        "arguments": call.arguments,
        "outcome": "denied",
        "gate": "model",
        "declined": False,
        "text": _NOT_RUN,
    }
    return message, record, entry


CANCELLED = "cancelled by the user before this call ran"
"""The result of each call a cancelled turn had not run (:func:`answer_pending`)."""


def answer_pending(history: list[Message], why: str) -> None:
    """Give every tool call of the last assistant message without a result one saying
    ``why``, so the history stays valid for the providers (each tool call needs its result).
    The same for a live turn cancelled and for its rebuild from a log that does not hold the
    turn's messages (:mod:`keen.agent.resume`): no compaction record, so a turn whose only
    calls were cancelled keeps its traffic as it was."""
    for index in range(len(history) - 1, -1, -1):
        message = history[index]
        if message.role == "assistant" and message.tool_calls:
            answered = {m.tool_call_id for m in history[index + 1 :] if m.role == "tool"}
            for call in message.tool_calls:
                if call.id not in answered:
                    history.append(
                        Message("tool", why, tool_call_id=call.id, name=call.name, kind="tool_traffic")
                    )
            return
        if message.role == "user":
            return
