"""Fake LLM provider endpoints on 127.0.0.1 for the real ``openai`` and ``anthropic`` SDKs.

No real provider is reachable here, so these stand in for one (the brief's one allowed
fake): a threaded stdlib HTTP server that answers

- ``POST /v1/chat/completions`` in OpenAI's streaming shape (``data: {chunk}`` lines, tool
  calls split into fragments, a usage chunk, ``data: [DONE]``), and
- ``POST /v1/messages`` in Anthropic's (``event:``/``data:`` pairs: ``message_start``,
  ``content_block_*`` with ``text_delta`` and ``input_json_delta``, ``message_delta``),

from a queue of :class:`Reply` objects, one per request. An error reply (``status``) is
answered with the provider's error body and ``retry-after-ms: 1`` (or the reply's own
``headers``) so retries run quickly; ``times`` repeats it for that many requests. A reply
may also end with another stop reason (``finish``), send a tool call's arguments as raw
text (``"raw"`` instead of ``"arguments"``), fail mid-stream with the provider's error
event (``stream_error``), stop without a stop reason (``cut``), send an event whose data
is not JSON (``garbage``) or end on an event cut mid-object (``torn``). Every request is kept in
``requests`` (path, headers, JSON body) for the tests to inspect.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["KEY", "FakeLLM", "Reply", "collect"]

KEY = "sk-test-9f8e7d6c5b4a39281706abcdef123456"
"""The API key the tests export; no message, log or event may quote it."""


@dataclass
class Reply:
    """One answer: streamed ``text`` and ``tool_calls`` (``{"name", "arguments"}``), or an
    HTTP error ``status`` with ``message``, repeated for ``times`` requests."""

    text: str = ""
    tool_calls: list[dict[str, Any]] = field(default_factory=lambda: list[dict[str, Any]]())
    status: int = 200
    message: str = ""
    times: int = 1
    usage: tuple[int, int] = (42, 7)
    pause: float = 0.0
    """Seconds to wait after each streamed event (a slow model, for Ctrl-C tests)."""
    finish: str | None = None
    """The stop reason sent (OpenAI ``finish_reason``, Anthropic ``stop_reason``); None: the
    natural one (``tool_calls``/``tool_use`` with calls, else ``stop``/``end_turn``)."""
    headers: dict[str, str] | None = None
    """An error reply's headers instead of ``retry-after-ms: 1`` (``{}``: none)."""
    stream_error: dict[str, str] | None = None
    """Fail after the text with this error object (``{"type", "message"}``) in the stream."""
    cut: bool = False
    """End the stream after the content, before any stop reason (a dropped connection)."""
    dropped: bool = False
    """Like ``cut``, but the body is chunked and the connection closes before its last chunk
    (a proxy or network dropping the stream: the client sees a broken body, not its end)."""
    garbage: str | None = None
    """After the text, one event whose data is this (not JSON: an HTML error page, a proxy's
    notice), then the connection closes, although the response said 200 and event-stream."""
    torn: bool = False
    """After the text, one event whose JSON is cut in the middle of an object, then the
    connection closes."""
    refusal: str = ""
    """OpenAI shape: this text in the delta's ``refusal`` field instead of ``content``."""
    index_zero: bool = False
    """OpenAI shape as Ollama streams it (ollama/ollama#15457): every tool call at ``index`` 0,
    told apart only by its ``id``."""
    hang: threading.Event | None = None
    """Never answer: hold each request until this is set (the test sets it when done; at most
    60 s), then close the connection without a response (a model server that hung)."""
    ids_change: bool = False
    """OpenAI shape as some servers stream it (poolsideai/pool#9, vLLM's gpt-oss path): a
    call's argument chunks carry an ``id`` other than its first chunk's."""


@dataclass
class Seen:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]
    at: float = field(default_factory=time.monotonic)
    """When the request arrived (``time.monotonic``, the clock every process here shares)."""


_RAW = "\x00raw"
"""An Anthropic event dict holding this key is sent as its value, as is (not JSON-encoded)."""


def _chunks(text: str, size: int = 5) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)] or []


def _openai_events(reply: Reply) -> Iterator[str]:
    base = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 0, "model": "fake"}

    def chunk(delta: dict[str, Any], finish: str | None = None) -> str:
        return json.dumps({**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})

    yield chunk({"role": "assistant", "content": ""})
    for part in _chunks(reply.text):
        yield chunk({"content": part})
    for part in _chunks(reply.refusal):
        yield chunk({"refusal": part})
    if reply.garbage is not None:
        yield reply.garbage
        return
    if reply.torn:
        yield chunk({"content": " and more"})[:40]
        return
    if reply.stream_error is not None:
        yield json.dumps({"error": reply.stream_error})
        return
    for index, call in enumerate(reply.tool_calls):
        args = call["raw"] if "raw" in call else json.dumps(call.get("arguments", {}))
        yield chunk(
            {
                "tool_calls": [
                    {
                        "index": 0 if reply.index_zero else index,
                        "id": f"call_{index}",
                        "type": "function",
                        "function": {"name": call["name"], "arguments": ""},
                    }
                ]
            }
        )
        for part in _chunks(args, 7):
            at = 0 if reply.index_zero else index
            more: dict[str, Any] = {"id": f"chunk_{index}"} if reply.ids_change else {}
            yield chunk({"tool_calls": [{"index": at, **more, "function": {"arguments": part}}]})
    if reply.cut or reply.dropped:
        return
    yield chunk({}, reply.finish or ("tool_calls" if reply.tool_calls else "stop"))
    prompt, completion = reply.usage
    yield json.dumps(
        {
            **base,
            "choices": [],
            "usage": {
                "prompt_tokens": prompt,
                "completion_tokens": completion,
                "total_tokens": prompt + completion,
            },
        }
    )
    yield "[DONE]"


