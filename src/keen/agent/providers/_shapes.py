"""The neutral history and MCP-shaped tool definitions in each API's shapes (no SDK imported).

- OpenAI Chat Completions: ``{"role", "content", "tool_calls": [{"id", "type": "function",
  "function": {"name", "arguments": "<json>"}}]}`` and ``{"role": "tool", "tool_call_id"}``;
  tools as ``{"type": "function", "function": {"name", "description", "parameters"}}``.
- Anthropic Messages: ``system`` apart; assistant content blocks ``text`` and ``tool_use``
  (``id``, ``name``, ``input``); tool results as ``tool_result`` blocks of one user message
  (consecutive results merged, as the API requires alternating roles); tools as
  ``{"name", "description", "input_schema"}``. A history that ends with an assistant message
  (a paused turn sent back to go on) ends without trailing whitespace, which the API refuses
  in that place.

A tool call's arguments arrive as JSON text in both APIs' streams; :func:`tool_call` parses
them once for both. Both APIs refuse a request whose history names a tool outside
``^[a-zA-Z0-9_-]+$`` (OpenAI: ``Invalid 'messages[N].tool_calls[0].function.name': string
does not match pattern``), and a model may invent one (``functions.read_file``): such a name
is sent back with each other character as ``_`` (:func:`api_name`); the call's result
already says, with the name as the model wrote it, that no such tool was offered.
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any

from keen.agent.models import Message

if TYPE_CHECKING:
    from keen.agent.model_events import ToolCall

__all__ = [
    "anthropic_messages",
    "anthropic_tools",
    "api_name",
    "openai_messages",
    "openai_tools",
    "tool_call",
]

# Compiled at the first tool name shaped (re's own cache), after the prompt is built.
_NOT_IN_NAMES = r"[^A-Za-z0-9_-]"


def api_name(name: str) -> str:
    """``name`` as both APIs take it in a history: characters outside ``[A-Za-z0-9_-]`` as
    ``_``, at most 64 (Keen's own names are already so, and unchanged)."""
    return re.sub(_NOT_IN_NAMES, "_", name)[:64] or "_"


def tool_call(call_id: str, name: str, raw: str) -> ToolCall:
    """A streamed tool call from its arguments' JSON text. Empty text and JSON ``null`` are
    no arguments (``{}``: how models and OpenAI-compatible servers call a tool without
    parameters; a tool that needs some is then refused by argument validation, naming
    them); text that is not a JSON object (not JSON, an array, a string) is kept as
    ``unparsed`` for the harness to refuse."""
    from keen.agent.model_events import ToolCall  # made when an answer arrives

    if not raw.strip():
        return ToolCall(call_id, name, {})
    try:
        value = json.loads(raw)
    except (ValueError, RecursionError):  # nested past the recursion limit too: not a turn's crash
        return ToolCall(call_id, name, {}, unparsed=raw)
    if value is None:
        return ToolCall(call_id, name, {})
    if not isinstance(value, dict):
        return ToolCall(call_id, name, {}, unparsed=raw)
    return ToolCall(call_id, name, value)  # pyright: ignore[reportUnknownArgumentType]


def _schema(tool: dict[str, Any]) -> dict[str, Any]:
    schema = tool.get("inputSchema") or {"type": "object", "properties": {}}
    return dict(schema)


def openai_tools(tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """MCP-shaped definitions as Chat Completions ``tools``."""
    return [
        {
            "type": "function",
            "function": {
                "name": t["name"],
                "description": t.get("description", ""),
                "parameters": _schema(t),
            },
        }
        for t in tools
    ]


def openai_messages(messages: list[Message]) -> list[dict[str, Any]]:
    """The history as Chat Completions ``messages``."""
    out: list[dict[str, Any]] = []
    for m in messages:
        if m.role == "tool":
            out.append({"role": "tool", "tool_call_id": m.tool_call_id or "", "content": m.content})
        elif m.role == "assistant" and m.tool_calls:
            out.append(
                {
                    "role": "assistant",
                    "content": m.content or None,
                    "tool_calls": [
                        {
                            "id": c.id,
                            "type": "function",
                            "function": {
                                "name": api_name(c.name),
                                "arguments": json.dumps(c.arguments, ensure_ascii=False),
                            },
                        }
                        for c in m.tool_calls
                    ],
                }
            )
        else:
            out.append({"role": m.role, "content": m.content})
    return out


def anthropic_tools(tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """MCP-shaped definitions as Messages ``tools``."""
    return [
        {"name": t["name"], "description": t.get("description", ""), "input_schema": _schema(t)}
        for t in tools
    ]


def anthropic_messages(messages: list[Message]) -> tuple[str, list[dict[str, Any]]]:
    """The history as Messages ``(system, messages)``: system text joined, roles alternating."""
    system: list[str] = []
    out: list[dict[str, Any]] = []

    def add(role: str, blocks: list[dict[str, Any]]) -> None:
        if out and out[-1]["role"] == role:
            out[-1]["content"].extend(blocks)
        else:
            out.append({"role": role, "content": blocks})

    for m in messages:
        if m.role == "system":
            system.append(m.content)
        elif m.role == "tool":
            result: dict[str, Any] = {
                "type": "tool_result",
                "tool_use_id": m.tool_call_id or "",
                "content": m.content,
            }
            if m.is_error:
                result["is_error"] = True
            add("user", [result])
        elif m.role == "assistant":
            blocks: list[dict[str, Any]] = [{"type": "text", "text": m.content}] if m.content else []
            blocks += [
                {"type": "tool_use", "id": c.id, "name": api_name(c.name), "input": c.arguments}
                for c in m.tool_calls
            ]
            add("assistant", blocks or [{"type": "text", "text": "(no answer)"}])
        else:
            add("user", [{"type": "text", "text": m.content or "(empty)"}])
    if out and out[-1]["role"] == "assistant":
        last = out[-1]["content"][-1]
        if last["type"] == "text":
            last["text"] = last["text"].rstrip() or "(no answer)"
    return "\n\n".join(system), out
