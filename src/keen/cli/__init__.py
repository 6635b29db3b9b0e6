"""The ``keen`` command line (typer + rich).

``keen mcp list|tools|call|import|add|remove|sync|connect|diff|trust|refresh|watch``, ``keen skills ...``, ``keen tools search``, ``keen prompt``,
``keen chat``, ``keen demo``. Library code never prints; everything a person sees is rendered here.
Each command imports what it needs when it runs, so commands that touch no server
(``--version``, ``skills``, ``prompt``) start without loading the MCP SDK.
"""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from keen._version import __version__
from keen.cli import chat_cmd, demo_cmd, mcp_config_cmd, pins_cmd, prompt_cmd, serve_cmd, watch_cmd
from keen.cli._common import EXIT_KEEN_ERROR, debug_enabled, err, setup_logging, typer_app
from keen.cli.mcp_cmd import app as mcp_app
from keen.cli.sessions_cmd import app as sessions_app
from keen.cli.skills_cmd import app as skills_app
from keen.cli.tools_cmd import app as tools_app

__all__ = ["app", "main"]

app = typer_app(
    "Use many MCP servers from an LLM agent without drowning its prompt in tool schemas.",
    name="keen",
    add_completion=False,
    pretty_exceptions_enable=False,
    epilog="Environment: KEEN_HOME (Keen's folder, default ~/.keen); KEEN_MCP_TIMEOUT (seconds each "
    "MCP server has to start, default 15); KEEN_DEBUG=1 (a traceback instead of 'internal error').",
)
pins_cmd.register(mcp_app)
mcp_config_cmd.register(mcp_app)
watch_cmd.register(mcp_app)
app.add_typer(mcp_app, name="mcp")
app.add_typer(sessions_app, name="sessions")
app.add_typer(skills_app, name="skills")
app.add_typer(tools_app, name="tools")
prompt_cmd.register(app)
demo_cmd.register(app)
serve_cmd.register(app)
chat_cmd.register(app)


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


def main() -> None:
    """Console-script entry point: no traceback escapes unless KEEN_DEBUG=1."""
    try:
        app(prog_name="keen")  # also under `python -m keen`
    except SystemExit:
        raise
    except Exception as exc:
        if debug_enabled():
            raise
        err.print(f"[bold red]internal error:[/] {type(exc).__name__}: {exc}", highlight=False)
        err.print("rerun with KEEN_DEBUG=1 for a traceback, and please report it")
        sys.exit(EXIT_KEEN_ERROR)
