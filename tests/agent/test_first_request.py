"""A session's first model request built and sent before its runtime opens
(``keen.agent.first``; docs/chat.md "Startup"): the same request the session's own first
step builds (system prompt and tools), from configs.json read without its validation models
only when that text validated before; the early answer used when the session asks the same,
dropped and asked again when it does not; the model's error reported as ever."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest

from helpers.agent_world import Notices, World
from helpers.fake_llm import KEY, FakeLLM, Reply
from keen.agent import open_model
from keen.agent.first import EarlyModel, FirstRequest, covered_servers, plan
from keen.agent.models import close_model
from keen.harness.definitions import first_step_tools
from keen.mcp.config import known_servers, load_config, remember_valid
from keen.runtime import Runtime, open_runtime
from keen.skills import MARKER_FILE, SkillsConfig, discover
from keen.skills.cache import skills_dir_state

pytestmark = pytest.mark.anyio


@pytest.fixture(autouse=True)
def key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)


def user_skill(world: World, name: str, description: str) -> None:
    folder = world.home / "skills" / name
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "SKILL.md").write_text(
        f"---\nname: {name}\ndescription: {description}\n---\nDo it well.\n", encoding="utf-8"
    )


def remember(rt: Runtime) -> bool:
    return remember_valid(rt.manager.config_path, rt.manager.config)


async def test_the_early_request_is_the_one_the_session_builds(world: World) -> None:
    user_skill(world, "notes", "Keeps the user's notes.")
    model = world.script({"content": "hi"})
    async with world.runtime("demo", from_file=True) as rt:  # synced: the demo skill is on disk
        # Never validated by a chat: configs.json is validated first, so nothing is built early.
        assert known_servers(world.config_path) is None and plan("hello") is None
        assert remember(rt)
        first = plan("hello")
        assert first is not None and first.servers == ["demo"]
        async with world.agent(rt, model) as agent:
            result = await agent.run_turn("hello")
    assert result.ok, result
    messages, tools = model.sent[0]
    # Byte for byte what the session's first step sent: the base text, the budgeted catalog
    # of the skills on disk, the user's message, and the same tool definitions in order.
    assert (messages, tools) == (first.messages, first.tools)
    assert "mcp:demo" in messages[0].content and "notes" in messages[0].content
    assert tools == first_step_tools()
    assert [t["name"] for t in tools] == [
        "call_mcp_tool",
        "glob",
        "grep",
        "list_dir",
        "load_skill",
        "read_file",
        "search_tools",
    ]


async def test_a_server_disabled_since_the_sync_is_in_neither_prompt(world: World) -> None:
    """keen mcp disable leaves the server's skill enabled until the next sync: neither the
    early request nor the session's own first step lists a server the session never starts
    (and they still agree, so the early answer is used)."""
    async with world.runtime("demo", "basic", from_file=True):
        pass  # synced: both skills on disk
    config = json.loads(world.config_path.read_text())
    config["servers"]["basic"]["enabled"] = False
    world.config_path.write_text(json.dumps(config))
    model = world.script({"content": "hi"})
    async with open_runtime(config_path=world.config_path, wait=60) as rt:
        assert remember(rt)
        first = plan("hello")
        assert first is not None and first.servers == ["demo"]
        async with world.agent(rt, model) as agent:
            result = await agent.run_turn("hello")
    assert result.ok, result
    messages, tools = model.sent[0]
    assert (messages, tools) == (first.messages, first.tools)
    assert "mcp:basic" in {skill.name for skill in discover(world.home / "skills").enabled}  # until a sync
    assert "mcp:demo" in messages[0].content and "mcp:basic" not in messages[0].content


async def test_known_servers_reads_only_a_text_that_validated(world: World) -> None:
    async with world.runtime("demo", "basic", from_file=True) as rt:
        assert remember(rt)
        config = json.loads(world.config_path.read_text())
    assert known_servers(world.config_path) == [("demo", True), ("basic", True)]
    config["servers"]["basic"]["enabled"] = False  # edited since: validated again first
    world.config_path.write_text(json.dumps(config))
    assert known_servers(world.config_path) is None
    # A text whose meaning depends on the environment is never taken as validated.
    config["servers"]["basic"]["env"] = {"TOKEN": "${SOME_TOKEN}"}
    world.config_path.write_text(json.dumps(config))
    assert not remember_valid(world.config_path, load_config(world.config_path, strict=False))
    assert known_servers(world.config_path) is None
    # Nor one whose validation found a broken entry.
    config["servers"]["basic"]["env"] = {"TOKEN": 5}
    world.config_path.write_text(json.dumps(config))
    assert not remember_valid(world.config_path, load_config(world.config_path, strict=False))
    assert known_servers(world.config_path) is None
    # The text recorded is the one validated, never the file as an edit since left it.
    del config["servers"]["basic"]["env"]
    world.config_path.write_text(json.dumps(config))
    validated = load_config(world.config_path, strict=False)
    config["servers"]["basic"]["env"] = {"TOKEN": 5}
    world.config_path.write_text(json.dumps(config))
    assert remember_valid(world.config_path, validated)
    assert known_servers(world.config_path) is None
    assert validated.source_text is not None
    world.config_path.write_text(validated.source_text)
    assert known_servers(world.config_path) == [("demo", True), ("basic", False)]
    world.config_path.unlink()
    assert known_servers(world.config_path) == []


async def early_turn(world: World, fake: FakeLLM, first: FirstRequest, before: Any = None) -> Any:
    """The session's turn with the first request sent early (as ``keen chat -p`` does)."""
    model = open_model("openai:fake", base_url=fake.url + "/v1")
    notices = Notices()
    result: Any = None
    early = EarlyModel(model, first)
    early.start()
    try:
        async with world.runtime("demo") as rt, world.agent(rt, early) as agent:
            if before is not None:
                before()
            result = await agent.run_turn("hello", notices)
    finally:
        await early.stop()
        await close_model(model)
    return result, notices


