"""The turn loop with Keen's scripted model against real MCP servers (keen-demo over stdio,
the npm server-everything, tests/servers): read a skill, read a schema, call, answer;
search then call a tool the catalog does not list; approval denied, then always; a server
killed mid-session; compaction; the step limit; a script that runs out; cancellation;
elicitation through the Manager."""

from __future__ import annotations

import json
from typing import Any

import anyio
import numpy
import pytest

from helpers.agent_world import MCP, Notices, World, call, kill_demo, step
from keen.agent import accept_defaults, decline
from keen.gateway import ApprovalRequest
from keen.harness import read_events, replay
from keen.mcp.types import ServerState

pytestmark = pytest.mark.anyio

MARATHON = {"value": 26.2, "from_unit": "mi", "to_unit": "km"}


def convert_script(world: World) -> list[dict[str, Any]]:
    return [
        step(call("read_file", path=world.skill_md("demo")), content="Reading the demo skill."),
        step(call("read_file", path=world.schema("demo", "convert_units"))),
        step(call(MCP, server="demo", tool="convert_units", arguments=MARATHON)),
        step(content="A marathon is 42.16 km."),
    ]


async def test_read_skill_read_schema_call_answer(world: World) -> None:
    model = world.script(*convert_script(world))
    async with world.runtime("demo") as rt, world.agent(rt, model) as agent:
        result = await agent.run_turn("How long is a marathon in km?")
        session = agent.session_id
    assert result.ok and result.error is None, result
    assert result.answer == "A marathon is 42.16 km." and result.steps == 4
    assert [c["outcome"] for c in result.tool_calls] == ["ok", "ok", "ok"]
    assert "convert_units" in result.tool_calls[0]["text"]  # SKILL.md lists the tool
    assert "42.1648" in result.tool_calls[2]["text"]
    # The prompt lists the server, not its tools; the tool joins the offered set only
    # after its schema was read (the discovery policy's "asked for").
    assert "mcp:demo" in model.system(0)
    assert not any("convert_units" in name for name in model.tool_names(0))
    assert not any("convert_units" in name for name in model.tool_names(1))
    assert any("convert_units" in name for name in model.tool_names(2))
    assert {"call_mcp_tool", "search_tools", "load_skill", "read_file"} <= set(model.tool_names(0))
    assert all(u["prompt_tokens"] > 0 for u in result.usage)
    log = world.home / "sessions" / f"{session}.jsonl"
    events = list(read_events(log))
    assert [e["outcome"] for e in events if e["type"] == "result"] == ["ok", "ok", "ok"]
    assert any(e["type"] == "agent.turn" and e["ok"] for e in events)
    assert replay(log).ok


async def test_search_then_call_a_tool_the_catalog_does_not_list(world: World) -> None:
    (world.home / "skills").mkdir(parents=True, exist_ok=True)
    (world.home / "skills" / "config.json").write_text(json.dumps({"is_enabled": {"mcp:everything": False}}))
    model = world.script(
        step(call("search_tools", query="add two numbers sum", limit=3)),
        step(call(MCP, server="everything", tool="get-sum", arguments={"a": 40, "b": 2})),
        step(content="40 + 2 = 42"),
    )
    async with world.runtime("demo", "everything") as rt, world.agent(rt, model) as agent:
        result = await agent.run_turn("what is 40 + 2? use a tool")
    assert result.ok, result
    assert "mcp:everything" not in model.system(0) and "mcp:demo" in model.system(0)
    assert "get-sum" in result.tool_calls[0]["text"] and "callable next step" in result.tool_calls[0]["text"]
    assert result.tool_calls[1]["outcome"] == "ok" and "42" in result.tool_calls[1]["text"]
    assert not any("get-sum" in n or "get_sum" in n for n in model.tool_names(0))
    assert any("get-sum" in n or "get_sum" in n for n in model.tool_names(1))


