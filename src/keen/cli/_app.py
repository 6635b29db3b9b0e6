"""The ``keen`` typer application: the root group, whose subcommands (:data:`COMMANDS`) are built
when looked up, once per process.

Imported on first use of ``keen.cli.app`` or ``keen.cli.COMMANDS`` (or by :func:`keen.cli.main` for any command
line :mod:`keen.cli._prompt` does not run itself), so ``keen prompt`` starts without typer.
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable, Iterator, Mapping, MutableMapping
from typing import Annotated, Any

import typer

from keen._version import __version__
from keen.cli._common import KeenGroup, setup_logging, typer_app

__all__ = ["COMMANDS", "app", "build_commands"]


def _command(module: str) -> Callable[[], typer.Typer]:
    """A one-command app: ``keen.cli.<module>.register`` adds its command to it."""

    def build() -> typer.Typer:
        single = typer_app("")
        importlib.import_module(f"keen.cli.{module}").register(single)
        return single

    return build


def _group(module: str) -> Callable[[], typer.Typer]:
    """The group ``keen.cli.<module>.app``."""
    return lambda: importlib.import_module(f"keen.cli.{module}").app


@functools.cache
def _mcp() -> typer.Typer:
    """``keen mcp``: its own commands, then those of the modules that add to it (once)."""
    from keen.cli import mcp_config_cmd, pins_cmd, watch_cmd
    from keen.cli.mcp_cmd import app as mcp_app

    pins_cmd.register(mcp_app)
    mcp_config_cmd.register(mcp_app)
    watch_cmd.register(mcp_app)
    return mcp_app


COMMANDS: dict[str, Callable[[], typer.Typer]] = {
    "prompt": _command("prompt_cmd"),
    "demo": _command("demo_cmd"),
    "serve": _command("serve_cmd"),
    "chat": _command("chat_cmd"),
    "mcp": _mcp,
    "sessions": _group("sessions_cmd"),
    "skills": _group("skills_cmd"),
    "tools": _group("tools_cmd"),
}
"""Each subcommand of ``keen``, in the order ``keen --help`` lists them, and how to build it:
its module is imported only when the command is looked up (it runs, or the help lists it)."""


_BUILT: dict[str, Any] = {}
"""The click commands built from :data:`COMMANDS` in this process, by name. Typer turns the
application into click commands again on every run of ``app``; a process that runs it more
than once (a host's tests with typer's ``CliRunner``, a process that forks each run) builds
each command once: ``keen mcp``'s group, the largest, is about 24 ms of CPU."""


def _built(name: str) -> Any:
    command = _BUILT.get(name)
    if command is None:
        command = typer.main.get_command(COMMANDS[name]())
        command.name = name
        _BUILT[name] = command
    return command


def build_commands() -> None:
    """Build every command of :data:`COMMANDS` now, as a run that looks one up would.

    For a process that forks each run of ``app`` (the children find them built) or a host
    that would otherwise build them during its first run; a run that calls nothing still
    builds the one command it looks up. Raises what a command module's import raises.
    """
    for name in COMMANDS:
        _built(name)


class _Commands(MutableMapping[str, Any]):
    """The root group's subcommands by name: every name of :data:`COMMANDS` is a key, and a
    command is built when it is first read (typer also reads ``commands.keys()`` to suggest
    a name for a typo, which builds nothing)."""

    def __init__(self, built: Mapping[str, Any]) -> None:
        self._built = dict(built)

    def __getitem__(self, name: str) -> Any:
        if name not in self._built:
            if name not in COMMANDS:
                raise KeyError(name)
            self._built[name] = _built(name)
        return self._built[name]

    def __setitem__(self, name: str, command: Any) -> None:
        self._built[name] = command

    def __delitem__(self, name: str) -> None:
        raise TypeError(f"keen's command {name!r} cannot be removed")

    def __contains__(self, name: object) -> bool:
        return name in COMMANDS or name in self._built

    def __iter__(self) -> Iterator[str]:
        yield from COMMANDS
        yield from (name for name in self._built if name not in COMMANDS)

    def __len__(self) -> int:
        return len(COMMANDS.keys() | self._built.keys())


class _LazyGroup(KeenGroup):
    """The root group: a subcommand is built from :data:`COMMANDS` when it is first looked
    up, so running one command imports only its own module (``keen prompt`` would otherwise
    import every command module and turn every command's signature into click parameters,
    about 200 ms of CPU on a small machine)."""

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.commands = _Commands(self.commands)

    def list_commands(self, ctx: Any) -> list[str]:
        return list(self.commands)


app = typer_app(
    "Use many MCP servers from an LLM agent without drowning its prompt in tool schemas.",
    name="keen",
    add_completion=False,
    pretty_exceptions_enable=False,
    epilog="Environment: KEEN_HOME (Keen's folder, default ~/.keen); KEEN_MCP_TIMEOUT (seconds each "
    "MCP server has to start, default 15); KEEN_DEBUG=1 (a traceback instead of 'internal error').",
    cls=_LazyGroup,
)


def _print_version(value: bool) -> None:
    if value:
        typer.echo(__version__)
        raise typer.Exit(0)


@app.callback()
def _root(
    verbose: Annotated[
        bool,
        typer.Option(
            "--verbose",
            "-v",
            help="Debug logging on stderr (secrets redacted); KEEN_DEBUG=1 adds tracebacks.",
        ),
    ] = False,
    version: Annotated[
        bool,
        typer.Option("--version", help="Print the version and exit.", is_eager=True, callback=_print_version),
    ] = False,
) -> None:
    setup_logging(verbose)
