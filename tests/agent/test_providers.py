"""The real ``openai`` and ``anthropic`` SDKs against fake provider endpoints on loopback:
streamed text and tool calls come out as Keen's events, the history goes in each API's
shape, and HTTP errors, rate limits and refused connections become clear ModelErrors
that never quote the key. Plus the scripted provider and ``open_model``'s own errors."""

from __future__ import annotations

import json
import shlex
import socket
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest

from helpers.fake_llm import KEY, FakeLLM, Reply
from helpers.fake_llm import collect as fake_collect
from keen.agent import (
    Message,
    ModelAuthFailed,
    ModelDone,
    ModelError,
    ModelNotConfigured,
    ModelRateLimited,
    ModelUnreachable,
    ScriptExhausted,
    ToolCall,
    open_model,
)

pytestmark = pytest.mark.anyio

TOOLS = [
    {
        "name": "call_mcp_tool",
        "description": "Call a visible MCP tool.",
        "inputSchema": {"type": "object", "properties": {"server": {"type": "string"}}},
    }
]
HISTORY = [
    Message("system", "You are terse."),
    Message("user", "convert 3 mi"),
    Message("assistant", "", [ToolCall("call_a", "call_mcp_tool", {"server": "demo"})], kind="tool_traffic"),
    Message("tool", "4.83 km", tool_call_id="call_a", name="call_mcp_tool", kind="tool_traffic"),
]


async def collect(
    model: Any, messages: list[Message] | None = None, *, close: bool = True
) -> tuple[str, ModelDone]:
    """One model call's streamed text and end event (:func:`helpers.fake_llm.collect`)."""
    return await fake_collect(model, messages or HISTORY, TOOLS, close=close)


@pytest.fixture
def keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)


def model_for(provider: str, fake: FakeLLM) -> Any:
    base = fake.url + "/v1" if provider == "openai" else fake.url
    return open_model(f"{provider}:fake-model", base_url=base)


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
async def test_streams_text_and_tool_calls(provider: str, keys: None) -> None:
    replies = [
        Reply(
            text="Looking that up.",
            tool_calls=[{"name": "call_mcp_tool", "arguments": {"server": "demo", "n": 3}}],
        ),
        Reply(text="3 mi is 4.83 km.", usage=(120, 9)),
    ]
    with FakeLLM(replies) as fake:
        model = model_for(provider, fake)
        streamed, done = await collect(model, close=False)
        assert streamed == done.content == "Looking that up."
        assert [(c.name, c.arguments) for c in done.tool_calls] == [
            ("call_mcp_tool", {"server": "demo", "n": 3})
        ]
        assert done.tool_calls[0].id
        streamed, done = await collect(model)
        assert done.content == "3 mi is 4.83 km." and not done.tool_calls
        assert done.usage == {"prompt_tokens": 120, "completion_tokens": 9}
    sent = fake.requests[0]
    if provider == "openai":
        assert sent.path == "/v1/chat/completions"
        assert sent.headers["authorization"] == f"Bearer {KEY}"
        assert sent.body["stream"] is True
        assert sent.body["tools"][0]["function"]["name"] == "call_mcp_tool"
        roles = [m["role"] for m in sent.body["messages"]]
        assert roles == ["system", "user", "assistant", "tool"]
        assert sent.body["messages"][2]["tool_calls"][0]["id"] == "call_a"
        assert sent.body["messages"][3]["tool_call_id"] == "call_a"
    else:
        assert sent.path == "/v1/messages"
        # The SDK sends the key as x-api-key or as a bearer token, depending on its version.
        assert KEY in (
            sent.headers.get("x-api-key"),
            sent.headers.get("authorization", "").removeprefix("Bearer "),
        )
        assert sent.body["system"] == "You are terse."
        assert sent.body["tools"][0]["input_schema"]["type"] == "object"
        assert [m["role"] for m in sent.body["messages"]] == ["user", "assistant", "user"]
        assert sent.body["messages"][1]["content"][0] == {
            "type": "tool_use",
            "id": "call_a",
            "name": "call_mcp_tool",
            "input": {"server": "demo"},
        }
        assert sent.body["messages"][2]["content"][0]["tool_use_id"] == "call_a"


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
@pytest.mark.parametrize(
    ("status", "error", "words"),
    [
        (401, ModelAuthFailed, "refused the API key"),
        (429, ModelRateLimited, "rate limiting"),
        (500, ModelError, "HTTP 500"),
    ],
)
async def test_http_errors_become_clear_model_errors(
    provider: str, status: int, error: type[ModelError], words: str, keys: None
) -> None:
    # 429 and 500 are retried by the SDK (twice by default), so they fail three times.
    with (
        FakeLLM([Reply(status=status, message=f"nope {KEY}", times=3)]) as fake,
        pytest.raises(error, match=words) as caught,
    ):
        await collect(model_for(provider, fake))
    message = caught.value.message
    assert words in message and str(status) in message
    assert KEY not in message and KEY not in str(caught.value)
    var = "OPENAI_API_KEY" if provider == "openai" else "ANTHROPIC_API_KEY"
    if status == 401:
        assert var in message
    assert len(fake.requests) == (1 if status == 401 else 3)


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
async def test_connection_refused(provider: str, keys: None) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    model: Any = open_model(f"{provider}:m", base_url=f"http://127.0.0.1:{port}")
    model.retry.backoff = 0.001  # Keen retries refused connections too; quickly here
    with pytest.raises(
        ModelUnreachable, match=r"cannot connect to .*check that the server is running"
    ) as caught:
        await collect(model)
    assert "check that the server is running" in caught.value.message


