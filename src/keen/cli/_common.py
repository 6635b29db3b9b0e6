"""What every CLI command shares: consoles, logging, the error boundary, async runs.

Exit codes (the CLI contract): 0 success, 1 the tool returned ``isError``, 2 any Keen
error (message on stderr, no traceback). Set ``KEEN_DEBUG=1`` for tracebacks.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Awaitable, Callable
from typing import Any, NoReturn, TypeVar, cast

import typer
from typer.core import TyperCommand, TyperGroup

from keen.cli._console import (
    EXIT_KEEN_ERROR,
    EXIT_TOOL_ERROR,
    STARTED,
    debug_enabled,
    err,
    guarded,
    out,
    print_error,
    print_json,
    real_console,
    setup_logging,
)

__all__ = [
    "EXIT_KEEN_ERROR",
    "EXIT_TOOL_ERROR",
    "STARTED",
    "KeenCommand",
    "KeenGroup",
    "debug_enabled",
    "err",
    "fail",
    "json_object",
    "out",
    "print_json",
    "real_console",
    "run",
    "setup_logging",
    "typer_app",
]

T = TypeVar("T")


def fail(message: str, code: int = EXIT_KEEN_ERROR) -> NoReturn:
    """Print ``message`` on stderr, literally and escaped (it may quote a server), and exit with ``code``."""
    print_error(message)
    raise typer.Exit(code)


class KeenGroup(TyperGroup):
    """The CLI's one error boundary, wrapped around every command of every group.

    A ``KeenError`` (alone, or inside the exception groups anyio raises) becomes its
    message on stderr and exit code 2, with no traceback; Ctrl-C exits 130
    (:func:`keen.cli._console.guarded`, the boundary commands run without typer share).
    """

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        if ctx.parent is None:
            # -v/--verbose is a root option; accept it after the subcommand too (before any `--`).
            end = args.index("--") if "--" in args else len(args)
            flags = [a for a in args[1:end] if a in ("-v", "--verbose")]
            if flags:
                rest = [a for i, a in enumerate(args) if not (0 < i < end and a in ("-v", "--verbose"))]
                args = ["--verbose", *rest]
        return super().parse_args(ctx, args)

    def invoke(self, ctx: Any) -> Any:
        try:
            return guarded(lambda: super(KeenGroup, self).invoke(ctx), set_up_logging=False)
        except Exception as exc:
            # click's NoSuchOption (typer may vendor click: matched by name): for --json, said
            # plainly instead of "No such option": this command prints no data.
            context = getattr(exc, "ctx", None)
            option = getattr(exc, "option_name", "")
            if type(exc).__name__ == "NoSuchOption" and context is not None:
                if option == "--json":
                    fail(f"`{context.command_path}` has no --json: it prints no data, only what it did")
                if context.command_path.endswith("mcp add"):
                    # `keen mcp add x npx -y pkg`: the server's own options need the `--` first.
                    fail(
                        f"{option} is not an option of keen mcp add; put the server's command after --: "
                        "keen mcp add NAME -- COMMAND [ARGS...]"
                    )
            raise


_USAGE_ARG = re.compile(r"([\[{])([a-z_][a-z0-9_]*)([\]}])(\.\.\.)?")


class KeenCommand(TyperCommand):
    """A command whose usage line names its arguments as its help text does (``SERVER``,
    ``[ARGS]...``), where typer writes ``{server}``."""

    def collect_usage_pieces(self, ctx: Any) -> list[str]:
        return [_usage_piece(piece) for piece in super().collect_usage_pieces(ctx)]


def _usage_piece(piece: str) -> str:
    found = _USAGE_ARG.fullmatch(piece)
    if found is None:
        return piece
    name = found[2].upper()
    return (f"[{name}]" if found[1] == "[" else name) + (found[4] or "")


class _KeenTyper(typer.Typer):
    """``typer.Typer`` whose commands are :class:`KeenCommand` unless told otherwise."""

    def command(self, name: str | None = None, *, cls: Any = None, **options: Any) -> Any:
        if "short_help" in options:
            return super().command(name, cls=cls or KeenCommand, **options)

        def register(fn: Any) -> Any:
            # A group lists each command by its docstring's first paragraph, line breaks
            # included: given as one line, it flows to the terminal's width instead.
            first = inspect.getdoc(fn) or ""
            short = " ".join(first.split("\n\n", 1)[0].split())
            return super(_KeenTyper, self).command(
                name, cls=cls or KeenCommand, short_help=short or None, **options
            )(fn)

        return register


def typer_app(help: str, **options: Any) -> typer.Typer:
    """A command group with Keen's error boundary (:class:`KeenGroup`) and house defaults."""
    options.setdefault("no_args_is_help", True)
    options.setdefault("cls", KeenGroup)
    options.setdefault("add_completion", False)  # a group or command built alone (keen.cli.COMMANDS)
    # -h as well as --help, as most command-line tools take it (no command uses -h otherwise).
    options.setdefault("context_settings", {"help_option_names": ["-h", "--help"]})
    return _KeenTyper(help=help, **options)


def run(fn: Callable[[], Awaitable[T]]) -> T:
    """Run an async command body; errors reach :class:`KeenGroup`.

    SIGTERM and SIGHUP cancel it like Ctrl-C (the servers are closed first); the boundary
    exits 143 or 129.
    """
    from keen.cli._signals import run_until_signal

    return run_until_signal(fn)


def json_object(text: str, what: str, example: str) -> dict[str, Any]:
    """``text`` parsed as one JSON object, or exit 2 saying where the JSON breaks (``what``
    names the value, ``example`` shows one that works)."""
    import json

    from keen._fs import BOM

    try:
        # Text from a file an editor saved ($(cat entry.json)) may start with a byte order mark.
        value = json.loads(text.removeprefix(BOM))
    except json.JSONDecodeError as exc:
        fail(
            f"{what} is not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg}); pass an object "
            f"like {example}"
        )
    except RecursionError:
        fail(f"{what} is nested too deep (brackets inside brackets); pass an object like {example}")
    if not isinstance(value, dict):
        fail(f"{what} must be a JSON object like {example}")
    return cast("dict[str, Any]", value)
