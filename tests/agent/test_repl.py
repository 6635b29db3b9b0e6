"""``keen chat`` without a terminal: a clear error, nothing started; the REPL's lines around a
reconnect, in-process (the REPL itself under a terminal: test_repl_tmux*.py)."""

from __future__ import annotations

import json
from io import StringIO
from pathlib import Path

import anyio
import pytest
from rich.console import Console

from helpers.agent_world import MCP, World, call, kill_demo, step
from helpers.cli import make_home
from keen.agent.asking import Asker
from keen.agent.repl import Repl

pytestmark = pytest.mark.slow_file


def test_without_a_terminal_the_repl_says_to_use_one_shot_mode(tmp_path: Path) -> None:
    home = make_home(tmp_path)
    script = tmp_path / "script.jsonl"
    script.write_text(json.dumps({"content": "never asked"}) + "\n")
    run = home.keen_process("chat", "--model", f"scripted:{script}")
    assert run.code == 2, run
    assert "needs a terminal" in run.stderr and "keen chat -p PROMPT" in run.stderr, run
    assert not (home.keen_home / "sessions").exists()  # no session was opened


@pytest.mark.anyio
async def test_a_reconnect_outlasting_the_wait_is_told_then_its_end_follows(world: World) -> None:
    # The REPL's line read "demo: still connecting; Keen tries again at the next call to it;
    # `/mcp connect demo` tries now" while the attempt went on in its task group. Now it
    # says so, and the watch's line follows when the attempt ends.
    marathon = {"value": 26.2, "from_unit": "mi", "to_unit": "km"}
    model = world.script(
        step(call("read_file", path=world.schema("demo", "convert_units"))),
        step(call(MCP, server="demo", tool="convert_units", arguments=marathon)),
        step(content="42.16 km."),
        step(call(MCP, server="demo", tool="convert_units", arguments=marathon)),
        step(content="The demo server is slow."),
    )
    screen = StringIO()
    console = Console(file=screen, width=400, color_system=None)
    async with (
        world.runtime("demo", from_file=True) as rt,  # the healthy start: the default limits
        world.agent(rt, model, connect_command="/mcp connect {server}") as agent,
    ):
        repl = Repl(rt, agent, console, Asker(console))
        agent.reconnect_wait = 1.0
        await repl.turn("marathon?")
        async with anyio.create_task_group() as tg:
            agent.reconnector.task_group = tg  # as Repl.run sets it
            tg.start_soon(repl.watch.run, 10.0)
            with anyio.fail_after(30):  # the watch follows changes once discovery was reported
                while "MCP ready" not in screen.getvalue():  # noqa: ASYNC110 (a screen has no event)
                    await anyio.sleep(0.05)
            # The attempt that hangs: a connect limit well past the 1 s wait (5 s past it for a
            # loaded machine's late wake-up, which could spend the 1 s left), and short.
            await world.retime(rt, "demo", {"connect": 6, "list_tools": 0.5})
            world.hang.touch()
            await kill_demo(world, rt)
            await repl.turn("again?")
            with anyio.fail_after(30):
                while "did not answer initialize" not in screen.getvalue():  # noqa: ASYNC110 (a screen has no event)
                    await anyio.sleep(0.05)
            tg.cancel_scope.cancel()
        agent.reconnector.task_group = None
        repl.watch.close()
    lines = [line for line in screen.getvalue().splitlines() if line.startswith("demo:")]
    still = next(line for line in lines if "still" in line)
    assert still == (
        "demo: still reconnecting after 1 s; Keen goes on in the background, and calls that need the server"
        " fail until it is back; a line here says when it is back, or why not"
    ), lines
    after = lines[lines.index(still) + 1 :]
    assert any(
        line.startswith("demo: disconnected (") and "did not answer initialize" in line for line in after
    ), lines


@pytest.mark.anyio
@pytest.mark.parametrize("answer", ["no", "fails"])
async def test_the_repl_keeps_quiet_about_a_persons_no_not_about_an_approval_prompt_that_failed(
    world: World, answer: str
) -> None:
    # Every permission-gate denial read as the person's own no, so the turn's error was hidden
    # also when nobody said no: an approval callback that failed (a policy's no likewise).
    async def approve(request: object) -> bool:
        if answer == "fails":
            raise RuntimeError("the terminal went away")
        return False

    note = {"title": "t", "body": "b"}
    model = world.script(
        step(call("read_file", path=world.schema("demo", "add_note"))),
        step(call(MCP, server="demo", tool="add_note", arguments=note)),
        step(content="Not saved."),
    )
    screen = StringIO()
    console = Console(file=screen, width=400, color_system=None)
    async with (
        world.runtime("demo") as rt,
        world.agent(rt, model, mode="ask", approval_prompt=approve) as agent,
    ):
        repl = Repl(rt, agent, console, Asker(console))
        await repl.turn("save a note")
        (entry,) = [c for c in agent.last_result.tool_calls if c["name"] == MCP]  # pyright: ignore[reportOptionalMemberAccess]
    assert entry["outcome"] == "denied" and entry["gate"] == "permission", entry
    errors = [line for line in screen.getvalue().splitlines() if line.startswith("error: ")]
    if answer == "no":
        assert entry["declined"] is True and errors == [], screen.getvalue()
    else:
        assert entry["declined"] is False and errors, screen.getvalue()