async def test_missing_keys_and_unknown_providers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with pytest.raises(ModelNotConfigured, match="OPENAI_API_KEY is not set"):
        open_model("openai:gpt-4.1-mini")
    with pytest.raises(ModelNotConfigured, match="ANTHROPIC_API_KEY is not set"):
        open_model("anthropic:claude-sonnet-4-5")
    with pytest.raises(ModelNotConfigured, match="use provider:name"):
        open_model("gemini:pro")
    with pytest.raises(ModelNotConfigured, match="use provider:name"):
        open_model("openai")


async def test_local_openai_compatible_server_needs_no_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with FakeLLM([Reply(text="hi from llama")]) as fake:
        _, done = await collect(open_model("openai:llama3.1", base_url=fake.url + "/v1"))
    assert done.content == "hi from llama"
    assert fake.requests[0].body["model"] == "llama3.1"


async def test_local_anthropic_compatible_server_needs_no_key(monkeypatch: pytest.MonkeyPatch) -> None:
    # README: "a local --base-url needs none"; the anthropic provider refused to start
    # without ANTHROPIC_API_KEY all the same.
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with FakeLLM([Reply(text="hi from a proxy")]) as fake:
        _, done = await collect(open_model("anthropic:claude-local", base_url=fake.url))
    assert done.content == "hi from a proxy"
    assert fake.requests[0].body["model"] == "claude-local"
    sent = fake.requests[0].headers  # the key as x-api-key or as a bearer token, by SDK version
    assert "keen-no-key" in (sent.get("x-api-key"), sent.get("authorization", "").removeprefix("Bearer ")), (
        sent
    )


async def test_scripted_model_replays_then_runs_out(tmp_path: Path) -> None:
    script = tmp_path / "s.jsonl"
    script.write_text(
        '{"content": "step one", "tool_calls": [{"name": "search_tools", "arguments": {"query": "time"}}]}\n'
        "\n"
        '{"content": "done"}\n'
    )
    model = open_model(f"scripted:{script}")
    streamed, done = await collect(model)
    assert streamed == "step one" and done.tool_calls[0].arguments == {"query": "time"}
    assert done.usage["prompt_tokens"] > 0
    _, done = await collect(model)
    assert done.content == "done"
    with pytest.raises(ScriptExhausted, match="has 2 answer"):
        await collect(model)


async def test_scripted_model_rejects_a_broken_script(tmp_path: Path) -> None:
    script = tmp_path / "bad.jsonl"
    script.write_text('{"content": "ok"}\n{not json\n')
    with pytest.raises(ModelNotConfigured, match="line 2 is not JSON"):
        open_model(f"scripted:{script}")
    with pytest.raises(ModelNotConfigured, match="cannot read the script"):
        open_model(f"scripted:{tmp_path / 'missing.jsonl'}")


