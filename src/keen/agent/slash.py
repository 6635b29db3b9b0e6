"""Slash commands of ``keen chat``: what a line starting with ``/`` does instead of a model turn.

======================================  ==================================================
``/help``                               the commands, and the skills ``/<skill>`` activates
``/mcp``                                the servers' status table
``/mcp connect SERVER``                 reconnect with its configs.json entry as it is now (and
                                        sign in), regenerate and enable its skill
``/mcp:SERVER ARGS``, ``/SKILL ARGS``   activate a skill: its SKILL.md, arguments substituted,
                                        becomes a retained ``[Activate skill: ...]`` message;
                                        a SERVER that went away is reconnected first
``/skills [list]``                      the skills, enabled or not
``/skills enable|disable NAME``         show or hide a skill in the catalog
``/skills reload``                      read the skills directory again
``/tools``                              the tools the model was offered (the visible set)
``/search QUERY``                       ToolSearch over every connected server's tools
``/exit``, ``/quit``                    leave (Ctrl-D at an empty prompt too)
======================================  ==================================================

A line starting with ``//`` is sent to the model with one slash removed. Skill
activation is described in docs/chat.md "Skill activation" (slash activation is the one
place arguments are substituted). Errors are worded here, with the slash command that fixes
them (``/mcp connect github`` rather than ``keen mcp connect github``).
"""

from __future__ import annotations

import inspect
import logging
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from rich.console import Console
from rich.table import Table
from rich.text import Text

from keen._tables import Clip, Col, Listing, error_in_row
from keen._terminal import cell, terminal_text
from keen.errors import KeenError, Remedy, ServerNotConfigured, SkillError, with_hint, worded
from keen.mcp.types import ServerState, ServerStatus

if TYPE_CHECKING:
    from keen.harness import Harness
    from keen.runtime import Runtime

logger = logging.getLogger(__name__)

__all__ = [
    "BUILTIN",
    "COMMANDS",
    "AgentLike",
    "Outcome",
    "SlashCommand",
    "SlashCommands",
    "describe",
    "message_text",
    "parse",
    "remedy_hint",
    "status_line",
    "with_hint",
]

COMMANDS: dict[str, str] = {
    "/help": "this list",
    "/mcp": "MCP servers: state, tools, last error",
    "/mcp connect SERVER": "reconnect SERVER as configs.json has it now (sign in if OAuth), enable its skill",
    "/mcp:SERVER ARGS": "activate SERVER's skill (kept in the conversation), then ask ARGS",
    "/SKILL ARGS": "activate a skill by name, then ask ARGS",
    "/skills [list]": "skills and whether the catalog shows them",
    "/skills enable NAME": "show skill NAME in the catalog",
    "/skills disable NAME": "hide skill NAME from the catalog",
    "/skills reload": "read the skills directory again",
    "/tools": "the tools the model is offered (the visible set)",
    "/search QUERY": "search every connected server's tools",
    "/exit": "leave (Ctrl-D at an empty prompt too)",
}
"""Command -> one-line help, in the order ``/help`` lists them."""

BUILTIN = ("help", "mcp", "skills", "tools", "search", "exit", "quit")
"""Command names that are never skills (a skill of the same name is reached as ``//``-less text)."""

_NAME = re.compile(r"/([\w.:-]+)(?:\s+(.*))?\s*", re.DOTALL)
_STATE_STYLE = {
    ServerState.CONNECTED: "green",
    ServerState.CONNECTING: "yellow",
    ServerState.CONFIGURED: "dim",
}


class AgentLike(Protocol):
    """What the slash commands use of :class:`keen.agent.loop.Agent`."""

    harness: Harness

    def activate_skill(self, name: str, args: str) -> None: ...

    def reload_catalog(self) -> None: ...

    async def revive(self, server: str) -> ServerStatus | None: ...


@dataclass(frozen=True)
class SlashCommand:
    """A parsed command line: ``/mcp connect x`` is ``name="mcp"``, ``args="connect x"``."""

    name: str
    args: str = ""


