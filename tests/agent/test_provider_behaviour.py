"""What real providers do, through the real ``openai`` and ``anthropic`` SDKs against the
fake endpoints on loopback: every stop reason reported, a stream cut before its stop reason,
tool-call arguments that are not a JSON object, Keen's bounded retries (429 with and without
``retry-after``, a ``retry-after`` too long to wait for, Anthropic's 529 and its in-stream
``overloaded_error``, 500/503, ``x-should-retry: false``) and auth failures (401/403) whose
message names the variable to fix and never the key."""

from __future__ import annotations

from typing import Any

import pytest

from helpers.fake_llm import KEY, FakeLLM, Reply
from helpers.fake_llm import collect as fake_collect
from keen.agent import Message, ModelAuthFailed, ModelError, ModelRateLimited, open_model

pytestmark = pytest.mark.anyio

PROVIDERS = ["openai", "anthropic"]
VARS = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY"}


@pytest.fixture(autouse=True)
def keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)


def model_for(provider: str, fake: FakeLLM) -> Any:
    base = fake.url + "/v1" if provider == "openai" else fake.url
    model: Any = open_model(f"{provider}:fake-model", base_url=base)
    model.retry.backoff = 0.001  # the backoff's shape is the same; the test need not wait
    return model


async def collect(model: Any) -> tuple[str, Any]:
    return await fake_collect(model, [Message("system", "terse"), Message("user", "hi")], [])


CALL = [{"name": "call_mcp_tool", "arguments": {"server": "demo"}}]


@pytest.mark.parametrize(
    ("provider", "sent", "calls", "stop"),
    [
        ("openai", "stop", [], "end"),
        ("openai", "tool_calls", CALL, "tool_calls"),
        ("openai", "length", [], "length"),
        ("openai", "content_filter", [], "content_filter"),
        ("anthropic", "end_turn", [], "end"),
        ("anthropic", "stop_sequence", [], "end"),
        ("anthropic", "tool_use", CALL, "tool_calls"),
        ("anthropic", "max_tokens", [], "length"),
        ("anthropic", "model_context_window_exceeded", [], "context"),
        ("anthropic", "refusal", [], "refusal"),
        ("anthropic", "pause_turn", [], "pause"),
    ],
)
async def test_every_stop_reason_is_reported(
    provider: str, sent: str, calls: list[dict[str, Any]], stop: str
) -> None:
    with FakeLLM([Reply(text="Some words", tool_calls=calls, finish=sent)]) as fake:
        streamed, done = await collect(model_for(provider, fake))
    assert streamed == done.content == "Some words"
    assert done.stop == stop
    assert len(done.tool_calls) == len(calls)


async def test_an_openai_refusal_field_is_the_answer_and_stops_as_refusal() -> None:
    # OpenAI sends a refusal in delta.refusal, not content, with finish_reason "stop": read
    # as content alone it was an empty answer taken for a complete one.
    with FakeLLM([Reply(refusal="I can't help with that.")]) as fake:
        streamed, done = await collect(model_for("openai", fake))
    assert streamed == done.content == "I can't help with that."
    assert done.stop == "refusal"


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_stream_cut_before_its_stop_reason_is_an_error_not_an_answer(provider: str) -> None:
    with (
        FakeLLM([Reply(text="The first half of", cut=True)]) as fake,
        pytest.raises(ModelError, match="ended before the model finished it") as caught,
    ):
        await collect(model_for(provider, fake))
    assert "ended before the model finished it" in caught.value.message
    assert "send your message again" in caught.value.message
    assert len(fake.requests) == 1  # text was shown: not tried again


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_stream_dropped_mid_answer_says_it_broke_and_is_not_retried(provider: str) -> None:
    with (
        FakeLLM([Reply(text="The first half of", dropped=True), Reply(text="x")]) as fake,
        pytest.raises(ModelError, match="broke during the answer") as caught,
    ):
        await collect(model_for(provider, fake))
    assert len(fake.requests) == 1  # text was shown: not tried again
    message = caught.value.message
    assert "broke during the answer" in message and "send your message again" in message, message


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize(
    ("reply", "words"),
    [
        (Reply(text="Half", garbage="<html>502 Bad Gateway</html>"), "sent an event that is not JSON"),
        (Reply(garbage="upstream connect error"), "sent an event that is not JSON"),
        (Reply(text="Half", torn=True), "ended in the middle of an event"),
    ],
)
async def test_a_200_stream_that_is_not_json_is_a_model_error(
    provider: str, reply: Reply, words: str
) -> None:
    # The SDKs let json.JSONDecodeError out of the stream: keen chat ended in "internal error:
    # ExceptionGroup ... please report it", exit 2, and no --json record.
    with (
        FakeLLM([reply, Reply(text="x")]) as fake,
        pytest.raises(ModelError, match=f"answered HTTP 200 but its stream {words}") as caught,
    ):
        await collect(model_for(provider, fake))
    message = caught.value.message
    assert f"answered HTTP 200 but its stream {words}" in message, message
    assert "send your message again" in message and "check --base-url" in message
    if reply.garbage:
        assert repr(reply.garbage) in message  # what it sent instead, quoted
    assert len(fake.requests) == 1  # the same endpoint would send the same: not retried


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_parallel_tool_calls_come_in_order_with_their_own_ids(provider: str) -> None:
    calls = [{"name": f"tool_{i}", "arguments": {"n": i}} for i in range(3)]
    with FakeLLM([Reply(tool_calls=calls)]) as fake:
        _, done = await collect(model_for(provider, fake))
    assert [(c.name, c.arguments) for c in done.tool_calls] == [(f"tool_{i}", {"n": i}) for i in range(3)]
    assert len({c.id for c in done.tool_calls}) == 3
    assert done.stop == "tool_calls"


