"""Slash-command parsing and wording, and /mcp connect of a server the session does not have
(the other commands run under tmux: test_repl_tmux.py)."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from conftest import stdio_server
from helpers.agent_world import World, step
from keen.agent.slash import SlashCommand, SlashCommands, describe, message_text, parse, remedy_hint
from keen.errors import Remedy, ServerDisconnected, SkillError
from keen.mcp.types import ServerState
from keen.runtime import Runtime


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
    # /mcp connect reads the entry again: no restart needed after the fix.
    assert remedy_hint(Remedy.FIX_CONFIG, server="gh") == "fix gh in configs.json, then /mcp connect gh"
    assert remedy_hint(Remedy.ENABLE_SERVER, server="gh") == (
        "run keen mcp enable gh in a shell, then /mcp connect gh"
    )
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


def write_servers(world: World, servers: dict[str, Any]) -> Path:
    config = world.home / "mcp" / "configs.json"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(json.dumps({"version": 1, "servers": servers}))
    return config


@contextlib.asynccontextmanager
async def session(
    world: World, config: Path, **options: Any
) -> AsyncIterator[tuple[SlashCommands, StringIO, Runtime]]:
    """A chat session over configs.json (as `keen chat` opens it): its slash commands and screen;
    ``options`` go to the Agent (``mode``)."""
    from keen.runtime import open_runtime

    model = world.script(step(content="unused"))
    async with (
        open_runtime(config_path=config, wait=30, sync=True) as rt,
        world.agent(rt, model, **options) as agent,
    ):
        screen = StringIO()
        yield SlashCommands(rt, agent, Console(file=screen, width=400, color_system=None)), screen, rt


@pytest.mark.anyio
async def test_mcp_connect_of_a_disabled_server_says_how_to_enable_it_and_connects_once_enabled(
    world: World,
) -> None:
    # It said "off: connected, N tools; skill mcp:off enabled" while every call was refused.
    config = write_servers(world, {"off": {**stdio_server("basic_stdio.py"), "enabled": False}})
    async with session(world, config) as (slash, screen, rt):
        await slash.run(SlashCommand("mcp", "connect off"))
        assert rt.manager.status("off").state is not ServerState.CONNECTED
        write_servers(world, {"off": stdio_server("basic_stdio.py")})  # what keen mcp enable writes
        await slash.run(SlashCommand("mcp", "connect off"))
        assert rt.manager.status("off").state is ServerState.CONNECTED
    refused, *rest = screen.getvalue().splitlines()
    assert refused == (
        'error: off is disabled in configs.json ("enabled": false); run keen mcp enable off in a shell,'
        " then /mcp connect off"
    ), refused
    assert rest[-1].startswith("off: connected, "), rest


@pytest.mark.anyio
async def test_mcp_connect_connects_a_server_added_to_configs_json_since_the_session_started(
    world: World,
) -> None:
    # The session read configs.json once: /mcp connect late said "restart keen chat to connect it".
    config = write_servers(world, {"first": stdio_server("basic_stdio.py")})
    async with session(world, config) as (slash, screen, rt):
        write_servers(
            world, {"first": stdio_server("basic_stdio.py"), "late": stdio_server("basic_stdio.py")}
        )
        await slash.run(SlashCommand("mcp", "connect late"))
        await slash.run(SlashCommand("mcp", "connect ghost"))
        assert rt.manager.status("late").state is ServerState.CONNECTED
        assert (await rt.manager.call_tool("late", "echo", {"text": "hi"})).text == "hi"
    news, connected, ghost = screen.getvalue().splitlines()
    assert news == "late: new in configs.json; connecting...", news
    assert connected.startswith("late: connected, ") and connected.endswith("; skill mcp:late enabled")
    assert (world.home / "skills" / "mcp:late" / "SKILL.md").exists()
    assert ghost == (
        f"error: no server named ghost in {config} (servers: first, late); add it with `keen mcp add"
        " ghost -- COMMAND [ARGS...]` (or `--url URL`), then /mcp connect ghost"
    ), ghost


@pytest.mark.anyio
async def test_mcp_connect_after_fixing_a_broken_entry_connects_it(world: World) -> None:
    # The hint said "fix broken in configs.json, then restart keen chat": /mcp connect reported
    # the entry the session read at its start again, the unset variable or the wrong command.
    config = write_servers(
        world,
        {"broken": {"command": "${KEEN_TEST_NEVER_SET}"}, "wrong": {"command": "keen-no-such-command-xyz"}},
    )
    async with session(world, config) as (slash, screen, rt):
        await slash.run(SlashCommand("mcp", "connect broken"))
        *_, still = screen.getvalue().strip().splitlines()
        assert "KEEN_TEST_NEVER_SET" in still, still
        assert still.endswith("fix broken in configs.json, then /mcp connect broken"), still
        write_servers(
            world, {"broken": stdio_server("basic_stdio.py"), "wrong": stdio_server("basic_stdio.py")}
        )
        for name in ("broken", "wrong"):
            screen.truncate(0)
            screen.seek(0)
            await slash.run(SlashCommand("mcp", f"connect {name}"))
            changed, connected = screen.getvalue().splitlines()
            assert changed == f"{name}: its entry in configs.json changed; connecting with the new one..."
            assert connected.startswith(f"{name}: connected, "), connected
            assert (await rt.manager.call_tool(name, "add", {"a": 1, "b": 2})).text == "3"


@pytest.mark.anyio
async def test_mcp_connect_of_a_server_removed_from_configs_json_says_so_and_drops_its_skill(
    world: World,
) -> None:
    config = write_servers(
        world, {"leaving": stdio_server("basic_stdio.py"), "staying": stdio_server("basic_stdio.py")}
    )
    skill = world.home / "skills" / "mcp:leaving"
    async with session(world, config) as (slash, screen, rt):
        assert (skill / "SKILL.md").exists()
        write_servers(world, {"staying": stdio_server("basic_stdio.py")})
        await slash.run(SlashCommand("mcp", "connect leaving"))
        assert [s.name for s in rt.manager.servers()] == ["staying"]
        assert rt.manager.status("staying").state is ServerState.CONNECTED
    (line,) = screen.getvalue().splitlines()
    assert line == (
        f'error: MCP server "leaving" is no longer in {config} (it was removed after this session read'
        " the file); add it back to connect it, or check the name."
    ), line
    assert not skill.exists() and not skill.is_symlink()


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


@pytest.mark.anyio
async def test_search_with_no_hit_in_read_only_mode_says_what_it_left_out(world: World) -> None:
    # "No tool matches; try other words": no other words find a tool that may write, nor one
    # whose readOnlyHint is a claim of a server not trusted for it.
    config = write_servers(world, {"basic": stdio_server("basic_stdio.py")})
    async with session(world, config, mode="read-only") as (slash, screen, _):
        await slash.run(SlashCommand("search", "add two numbers"))
    said = " ".join(screen.getvalue().split())
    assert said.startswith("No tool the read-only mode allows matches: it leaves out tools that may write"), (
        said
    )
    assert "keen mcp trust SERVER" in said and "`keen chat --mode ask` shows every tool" in said, said


@pytest.mark.anyio
async def test_search_in_read_only_mode_names_no_pin_review_for_a_server_that_compares_none(
    world: World,
) -> None:
    # Under "pinning": "off" no pin is compared, so `keen mcp trust` grants nothing: the hint
    # named it anyway, a step that changes nothing.
    basic = {**stdio_server("basic_stdio.py"), "pinning": "off"}
    config = write_servers(world, {"basic": basic})
    async with session(world, config, mode="read-only") as (slash, screen, _):
        await slash.run(SlashCommand("search", "add two numbers"))
    said = " ".join(screen.getvalue().split())
    assert said.startswith("No tool the read-only mode allows matches"), said
    assert "keen mcp trust" not in said and '"trust_annotations": true in its configs.json entry' in said, (
        said
    )