@dataclass(frozen=True)
class Outcome:
    """What the REPL does after a command: ``exit`` the session, or run ``turn`` (a user
    message) as a model turn, e.g. the arguments after an activated skill."""

    exit: bool = False
    turn: str | None = None


def parse(line: str) -> SlashCommand | None:
    """The command in ``line``, or None when the line is a message for the model.

    ``"/mcp connect a"`` -> ``SlashCommand("mcp", "connect a")``; ``"hello"`` and
    ``"//etc is a dir"`` -> None (the REPL sends the latter as ``"/etc is a dir"``); a lone
    ``"/"`` or ``"/ x"`` is the command ``""`` (unknown, answered with the help hint).
    """
    text = line.strip()
    if not text.startswith("/") or text.startswith("//"):
        return None
    match = _NAME.fullmatch(text)
    if match is None:
        return SlashCommand("", text[1:].strip())
    return SlashCommand(match.group(1), (match.group(2) or "").strip())


def message_text(line: str) -> str:
    """The text sent to the model for a non-command line (``//x`` becomes ``/x``)."""
    text = line.strip()
    return text[1:] if text.startswith("//") else text


def remedy_hint(remedy: Remedy | None, *, server: str | None = None, skill: str | None = None) -> str:
    """The slash command (or the edit) that applies ``remedy`` in the REPL ("" for none)."""
    if remedy is Remedy.LIST_SKILLS:
        return "/skills list shows the skills"
    if remedy is Remedy.ENABLE_SKILL:
        name = skill or (f"mcp:{server}" if server else None)
        return f"/skills enable {name}" if name else ""
    if not server or remedy is None:
        return ""
    return {
        Remedy.SIGN_IN: f"/mcp connect {server} to sign in",
        Remedy.RECONNECT: f"then /mcp connect {server}",
        # /mcp connect reads the server's entry again (Manager.reload_server): no restart.
        Remedy.ENABLE_SERVER: f"run keen mcp enable {server} in a shell, then /mcp connect {server}",
        Remedy.FIX_CONFIG: f"fix {server} in configs.json, then /mcp connect {server}",
    }.get(remedy, "")


def describe(exc: KeenError) -> str:
    """An error's message and the slash command that fixes it, when there is one."""
    return worded(exc, remedy_hint)


def status_line(status: ServerStatus) -> str:
    """One line for a server that did not connect: ``name: state: error; fix``."""
    error = with_hint(status.last_error or "", remedy_hint(status.remedy, server=status.name))
    return f"{status.name}: {status.state.value}" + (f": {error}" if error else "")