def _anthropic_events(reply: Reply) -> Iterator[tuple[str, dict[str, Any]]]:
    prompt, completion = reply.usage
    yield (
        "message_start",
        {
            "type": "message_start",
            "message": {
                "id": "msg_1",
                "type": "message",
                "role": "assistant",
                "model": "fake",
                "content": [],
                "stop_reason": None,
                "stop_sequence": None,
                "usage": {"input_tokens": prompt, "output_tokens": 1},
            },
        },
    )
    index = 0
    if reply.text:
        yield (
            "content_block_start",
            {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        )
        for part in _chunks(reply.text):
            yield (
                "content_block_delta",
                {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": part}},
            )
        yield "content_block_stop", {"type": "content_block_stop", "index": 0}
        index = 1
    if reply.garbage is not None or reply.torn:
        whole = json.dumps(
            {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": " and more"}}
        )
        yield "content_block_delta", {_RAW: reply.garbage if reply.garbage is not None else whole[:40]}
        return
    if reply.stream_error is not None:
        yield "error", {"type": "error", "error": reply.stream_error}
        return
    for offset, call in enumerate(reply.tool_calls):
        i = index + offset
        block = {"type": "tool_use", "id": f"toolu_{offset}", "name": call["name"], "input": {}}
        yield "content_block_start", {"type": "content_block_start", "index": i, "content_block": block}
        raw = call["raw"] if "raw" in call else json.dumps(call.get("arguments", {}))
        for part in _chunks(raw, 7):
            yield (
                "content_block_delta",
                {
                    "type": "content_block_delta",
                    "index": i,
                    "delta": {"type": "input_json_delta", "partial_json": part},
                },
            )
        yield "content_block_stop", {"type": "content_block_stop", "index": i}
    if reply.cut or reply.dropped:
        return
    stop = reply.finish or ("tool_use" if reply.tool_calls else "end_turn")
    yield (
        "message_delta",
        {
            "type": "message_delta",
            "delta": {"stop_reason": stop, "stop_sequence": None},
            "usage": {"output_tokens": completion},
        },
    )
    yield "message_stop", {"type": "message_stop"}


class FakeLLM:
    """The fake endpoint; use as a context manager. ``url`` is ``http://127.0.0.1:PORT``;
    the OpenAI base URL is ``url + "/v1"``, the Anthropic one ``url``."""

    def __init__(self, replies: list[Reply] | None = None) -> None:
        self.replies: list[Reply] = list(replies or [])
        self.requests: list[Seen] = []
        self._lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # quiet
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                fake.requests.append(Seen(self.path, {k.lower(): v for k, v in self.headers.items()}, body))
                reply = fake._next()
                if reply.hang is not None:
                    reply.hang.wait(60)
                    self.close_connection = True
                    return
                anthropic = self.path.endswith("/messages")
                if reply.status != 200:
                    self._error(reply, anthropic)
                elif anthropic:
                    self._stream(
                        (
                            f"event: {name}\ndata: {data[_RAW] if _RAW in data else json.dumps(data)}\n\n"
                            for name, data in _anthropic_events(reply)
                        ),
                        reply,
                    )
                else:
                    self._stream((f"data: {data}\n\n" for data in _openai_events(reply)), reply)

            def _error(self, reply: Reply, anthropic: bool) -> None:
                kind = {
                    401: "authentication_error",
                    403: "permission_error",
                    429: "rate_limit_error",
                    529: "overloaded_error",
                }.get(reply.status, "api_error")
                error = {"type": kind, "message": reply.message or f"fake error {reply.status}"}
                payload = json.dumps(
                    {"type": "error", "error": error} if anthropic else {"error": error}
                ).encode()
                self.send_response(reply.status)
                self.send_header("content-type", "application/json")
                headers = {"retry-after-ms": "1"} if reply.headers is None else reply.headers
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("content-length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def _stream(self, events: Iterator[str], reply: Reply) -> None:
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("cache-control", "no-cache")
                self.send_header("connection", "close")
                if reply.dropped:
                    self.send_header("transfer-encoding", "chunked")
                self.end_headers()
                try:
                    for event in events:
                        data = event.encode()
                        if reply.dropped:
                            data = b"%x\r\n%s\r\n" % (len(data), data)
                        self.wfile.write(data)
                        self.wfile.flush()
                        if reply.pause:
                            time.sleep(reply.pause)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client hung up mid-stream (a cancelled turn)
                self.close_connection = True

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        # serve_forever looks at its stop flag between selects: at its default 0.5 s poll,
        # every ``with FakeLLM()`` block waited up to half a second to end (most of the
        # provider tests' time); 20 ms costs nothing measurable.
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, name="fake-llm", daemon=True
        )

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def _next(self) -> Reply:
        with self._lock:
            if not self.replies:
                return Reply(status=500, message="the fake has no reply queued for this request")
            reply = self.replies[0]
            reply.times -= 1
            if reply.times <= 0:
                self.replies.pop(0)
            return reply

    def __enter__(self) -> FakeLLM:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)


async def collect(
    model: Any, messages: list[Any], tools: list[dict[str, Any]], *, close: bool = True
) -> tuple[str, Any]:
    """One model call's streamed text and its ``ModelDone``; the SDK client is closed after
    it (in the test's event loop) unless the test makes more calls."""
    from keen.agent import TextDelta
    from keen.agent.models import close_model

    streamed: list[str] = []
    done: Any = None
    try:
        async for event in model.stream(messages, tools):
            if isinstance(event, TextDelta):
                streamed.append(event.text)
            else:
                done = event
    finally:
        if close:
            await close_model(model)
    assert done is not None
    return "".join(streamed), done
