"""A session's first model request, sent before its runtime opens (docs/chat.md "Startup").

When the skills on disk cover the configuration (a second run: each enabled server has its
``mcp:<server>`` skill, and no generated skill is left of a server no longer configured),
the first step's request depends only on them: the system prompt is the base text and the
budgeted catalog of the skills on disk, and the tools are the ones every new session's
first step offers (:func:`keen.harness.definitions.first_step_tools`). :func:`plan` builds
that request from configs.json read without its validation models
(:func:`keen.mcp.config.known_servers`), the skills directory and the token budget, before
the runtime, the harness, the MCP SDK or the search stack is imported;
:class:`EarlyModel` sends it, and the session's runtime opens while the model answers.

The session then runs as ever: when its first step asks the model for exactly that request
(the same messages and tools), :class:`EarlyModel` hands it the answer already under way;
otherwise (the skills changed meanwhile, the full validation found a broken entry) the
early answer is dropped and the model is asked again. A tool call in the answer runs in the
session, so it waits for the runtime.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from keen import paths
from keen.agent.models import Message, Model
from keen.errors import KeenError

if TYPE_CHECKING:
    from keen.agent.model_events import ModelEvent
    from keen.skills.cache import SkillsDirState

__all__ = ["EarlyModel", "FirstRequest", "covered_servers", "plan"]


class FirstRequest(NamedTuple):
    """A first model request built before the runtime (a named tuple: made before the
    request, where a frozen dataclass would compile six methods as its module loads).

    Attributes:
        messages: the system prompt and the user's message.
        tools: the first step's tool definitions.
        servers: the enabled servers, whose skills on disk the prompt shows.
    """

    messages: list[Message]
    tools: list[dict[str, Any]]
    servers: list[str]


def covered_servers(
    root: Path,
    servers: Sequence[tuple[str, bool]],
    only: frozenset[str] | set[str] | None = None,
    *,
    state: SkillsDirState | None = None,
) -> list[str] | None:
    """The enabled ``servers`` (``(name, enabled)`` of a valid configuration), when the
    skills under ``root`` cover them: each has its ``mcp:<server>`` skill (or an entry in the
    skills config, one that never connected), and every generated skill on disk is a
    configured server's; ``None`` when not (a server new to this Keen home, one removed
    since). Reads the skills directory only.

    Args:
        root: the skills directory.
        servers: every configured server and whether it is enabled, in configuration order.
        only: the servers a session was limited to, if any.
        state: ``root``'s :class:`~keen.skills.cache.SkillsDirState` when the caller just
            took it (:func:`plan` hands the same one to discovery); default: taken now.
    """
    from keen.skills.cache import skills_dir_state
    from keen.skills.config import SkillsConfig

    enabled = [name for name, on in servers if on and (only is None or name in only)]
    try:
        listed = set(SkillsConfig.load(root / "config.json").names())
    except KeenError:
        return None
    if state is None:
        state = skills_dir_state(root)
    if not state.entries and _unlistable(root):
        return None
    # Each skill the config does not list must be on disk under one of its spellings (one
    # pass over the entries for all of them).
    wanted = {f"mcp:{name}" for name in enabled} - listed
    spellings = {skill: paths.skill_dir_spellings(skill) for skill in wanted}
    present = state.existing(d for ds in spellings.values() for d in ds)
    if any(present.isdisjoint(ds) for ds in spellings.values()):
        return None
    configured = {spelling for name, _ in servers for spelling in paths.skill_dir_spellings(f"mcp:{name}")}
    # A generated skill of a server no longer configured: the sync removes it.
    if any(name not in configured for name in state.generated()):
        return None
    return enabled


def _unlistable(root: Path) -> bool:
    """An empty :class:`~keen.skills.cache.SkillsDirState` is a missing or empty directory,
    or one that cannot be listed: True for the last."""
    try:
        os.listdir(root)
    except FileNotFoundError:
        return False
    except OSError:
        return True
    return False


def plan(
    prompt: str,
    *,
    skills_root: Path | None = None,
    config_path: Path | None = None,
    budget: int | None = None,
) -> FirstRequest | None:
    """The first request of a new session asked ``prompt``, when it can be built before the
    runtime (module doc); else ``None``, and the session builds it as it always did.

    Args:
        prompt: the user's first message.
        skills_root: the skills directory; default ``$KEEN_HOME/skills``.
        config_path: configs.json; default ``$KEEN_HOME/mcp/configs.json``.
        budget: tokens for the catalog plus the tools (the session's ``prompt_budget``);
            default :data:`keen.agent.system_prompt.DEFAULT_PROMPT_BUDGET`.
    """
    from keen.mcp.config.validated import known_servers

    root = skills_root or paths.skills_dir()
    servers = known_servers(config_path or paths.mcp_config_path())
    if servers is None:
        return None  # validated first, as ever: its errors come before anything else
    from keen.skills.cache import DiscoveryCache, skills_dir_state

    state = skills_dir_state(root)  # one listing and stat of each skill, for both
    covered = covered_servers(root, servers, state=state)
    if covered is None:
        return None
    from keen.agent.system_prompt import DEFAULT_PROMPT_BUDGET, build_system_prompt, offered_skills
    from keen.harness.definitions import first_step_tools

    tools = first_step_tools()
    try:
        # The store is not written here: the session's own scan writes it, after the request.
        found = DiscoveryCache(root, save=False).discover(state)
        text = build_system_prompt(
            root,
            tools,
            budget=DEFAULT_PROMPT_BUDGET if budget is None else budget,
            skills=offered_skills(found.enabled, covered),
        )
    except KeenError:
        return None  # the session says what is wrong with the skills, as it always did
    return FirstRequest([Message("system", text), Message("user", prompt)], tools, covered)


class EarlyModel:
    """A model whose first call was made before anyone asked for it (module doc).

    :meth:`start` runs :meth:`send` as a task of the running asyncio loop: it streams
    ``first`` from ``model`` into a buffer; the first :meth:`stream` call with the same
    messages and tools reads the buffer (and the call's error, if it failed), any other call
    cancels it and asks ``model``. :meth:`stop` ends it. Every other attribute is ``model``'s.

    It uses asyncio itself, not anyio (whose import costs about 25 ms of CPU): ``keen chat
    -p`` sends the request before it imports anyio and opens the session (Keen's event loop
    is always asyncio's: ``anyio.run``'s default backend).

    Args:
        model: the session's model.
        first: the request to send early.
    """

    def __init__(self, model: Model, first: FirstRequest) -> None:
        import asyncio

        self.model = model
        self.name: str = model.name
        self.first = first
        self._events: asyncio.Queue[ModelEvent | None] = asyncio.Queue()  # None: the answer ended
        self._error: BaseException | None = None
        self._claimed = False
        self._task: asyncio.Task[None] | None = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self.model, name)

    async def send(self) -> None:
        """Ask the model now and keep its answer for :meth:`stream`."""
        try:
            async for event in self.model.stream(self.first.messages, self.first.tools):
                self._events.put_nowait(event)
        except Exception as exc:  # the session's stream raises it, as the model would have
            self._error = exc
        finally:
            self._events.put_nowait(None)

    def start(self) -> None:
        """Start :meth:`send` as a task of the running asyncio loop: the request goes out
        at the caller's next wait (the task runs to its first wait on the network)."""
        import asyncio

        self._task = asyncio.get_running_loop().create_task(self.send(), name="keen-early-request")

    async def stop(self) -> None:
        """Cancel :meth:`send` if it is still under way, and wait for it to end."""
        import asyncio

        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.wait([task])

    async def stream(self, messages: list[Message], tools: list[dict[str, Any]]) -> AsyncIterator[ModelEvent]:
        """The early answer when this is the first call and asks what was sent early; else the model's."""
        if not self._claimed:
            self._claimed = True
            if messages == self.first.messages and tools == self.first.tools:
                while (event := await self._events.get()) is not None:
                    yield event
                if self._error is not None:
                    raise self._error
                return
            if self._task is not None:  # asked for something else: the early answer is not this one
                self._task.cancel()
        async for event in self.model.stream(messages, tools):
            yield event