class SlashCommands:
    """Runs slash commands against one chat session.

    Args:
        runtime: the session's open :class:`~keen.runtime.Runtime`.
        agent: the session's agent (its harness, skill activation, catalog reload).
        console: where tables and messages go (rich; server text is escaped).
        on_authorization_url: told a sign-in URL and whether a browser opened (``/mcp connect``).
    """

    def __init__(
        self,
        runtime: Runtime,
        agent: AgentLike,
        console: Console,
        *,
        on_authorization_url: Callable[[str, bool], None] | None = None,
    ) -> None:
        self.runtime = runtime
        self.agent = agent
        self.console = console
        self.on_authorization_url = on_authorization_url

    # -- helpers --------------------------------------------------------------------------------

    def say(self, text: str, style: str = "") -> None:
        """Print ``text`` literally (escaped: it may quote a server), in ``style``."""
        self.console.print(Text(terminal_text(text), style=style), soft_wrap=True)

    def error(self, text: str) -> None:
        """Print ``error: text`` (escaped)."""
        self.console.print(Text.assemble(("error: ", "bold red"), terminal_text(text)), soft_wrap=True)

    def skill_names(self) -> list[str]:
        """Every skill's name (enabled or not), for ``/help`` and completion."""
        from keen.skills import discover

        try:
            return [s.name for s in discover(self.runtime.skills_root).skills]
        except SkillError:
            return []

    # -- dispatch -------------------------------------------------------------------------------

    async def run(self, command: SlashCommand) -> Outcome:
        """Run ``command``; every :class:`~keen.errors.KeenError` is printed, never raised."""
        handlers: dict[str, Callable[[str], Any]] = {
            "help": self.help,
            "mcp": self.mcp,
            "skills": self.skills,
            "tools": self.tools,
            "search": self.search,
        }
        if command.name in ("exit", "quit"):
            return Outcome(exit=True)
        try:
            handler = handlers.get(command.name)
            if handler is not None:
                result = handler(command.args)
                if inspect.isawaitable(result):
                    await result
                return Outcome()
            if command.name.startswith("mcp:"):
                await self.revive(command.name.removeprefix("mcp:"))
            return self.activate(command.name, command.args)
        except KeenError as exc:
            self.error(describe(exc))
        except Exception as exc:  # a bug in one command must not end the session
            logger.exception("/%s failed", command.name)
            self.error(f"/{command.name} failed ({type(exc).__name__}: {exc}); the session goes on")
        return Outcome()

    def help(self, _args: str = "") -> None:
        """``/help``: the commands, the skills, the two keys worth knowing."""
        table = Table(show_header=False, box=None, padding=(0, 2, 0, 0))
        for usage, text in COMMANDS.items():
            table.add_row(Text(usage, style="bold"), text)
        self.console.print(table)
        names = self.skill_names()
        if names:
            self.say("Skills: " + ", ".join(f"/{n}" for n in names))
        self.say("Start a message with // to send a line that begins with /. Ctrl-C stops a reply.", "dim")

    # -- /mcp -----------------------------------------------------------------------------------

    async def mcp(self, args: str) -> None:
        """``/mcp`` and ``/mcp connect SERVER``."""
        words = args.split()
        if not words:
            self.mcp_status()
            return
        if words[0] == "connect" and len(words) == 2:
            await self.mcp_connect(words[1])
            return
        self.error("usage: /mcp, or /mcp connect SERVER")

    def mcp_status(self) -> None:
        """The servers' status table (name, transport, auth, state, tools, last error + fix)."""
        statuses = self.runtime.manager.servers()
        if not statuses:
            self.say(
                f"No MCP servers configured; add them to {self.runtime.manager.config_path} "
                "(or `keen mcp import FILE`), then /mcp connect NAME."
            )
            return
        # The CLI's layout (keen._tables): names whole, the error cut to two lines with its fix
        # kept whole, transport and auth hidden on a narrow terminal.
        table = Listing(
            [
                Col("name", "key"),
                Col("transport", drop=2),
                Col("auth", drop=2),
                Col("state"),
                Col("tools", justify="right"),
                Col("last error", "text", min_width=40),
            ],
            title="MCP servers",
            whole="keen mcp list --json (in a shell)",
        )
        for s in statuses:
            style = _STATE_STYLE.get(s.state, "red")
            state = s.state.value if s.enabled else f"{s.state.value} (disabled)"
            if not s.enabled and s.state is ServerState.CONFIGURED:
                state = "disabled"  # never connected: "configured" says nothing more
            hint = remedy_hint(s.remedy, server=s.name) if s.last_error else ""
            table.add_row(
                cell(s.name),
                s.transport,
                s.auth,
                cell(state, style=style),
                str(s.tool_count),
                Clip(cell(error_in_row(s.last_error or "", s.name)), tail=cell(hint)),
            )
        self.console.print(table)

    async def mcp_connect(self, server: str) -> None:
        """Reconnect ``server`` with its configs.json entry as it is now
        (:meth:`keen.runtime.Runtime.connect`) and reload the catalog: an entry fixed since
        the session started, or a server added since, connects without a restart."""
        manager = self.runtime.manager
        known = [s.name for s in manager.servers()]
        try:
            # Read here too, so the line before the wait says which entry is connected.
            change = await manager.reload_server(server)
        except ServerNotConfigured as exc:
            if server not in known:
                self.error(self._no_such_server(server))
                return
            self.error(describe(exc))
            await self.runtime.sync()  # removed from configs.json: its generated skill goes
            self.agent.reload_catalog()
            return
        if not manager.status(server).enabled:
            # Connected, it would say "connected" while every call to it is refused as disabled.
            hint = remedy_hint(Remedy.ENABLE_SERVER, server=server)
            self.error(f'{server} is disabled in configs.json ("enabled": false); {hint}')
            return
        intro = {
            "added": f"{server}: new in configs.json; connecting...",
            "changed": f"{server}: its entry in configs.json changed; connecting with the new one...",
            "unchanged": f"connecting {server}...",
        }.get(change)
        if intro:
            self.say(intro, "dim")
        outcome = await self.runtime.connect(server, on_authorization_url=self.on_authorization_url)
        self.agent.reload_catalog()
        status = outcome.status
        if status.state is ServerState.CONNECTED:
            self.say(f"{server}: connected, {status.tool_count} tools; skill mcp:{server} enabled", "green")
        else:
            self.error(status_line(status))

    def _server_status(self, server: str) -> ServerStatus | None:
        """``server``'s status in this session, ``None`` when the session has no such server."""
        try:
            return self.runtime.manager.status(server)
        except KeenError:
            return None

    def _no_such_server(self, server: str) -> str:
        """Why ``/mcp connect SERVER`` cannot connect a server configs.json does not list."""
        listed = ", ".join(s.name for s in self.runtime.manager.servers()) or "none"
        return (
            f"no server named {server} in {self.runtime.manager.config_path} (servers: {listed}); add it "
            f"with `keen mcp add {server} -- COMMAND [ARGS...]` (or `--url URL`), then /mcp connect {server}"
        )

    # -- /skills --------------------------------------------------------------------------------

    def skills(self, args: str) -> None:
        """``/skills [list]``, ``/skills enable|disable NAME``, ``/skills reload``."""
        words = args.split()
        verb = words[0] if words else "list"
        if verb == "list" and len(words) <= 1:
            self.skills_list()
        elif verb in ("enable", "disable") and len(words) == 2:
            self.skills_set(words[1], verb == "enable")
        elif verb == "reload" and len(words) == 1:
            self.agent.reload_catalog()
            self.say(f"Reloaded skills: {len(self.skill_names())} in {self.runtime.skills_root}.")
        else:
            self.error("usage: /skills [list], /skills enable NAME, /skills disable NAME, /skills reload")

    def skills_list(self) -> None:
        """The skills table; broken skills as warnings above it."""
        from keen.skills import discover

        found = discover(self.runtime.skills_root)
        for problem in found.problems:
            self.say(f"warning: {problem}", "yellow")
        if not found.skills:
            self.say(f"No skills in {self.runtime.skills_root}.")
            return
        table = Listing(
            [
                Col("name", "key"),
                Col("enabled"),
                Col("managed", drop=1),
                Col("description", "text", min_width=30),
            ],
            title="Skills",
            whole="keen skills list --json (in a shell)",
        )
        for s in found.skills:
            table.add_row(
                cell(s.name), "yes" if s.enabled else "no", "yes" if s.managed else "no", cell(s.description)
            )
        self.console.print(table)

    def skills_set(self, name: str, value: bool) -> None:
        """Enable or disable skill ``name`` in the skills config; raises ``SkillError`` for an unknown name."""
        from keen.skills import SkillsConfig, discover

        path = self.runtime.skills_root / "config.json"
        try:
            # Under the skills-dir lock: a live refresh or another Keen may be saving it too.
            with SkillsConfig.edit(path) as config:
                found = discover(self.runtime.skills_root, config=config)
                if found.get(name) is None and found.problem(name) is None:
                    meant = found.closest(name)
                    if meant is not None:
                        raise SkillError(f"no skill named {name!r}; did you mean {meant}?", name=name)
                    raise SkillError(f"no skill named {name!r}", name=name, remedy=Remedy.LIST_SKILLS)
                config.set_enabled(name, value)
        except OSError as exc:
            raise SkillError(f"cannot write {path}: {exc.strerror or exc}; check its permissions") from exc
        self.agent.reload_catalog()
        self.say(f"{'Enabled' if value else 'Disabled'} skill {name}.")

    # -- /tools, /search ------------------------------------------------------------------------

    def tools(self, _args: str = "") -> None:
        """``/tools``: the visible set of the last step (base tools, searched MCP tools, skills)."""
        harness = self.agent.harness
        entries = sorted(harness.visible.values(), key=lambda e: (e.kind == "skill", e.name))
        if not entries:
            self.say(
                "No turn yet: the model gets the local tools, search_tools, load_skill and "
                "call_mcp_tool, plus the MCP tools it finds with search_tools."
            )
            return
        table = Listing(
            [Col("name", "key"), Col("kind"), Col("why", "text")],
            title=f"Visible set (step {harness.step}, mode {harness.mode})",
            whole="keen sessions show ID (in a shell)",
        )
        for entry in entries:
            table.add_row(cell(entry.name), entry.kind, cell(entry.reason))
        self.console.print(table)

    def search(self, query: str) -> None:
        """``/search QUERY``: the ten best ToolSearch hits the permission mode admits."""
        from keen.capabilities import SearchFilter

        if not query.strip():
            self.error("usage: /search QUERY, e.g. /search create an issue")
            return
        harness = self.agent.harness
        catalog = harness.catalog_source()
        hits = catalog.search(query, 10, SearchFilter(mode=harness.mode, kinds=frozenset({"tool"})))
        if not hits and harness.mode == "read-only":
            # Other words find no tool that may write: say what leaves them out.
            self.say(
                "No tool the read-only mode allows matches: it leaves out tools that may write, and"
                f" takes a server's readOnlyHint only once you trust the server ({self._trust_hint()});"
                " `keen chat --mode ask` shows every tool."
            )
            return
        if not hits:
            self.say("No tool matches; try other words, or /mcp to see which servers are connected.")
            return
        table = Listing(
            [Col("server", "key"), Col("tool", "key"), Col("risk"), Col("summary", "text", min_width=36)],
            title=f"Tools for {query!r}",
            whole="keen tools search QUERY --json (in a shell)",
        )
        for hit in hits:
            table.add_row(cell(hit.server), cell(hit.tool), hit.risk, cell(hit.summary))
        self.console.print(table)

    def _trust_hint(self) -> str:
        """How to trust a server's annotations here: under ``"pinning": "off"`` no pin is
        compared, so ``keen mcp trust`` grants nothing and only ``trust_annotations`` does."""
        grant = '"trust_annotations": true in its configs.json entry'
        pinnings = {entry.pinning == "off" for entry in self.runtime.manager.config.servers.values()}
        if pinnings == {True}:
            return grant
        if True in pinnings:
            return f'keen mcp trust SERVER; for a server with "pinning": "off", {grant}'
        return f"keen mcp trust SERVER, or {grant}"

    # -- /SKILL ---------------------------------------------------------------------------------

    async def revive(self, server: str) -> None:
        """Before ``/mcp:SERVER``: reconnect SERVER if it went away (the agent's back-off rules
        and line), then sync the skills, so the skill the outage disabled is enabled again."""
        status = await self.agent.revive(server)
        if status is not None and status.state is ServerState.CONNECTED:
            await self.runtime.sync()
            self.agent.reload_catalog()

    def activate(self, name: str, args: str) -> Outcome:
        """``/NAME ARGS``: activate skill ``name``; ARGS (if any) becomes the turn to run."""
        if not name or name in BUILTIN:
            self.error(f"unknown command /{name}; /help lists the commands")
            return Outcome()
        try:
            self.agent.activate_skill(name, args)
        except SkillError as exc:
            if exc.remedy is not Remedy.LIST_SKILLS:
                raise
            status = self._server_status(name.removeprefix("mcp:")) if name.startswith("mcp:") else None
            if status is not None:
                # A configured server that never connected has no skill yet: say why, not
                # "unknown command".
                self.error(
                    f"/{name}: server {status.name} has no skill yet, as it never connected; {status_line(status)}"
                )
                return Outcome()
            self.error(f"unknown command /{name}: no such command or skill; /help lists both")
            return Outcome()
        if args:
            self.say(f"Activated skill {name}.", "dim")
            return Outcome(turn=args)
        self.say(f"Activated skill {name}: it stays in the conversation; now say what you need.", "dim")
        return Outcome()
