"""The turn loop over the real ``openai`` and ``anthropic`` adapters and the fake endpoints on
loopback: parallel tool calls answered in order in each API's shape (one invented, one with
arguments that are not JSON), answers that did not finish (cut at the token limit, filtered,
refused) said so and their calls not run, Anthropic's ``pause_turn`` continued, and a huge
MCP result truncated once, by the harness."""

from __future__ import annotations

import json
from typing import Any

import pytest

from helpers.agent_world import MCP, Notices, World
from helpers.fake_llm import KEY, FakeLLM, Reply
from keen.agent import open_model
from keen.agent.models import close_model
from keen.harness import read_events

pytestmark = pytest.mark.anyio

PROVIDERS = ["openai", "anthropic"]


@pytest.fixture(autouse=True)
def keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)


async def run(world: World, provider: str, replies: list[Reply], *servers: str, **options: Any) -> Any:
    """One turn with ``provider``'s adapter on a fake serving ``replies``; returns the turn's
    result, the fake (its requests), the notices and the session's events."""
    notices = Notices()
    with FakeLLM(replies) as fake:
        model = open_model(f"{provider}:fake", base_url=fake.url + ("/v1" if provider == "openai" else ""))
        try:
            async with world.runtime(*servers) as rt, world.agent(rt, model) as agent:
                for name, value in options.items():
                    setattr(agent.harness, name, value)
                result = await agent.run_turn("go", notices)
        finally:
            await close_model(model)
    events = list(read_events(world.home / "sessions" / f"{result.session_id}.jsonl"))
    return result, fake, notices, events


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_parallel_calls_are_answered_in_order_in_the_apis_shape(world: World, provider: str) -> None:
    (world.tmp / "a.txt").write_text("alpha\n")
    (world.tmp / "b.txt").write_text("bravo\n")
    calls = [
        {"name": "read_file", "arguments": {"path": "a.txt"}},
        {"name": "read_file", "arguments": {"path": "b.txt"}},
        {"name": "delete_everything", "arguments": {}},  # never offered
        {"name": "read_file", "raw": '{"path": "a.txt"'},  # not JSON
    ]
    replies = [Reply(tool_calls=calls), Reply(text="Both read.")]
    result, fake, _, events = await run(world, provider, replies)
    assert result.ok and result.answer == "Both read.", result
    outcomes = [(c["outcome"], c["gate"]) for c in result.tool_calls]
    assert outcomes == [("ok", None), ("ok", None), ("denied", "visibility"), ("denied", "validate")]
    texts = [c["text"] for c in result.tool_calls]
    assert "alpha" in texts[0] and "bravo" in texts[1]
    assert "delete_everything is not among this step's tools" in texts[2]
    assert "these are not JSON" in texts[3] and "send them again as one JSON object" in texts[3]
    # Every call went through the harness once, each audited.
    assert [e["name"] for e in events if e["type"] == "call"] == [
        "read_file",
        "read_file",
        "delete_everything",
        "read_file",
    ]
    sent = fake.requests[1].body["messages"]
    if provider == "openai":
        assistant, results = sent[-5], sent[-4:]
        ids = [c["id"] for c in assistant["tool_calls"]]
        assert len(set(ids)) == 4
        assert [c["function"]["name"] for c in assistant["tool_calls"]][2:] == [
            "delete_everything",
            "read_file",
        ]
        assert assistant["tool_calls"][3]["function"]["arguments"] == "{}"  # an object, in the call's place
        assert [m["role"] for m in results] == ["tool"] * 4
        assert [m["tool_call_id"] for m in results] == ids
        assert [m["content"] for m in results] == texts
    else:
        assistant, user = sent[-2], sent[-1]
        uses = [b for b in assistant["content"] if b["type"] == "tool_use"]
        ids = [b["id"] for b in uses]
        assert len(set(ids)) == 4 and uses[3]["input"] == {}
        assert user["role"] == "user" and [b["type"] for b in user["content"]] == ["tool_result"] * 4
        assert [b["tool_use_id"] for b in user["content"]] == ids
        assert [b["content"] for b in user["content"]] == texts
        assert [b.get("is_error", False) for b in user["content"]] == [False, False, True, True]


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_an_invented_name_the_apis_refuse_is_sent_back_in_their_pattern(
    world: World, provider: str
) -> None:
    # Both APIs refuse a history naming a tool outside ^[a-zA-Z0-9_-]+$ (OpenAI: "Invalid
    # 'messages[N].tool_calls[0].function.name': string does not match pattern"), so the
    # turn's next request failed after a model wrote e.g. functions.read_file.
    calls = [{"name": "functions.read_file", "arguments": {"path": "a.txt"}}]
    result, fake, _, _ = await run(world, provider, [Reply(tool_calls=calls), Reply(text="Sorry.")])
    assert result.tool_calls[0]["outcome"] == "denied"
    assert "functions.read_file is not among this step's tools" in result.tool_calls[0]["text"]
    sent = fake.requests[1].body["messages"]
    if provider == "openai":
        names = [c["function"]["name"] for m in sent for c in m.get("tool_calls") or []]
    else:
        names = [b["name"] for m in sent for b in m["content"] if b["type"] == "tool_use"]
    assert names == ["functions_read_file"]