async def test_parallel_calls_streamed_all_at_index_0_are_told_apart_by_id() -> None:
    # Ollama's OpenAI-compatible stream (ollama/ollama#15457): joined by index alone, the
    # three calls became one with three names run together and arguments that are not JSON.
    calls = [{"name": f"write_{i}", "arguments": {"path": f"f{i}.py", "text": "x" * 20}} for i in range(3)]
    with FakeLLM([Reply(tool_calls=calls, index_zero=True)]) as fake:
        _, done = await collect(model_for("openai", fake))
    assert [(c.id, c.name, c.arguments, c.unparsed) for c in done.tool_calls] == [
        (f"call_{i}", f"write_{i}", calls[i]["arguments"], None) for i in range(3)
    ]


@pytest.mark.parametrize("index_zero", [False, True])
async def test_a_call_whose_argument_chunks_carry_another_id_stays_one_call(index_zero: bool) -> None:
    # Some servers (poolsideai/pool#9, vLLM's gpt-oss path) send a call's first chunk with one
    # id and its arguments with another: a new id alone split it into search({}) and a call
    # with no name. Only a chunk that names a function starts a call at an index in use.
    calls = [{"name": f"search_{i}", "arguments": {"q": f"x{i}"}} for i in range(2)]
    with FakeLLM([Reply(tool_calls=calls, ids_change=True, index_zero=index_zero)]) as fake:
        _, done = await collect(model_for("openai", fake))
    assert [(c.name, c.arguments) for c in done.tool_calls] == [
        (f"search_{i}", {"q": f"x{i}"}) for i in range(2)
    ]


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_arguments_that_are_not_a_json_object_are_kept_as_sent(provider: str) -> None:
    calls = [
        {"name": "a", "raw": '{"server": "demo", '},  # not JSON (cut short)
        {"name": "b", "raw": "[1, 2]"},  # JSON, not an object
        {"name": "c", "raw": "null"},  # some models' way of calling a tool without parameters
        {"name": "d", "raw": ""},  # no arguments: a tool without parameters
        {"name": "e", "raw": '{"x": 1}'},
        {"name": "f", "raw": "[" * 100000},  # nested past the recursion limit: it crashed the stream
    ]
    with FakeLLM([Reply(tool_calls=calls)]) as fake:
        _, done = await collect(model_for(provider, fake))
    got = [(c.name, c.arguments, c.unparsed) for c in done.tool_calls]
    assert got == [
        ("a", {}, '{"server": "demo", '),
        ("b", {}, "[1, 2]"),
        ("c", {}, None),  # null: no arguments, as for a tool without parameters
        ("d", {}, None),
        ("e", {"x": 1}, None),
        ("f", {}, "[" * 100000),
    ]


