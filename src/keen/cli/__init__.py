"""The ``keen`` command line (typer + rich).

``keen mcp list|tools|call|import|add|remove|sync|connect|diff|trust|refresh|watch``, ``keen skills ...``, ``keen tools search``, ``keen prompt``,
``keen chat``, ``keen demo``. Library code never prints; everything a person sees is rendered here.
Each command's module is imported when that command runs (or ``keen --help`` lists it),
and each command imports what it needs inside, so ``keen prompt`` loads none of the
other commands and commands that touch no server (``--version``, ``skills``, ``prompt``)
start without loading the MCP SDK. ``keen prompt`` with only its own options (no
``--help``, no ``-v``, numbers as plain digits) runs without typer at all
(:mod:`keen.cli._prompt`), and so do ``keen chat -p PROMPT`` with only its own options
(:mod:`keen.cli._chat`) and ``keen skills list [--json]`` and ``keen skills show NAME [--json]``
(:mod:`keen.cli._skills`); every
other command line goes through the typer application (``keen.cli.app``, built on first use).
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

from keen._gcfreeze import freeze_at_first_start
from keen.cli._console import EXIT_KEEN_ERROR, debug_enabled

if TYPE_CHECKING:
    from keen.cli._app import COMMANDS as COMMANDS
    from keen.cli._app import app as app

__all__ = ["COMMANDS", "app", "main"]


def __getattr__(name: str) -> Any:
    # PEP 562: the typer application is built at its first use, not with this package.
    if name in ("app", "COMMANDS"):
        from keen.cli import _app

        return getattr(_app, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _alone(args: list[str]) -> bool:
    """Run the command line without typer when it is one of those that can (module doc) and
    return True; else False, having done nothing. Each is looked at only by its command's
    first word, so another command imports none of their modules."""
    command = args[0] if args else None
    if command == "prompt":
        from keen.cli._prompt import run_alone
    elif command == "chat":
        from keen.cli._chat import run_alone
    elif command == "skills":
        from keen.cli._skills import run_alone
    else:
        return False
    return run_alone(args)


def main() -> None:
    """Console-script entry point: no traceback escapes unless KEEN_DEBUG=1."""
    # The process is Keen's own: the objects its imports made live as long as it, so the
    # first Manager's start may freeze them out of the collector's walks (keen._gcfreeze).
    freeze_at_first_start()
    try:
        if not _alone(sys.argv[1:]):
            from keen.cli._app import app

            app(prog_name="keen")  # also under `python -m keen`
    except SystemExit:
        raise
    except Exception as exc:
        if debug_enabled():
            raise
        from keen.cli._console import err

        err.print(f"[bold red]internal error:[/] {type(exc).__name__}: {exc}", highlight=False)
        err.print("rerun with KEEN_DEBUG=1 for a traceback, and please report it")
        sys.exit(EXIT_KEEN_ERROR)
