"""The conversation rebuilt from a session's log (``keen.agent.resume``) is the one the live
agent held: user messages, answers, compacted tool records, activated skills; a resumed
agent sends it to the model, and its own log rebuilds the whole again."""

from __future__ import annotations

import pytest

from helpers.agent_world import MCP, World, call, step
from keen.agent.resume import message_record, restore

pytestmark = pytest.mark.anyio

MARATHON = {"value": 26.2, "from_unit": "mi", "to_unit": "km"}


async def test_the_rebuilt_conversation_is_the_live_one_and_a_resumed_agent_sends_it(world: World) -> None:
    skill = world.home / "skills" / "unit-style"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text(
        "---\nname: unit-style\ndescription: How to write units.\n---\n\nAlways write units as $ARGUMENTS.\n"
    )
    model = world.script(
        step(call("read_file", path=world.schema("demo", "convert_units")), content="Reading."),
        step(call(MCP, server="demo", tool="convert_units", arguments=MARATHON)),
        step(content="A marathon is 42.16 km."),
        step(content="You are welcome."),
        step(content="In SI symbols: km."),
    )
    async with world.runtime("demo") as rt:
        async with world.agent(rt, model) as agent:
            agent.activate_skill("unit-style", "SI symbols")
            await agent.run_turn("marathon?")
            await agent.run_turn("thanks")
            live = [message_record(m) for m in agent.history]
            log = agent.harness.log.path
        restored = restore(log)
        assert [message_record(m) for m in restored.messages] == live
        assert (restored.turns, restored.calls, restored.servers, restored.notes) == (2, 2, ["demo"], [])
        assert [m["role"] for m in live] == ["user", "user", "user", "assistant", "user", "assistant"]

        async with world.agent(rt, model) as resumed:
            resumed.resume(restored)
            await resumed.run_turn("which symbols?")
            again = [message_record(m) for m in resumed.history]
            second = resumed.harness.log.path
    sent = [message_record(m) for m in model.sent[-1][0][1:]]
    assert sent == [*live, {"role": "user", "content": "which symbols?"}]
    # The resumed session's own log rebuilds the whole conversation, its parent's turns too.
    chained = restore(second)
    assert [message_record(m) for m in chained.messages] == again and chained.turns == 3