async def test_approval_denied_then_always(world: World) -> None:
    asked: list[ApprovalRequest] = []
    answers = iter(["no", "always"])

    async def prompt(request: ApprovalRequest) -> Any:
        asked.append(request)
        return next(answers)

    note = {"server": "demo", "tool": "add_note", "arguments": {"title": "t", "body": "b"}}
    model = world.script(
        step(call("read_file", path=world.schema("demo", "add_note"))),
        step(call(MCP, **note)),
        step(content="The user did not allow it."),
        step(call(MCP, **note)),
        step(call(MCP, **note)),
        step(content="Saved twice."),
    )
    async with world.runtime("demo") as rt, world.agent(rt, model, approval_prompt=prompt) as agent:
        first = await agent.run_turn("save a note")
        second = await agent.run_turn("save it twice")
    denied = first.tool_calls[1]
    assert denied["outcome"] == "denied" and denied["gate"] == "permission"
    assert "did not approve" in denied["text"]
    assert not first.ok and "failed or was denied" in (first.error or "")
    assert [c["outcome"] for c in second.tool_calls] == ["ok", "ok"] and second.ok
    # "always" is remembered for the session: the third call asked no one.
    assert len(asked) == 2
    assert (asked[0].server, asked[0].tool, asked[0].arguments) == ("demo", "add_note", note["arguments"])


async def _note_answered_by(world: World, answer: object) -> dict[str, Any]:
    """The record of a demo add_note call (its schema read first) whose approval the
    Agent's approval prompt answered with ``answer``."""

    async def prompt(request: ApprovalRequest) -> Any:
        return answer

    note = {"server": "demo", "tool": "add_note", "arguments": {"title": "t", "body": "b"}}
    model = world.script(
        step(call("read_file", path=world.schema("demo", "add_note"))),
        step(call(MCP, **note)),
        step(content="Done."),
    )
    async with world.runtime("demo") as rt, world.agent(rt, model, approval_prompt=prompt) as agent:
        result = await agent.run_turn("save a note")
    return result.tool_calls[1]


@pytest.mark.parametrize(
    ("answer", "named"), [("y", "str"), (None, "NoneType"), (1, "int"), (numpy.True_, "numpy.bool")]
)
async def test_an_approval_prompt_answering_in_other_terms_is_a_stated_failure_not_the_users_no(
    world: World, answer: object, named: str, caplog: pytest.LogCaptureFixture
) -> None:
    # An approval prompt returning anything but "yes", "always" (or True) was silently taken as the
    # user's no: the model read "the user did not approve" and nothing told the host what to return.
    denied = await _note_answered_by(world, answer)
    assert (denied["outcome"], denied["gate"], denied["declined"]) == ("denied", "permission", False)
    assert "the approval callback failed (TypeError); treated as no" in denied["text"]
    assert "did not approve" not in denied["text"]
    said = (
        f"the Agent's approval prompt returned {answer!r} ({named}); it must return 'yes', 'no' or 'always' "
        "(keen.agent.ApprovalAnswer), or a Python bool"
    )
    assert any(said in record.getMessage() for record in caplog.records), [
        r.getMessage() for r in caplog.records
    ]


@pytest.mark.parametrize(("answer", "outcome"), [(True, "ok"), (False, "denied")])
async def test_an_approval_prompt_may_answer_with_a_python_bool(
    world: World, answer: bool, outcome: str
) -> None:
    made = await _note_answered_by(world, answer)
    assert made["outcome"] == outcome, made
    assert made["declined"] is (not answer)  # False is the person's own no, not a failure


