"""``keen serve``: Keen as an MCP server for other hosts (Claude Desktop, Claude Code, Cursor...)."""

from __future__ import annotations

import math
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from keen._redact import redact_url
from keen.cli._common import fail, run

if TYPE_CHECKING:
    from keen.serve import KeenServer

__all__ = ["FETCH_LIMIT", "MAX_SESSIONS", "register"]

# keen.serve's own defaults (keen.serve.store.DEFAULT_FETCH_LIMIT, DEFAULT_MAX_SESSIONS),
# written here because importing keen.serve loads the HTTP stack every other command does
# without; tests/cli/test_config_mistakes.py holds them equal.
FETCH_LIMIT = 60
MAX_SESSIONS = 100


def serve(
    transport: str = typer.Option("stdio", "--transport", help="stdio (a host launches keen) or http."),
    host: str = typer.Option(
        "127.0.0.1", "--host", help="HTTP bind address; non-loopback needs KEEN_SERVE_TOKEN."
    ),
    port: int = typer.Option(8765, "--port", help="HTTP port."),
    mode: str = typer.Option(
        "search", "--mode", help="search (3 tools: search, describe, call) or extension (tool_descriptions)."
    ),
    store: str = typer.Option(
        "memory", "--store", help="memory, or redis://host:port/db to share state across replicas."
    ),
    allow_host: list[str] = typer.Option(
        [], "--allow-host", help="Extra Host header value to accept (repeatable)."
    ),
    allow_origin: list[str] = typer.Option([], "--allow-origin", help="Extra Origin to accept (repeatable)."),
    audit_log: Path | None = typer.Option(
        None, "--audit-log", help="JSON lines, one per call (default $KEEN_HOME/logs/serve-audit.jsonl)."
    ),
    config: Path | None = typer.Option(
        None, "--config", help="configs.json (default $KEEN_HOME/mcp/configs.json)."
    ),
    auth_ttl: float = typer.Option(
        3600.0,
        "--auth-ttl",
        help="Seconds a fetched description authorizes its tool in the stateless era (a session's "
        "or stdio connection's authorizations last as long as it).",
    ),
    session_ttl: float = typer.Option(1800.0, "--session-ttl", help="Seconds an idle session lives."),
    fetch_limit: int = typer.Option(
        FETCH_LIMIT,
        "--fetch-limit",
        help="Description fetches per caller (bearer token, or address) per minute.",
    ),
    max_sessions: int = typer.Option(
        MAX_SESSIONS, "--max-sessions", help="Open HTTP sessions per caller (bearer token, or address)."
    ),
    notify_interval: float = typer.Option(
        0.5,
        "--notify-interval",
        help="Seconds that coalesce upstream tool changes into one list_changed notice to hosts.",
    ),
    pins_poll: float = typer.Option(
        1.0,
        "--pins-poll",
        help="Seconds between two looks at the pin files (extension mode), so a `keen mcp trust` "
        "run elsewhere reaches the hosts as a change notice.",
    ),
    ready_wait: float = typer.Option(
        15.0,
        "--ready-wait",
        help="Seconds the first request waits for upstream servers to connect (later ones are "
        "named as still connecting in search results).",
    ),
) -> None:
    """Serve the configured MCP servers to any MCP host with progressive disclosure."""
    from keen import paths
    from keen.mcp.manager import Manager
    from keen.serve import (
        HttpSecurity,
        KeenServer,
        RedisStore,
        open_store,
        serve_http,
        serve_stdio,
        tokens_from_env,
    )
    from keen.trust import PinGuard, PinStore

    if transport not in ("stdio", "http"):
        fail(f"unknown --transport {transport!r}; use stdio or http")
    if mode not in ("search", "extension"):
        fail(f"unknown --mode {mode!r}; use search or extension")
    if config is not None and not config.exists():
        # A missing configs.json is "no servers yet"; a path given on purpose that is not
        # there is a typo, and a host would be served no tool without a word.
        fail(
            f"--config {config}: no such file; fix the path, or leave --config out for $KEEN_HOME/mcp/configs.json"
        )
    try:
        state = open_store(store)
        security = HttpSecurity(
            host=host, tokens=tokens_from_env(), allowed_hosts=allow_host, allowed_origins=allow_origin
        )
    except ValueError as exc:
        fail(str(exc))
    if not 0 <= port <= 65535:
        # Past 65535 the listener's OverflowError was an internal error.
        fail(f"--port {port} is no TCP port; use 1-65535 (0: any free port)")
    seconds = {
        "--auth-ttl": (auth_ttl, "3600 (the default) keeps a fetched description's authorization an hour"),
        "--session-ttl": (session_ttl, "1800 (the default) ends an idle session after 30 minutes"),
        "--notify-interval": (notify_interval, "0.5 (the default) waits half a second for a burst to end"),
        "--pins-poll": (pins_poll, "1 looks at the pin files once a second (the default)"),
        "--ready-wait": (ready_wait, "15 (the default) waits up to 15 s; 0 waits for none"),
    }
    for option, (value, example) in seconds.items():
        # One check for every time: "nan" passes every comparison, and "inf" never ends a wait.
        least = 0.0 if option == "--ready-wait" else None
        if not _seconds_ok(value, least):
            what = "a number of seconds >= 0" if least is not None else "a positive number of seconds"
            fail(f"{option} must be {what}, got {value!r}; {example}")
    counts = {
        "--fetch-limit": (
            fetch_limit,
            f"{FETCH_LIMIT} (the default) lets one caller read {FETCH_LIMIT} descriptions a minute",
        ),
        "--max-sessions": (
            max_sessions,
            f"{MAX_SESSIONS} (the default) lets one caller hold {MAX_SESSIONS} open sessions",
        ),
    }
    for option, (count, example) in counts.items():
        if count < 1:
            fail(f"{option} must be a whole number >= 1, got {count}; {example}")

    # Failures come back as words and fail() runs outside the event loop: typer.Exit raised
    # inside run()'s task group reached the user as "internal error: ExceptionGroup".
    async def main() -> str | None:
        if isinstance(state, RedisStore):
            try:
                await state.ping()
            except Exception as exc:
                await state.aclose()
                return (
                    f"cannot reach the --store Redis ({type(exc).__name__}); start it, or use --store memory"
                )
        # Built only now that the store answers: KeenServer opens the audit log (after loading
        # the config, raising ConfigError for an unusable file), and a start that fails
        # before serving must leave no session.start in it.
        try:
            # The pins' folder found once: a store without a root reads KEEN_HOME at every
            # call's look at the pins (os.environ's Python layers, a missing variable's
            # KeyError: 8,000 to 24,000 instructions a call), and a server's KEEN_HOME is
            # the one it started with.
            keen = KeenServer(
                Manager(config, trust=PinGuard(PinStore(paths.pins_dir()))),
                mode=mode,  # type: ignore[arg-type]
                store=state,
                audit_path=audit_log,
                auth_ttl=auth_ttl,
                session_ttl=session_ttl,
                fetch_limit=fetch_limit,
                max_sessions=max_sessions,
                notify_interval=notify_interval,
                ready_wait=ready_wait,
                pins_poll=pins_poll,
            )
        except BaseException:
            await state.aclose()
            raise
        try:
            if transport == "stdio":
                await serve_stdio(keen)
            else:
                await serve_http(keen, security, port, on_ready=partial(_say_ready, keen, store))
        except OSError as exc:
            # An errno-less one is worded already (keen.serve.run's listen failure).
            hint = "" if exc.errno is None else "; is the port free and the store reachable?"
            return f"cannot serve: {exc}{hint}"
        return None

    problem = run(main)
    if problem is not None:
        fail(problem)


def _say_ready(keen: KeenServer, store: str, url: str) -> None:
    """The start-up line on stderr (stdout stays free): where it listens and what it serves."""
    servers = len(keen.manager.servers())
    shown = "memory" if store in ("", "memory") else redact_url(store)
    typer.echo(
        f"keen serve: listening on {url} ({keen.mode} mode, store {shown}, "
        f"{servers} upstream server{'' if servers == 1 else 's'}); Ctrl-C stops it",
        err=True,
    )


def register(app: typer.Typer) -> None:
    app.command("serve")(serve)


def _seconds_ok(value: float, least: float | None) -> bool:
    """Whether ``value`` is a finite number of seconds above 0 (at least ``least`` when given)."""
    if not math.isfinite(value):
        return False
    return value >= least if least is not None else value > 0
