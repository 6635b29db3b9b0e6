"""``keen skills list``'s work, without typer: the skills on disk as a table, or as JSON.

:mod:`keen.cli.skills_cmd` declares the command's options for typer and calls
:func:`list_skills`. :func:`run_alone` runs the same :func:`list_skills` for the command
line ``keen skills list`` or ``keen skills list --json`` before typer is imported: the
command only reads ``$KEEN_HOME/skills``, and importing typer and building its click
commands was about a third of its start (``bench/cli_start.py``). Anything else (``--help``,
``-v``, a repeated or unknown option, shell completion) returns False and goes through
typer, so help, errors and completion stay typer's, byte for byte. The error boundary is
the CLI's one, :func:`keen.cli._console.guarded`, as for ``keen prompt``
(:mod:`keen.cli._prompt`).
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Sequence
from typing import IO

from keen import paths
from keen._gcfreeze import pause_collection
from keen._log import before_first_record
from keen.cli._console import guarded, setup_logging

__all__ = ["list_skills", "plain_json", "run_alone"]

# click.echo's pattern: what it strips from text written to a stream that is not a terminal.
_ANSI = re.compile(r"\033\[[;?0-9]*[a-zA-Z]")


def _echo(text: str, stream: IO[str]) -> None:
    """``text`` and a newline on ``stream``, flushed, as ``typer.echo`` writes them: ANSI
    style codes removed when the stream is not a terminal (click's ``echo``), so both ways
    of running the command print the same bytes."""
    if not stream.isatty():
        text = _ANSI.sub("", text)
    stream.write(text + "\n")
    stream.flush()


def list_skills(*, as_json: bool) -> None:
    """Print every skill of ``$KEEN_HOME/skills`` with its enabled state, whether Keen
    manages it and its directory: a table for a person, or (``as_json``) a JSON list of
    ``{name, description, enabled, path, managed}``. Broken skills are warnings on stderr,
    never on stdout, so the JSON stays parseable.

    Raises:
        SkillError: the skills config cannot be read (the caller's error boundary words it).
    """
    from keen.skills.cache import DiscoveryCache

    # What discovery reads, from keen.skills.cache's store for each skill whose files are
    # as they were stored (the same result; PyYAML then stays unloaded), else read again.
    found = DiscoveryCache(paths.skills_dir()).discover()
    for problem in found.problems:
        _echo(f"warning: {problem} ({problem.path})", sys.stderr)
    if as_json:
        rows = [
            {
                "name": s.name,
                "description": s.description,
                "enabled": s.enabled,
                "path": str(s.path),
                "managed": s.managed,
            }
            for s in found.skills
        ]
        _echo(json.dumps(rows, indent=2, ensure_ascii=False), sys.stdout)
        return
    from rich.console import Console

    from keen._tables import Col, Listing
    from keen.cli._terminal import cell

    console = Console(highlight=False)
    if not found.skills:
        console.print(f"No skills in {paths.skills_dir()}.", markup=False)
        return
    # Each path is the skills folder (the title) and the name, unless a skill lives elsewhere:
    # shown when there is room, as is everything in --json.
    table = Listing(
        [
            Col("Name", "key"),
            Col("Enabled"),
            Col("Managed", drop=1),
            Col("Description", "text", min_width=30),
            Col("Path", drop=2),
        ],
        title=f"Skills in {paths.skills_dir()}",
        whole="keen skills list --json",
    )
    for s in found.skills:
        # Text cells: "[draft]" or ":office:" in a description print literally, controls escaped.
        table.add_row(
            cell(s.name),
            "yes" if s.enabled else "no",
            "yes" if s.managed else "no",
            cell(s.description),
            cell(str(s.path)),
        )
    console.print(table)


def plain_json(args: Sequence[str]) -> bool | None:
    """Whether ``keen ARGS...`` (``args`` without the program name) asks for JSON when the
    command line is ``skills list`` with at most one ``--json``; else None (typer parses it)."""
    if list(args[:2]) != ["skills", "list"]:
        return None
    rest = list(args[2:])
    if not rest:
        return False
    if rest == ["--json"]:
        return True
    return None


def run_alone(args: Sequence[str]) -> bool:
    """Run ``keen ARGS`` here when it is a plain ``keen skills list`` (module doc) and
    return True; else False, having done nothing. Exits as typer would: 2 on a Keen error
    (its message on stderr), 130 on Ctrl-C, 1 on a closed stdout."""
    as_json = plain_json(args)
    if as_json is None or "_KEEN_COMPLETE" in os.environ:
        return False
    # What this process makes (modules, classes, the listing) lives until it exits: the
    # collector's walks over it would free next to nothing (keen._gcfreeze; about 2 % of the
    # command's instructions). Never resumed: the process ends with the command.
    pause_collection()
    # Logging is set up as the root command sets it up, at the first record a Keen module
    # logs (keen._log): a listing read without trouble logs none, so logging is not imported.
    if "logging" in sys.modules:
        setup_logging(False)
    else:
        before_first_record(lambda: setup_logging(False))
    guarded(lambda: list_skills(as_json=as_json), set_up_logging=False)
    return True