async def test_a_crashed_server_is_reconnected_by_the_next_call(world: World) -> None:
    model = world.script(
        *convert_script(world),
        step(call(MCP, server="demo", tool="convert_units", arguments=MARATHON)),
        step(content="Still 42.16 km."),
    )
    async with world.runtime("demo") as rt, world.agent(rt, model) as agent:
        assert (await agent.run_turn("marathon?")).ok
        pid = await kill_demo(world, rt)
        assert world.launches() == 1
        notices = Notices()
        again = await agent.run_turn("again?", notices)
        session = agent.session_id
    # The call reconnected the server (a new process), then ran: no /mcp connect needed.
    assert again.ok, again
    assert again.tool_calls[0]["outcome"] == "ok" and "42.1648" in again.tool_calls[0]["text"]
    assert world.launches() == 2 and int(world.pidfile.read_text()) != pid
    assert notices.lines == [f"demo: reconnected, {rt.manager.status('demo').tool_count} tools"], (
        notices.lines
    )
    # The step's visible set was computed while the server was down: the model was not
    # offered the tool, the call still ran under a visible set computed again.
    assert not any("convert_units" in name for name in model.tool_names(4))
    log = world.home / "sessions" / f"{session}.jsonl"
    events = list(read_events(log))
    [reconnect] = [e for e in events if e["type"] == "agent.reconnect"]
    assert reconnect["server"] == "demo" and reconnect["state"] == "connected"
    assert any(e["type"] == "step.end" and e.get("reconnected") == "demo" for e in events)
    # A replay shows the call under the visible set computed after the reconnect.
    last = [t for t in replay(log).steps if t.calls][-1]
    assert last.calls[0]["result"]["outcome"] == "ok"
    assert any("convert_units" in i for i in last.visible)


async def test_a_server_still_down_says_when_keen_tries_again(world: World) -> None:
    once = step(call(MCP, server="demo", tool="convert_units", arguments=MARATHON))
    model = world.script(
        *convert_script(world),
        once,
        once,
        step(content="The demo server is gone."),
        step(call("list_dir", path=".")),
        step(content="Still here."),
        once,
        step(content="Back: 42.16 km."),
    )
    async with world.runtime("demo") as rt, world.agent(rt, model) as agent:
        # The back-off window runs on this clock, not the wall's: a loaded machine cannot
        # stretch the turn past the window and make a second attempt (or change the wording).
        now = [1000.0]
        agent.reconnector.clock = lambda: now[0]
        assert (await agent.run_turn("marathon?")).ok
        world.down.touch()
        await kill_demo(world, rt)
        notices = Notices()
        broken = await agent.run_turn("again?", notices)
        # One attempt (refused), then none within its back-off window.
        assert world.launches() == 2
        alive = await agent.run_turn("list the work dir")
        world.down.unlink()
        now[0] += 1.1  # past the 1 s back-off window of the failed attempt
        back_notices = Notices()
        back = await agent.run_turn("and now?", back_notices)
        session = agent.session_id
    first, second = broken.tool_calls
    assert first["outcome"] in ("denied", "error") and second["outcome"] in ("denied", "error")
    text = first["text"]
    assert "disconnected" in text and "the demo server is down" in text, text
    assert "Keen reconnects this server by itself at a call made 1 s from now or later" in text, text
    assert "keen mcp connect demo" in text, text
    assert "search_tools" not in text, text  # the tool exists; its server is down
    assert not broken.ok
    [line] = notices.lines[:1]
    assert line.startswith("demo: still disconnected (") and "the demo server is down" in line, line
    assert "Keen tries again at a call made 1 s from now or later; `keen mcp connect demo` tries now" in line
    assert len([n for n in notices.lines if n.startswith("demo:")]) == 1, notices.lines
    assert alive.ok and alive.answer == "Still here."
    assert back.ok and "42.1648" in back.tool_calls[0]["text"], back
    assert world.launches() == 3
    assert back_notices.lines[0].startswith("demo: reconnected, ")
    events = list(read_events(world.home / "sessions" / f"{session}.jsonl"))
    states = [e["state"] for e in events if e["type"] == "agent.reconnect"]
    assert states == ["disconnected", "connected"]


