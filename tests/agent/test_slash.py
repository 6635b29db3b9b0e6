"""Slash-command parsing and wording, and /mcp connect of a server the session does not have
(the other commands run under tmux: test_repl_tmux.py)."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from rich.console import Console

from helpers.agent_world import World, step
from keen.agent.slash import SlashCommand, SlashCommands, describe, message_text, parse, remedy_hint
from keen.errors import Remedy, ServerDisconnected, SkillError


@pytest.mark.parametrize(
    ("line", "command"),
    [
        ("/help", SlashCommand("help")),
        ("  /mcp  ", SlashCommand("mcp")),
        ("/mcp connect github", SlashCommand("mcp", "connect github")),
        ("/mcp:github list my   open issues ", SlashCommand("mcp:github", "list my   open issues")),
        ("/review-pr 12 'two words'", SlashCommand("review-pr", "12 'two words'")),
        ("/skills\tenable  notes", SlashCommand("skills", "enable  notes")),
        ("/", SlashCommand("")),
        ("/ spaced", SlashCommand("", "spaced")),
        ("/a\nsecond line", SlashCommand("a", "second line")),
    ],
)
def test_commands_are_parsed_into_name_and_arguments(line: str, command: SlashCommand) -> None:
    assert parse(line) == command


@pytest.mark.parametrize("line", ["hello", "what is /etc for?", "//etc is a directory", ""])
def test_other_lines_are_messages(line: str) -> None:
    assert parse(line) is None


def test_a_double_slash_sends_one_slash() -> None:
    assert message_text("//etc is a directory") == "/etc is a directory"
    assert message_text("  plain  ") == "plain"


def test_remedies_are_worded_as_slash_commands() -> None:
    assert remedy_hint(Remedy.SIGN_IN, server="gh") == "/mcp connect gh to sign in"
    assert remedy_hint(Remedy.RECONNECT, server="gh") == "then /mcp connect gh"
    assert remedy_hint(Remedy.ENABLE_SKILL, server="gh") == "/skills enable mcp:gh"
    assert remedy_hint(Remedy.ENABLE_SKILL, skill="notes") == "/skills enable notes"
    assert remedy_hint(Remedy.LIST_SKILLS) == "/skills list shows the skills"
    # /mcp connect of a broken entry reports the entry the session read at its start again.
    assert remedy_hint(Remedy.FIX_CONFIG, server="gh") == "fix gh in configs.json, then restart keen chat"
    assert remedy_hint(Remedy.SIGN_IN) == ""  # no server: nothing to say
    assert remedy_hint(None, server="gh") == ""
    error = ServerDisconnected("server gh is not connected", server="gh", remedy=Remedy.RECONNECT)
    assert describe(error) == "server gh is not connected; then /mcp connect gh"
    assert describe(SkillError("no skill named 'x'", name="x", remedy=Remedy.LIST_SKILLS)).endswith(
        "; /skills list shows the skills"
    )


def completions(text: str) -> list[str]:
    from types import SimpleNamespace

    from prompt_toolkit.completion import CompleteEvent
    from prompt_toolkit.document import Document

    from keen.agent.repl import _completer  # pyright: ignore[reportPrivateUsage]

    names = SimpleNamespace(skills=["mcp:github", "mcp:time", "notes"], servers=["github", "time"])
    found = _completer(names).get_completions(Document(text), CompleteEvent(completion_requested=True))  # type: ignore[arg-type]
    return [text[: len(text) + c.start_position] + c.text for c in found]


def test_completion_offers_commands_skills_and_servers() -> None:
    assert completions("/sk") == ["/skills"]
    assert completions("/mcp") == ["/mcp connect", "/mcp:github", "/mcp:time"]
    assert completions("/no") == ["/notes"]
    assert completions("/skills ") == ["/skills list", "/skills enable", "/skills disable", "/skills reload"]
    assert completions("/skills en") == ["/skills enable"]
    assert completions("/skills enable mcp:") == ["/skills enable mcp:github", "/skills enable mcp:time"]
    assert completions("/mcp connect ") == ["/mcp connect github", "/mcp connect time"]
    assert completions("/mcp connect t") == ["/mcp connect time"]
    assert completions("hello /sk") == []
    assert completions("//sk") == []


@pytest.mark.anyio
async def test_mcp_connect_of_a_server_this_session_does_not_have_says_to_restart(world: World) -> None:
    # The session reads configs.json once. `/mcp connect late` for a server added since said
    # 'MCP server "late" is not configured; add it to configs.json', where it already was.
    model = world.script(step(content="unused"))
    async with world.runtime("demo") as rt, world.agent(rt, model) as agent:
        screen = StringIO()
        slash = SlashCommands(rt, agent, Console(file=screen, width=400, color_system=None))
        config = world.home / "mcp" / "configs.json"
        config.parent.mkdir(parents=True, exist_ok=True)
        config.write_text(json.dumps({"version": 1, "servers": {"late": {"command": "some-server"}}}))
        await slash.run(SlashCommand("mcp", "connect late"))
        await slash.run(SlashCommand("mcp", "connect ghost"))
    late, ghost = screen.getvalue().splitlines()
    assert late == (
        f"error: late was added to {config} after this session started (servers of this session: demo);"
        " restart keen chat to connect it"
    ), late
    assert ghost == (
        "error: no server named ghost (servers of this session: demo); add it with `keen mcp add ghost"
        " -- COMMAND [ARGS...]` (or `--url URL`), then restart keen chat"
    ), ghost


@pytest.mark.anyio
async def test_mcp_connect_of_a_broken_entry_says_to_restart_after_the_fix(world: World) -> None:
    # The hint read "fix broken in configs.json, then /mcp connect broken", but the session
    # read configs.json once: after the fix, /mcp connect reported the old entry again.
    from keen.runtime import open_runtime

    config = world.home / "mcp" / "configs.json"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(
        json.dumps({"version": 1, "servers": {"broken": {"command": "${KEEN_TEST_NEVER_SET}"}}})
    )
    model = world.script(step(content="unused"))
    async with open_runtime(config_path=config, wait=10) as rt, world.agent(rt, model) as agent:
        screen = StringIO()
        slash = SlashCommands(rt, agent, Console(file=screen, width=400, color_system=None))
        config.write_text(json.dumps({"version": 1, "servers": {"broken": {"command": "fixed-command"}}}))
        await slash.run(SlashCommand("mcp", "connect broken"))
    *_, line = screen.getvalue().strip().splitlines()
    assert "KEEN_TEST_NEVER_SET" in line, line  # the entry the session read, not the fixed one
    assert line.endswith("fix broken in configs.json, then restart keen chat"), line


@pytest.mark.anyio
async def test_mcp_skill_of_a_server_that_never_connected_says_why(world: World) -> None:
    # `/mcp:gone hi` for a configured server that never connected (so it has no skill yet)
    # read "unknown command /mcp:gone: no such command or skill".
    from keen.runtime import open_runtime

    config = world.home / "mcp" / "configs.json"
    config.parent.mkdir(parents=True, exist_ok=True)
    servers = {
        "gone": {"command": str(world.tmp / "no-such-server")},
        "broken": {"command": "${KEEN_TEST_NEVER_SET}"},
    }
    config.write_text(json.dumps({"version": 1, "servers": servers}))
    model = world.script(step(content="unused"))
    async with open_runtime(config_path=config, wait=20, sync=True) as rt, world.agent(rt, model) as agent:
        screen = StringIO()
        slash = SlashCommands(rt, agent, Console(file=screen, width=400, color_system=None))
        for name in ("gone", "broken", "ghost"):
            await slash.run(SlashCommand(f"mcp:{name}", "hi"))
    gone, broken, ghost = screen.getvalue().strip().splitlines()
    assert gone.startswith(
        "error: /mcp:gone: server gone has no skill yet, as it never connected; gone: disconnected:"
    )
    assert "no-such-server" in gone and gone.endswith("/mcp connect gone"), gone
    assert (
        broken.startswith("error: /mcp:broken: server broken has no skill yet")
        and "KEEN_TEST_NEVER_SET" in broken
    )
    assert ghost == "error: unknown command /mcp:ghost: no such command or skill; /help lists both"
