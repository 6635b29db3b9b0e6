"""``keen skills list`` and ``keen skills show``'s work, without typer: the skills on disk as
a table or JSON, and one skill's SKILL.md.

:mod:`keen.cli.skills_cmd` declares the commands' options for typer and calls
:func:`list_skills` and :func:`show_skill`. :func:`run_alone` runs the same functions for
the command lines ``keen skills list [--json]`` and ``keen skills show NAME [--json]``
before typer is imported: the commands only read ``$KEEN_HOME/skills``, and importing typer
and building its click commands was about a third of their start (``bench/cli_start.py``).
Anything else (``--help``, ``-v``, a repeated or unknown option, a name that starts with
``-``, shell completion) returns False and goes through typer, so help, errors and
completion stay typer's, byte for byte. The error boundary is the CLI's one,
:func:`keen.cli._console.guarded`, as for ``keen prompt`` (:mod:`keen.cli._prompt`).
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Sequence
from typing import IO, TYPE_CHECKING, Any

from keen import paths
from keen._terminal import safe_json, terminal_text
from keen.cli._console import fail, guarded_reader, print_json

if TYPE_CHECKING:
    from keen.skills import Discovery

__all__ = ["check_known", "list_skills", "plain_options", "run_alone", "show_skill"]

# click.echo's pattern: what it strips from text written to a stream that is not a terminal.
_ANSI = re.compile(r"\033\[[;?0-9]*[a-zA-Z]")


def _echo(text: str, stream: IO[str], *, nl: bool = True) -> None:
    """``text`` (and a newline unless ``nl`` is False) on ``stream``, flushed, as
    ``typer.echo`` writes them: ANSI style codes removed when the stream is not a terminal
    (click's ``echo``), so both ways of running a command print the same bytes."""
    if nl:
        text += "\n"
    if not text:
        stream.flush()
        return
    if not stream.isatty():
        text = _ANSI.sub("", text)
    stream.write(text)
    stream.flush()


def _discover() -> Discovery:
    from keen.skills.cache import DiscoveryCache

    # What discovery reads, from keen.skills.cache's store for each skill whose files are
    # as they were stored (the same result; PyYAML then stays unloaded), else read again.
    return DiscoveryCache(paths.skills_dir()).discover()


def check_known(found: Discovery, name: str) -> None:
    """Exit 2 unless ``name`` is a discovered skill or a broken one (which still exists on
    disk), naming the closest skill when there is one."""
    if found.get(name) is None and found.problem(name) is None:
        meant = found.closest(name)
        hint = f"did you mean {meant}?" if meant else "run `keen skills list` to see the skills"
        fail(f"no skill named {name!r} in {paths.skills_dir()}; {hint}")


def list_skills(*, as_json: bool) -> None:
    """Print every skill of ``$KEEN_HOME/skills`` with its enabled state, whether Keen
    manages it and its directory: a table for a person, or (``as_json``) a JSON list of
    ``{name, description, enabled, path, managed}``. Broken skills are warnings on stderr,
    never on stdout, so the JSON stays parseable.

    Raises:
        SkillError: the skills config cannot be read (the caller's error boundary words it).
    """
    found = _discover()
    for problem in found.problems:
        # The folder's name is the skill's: any text a person or a tool wrote (escaped, as a
        # terminal must never act on it).
        _echo(f"warning: {problem} ({terminal_text(str(problem.path))})", sys.stderr)
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
        # DEL, C1 controls and bidi marks of a hand-written SKILL.md escaped as well.
        _echo(safe_json(rows), sys.stdout)
        return
    from rich.console import Console

    from keen._tables import Col, Listing
    from keen.cli._terminal import cell

    # The title and the message name a folder, printed as named: no markup, no emoji codes
    # (nor rich's table of emoji codes to load, 4% of this command's instructions).
    console = Console(highlight=False, markup=False, emoji=False)
    if not found.skills:
        console.print(f"No skills in {paths.skills_dir()}.")
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


def show_skill(name: str, *, as_json: bool) -> None:
    """Print skill ``name``'s SKILL.md as it is on disk (frontmatter included), control
    characters escaped, or (``as_json``) ``{name, description, enabled, managed, path,
    text}``; a broken skill's file too, after a warning saying what is wrong with it.
    Exits 2 for a name that is no skill on disk, or a file that cannot be read."""
    from keen.cli._terminal import terminal_text
    from keen.skills import SKILL_FILE

    found = _discover()
    check_known(found, name)
    skill = found.get(name)
    problem = None
    if skill is not None:
        text = skill.read_text()
    else:
        problem = found.problem(name)
        if problem is None:  # unreachable after check_known; keeps the type checker exact
            fail(f"no skill named {name!r}")
        _echo(f"warning: {problem}", sys.stderr)
        try:
            text = (problem.path / SKILL_FILE).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            fail(f"cannot show skill {name!r}: {problem.message}")
    if as_json:
        path = skill.path if skill is not None else problem.path if problem is not None else None
        print_json(
            {
                "name": name,
                "description": skill.description if skill is not None else None,
                "enabled": skill.enabled if skill is not None else None,
                "managed": skill.managed if skill is not None else None,
                "path": str(path) if path is not None else None,
                "text": text,
            }
        )
        return
    text = terminal_text(text)
    _echo(text, sys.stdout, nl=not text.endswith("\n"))


def plain_options(args: Sequence[str]) -> dict[str, Any] | None:
    """What ``keen ARGS...`` (``args`` without the program name) asks when the command line
    is ``skills list`` with at most one ``--json``, or ``skills show NAME`` with at most one
    ``--json`` before or after a name that does not start with ``-``: ``{"command": "list",
    "as_json": ...}`` or ``{"command": "show", "name": ..., "as_json": ...}``; else None
    (typer parses it)."""
    if len(args) < 2 or args[0] != "skills" or args[1] not in ("list", "show"):
        return None
    rest = list(args[2:])
    as_json = "--json" in rest
    if as_json:
        rest.remove("--json")
    if args[1] == "list":
        return None if rest else {"command": "list", "as_json": as_json}
    if len(rest) != 1 or rest[0].startswith("-"):
        return None
    return {"command": "show", "name": rest[0], "as_json": as_json}


def run_alone(args: Sequence[str]) -> bool:
    """Run ``keen ARGS`` here when it is a plain ``keen skills list`` or ``keen skills show``
    (module doc) and return True; else False, having done nothing. Exits as typer would: 2
    on a Keen error or an unknown skill (the message on stderr), 130 on Ctrl-C, 1 on a
    closed stdout."""
    options = plain_options(args)
    if options is None or "_KEEN_COMPLETE" in os.environ:
        return False
    if options["command"] == "list":
        guarded_reader(lambda: list_skills(as_json=options["as_json"]))
    else:
        guarded_reader(lambda: show_skill(options["name"], as_json=options["as_json"]))
    return True