async def test_a_call_by_model_name_to_a_server_still_down_says_when_keen_tries_again(world: World) -> None:
    # The model may call a tool by the name it was offered in an earlier step
    # (mcp__demo__convert_units); its refusal said "the user has to fix and reconnect this
    # server" while the same call through call_mcp_tool said Keen reconnects it by itself.
    model = world.script(
        *convert_script(world),
        step(call(MCP, server="demo", tool="convert_units", arguments=MARATHON)),
        step(content="Still 42.16 km."),
        step(call("mcp__demo__convert_units", **MARATHON)),
        step(content="The demo server is gone."),
    )
    async with world.runtime("demo") as rt, world.agent(rt, model) as agent:
        agent.reconnector.clock = lambda: 1000.0  # the back-off window never passes
        assert (await agent.run_turn("marathon?")).ok
        assert (await agent.run_turn("again?")).ok
        assert any(n == "mcp__demo__convert_units" for n in model.tool_names(-1)), model.tool_names(-1)
        world.down.touch()
        await kill_demo(world, rt)
        broken = await agent.run_turn("and now?", Notices())
    [refused] = broken.tool_calls
    assert refused["outcome"] in ("denied", "error"), refused
    text = refused["text"]
    assert text.startswith("mcp__demo__convert_units of server demo cannot run now."), text
    assert "Keen reconnects this server by itself at a call made 1 s from now or later" in text, text
    assert "keen mcp connect demo" in text and "search_tools" not in text, text


async def test_compaction_leaves_a_short_record_and_keeps_activated_skills(world: World) -> None:
    skill = world.home / "skills" / "unit-style"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text(
        "---\nname: unit-style\ndescription: How to write units.\n---\n\nAlways write units as $ARGUMENTS.\n"
    )
    model = world.script(*convert_script(world), step(content="Next answer."))
    async with world.runtime("demo") as rt, world.agent(rt, model) as agent:
        agent.activate_skill("unit-style", "SI symbols")
        await agent.run_turn("marathon?")
        raw = sum(len(m.content) for m in model.sent[3][0][1:])
        await agent.run_turn("thanks")
        history = list(agent.history)
    kinds = [(m.role, m.kind) for m in history]
    assert kinds == [
        ("user", "skill_activation"),
        ("user", ""),
        ("user", "compacted"),
        ("assistant", ""),
        ("user", ""),
        ("assistant", ""),
    ]
    assert "Always write units as SI symbols." in history[0].content
    record = history[2].content
    assert "call_mcp_tool demo/convert_units" in record and "42.1648" in record
    assert "characters read (not kept)" in record
    assert len(record) < 800 < raw
    # The second turn's model call got the record, not the skill body or the schema.
    second = "\n".join(m.content for m in model.sent[4][0][1:])
    assert "Reading the demo skill." not in second
    assert '"inputSchema"' not in second and record in second


async def test_compacted_results_never_reach_the_model_as_its_own_words(world: World) -> None:
    # The demo server's result (42.1648...) is server text: after compaction it is in the
    # record, a user-role message framed as tool output, and in no assistant-role message,
    # for the provider shapes as for the neutral history.
    from keen.agent.compaction import RECORD_HEAD
    from keen.agent.providers._shapes import anthropic_messages, openai_messages

    model = world.script(*convert_script(world), step(content="Next answer."))
    async with world.runtime("demo") as rt, world.agent(rt, model) as agent:
        await agent.run_turn("marathon?")
        await agent.run_turn("thanks")
    sent = model.sent[-1][0]
    [record] = [m for m in sent if m.kind == "compacted"]
    assert record.role == "user" and record.content.startswith(RECORD_HEAD), record
    assert "42.1648" in record.content
    assert not [m.content for m in sent if m.role == "assistant" and "42.1648" in m.content]
    as_openai = [m for m in openai_messages(sent) if "42.1648" in str(m.get("content"))]
    assert [m["role"] for m in as_openai] == ["user"], as_openai
    _, as_anthropic = anthropic_messages(sent)
    assert [m["role"] for m in as_anthropic if "42.1648" in json.dumps(m)] == ["user"]