async def planned(world: World) -> FirstRequest:
    async with world.runtime("demo", from_file=True) as rt:
        assert remember(rt)
    first = plan("hello")
    assert first is not None
    return first


async def test_the_session_takes_the_early_answer_when_it_asks_the_same(world: World) -> None:
    first = await planned(world)
    with FakeLLM([Reply(text="early answer"), Reply(text="asked twice")]) as fake:
        result, _ = await early_turn(world, fake, first)
    assert (result.ok, result.answer) == (True, "early answer"), result
    assert len(fake.requests) == 1  # the model was asked once
    sent = fake.requests[0].body
    assert sent["messages"][0]["content"] == first.messages[0].content


async def test_an_early_answer_to_another_request_is_dropped_and_the_model_asked_again(world: World) -> None:
    first = await planned(world)
    # A skill added after the early request was built: the session's first step shows it.
    with FakeLLM([Reply(text="early answer"), Reply(text="the session's answer")]) as fake:
        result, _ = await early_turn(
            world, fake, first, before=lambda: user_skill(world, "jotter", "Keeps the user's jottings.")
        )
    assert (result.ok, result.answer) == (True, "the session's answer"), result
    assert len(fake.requests) == 2
    assert "jotter" not in fake.requests[0].body["messages"][0]["content"]
    assert "jotter" in fake.requests[1].body["messages"][0]["content"]


async def test_the_early_requests_error_is_the_turns_error(world: World) -> None:
    first = await planned(world)
    refused = Reply(status=401, message="bad key for this fake")
    with FakeLLM([refused]) as fake:
        result, notices = await early_turn(world, fake, first)
    assert not result.ok and result.error is not None, result
    assert "bad key for this fake" in result.error
    assert notices.lines == [f"model error: {result.error}"]
    assert len(fake.requests) == 1


def test_plan_leaves_a_broken_skills_config_to_the_session(keen_home: Path) -> None:
    (keen_home / "skills").mkdir()
    (keen_home / "skills" / "config.json").write_text("{not json", encoding="utf-8")
    assert plan("hello") is None