# -- rate limits, overload, server errors: Keen's bounded retries ---------------------------


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_429_without_retry_after_is_retried_with_backoff_then_answers(provider: str) -> None:
    replies = [Reply(status=429, headers={}, times=2), Reply(text="at last")]
    with FakeLLM(replies) as fake:
        _, done = await collect(model_for(provider, fake))
    assert done.content == "at last" and len(fake.requests) == 3


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_retry_after_too_long_to_wait_for_fails_at_once_and_says_how_long(provider: str) -> None:
    # The anthropic SDK alone would sleep the hour; the openai SDK would give up silently.
    with (
        FakeLLM([Reply(status=429, headers={"retry-after": "3600"}, times=3)]) as fake,
        pytest.raises(
            ModelRateLimited, match="asks to wait 3600 s: send your message again after that"
        ) as caught,
    ):
        await collect(model_for(provider, fake))
    assert len(fake.requests) == 1
    assert "asks to wait 3600 s: send your message again after that" in caught.value.message


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_short_retry_after_is_waited_for(provider: str) -> None:
    replies = [Reply(status=429, headers={"retry-after": "0.01"}), Reply(text="ok")]
    with FakeLLM(replies) as fake:
        _, done = await collect(model_for(provider, fake))
    assert done.content == "ok" and len(fake.requests) == 2


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("status", [500, 503])
async def test_server_errors_are_retried_a_bounded_number_of_times(provider: str, status: int) -> None:
    with (
        FakeLLM([Reply(status=status, headers={}, times=5)]) as fake,
        pytest.raises(ModelError, match=f"HTTP {status}.*Keen tried 3 times; try again later") as caught,
    ):
        await collect(model_for(provider, fake))
    assert len(fake.requests) == 3
    message = caught.value.message
    assert f"HTTP {status}" in message and "Keen tried 3 times" in message and "try again later" in message


async def test_anthropic_529_overloaded_says_overloaded() -> None:
    with (
        FakeLLM([Reply(status=529, message="Overloaded", times=3)]) as fake,
        pytest.raises(
            ModelError, match=r"is overloaded \(HTTP 529: Overloaded\); Keen tried 3 times"
        ) as caught,
    ):
        await collect(model_for("anthropic", fake))
    assert len(fake.requests) == 3
    assert "is overloaded (HTTP 529: Overloaded); Keen tried 3 times; try again in a few minutes" in (
        caught.value.message
    )


async def test_anthropic_overloaded_inside_the_stream_is_retried_before_any_text() -> None:
    replies = [
        Reply(stream_error={"type": "overloaded_error", "message": "Overloaded"}),
        Reply(text="second try"),
    ]
    with FakeLLM(replies) as fake:
        _, done = await collect(model_for("anthropic", fake))
    assert done.content == "second try" and len(fake.requests) == 2


async def test_anthropic_overloaded_inside_the_stream_after_text_is_said_not_retried() -> None:
    error = {"type": "overloaded_error", "message": "Overloaded"}
    with (
        FakeLLM([Reply(text="Half an ans", stream_error=error), Reply(text="x")]) as fake,
        pytest.raises(ModelError, match=r"is overloaded \(HTTP 529, in its stream: Overloaded\)") as caught,
    ):
        await collect(model_for("anthropic", fake))
    assert len(fake.requests) == 1
    assert "is overloaded (HTTP 529, in its stream: Overloaded)" in caught.value.message


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_x_should_retry_false_is_obeyed(provider: str) -> None:
    reply = Reply(status=503, headers={"x-should-retry": "false"}, times=3)
    with (
        FakeLLM([reply]) as fake,
        # Not "Keen tried 3 times": the server said not to retry.
        pytest.raises(ModelError, match=r"failed the request \(HTTP 503: [^)]*\); try again later"),
    ):
        await collect(model_for(provider, fake))
    assert len(fake.requests) == 1


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("status", [401, 403])
async def test_auth_failures_name_the_variable_never_the_key(provider: str, status: int) -> None:
    with (
        FakeLLM([Reply(status=status, message=f"bad key {KEY}", times=3)]) as fake,
        pytest.raises(ModelAuthFailed, match=f"refused the API key .*; check {VARS[provider]}") as caught,
    ):
        await collect(model_for(provider, fake))
    assert len(fake.requests) == 1  # never retried
    message = caught.value.message
    assert f"HTTP {status}" in message and f"check {VARS[provider]}" in message
    assert KEY not in message and KEY not in str(caught.value) and KEY not in repr(caught.value)