async def test_step_limit_and_a_script_that_runs_out(world: World) -> None:
    looping = world.script(*[step(call("list_dir", path="."))] * 3)
    async with world.runtime() as rt, world.agent(rt, looping, max_steps=2) as agent:
        limited = await agent.run_turn("loop")
        exhausted = await agent.run_turn("once more")
    assert not limited.ok and "step limit" in (limited.error or "") and limited.steps == 2
    assert not exhausted.ok and "has 3 answer(s)" in (exhausted.error or "")
    assert "add a line to the script" in (exhausted.error or "")


async def test_cancelling_a_turn_keeps_the_session(world: World) -> None:
    model = world.script(
        step(call("read_file", path=world.schema("basic", "sleep"))),
        step(call(MCP, server="basic", tool="sleep", arguments={"seconds": 30})),
        step(call("read_file", path=world.schema("basic", "echo"))),
        step(call(MCP, server="basic", tool="echo", arguments={"text": "back"})),
        step(content="back again"),
    )

    async def prompt(request: ApprovalRequest) -> Any:
        return "yes"

    async with world.runtime("basic") as rt, world.agent(rt, model, approval_prompt=prompt) as agent:
        # Cancelled once the model has asked for the 30 s sleep (in the history before it runs),
        # not after a fixed 3 s, which a loaded machine could spend before: the sleep would be
        # left to the next turn's script.
        with anyio.CancelScope() as scope:
            async with anyio.create_task_group() as tg:
                tg.start_soon(agent.run_turn, "sleep a while")

                def asked() -> bool:
                    return any(
                        c.arguments.get("tool") == "sleep" for m in agent.history for c in m.tool_calls
                    )

                with anyio.fail_after(60):
                    while not asked():  # noqa: ASYNC110 (the history has no event)
                        await anyio.sleep(0.05)
                scope.cancel()
        assert scope.cancelled_caught
        cancelled = agent.last_result
        assert cancelled is not None and cancelled.cancelled
        # Every tool call in the history has its result, so the next request is valid.
        calls = {c.id for m in agent.history for c in m.tool_calls}
        results = {m.tool_call_id for m in agent.history if m.role == "tool"}
        assert calls <= results
        after = await agent.run_turn("echo back")
        assert rt.manager.status("basic").state is ServerState.CONNECTED
    assert after.ok and after.tool_calls[-1]["text"] == "back"


@pytest.mark.parametrize(
    ("elicitor", "expected"),
    [(accept_defaults, "booked Chez Nous for 2 at 19:30"), (decline, "decline"), (None, "no elicitation")],
)
async def test_elicitation_reaches_the_elicitor(world: World, elicitor: Any, expected: str) -> None:
    model = world.script(
        step(call("read_file", path=world.schema("booking", "book_table"))),
        step(call(MCP, server="booking", tool="book_table", arguments={"restaurant": "Chez Nous"})),
        step(content="done"),
    )
    async with (
        world.runtime("booking", elicitation=elicitor) as rt,
        world.agent(rt, model, mode="auto", elicitor=elicitor) as agent,
    ):
        result = await agent.run_turn("book a table")
    assert result.tool_calls[1]["text"].startswith(expected), result.tool_calls[1]


async def test_calling_an_unoffered_tool_asks_for_it_or_says_why_not(world: World) -> None:
    note = {"server": "demo", "tool": "add_note", "arguments": {"title": "t", "body": "b"}}
    model = world.script(
        step(call(MCP, server="demo", tool="convert_units", arguments=MARATHON)),
        step(call(MCP, server="demo", tool="convert_units", arguments=MARATHON)),
        step(call(MCP, **note)),
        step(content="42.16 km; I cannot save notes in read-only mode."),
    )
    async with world.runtime("demo") as rt, world.agent(rt, model, mode="read-only") as agent:
        result = await agent.run_turn("marathon in km, and save it")
    first, second, third = result.tool_calls
    assert first["outcome"] == "denied" and "callable from your next step" in first["text"]
    assert "search_tools" not in first["text"], first["text"]
    assert second["outcome"] == "ok" and "42.1648" in second["text"]
    assert third["outcome"] == "denied", third
    # The harness says why once; the loop adds only the remedy.
    assert third["text"].count("read-only mode") == 2, third["text"]  # "may not run in", and the reason
    assert "may not run in read-only mode: read-only mode forbids tools that may write" in third["text"]
    assert third["text"].endswith("will not change that; the user can switch the permission mode."), third[
        "text"
    ]


