"""Slash activation: ``/<skill> args`` becomes an ``[Activate skill: <name>]`` message.

Slash activation is handled before the LLM
turn; Keen reads SKILL.md, applies argument substitution and injects the processed
body as a conversation message, which stays in the retained history. (When the model
reads SKILL.md itself, nothing is substituted; that path does not come through here.)

Substitution, done in a single left-to-right pass so text coming from the arguments is
never substituted again:

* ``$ARGUMENTS``: the whole argument string, as typed (outer whitespace stripped).
* ``$1`` .. ``$N``: the arguments split like a POSIX shell (``shlex.split``), so
  ``"two words"`` is one argument. A missing argument becomes ``""``. All digits after
  ``$`` form the number: ``$10`` is the tenth argument, never ``$1`` followed by ``0``.
  ``$0`` is not a placeholder and stays as written.
* ``${KEEN_SKILL_DIR}``: the skill's absolute directory (the path the catalog shows).

If the arguments are non-empty but the body uses neither ``$ARGUMENTS`` nor any ``$N``,
a final ``ARGUMENTS: <arguments>`` line is appended so the user's input is not lost.
There is no escape for a literal ``$1`` in a body; write it another way (e.g. ``$ 1``
or ``${1}`` for shell code).
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

from keen.errors import Remedy, SkillError
from keen.skills.config import SkillsConfig
from keen.skills.discover import load_skill

__all__ = ["activate", "activation_message", "split_arguments", "substitute"]

# Compiled at the first activation (re's own cache), not with keen.skills at every start.
_PLACEHOLDER = r"\$\{KEEN_SKILL_DIR\}|\$ARGUMENTS(?![A-Za-z0-9_])|\$([1-9][0-9]*)"


def split_arguments(arguments: str) -> list[str]:
    """Split ``arguments`` like a POSIX shell. Raises ``SkillError`` on an unbalanced quote."""
    try:
        return shlex.split(arguments)
    except ValueError as exc:
        raise SkillError(
            f"cannot split the skill arguments ({exc}): close the quote, or escape it with a backslash"
        ) from exc


def substitute(body: str, arguments: str, skill_dir: Path) -> str:
    """Apply the substitutions of this module's docstring to ``body``.

    ``arguments`` is the raw text after the skill name; raises ``SkillError`` when it
    cannot be split (unbalanced quote).
    """
    arguments = arguments.strip()
    positional = split_arguments(arguments)
    used_arguments = False

    def replace(match: re.Match[str]) -> str:
        nonlocal used_arguments
        text = match.group(0)
        if text == "${KEEN_SKILL_DIR}":
            return str(skill_dir)
        used_arguments = True
        if text == "$ARGUMENTS":
            return arguments
        index = int(match.group(1))
        return positional[index - 1] if index <= len(positional) else ""

    result = re.sub(_PLACEHOLDER, replace, body)
    if arguments and not used_arguments:
        result = f"{result.rstrip()}\n\nARGUMENTS: {arguments}"
    return result


def activation_message(name: str, body: str) -> str:
    """The conversation message for an activated skill: ``[Activate skill: <name>]``, blank line, body."""
    return f"[Activate skill: {name}]\n\n{body.strip()}"


def activate(
    name: str, arguments: str = "", *, skills_root: Path | None = None, config: SkillsConfig | None = None
) -> str:
    """Read skill ``name`` now and build its activation message (a ``/name args`` command).

    Args:
        name: the skill's name.
        arguments: the text after the command; substituted for ``$ARGUMENTS``, ``$1``...
        skills_root: the skills directory; default ``paths.skills_dir()``.
        config: the enabled flags; default the directory's ``config.json``.

    Returns:
        ``[Activate skill: <name>]`` followed by the SKILL.md body with arguments substituted.

    Raises:
        SkillError: the skill is unknown (remedy ``LIST_SKILLS``), disabled (remedy
            ``ENABLE_SKILL``), broken or unreadable, or the arguments have an unbalanced quote.
    """
    skill = load_skill(name, skills_root, config=config)
    if not skill.enabled:
        raise SkillError(f"skill {name!r} is disabled", name=name, remedy=Remedy.ENABLE_SKILL)
    return activation_message(skill.name, substitute(skill.read_body(), arguments, skill.path))