@pytest.mark.parametrize(
    ("provider", "spec"), [("openai", "openai>=3.50,<4"), ("anthropic", "anthropic>=2.10,<3")]
)
async def test_a_missing_sdk_names_a_command_that_installs_it(
    provider: str, spec: str, keys: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    # An installation without the extra: importing the SDK fails as it would there. The fix it
    # named, pip install 'keen-code[openai]', fails: no such package on PyPI.
    monkeypatch.setitem(sys.modules, provider, None)
    with pytest.raises(ModelNotConfigured, match=f"the {provider} SDK is not installed") as caught:
        open_model(f"{provider}:m")
    message = caught.value.message
    assert f"{shlex.quote(sys.executable)} -m pip install '{spec}'" in message
    assert f"pip install '.[{provider}]'" in message and "keen-code[" not in message
    # The spec is pyproject's own extra.
    extras = tomllib.loads((Path(__file__).parents[2] / "pyproject.toml").read_text())["project"]
    assert extras["optional-dependencies"][provider] == [spec]


async def test_scripted_model_replays_a_stop_reason(tmp_path: Path) -> None:
    script = tmp_path / "s.jsonl"
    script.write_text('{"content": "cut sho", "stop": "length"}\n{"content": "whole"}\n')
    model = open_model(f"scripted:{script}")
    assert (await collect(model))[1].stop == "length"
    assert (await collect(model))[1].stop == "end"
    script.write_text('{"content": "x", "stop": "truncated"}\n')
    with pytest.raises(ModelNotConfigured, match="line 1: stop must be one of end, tool_calls, length"):
        open_model(f"scripted:{script}")
    # Every stop reason a model may give is one a script may replay (the scripted model
    # checks its script before the answers' module loads, with its own copy of the names).
    from keen.agent.model_events import STOP_REASONS

    for stop in STOP_REASONS:
        script.write_text(json.dumps({"content": "x", "stop": stop}) + "\n")
        assert (await collect(open_model(f"scripted:{script}")))[1].stop == stop
    script.write_text('{"content": "x", "stop": "truncated"}\n')
    with pytest.raises(ModelNotConfigured, match=", ".join(STOP_REASONS) + "; fix the script"):
        open_model(f"scripted:{script}")


# A new interpreter importing both SDKs: seconds on an idle machine, past the suite's 120 s
# limit at load 19 on 2 CPUs.
@pytest.mark.timeout(300)
def test_choosing_a_model_loads_its_sdk_only_at_the_first_request(keys: None) -> None:
    # keen chat builds its system prompt after choosing the model: the SDK (hundreds of ms of
    # CPU to import) loads with the first request, not before the prompt. Both
    # providers in one new interpreter (each one's SDK is absent until its own first request).
    with FakeLLM([Reply(text="hi"), Reply(text="hi")]) as fake:
        code = (
            "import asyncio, sys\n"
            "from keen.agent import Message, open_model\n"
            "async def turn(model):\n"
            "    text = [e.text async for e in model.stream([Message('user', 'x')], []) if hasattr(e, 'text')]\n"
            "    await model.aclose()\n"
            "    return ''.join(text)\n"
        )
        for provider in ("openai", "anthropic"):
            base = fake.url + "/v1" if provider == "openai" else fake.url
            code += (
                f"model = open_model({provider + ':m'!r}, base_url={base!r})\n"
                f"print({provider!r} in sys.modules)\n"
                f"print(asyncio.run(turn(model)), {provider!r} in sys.modules)\n"
            )
        done = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
        )
    assert done.stdout.split() == ["False", "hi", "True"] * 2, done.stderr
    assert [r.path for r in fake.requests] == ["/v1/chat/completions", "/v1/messages"]


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_model_timeout_bounds_the_wait_for_an_answer_not_for_a_connection(keys: None, provider: str) -> None:
    # model_timeout went to the SDK as a bare float, which httpx takes as the connect timeout
    # too: a slow model given 600 s waited 600 s on a host that never accepted the connection.
    from keen.agent.providers._sdk_client import CONNECT_TIMEOUT

    for seconds in (CONNECT_TIMEOUT * 40, CONNECT_TIMEOUT / 2):
        model = open_model(f"{provider}:m", base_url="http://127.0.0.1:9/v1", timeout=seconds)
        timeout = model._client.timeout  # pyright: ignore[reportAttributeAccessIssue]
        assert timeout.connect == min(seconds, CONNECT_TIMEOUT), timeout
        assert timeout.read == seconds and timeout.write == seconds and timeout.pool == seconds, timeout