async def test_a_reconnect_that_outlasts_the_wait_says_it_goes_on_in_the_background(world: World) -> None:
    # A server that hangs in its handshake: the attempt (connect timeout, then stopping the
    # process) outlasts the call's wait (connect + list_tools). The line read "demo: still
    # connecting; Keen tries again at the next call to it; `keen mcp connect demo` tries
    # now": the attempt was still running, and nothing would start another one.
    once = step(call(MCP, server="demo", tool="convert_units", arguments=MARATHON))
    model = world.script(*convert_script(world), once, step(content="The demo server is slow."))
    async with (
        world.runtime("demo", from_file=True) as rt,  # the healthy start: the default limits
        world.agent(rt, model) as agent,
        anyio.create_task_group() as tg,
    ):
        agent.reconnector.task_group = tg  # as the REPL does: the attempt outlives the wait
        agent.reconnect_wait = 1.0
        assert (await agent.run_turn("marathon?")).ok
        # The attempt that hangs: a connect limit well past the 1 s wait (5 s past it for a
        # loaded machine's late wake-up, which could spend the 1 s left), and short.
        await world.retime(rt, "demo", {"connect": 6, "list_tools": 0.5})
        world.hang.touch()
        await kill_demo(world, rt)
        notices = Notices()
        slow = await agent.run_turn("again?", notices)
        ended = anyio.Event()
        stop = rt.manager.subscribe(lambda s: ended.set() if s.state is not ServerState.CONNECTING else None)
        waited_state = rt.manager.status("demo").state
        with anyio.fail_after(30):
            if waited_state is ServerState.CONNECTING:
                await ended.wait()
        stop()
        agent.reconnector.task_group = None
    assert waited_state is ServerState.CONNECTING, (waited_state, notices.lines)
    [line] = [n for n in notices.lines if n.startswith("demo:")]
    assert line == (
        "demo: still reconnecting after 1 s; Keen goes on in the background, and calls that need"
        " the server fail until it is back"
    ), line
    [refused] = slow.tool_calls
    assert refused["outcome"] in ("denied", "error"), refused
    text = refused["text"]
    assert "Keen is still connecting this server in the background; call it again in a moment" in text, text
    assert "keen mcp connect" not in text, text  # nothing for the user to do yet
    # The attempt ended by itself (the hung server's connect timeout), with its reason.
    status = rt.manager.status("demo")
    assert status.state is ServerState.DISCONNECTED and "did not answer initialize" in (
        status.last_error or ""
    )


async def test_a_call_to_a_server_still_on_its_first_connection_says_to_call_again(world: World) -> None:
    # A turn sent before discovery ends (the REPL's prompt is ready at once): the model read
    # "Server slow is connecting; the user can reconnect it with `keen mcp connect slow`",
    # sending the user to reconnect a server that was still coming up.
    from conftest import stdio_server
    from keen.runtime import open_runtime

    model = world.script(
        step(call(MCP, server="slow", tool="anything", arguments={})), step(content="It is still starting.")
    )
    config = {"version": 1, "servers": {"slow": stdio_server("hang_init.py", timeouts={"connect": 30})}}
    async with open_runtime(config=config) as rt, world.agent(rt, model) as agent:
        assert rt.manager.status("slow").state in (ServerState.CONFIGURED, ServerState.CONNECTING)
        turn = await agent.run_turn("use slow")
    [refused] = turn.tool_calls
    assert refused["outcome"] in ("denied", "error"), refused
    text = refused["text"]
    assert "Keen is still connecting this server in the background; call it again in a moment" in text, text
    assert "keen mcp connect" not in text, text
