"""``scripted:FILE``: a model that replays answers from a JSON-lines file (tests, demos, benchmarks).

Each line is one model call's answer::

    {"content": "Let me look.", "tool_calls": [{"name": "load_skill", "arguments": {"name": "mcp:demo"}}]}
    {"content": "26.2 mi is 42.16 km."}

A line may also say why the answer ended, ``"stop"`` (a :data:`~keen.agent.models.StopReason`,
default ``end``), to replay a truncated or refused answer. The calls are answered in order;
a call past the last line raises :class:`ScriptExhausted`.
Usage is counted locally: ``prompt_tokens`` is what the request would cost an OpenAI-style API
(the messages and tool definitions as JSON, counted with :func:`keen.tokens.token_counter`),
so a scripted run still measures prompt size.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from keen.agent.models import Message, ModelNotConfigured, ScriptExhausted
from keen.agent.providers._shapes import openai_messages, openai_tools
from keen.tokens import token_counter

if TYPE_CHECKING:
    from keen.agent.model_events import ModelDone, ModelEvent, StopReason

__all__ = ["ScriptedModel", "parse_script"]

_CHUNK = 16
# StopReason's values (keen.agent.model_events.STOP_REASONS, whose module loads with the
# answer's first event, after a chat's first request is out).
_STOP_REASONS = ("end", "tool_calls", "length", "context", "content_filter", "refusal", "pause")


class _Line(NamedTuple):
    """One script line, checked: its content, tool calls ``(id, name, arguments)`` and stop."""

    content: str
    calls: list[tuple[str, str, dict[str, Any]]]
    stop: StopReason

    def answer(self, usage: dict[str, int] | None = None) -> ModelDone:
        from keen.agent.model_events import ModelDone, ToolCall

        calls = [ToolCall(*call) for call in self.calls]
        return ModelDone(self.content, calls, usage or {}, self.stop)


def parse_script(text: str, source: str) -> list[ModelDone]:
    """The answers of a script (module doc); blank lines are skipped.

    Raises:
        ModelNotConfigured: a line is not JSON of the documented shape (the message names it).
    """
    return [line.answer() for line in _script_lines(text, source)]


def _script_lines(text: str, source: str) -> list[_Line]:
    """:func:`parse_script`'s lines, checked, before any answer is made."""
    answers: list[_Line] = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        where = f"{source} line {number}"
        try:
            data = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ModelNotConfigured(
                f"{where} is not JSON ({exc.msg}); fix the script", provider="scripted"
            ) from exc
        if not isinstance(data, dict) or not isinstance(data.get("content", ""), str):
            raise ModelNotConfigured(
                f'{where}: expected {{"content": str, "tool_calls": [...]}}; fix the script',
                provider="scripted",
            )
        calls: list[tuple[str, str, dict[str, Any]]] = []
        for i, call in enumerate(data.get("tool_calls") or []):  # type: ignore[union-attr]
            if not isinstance(call, dict) or not isinstance(call.get("name"), str):
                raise ModelNotConfigured(
                    f'{where}: tool call {i + 1} needs {{"name": str, "arguments": {{...}}}}',
                    provider="scripted",
                )
            arguments = call.get("arguments", {})  # type: ignore[union-attr]
            if not isinstance(arguments, dict):
                raise ModelNotConfigured(
                    f"{where}: tool call {i + 1}'s arguments must be an object", provider="scripted"
                )
            calls.append((f"call_{len(answers) + 1}_{i + 1}", str(call["name"]), dict(arguments)))  # type: ignore[arg-type]
        stop = data.get("stop", "end")  # type: ignore[union-attr]
        if stop not in _STOP_REASONS:
            raise ModelNotConfigured(
                f"{where}: stop must be one of {', '.join(_STOP_REASONS)}; fix the script",
                provider="scripted",
            )
        answers.append(_Line(str(data.get("content", "")), calls, stop))  # type: ignore[arg-type]
    return answers


class ScriptedModel:
    """Replays a script's answers, one per :meth:`stream` call (module doc).

    Args:
        path: the JSON-lines file.

    Raises:
        ModelNotConfigured: the file cannot be read or a line is malformed.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.name = f"scripted:{path}"
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise ModelNotConfigured(
                f"cannot read the script {path} ({exc.strerror or exc}); pass --model scripted:FILE with a JSON-lines file",
                provider="scripted",
            ) from exc
        # Checked now (a broken script fails before anything is sent); each answer's events
        # are made when it is asked for.
        self.answers = _script_lines(text, str(path))
        self.calls = 0

    async def stream(self, messages: list[Message], tools: list[dict[str, Any]]) -> AsyncIterator[ModelEvent]:
        """Yield the next answer's content in chunks, then the answer (see :class:`~keen.agent.models.Model`)."""
        if self.calls >= len(self.answers):
            raise ScriptExhausted(
                f"the scripted model {self.path} has {len(self.answers)} answer(s) and was asked for answer "
                f"{self.calls + 1}; add a line to the script or end the turn earlier",
                provider="scripted",
            )
        answer = self.answers[self.calls]
        self.calls += 1
        request = json.dumps(
            {"messages": openai_messages(messages), "tools": openai_tools(tools)}, ensure_ascii=False
        )
        from keen.agent.model_events import TextDelta

        for start in range(0, len(answer.content), _CHUNK):
            yield TextDelta(answer.content[start : start + _CHUNK])
        # The counter is looked up with the usage, after the request: not when the model opens.
        count = token_counter().count
        usage = {"prompt_tokens": count(request), "completion_tokens": count(answer.content)}
        yield answer.answer(usage)