def test_an_error_opening_the_session_after_the_early_request_is_the_same_as_without(world: World) -> None:
    # Run as `keen chat -p` runs its turn (_run, or _run_early when the request was built
    # early): each starts its own event loop, so this test is not itself async.
    from keen.agent.settings import ChatSettings
    from keen.cli._chat import _one_shot, _OneShotView, _run, _run_early  # pyright: ignore[reportPrivateUsage]
    from keen.errors import find_keen_error

    first = anyio.run(planned, world)
    # configs.json broken between the early request and the session's start: the chat's
    # error boundary gets the same error as when nothing was sent early.
    world.config_path.write_text("{broken", encoding="utf-8")

    def outcome(planned: FirstRequest | None) -> BaseException:
        with FakeLLM([Reply(text="early answer")]) as fake:
            model = open_model("openai:fake", base_url=fake.url + "/v1")
            early = None if planned is None else EarlyModel(model, planned)

            async def turn() -> Any:
                try:
                    return await _one_shot(
                        model,
                        ChatSettings(model="openai:fake"),
                        "hello",
                        _OneShotView(stream=False),
                        yes=False,
                        max_steps=2,
                        timeout=5,
                        show=lambda _: None,
                        early=early,
                    )
                finally:
                    await close_model(model)

            try:
                _run(turn) if early is None else _run_early(early, turn)
            except Exception as exc:
                return exc
        raise AssertionError("the session opened over a broken configs.json")

    def shape(exc: BaseException) -> Any:
        if isinstance(exc, BaseExceptionGroup):
            return [type(exc).__name__, [shape(e) for e in exc.exceptions]]
        return type(exc).__name__

    without, early = outcome(None), outcome(first)
    assert shape(early) == shape(without)  # not wrapped once more by the early request's task
    found = find_keen_error(early)
    assert found is not None and "invalid JSON at line 1, column 2" in found.message
    assert found.message == getattr(find_keen_error(without), "message", None)


def skill_folder(root: Path, folder: str, *, generated: bool) -> Path:
    path = root / folder
    path.mkdir(parents=True)
    (path / "SKILL.md").write_text(f"---\nname: {folder}\ndescription: x\n---\n", encoding="utf-8")
    if generated:
        (path / MARKER_FILE).write_text("{}", encoding="utf-8")
    return path


@pytest.mark.parametrize("shared", [False, True], ids=["own-listing", "plan's-state"])
def test_covered_servers_reads_the_skills_directory_as_it_is(tmp_path: Path, shared: bool) -> None:
    # plan() hands covered_servers the state discovery then reuses (one listing and stat of
    # each skill); the answers are the same as from a listing of its own.
    root = tmp_path / "skills"

    def covered(servers: list[tuple[str, bool]]) -> list[str] | None:
        return covered_servers(root, servers, state=skills_dir_state(root) if shared else None)

    assert covered([]) == [] and covered([("a", True)]) is None  # no skills directory yet
    skill_folder(root, "mcp:a", generated=True)
    skill_folder(root, "notes", generated=False)  # a person's own skill never blocks
    assert covered([("a", True), ("b", False)]) == ["a"]  # a disabled server needs no skill
    assert covered([("a", True), ("b", True)]) is None
    SkillsConfig(root / "config.json", {"is_enabled": {"mcp:b": True}}).save()
    assert covered([("a", True), ("b", True)]) == ["a", "b"]  # known to the skills config
    # The other platform's spelling of a name counts (a directory copied from Windows).
    skill_folder(root, "mcp_c", generated=True)
    assert covered([("a", True), ("b", True), ("c", True)]) == ["a", "b", "c"]
    # A generated skill of a server no longer configured: the sync must remove it first.
    skill_folder(root, "mcp:gone", generated=True)
    assert covered([("a", True), ("b", True), ("c", True)]) is None
    assert covered([("a", True), ("b", True), ("c", True), ("gone", False)]) == ["a", "b", "c"]
    # A link (as the sync writes a skill) counts while its target exists, with or without
    # the files discovery reads; a dangling one does not.
    version = skill_folder(root, ".mcp:d.1", generated=True)
    (root / "mcp:d").symlink_to(version.name)
    servers = [("a", True), ("b", True), ("c", True), ("gone", False), ("d", True)]
    assert covered(servers) == ["a", "b", "c", "d"]
    for name in ("SKILL.md", MARKER_FILE):
        (version / name).unlink()
    assert covered(servers) == ["a", "b", "c", "d"]
    version.rmdir()
    assert covered(servers) is None
