"""``keen skills``: list, enable, disable and show skills.

Every command reads ``$KEEN_HOME/skills`` at call time (``keen.paths``). A ``KeenError``
becomes its message on stderr and exit code 2 (the CLI's one boundary,
:class:`~keen.cli._common.KeenGroup`), as does an unknown skill name. Broken skills are
reported as warnings on stderr, never on stdout, so ``list --json`` stays parseable.
"""

from __future__ import annotations

from typing import Annotated

import typer

from keen import paths
from keen.cli._common import typer_app
from keen.errors import SkillError

__all__ = ["app"]

app = typer_app("List, enable, disable and show skills (user-written and generated mcp:<server> skills).")

NameArg = Annotated[str, typer.Argument(help="Skill name, e.g. mcp:github (see `keen skills list`).")]


@app.command("list")
def list_skills(
    as_json: Annotated[bool, typer.Option("--json", help="Print a JSON list instead of a table.")] = False,
) -> None:
    """List skills with their enabled state, whether Keen manages them, and their directory."""
    # The work is keen.cli._skills', which also runs a plain `keen skills list` without typer.
    from keen.cli._skills import list_skills as show

    show(as_json=as_json)


def _set_enabled(name: str, value: bool) -> None:
    from keen.cli._skills import check_known
    from keen.skills import SkillsConfig, discover

    path = paths.skills_config_path()
    try:
        # Under the skills-dir lock: a running `keen chat` may be saving it too.
        with SkillsConfig.edit(path) as config:
            found = discover(path.parent, config=config)
            check_known(found, name)
            problem = found.problem(name)
            config.set_enabled(name, value)
    except OSError as exc:
        raise SkillError(f"cannot write {path}: {exc.strerror or exc}; check its permissions") from exc
    if problem is not None:
        typer.echo(f"warning: {problem}; it stays out of the catalog until SKILL.md is fixed", err=True)
    typer.echo(f"{'Enabled' if value else 'Disabled'} skill {name}.")


@app.command()
def enable(name: NameArg) -> None:
    """Enable a skill: it shows in the prompt's skills catalog again."""
    _set_enabled(name, True)


@app.command()
def disable(name: NameArg) -> None:
    """Disable a skill: hidden from the catalog (an MCP server's tools stay callable while connected)."""
    _set_enabled(name, False)


@app.command()
def show(
    name: NameArg,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print name, description, enabled, managed, path and text as JSON.")
    ] = False,
) -> None:
    """Print a skill's SKILL.md as it is on disk (frontmatter included), control characters escaped."""
    # keen.cli._skills' work, which also runs a plain `keen skills show NAME` without typer.
    from keen.cli._skills import show_skill

    show_skill(name, as_json=as_json)