@pytest.mark.parametrize(
    ("provider", "stop", "words"),
    [
        ("openai", "length", "cut off at the model's output token limit, so it is incomplete"),
        ("anthropic", "max_tokens", "cut off at the model's output token limit, so it is incomplete"),
        ("anthropic", "model_context_window_exceeded", "filled the model's context window"),
        ("openai", "content_filter", "content filter stopped the answer, so it is incomplete"),
        ("anthropic", "refusal", "the model refused to answer"),
    ],
)
async def test_an_unfinished_answer_is_said_unfinished(
    world: World, provider: str, stop: str, words: str
) -> None:
    result, _, notices, events = await run(
        world, provider, [Reply(text="The three steps are: one,", finish=stop)]
    )
    assert not result.ok and result.answer == "The three steps are: one,"
    assert words in (result.error or "") and any(words in line for line in notices.lines)
    turn = next(e for e in events if e["type"] == "agent.turn")
    assert not turn["ok"] and words in turn["error"]
    assert next(e for e in events if e["type"] == "agent.model")["stop"] != "end"


@pytest.mark.parametrize(("provider", "stop"), [("openai", "length"), ("anthropic", "max_tokens")])
async def test_calls_of_an_answer_cut_at_the_token_limit_do_not_run(
    world: World, provider: str, stop: str
) -> None:
    (world.tmp / "a.txt").write_text("alpha\n")
    cut = [
        {"name": "read_file", "arguments": {"path": "a.txt"}},
        {"name": "read_file", "raw": '{"path": "a.t'},
    ]
    replies = [
        Reply(tool_calls=cut, finish=stop),
        Reply(tool_calls=[{"name": "read_file", "arguments": {"path": "a.txt"}}]),
        Reply(text="alpha it is."),
    ]
    result, fake, notices, events = await run(world, provider, replies)
    assert result.ok and result.answer == "alpha it is.", result
    assert [c["outcome"] for c in result.tool_calls] == ["denied", "denied", "ok"]
    assert result.tool_calls[0]["text"].startswith("Not run: your answer did not finish")
    assert len([e for e in events if e["type"] == "call"]) == 1  # only the one sent again ran
    assert any("its tool calls were not run" in line for line in notices.lines)
    second = json.dumps(fake.requests[1].body["messages"])
    assert second.count("Not run: your answer did not finish") == 2


async def test_a_full_context_window_ends_the_turn_and_its_calls_do_not_run(world: World) -> None:
    # Not a cut at the output limit: sending the calls back would only resend a larger
    # history to a full window, step after step until max_steps.
    (world.tmp / "a.txt").write_text("alpha\n")
    calls = [{"name": "read_file", "arguments": {"path": "a.txt"}}]
    replies = [Reply(tool_calls=calls, finish="model_context_window_exceeded"), Reply(text="never sent")]
    result, fake, _, events = await run(world, "anthropic", replies)
    assert not result.ok and "filled the model's context window" in (result.error or "")
    assert "start a new keen chat session" in (result.error or "")
    assert len(fake.requests) == 1 and result.steps == 1
    assert [c["outcome"] for c in result.tool_calls] == ["denied"]
    assert not [e for e in events if e["type"] == "call"]


async def test_anthropic_pause_turn_is_sent_back_and_goes_on(world: World) -> None:
    replies = [Reply(text="Part one. ", finish="pause_turn"), Reply(text="Part two.")]
    result, fake, _, _ = await run(world, "anthropic", replies)
    assert result.ok and result.answer == "Part one. Part two." and result.steps == 2
    last = fake.requests[1].body["messages"][-1]
    # The paused answer goes back as the last message, without trailing whitespace (refused there).
    assert last == {"role": "assistant", "content": [{"type": "text", "text": "Part one."}]}


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_huge_mcp_result_is_truncated_once_by_the_harness(world: World, provider: str) -> None:
    big = "0123456789" * 500
    replies = [
        Reply(tool_calls=[{"name": "read_file", "arguments": {"path": world.schema("basic", "echo")}}]),
        Reply(
            tool_calls=[
                {"name": MCP, "arguments": {"server": "basic", "tool": "echo", "arguments": {"text": big}}}
            ]
        ),
        Reply(text="Echoed."),
    ]
    result, fake, _, events = await run(world, provider, replies, "basic", max_result_chars=1000)
    assert result.ok, result
    text = result.tool_calls[1]["text"]
    assert text.startswith(big[:1000]) and big not in text
    assert text.count("[truncated:") == 1 and "4000 of 5000 characters cut" in text
    sent = json.dumps(fake.requests[2].body["messages"])
    assert sent.count("[truncated:") == 1 and json.dumps(text)[1:-1] in sent  # sent as the harness cut it
    result_event = [e for e in events if e["type"] == "result"][1]
    assert result_event["truncated_chars"] == 4000 and result_event["stages"].count("truncate") == 1


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("status", [401, 403])
async def test_an_auth_failure_ends_the_turn_naming_the_variable_and_never_the_key(
    world: World, provider: str, status: int
) -> None:
    result, fake, notices, _ = await run(world, provider, [Reply(status=status, message=f"no: {KEY}")])
    var = "OPENAI_API_KEY" if provider == "openai" else "ANTHROPIC_API_KEY"
    assert not result.ok and f"check {var}" in (result.error or "") and len(fake.requests) == 1
    log = (world.home / "sessions" / f"{result.session_id}.jsonl").read_text()
    for text in (log, json.dumps(result.to_dict()), *notices.lines):
        assert KEY not in text
    assert f"check {var}" in log
