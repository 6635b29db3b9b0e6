"""Find skills on disk: ``$KEEN_HOME/skills/<name>/SKILL.md`` (docs/architecture.md "Files on disk").

User-written and generated skills look the same here; a generated MCP skill is an
ordinary skill whose directory also holds ``.keen-generated-mcp.json`` with
``"managed_by": "keen-mcp"`` (``keen.skills`` knows nothing of MCP: docs/architecture.md "Package map").

Rules, in the order they are applied to each entry of the skills directory:

* Entries whose name starts with ``.`` are skipped silently: they are build and
  versioned directories of the atomic swap (docs/architecture.md "Generated skills") or editor
  litter, never skills. Plain files are skipped too, and ``config.json`` (the skills
  config) even when it is a symlink to a file kept elsewhere.
* A skill directory may be a symlink (the generator swaps a link to a versioned
  directory); it is followed. ``Skill.path`` keeps the *link* path, made absolute but
  not resolved, because the versioned target disappears at the next swap while the
  link path stays valid.
* ``SKILL.md`` starts with YAML frontmatter fenced by ``---`` lines, parsed with
  PyYAML's safe loader (libyaml's ``CSafeLoader`` when PyYAML has it). Only the frontmatter is read at discovery; the body is read on
  demand (:meth:`Skill.read_body`).
* ``description`` is required (a non-empty string; whitespace is collapsed so it fits
  on one catalog line). ``name`` is optional and defaults to the directory name; when
  present it must equal the directory name. The Agent Skills format requires that
  match, and it keeps names unique (one directory, one name) and lets a name be
  looked up without scanning (:func:`load_skill`).
* Names contain only letters, digits and ``_ . : -`` (at most 128 characters), so a
  name is a single token after ``/`` and never breaks a catalog line.

Anything broken (no SKILL.md, no or unclosed frontmatter, bad YAML, missing
description, name mismatch, unreadable or non-UTF-8 file, dangling symlink) becomes a
:class:`SkillProblem` and the scan goes on: one bad skill never hides the others.
"""

from __future__ import annotations

import functools
import json
import os
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from keen import paths
from keen._fs import BOM
from keen._log import LazyLogger
from keen._record import FrozenRecord
from keen.errors import Remedy, SkillError
from keen.skills.config import SkillsConfig
from keen.skills.lock import CONFIG_FILE

__all__ = [
    "MANAGED_BY",
    "MARKER_FILE",
    "SKILL_FILE",
    "Discovery",
    "Parsed",
    "Skill",
    "SkillProblem",
    "discover",
    "frontmatter_at",
    "load_dir",
    "load_skill",
    "read_marker",
    "safe_loader",
    "scan",
    "split_frontmatter",
    "valid_skill_name",
]

# logging is imported only when something is logged (keen._log).
logger = LazyLogger(__name__)

SKILL_FILE = "SKILL.md"
MARKER_FILE = ".keen-generated-mcp.json"
MANAGED_BY = "keen-mcp"

# Compiled at its first use (re's own cache): a start that takes every skill from the store
# checks no name.
_NAME_RE = r"[\w.:-]{1,128}"
# Frontmatter is a few lines; a file that opens a fence and never closes it within
# this many bytes is broken, and reading further would only waste time.
_MAX_FRONTMATTER_BYTES = 64 * 1024
# One read of a skill's files (frontmatter_at, read_marker with a dir_fd): a generated
# skill's frontmatter and marker are well under it.
_READ_BYTES = 8192


class Skill(FrozenRecord):
    """One usable skill (a frozen dataclass, :mod:`keen._record`).

    ``name``: the skill's name (= its directory name). ``description``: one line.
    ``path``: absolute skill directory (symlinks not resolved). ``skill_md``:
    ``path / "SKILL.md"``. ``enabled``: from the skills config (absent = enabled).
    ``managed``: the directory holds the keen-mcp marker file (generated MCP skill).
    ``paths``: the optional frontmatter ``paths``, glob patterns (relative to the workspace)
    of the files the skill is about, given as one string or a list; empty when absent.
    ``tool_count``: the ``tool_count`` its marker file records (a generated skill: its
    server's tools; 0 without one), read with the marker at discovery; ``None`` for a skill
    made without discovery, whose marker was not read.
    """

    name: str
    description: str
    path: Path
    skill_md: Path
    # The defaults in the body too: what a type checker reads (dataclass_transform), as
    # __init__ takes them.
    enabled: bool = True
    managed: bool = False
    paths: tuple[str, ...] = ()
    tool_count: int | None = None

    _fields = ("name", "description", "path", "skill_md", "enabled", "managed", "paths", "tool_count")
    __match_args__ = _fields

    def __init__(
        self,
        name: str,
        description: str,
        path: Path,
        skill_md: Path,
        enabled: bool = True,
        managed: bool = False,
        paths: tuple[str, ...] = (),
        tool_count: int | None = None,
    ) -> None:
        self._set(
            name=name,
            description=description,
            path=path,
            skill_md=skill_md,
            enabled=enabled,
            managed=managed,
            paths=paths,
            tool_count=tool_count,
        )

    def read_text(self) -> str:
        """The whole SKILL.md, read now. Raises ``SkillError`` if it cannot be read."""
        try:
            return self.skill_md.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise SkillError(
                f"skill {self.name!r}: cannot read {self.skill_md}: {exc}; check the file", name=self.name
            ) from exc

    def read_body(self) -> str:
        """SKILL.md without its frontmatter, read now (it may have been regenerated since discovery)."""
        _, body = split_frontmatter(self.read_text())
        return body


class SkillProblem(FrozenRecord):
    """A skill directory that could not be loaded: ``name`` (directory name), ``path``,
    ``message`` (a frozen dataclass, :mod:`keen._record`)."""

    name: str
    path: Path
    message: str

    _fields = ("name", "path", "message")
    __match_args__ = _fields

    def __init__(self, name: str, path: Path, message: str) -> None:
        self._set(name=name, path=path, message=message)

    def __str__(self) -> str:
        return f"skill {self.name!r} skipped: {self.message}"


class Discovery(FrozenRecord):
    """Result of :func:`discover`: usable ``skills`` and skipped ``problems``, both sorted by
    name (a frozen dataclass, :mod:`keen._record`; each list new when not given)."""

    skills: list[Skill]
    problems: list[SkillProblem]

    _fields = ("skills", "problems")
    _new_lists = ("skills", "problems")
    __match_args__ = _fields

    def __init__(self, skills: list[Skill] | None = None, problems: list[SkillProblem] | None = None) -> None:
        self._set(skills=[] if skills is None else skills, problems=[] if problems is None else problems)

    def get(self, name: str) -> Skill | None:
        return next((s for s in self.skills if s.name == name), None)

    def problem(self, name: str) -> SkillProblem | None:
        return next((p for p in self.problems if p.name == name), None)

    @property
    def enabled(self) -> list[Skill]:
        return [s for s in self.skills if s.enabled]

    def closest(self, name: str) -> str | None:
        """The skill a mistyped ``name`` most likely meant: ``mcp:<name>`` when ``name`` is a
        server's name, else the nearest spelling (difflib), else ``None``."""
        names = [s.name for s in self.skills] + [p.name for p in self.problems]
        if f"mcp:{name}" in names:
            return f"mcp:{name}"
        import difflib  # only for a name not found

        close = difflib.get_close_matches(name, names, n=1, cutoff=0.75)
        return close[0] if close else None


def valid_skill_name(name: str) -> bool:
    """True when ``name`` is a legal skill name (letters, digits, ``_ . : -``; not starting with ``.``)."""
    return bool(re.fullmatch(_NAME_RE, name)) and not name.startswith(".")


def split_frontmatter(text: str) -> tuple[str | None, str]:
    """Split SKILL.md text into ``(frontmatter_yaml, body)``.

    The frontmatter is the text between a first line ``---`` and the next line
    ``---``; ``None`` when the text does not start with a fence or never closes it
    (then the body is the whole text). Leading blank lines of the body are dropped.
    """
    text = text.removeprefix(BOM)
    lines = text.splitlines(keepends=True)
    if not lines or lines[0].strip() != "---":
        return None, text
    for i in range(1, len(lines)):
        if lines[i].strip() == "---":
            return "".join(lines[1:i]), "".join(lines[i + 1 :]).lstrip("\r\n")
    return None, text


def _read_frontmatter(skill_md: Path) -> str:
    """Read only the frontmatter block of ``skill_md``; raise ``ValueError`` saying what is wrong.

    Binary line reads, decoded one line at a time: a text-mode read would decode a
    whole buffer, body included, and a large body would be read for nothing.
    """
    with skill_md.open("rb") as handle:
        first = handle.readline(_MAX_FRONTMATTER_BYTES).decode("utf-8").removeprefix(BOM)
        if first.strip() != "---":
            raise ValueError(
                f"{SKILL_FILE} must start with YAML frontmatter: a '---' line, name/description, '---'"
            )
        chunks: list[str] = []
        size = 0
        while size <= _MAX_FRONTMATTER_BYTES:
            raw = handle.readline(_MAX_FRONTMATTER_BYTES)
            if not raw:
                break
            line = raw.decode("utf-8")
            if line.strip() == "---":
                return "".join(chunks)
            chunks.append(line)
            size += len(raw)
    raise ValueError("frontmatter is not closed: add a '---' line after the description")


def frontmatter_at(name: str, dir_fd: int) -> bytes | None:
    """The frontmatter block of ``<name>/SKILL.md`` relative to the open directory
    ``dir_fd``, as bytes (the lines between the opening ``---`` line and the next one, as
    :func:`_read_frontmatter` returns them, encoded), from one read of the file's first
    :data:`_READ_BYTES`; None when it is not found there (the file is missing or unreadable,
    has no frontmatter, or its frontmatter is longer): the caller reads it the usual way.

    Lines are split at ``\n`` and a fence is a line that is ``---`` once its ASCII
    whitespace is stripped: a stricter rule than :func:`_read_frontmatter`'s (which strips
    any Unicode whitespace), so what it returns can only be what that function reads when
    it equals a text that function read before (``keen.skills.cache`` compares digests:
    such a text holds no line that either rule takes for a fence).
    """
    try:
        fd = os.open(f"{name}/{SKILL_FILE}", os.O_RDONLY, dir_fd=dir_fd)
    except OSError:
        return None
    try:
        head = os.read(fd, _READ_BYTES)
    except OSError:
        return None
    finally:
        os.close(fd)
    head = head.removeprefix(b"\xef\xbb\xbf")
    first = head.find(b"\n")
    if first < 0 or head[:first].strip() != b"---":
        return None
    start = at = first + 1
    while (end := head.find(b"\n", at)) >= 0:
        if head[at:end].strip() == b"---":
            return head[start:at]
        at = end + 1
    return None  # not closed within the read (or the last line has no newline): read it in full


@functools.cache
def safe_loader() -> Any:
    """libyaml's loader when PyYAML was built with it: the same safe subset of YAML, about ten
    times faster than the pure-Python one (31 -> 3 ms for 292 skills' frontmatter). PyYAML is
    imported here, at the first file read (about 15 ms): a scan that takes every skill from
    :mod:`keen.skills.cache`'s store never imports it."""
    import yaml

    return getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _parse_frontmatter(raw: str, dir_name: str) -> tuple[str, str, tuple[str, ...]]:
    """Validate parsed frontmatter; return ``(name, description, paths)`` or raise ``ValueError``."""
    loader = safe_loader()
    import yaml

    try:
        data: Any = yaml.load(raw, Loader=loader)
    except yaml.YAMLError as exc:
        where = ""
        mark = getattr(exc, "problem_mark", None)
        if mark is not None:
            # +2: the fence line, and YAML marks are 0-based.
            where = f" at line {mark.line + 2}"
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ValueError(f"invalid YAML in frontmatter{where}: {problem}") from exc
    if not isinstance(data, dict):
        raise ValueError("frontmatter must be a YAML mapping with 'name' and 'description'")
    name: Any = data.get("name", dir_name)
    if not isinstance(name, str):
        # YAML 1.1 reads `name: off` as false and `name: 1.0` as a float.
        raise ValueError(f'frontmatter name must be a string; quote it: name: "{dir_name}"')
    if dir_name not in paths.skill_dir_spellings(name):
        # On Windows a ':' of the name is spelled '_' in the directory name (keen.paths).
        raise ValueError(
            f"frontmatter name {name!r} does not match the directory name {dir_name!r}; make them equal"
        )
    description: Any = data.get("description")
    if description is not None and not isinstance(description, str):
        raise ValueError("frontmatter 'description' must be a string; put it in quotes")
    if not isinstance(description, str) or not description.strip():
        raise ValueError("frontmatter needs a non-empty 'description' string saying when to use the skill")
    return name, " ".join(description.split()), _paths(data.get("paths"))


def _paths(value: Any) -> tuple[str, ...]:
    """The frontmatter's ``paths`` (one string or a list of them); anything else: none."""
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list):
        return ()
    return tuple(str(p).strip() for p in value if isinstance(p, str | int) and str(p).strip())  # pyright: ignore[reportUnknownVariableType, reportUnknownArgumentType]


def _read_at(path: str, dir_fd: int) -> bytes:
    """The whole file at ``path`` relative to the open directory ``dir_fd``: one ``open``
    and as many ``read`` calls as its size takes, without a Python file object."""
    fd = os.open(path, os.O_RDONLY, dir_fd=dir_fd)
    try:
        chunks: list[bytes] = []
        while chunk := os.read(fd, _READ_BYTES):
            chunks.append(chunk)
            if len(chunk) < _READ_BYTES:
                break
        return b"".join(chunks)
    finally:
        os.close(fd)


def read_marker(skill_dir: Path, *, dir_fd: int | None = None) -> tuple[bool, int]:
    """Whether ``skill_dir`` holds the keen-mcp marker file (managed) and the tool count it
    records (0 when it has none).

    ``dir_fd``: ``skill_dir``'s parent, open, when the caller has it (``keen.skills.cache``):
    the marker is then looked up by name relative to it, the same file for less CPU.
    """
    try:
        raw = (
            (skill_dir / MARKER_FILE).read_bytes()
            if dir_fd is None
            else _read_at(f"{skill_dir.name}/{MARKER_FILE}", dir_fd)
        )
        data: Any = json.loads(raw.decode("utf-8"))
    except FileNotFoundError:
        return False, 0
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        # Not managed means the generator will never delete it: the safe reading.
        logger.warning(
            "skill dir %s: unreadable %s (%s); treating it as user-owned", skill_dir, MARKER_FILE, exc
        )
        return False, 0
    if not isinstance(data, dict):
        return False, 0
    try:
        tools = int(data.get("tool_count", 0))  # pyright: ignore[reportUnknownMemberType, reportUnknownArgumentType]
    except (ValueError, TypeError):
        tools = 0
    return data.get("managed_by") == MANAGED_BY, tools  # pyright: ignore[reportUnknownMemberType]


Parsed = tuple[str, str, tuple[str, ...]]
"""What a skill's frontmatter gives: its name, description (one line) and ``paths``."""


def load_dir(
    skill_dir: Path, config: SkillsConfig, *, known: Callable[[str], Parsed | None] | None = None
) -> Skill | SkillProblem:
    """Load one skill directory (``skill_dir`` already absolute): a usable skill (its
    ``enabled`` from ``config``) or the problem that keeps it out.

    ``known``: given the frontmatter text read from ``SKILL.md``, what parsing that same
    text (in the same directory) gave before, or ``None``: ``keen.skills.cache`` passes one
    so that a file whose stat data changed but whose frontmatter did not (a copied skills
    folder, a file saved again unchanged) is not parsed again.
    """

    name = skill_dir.name
    if not valid_skill_name(name):
        return SkillProblem(
            name, skill_dir, "directory name must use only letters, digits and _ . : - (max 128); rename it"
        )
    if skill_dir.is_symlink() and not skill_dir.exists():
        return SkillProblem(name, skill_dir, "symlink points to a missing directory; fix or remove the link")
    if not skill_dir.is_dir():
        return SkillProblem(name, skill_dir, "not a directory")
    skill_md = paths.child(skill_dir, SKILL_FILE)
    try:
        raw = _read_frontmatter(skill_md)
        parsed = known(raw) if known is not None else None
        name, description, patterns = parsed or _parse_frontmatter(raw, name)
    except FileNotFoundError:
        return SkillProblem(
            name, skill_dir, f"no {SKILL_FILE} in the directory; add one or remove the directory"
        )
    except UnicodeDecodeError as exc:
        return SkillProblem(name, skill_dir, f"{SKILL_FILE} is not UTF-8 ({exc.reason}); re-save it as UTF-8")
    except OSError as exc:
        return SkillProblem(name, skill_dir, f"cannot read {SKILL_FILE}: {exc.strerror or exc}")
    except ValueError as exc:
        return SkillProblem(name, skill_dir, str(exc))
    managed, tools = read_marker(skill_dir)
    return Skill(
        name=name,
        description=description,
        path=skill_dir,
        skill_md=skill_md,
        enabled=config.is_enabled(name),
        managed=managed,
        paths=patterns,
        tool_count=tools,
    )


def _root_and_config(skills_root: Path | None, config: SkillsConfig | None) -> tuple[Path, SkillsConfig]:
    root = (skills_root if skills_root is not None else paths.skills_dir()).absolute()
    if config is None:
        config = SkillsConfig.load(root / CONFIG_FILE)
    return root, config


def discover(skills_root: Path | None = None, *, config: SkillsConfig | None = None) -> Discovery:
    """Scan a skills directory for ``<name>/SKILL.md`` skills (Agent Skills format).

    Args:
        skills_root: the directory; default ``paths.skills_dir()``. Missing: an empty result.
        config: the enabled flags; default ``SkillsConfig.load(skills_root / "config.json")``.

    Returns:
        The skills and, separately, the broken ones (``problems``), both sorted by name.
        Broken skills never raise.

    Raises:
        SkillError: the skills config is broken (enabled/disabled would be guesswork), or
            the directory cannot be listed.
    """
    root, config = _root_and_config(skills_root, config)
    return scan(root, config, load_dir)


def scan(
    root: Path,
    config: SkillsConfig,
    load: Callable[[Path, SkillsConfig], Skill | SkillProblem],
    listing: Sequence[str] | None = None,
) -> Discovery:
    """:func:`discover` of the absolute ``root`` with ``config``, loading each skill entry
    with ``load(entry, config)`` (``keen.skills.cache`` passes one that reuses the skills
    whose files did not change). ``listing``: the names of ``root``'s folders and symlinks,
    not starting with ``.``, sorted, when the caller has just listed it (the cache has);
    else ``root`` is listed here. Raises ``SkillError`` when ``root`` cannot be listed."""
    if listing is None:
        try:
            with os.scandir(root) as found:
                listing = sorted(
                    entry.name
                    for entry in found
                    # plain files are skipped; links are followed by load, but config.json
                    # linked to one's dotfiles is the config, no skill to report as broken
                    if not entry.name.startswith(".")
                    and entry.name != CONFIG_FILE
                    and (entry.is_symlink() or entry.is_dir())
                )
        except FileNotFoundError:
            return Discovery()
        except OSError as exc:
            raise SkillError(
                f"cannot list the skills directory {root}: {exc.strerror or exc}; check it"
            ) from exc
    skills: list[Skill] = []
    problems: list[SkillProblem] = []
    names: set[str] = set()
    for entry_name in listing:
        entry = paths.child(root, entry_name)
        loaded = load(entry, config)
        if isinstance(loaded, Skill) and loaded.name in names:
            # Both spellings of one name (mcp:x and its Windows form mcp_x) side by side.
            loaded = SkillProblem(
                loaded.name, entry, f"another directory already holds the skill {loaded.name!r}; remove one"
            )
        if isinstance(loaded, SkillProblem):
            logger.debug("%s", loaded)
            problems.append(loaded)
        else:
            skills.append(loaded)
            names.add(loaded.name)
    return Discovery(skills=skills, problems=problems)


def load_skill(name: str, skills_root: Path | None = None, *, config: SkillsConfig | None = None) -> Skill:
    """Load the one skill called ``name`` without scanning the others.

    Raises ``SkillError`` (with ``name``) when the name is illegal, no such skill
    exists (remedy ``LIST_SKILLS``) or the skill is broken (the problem, and
    what to fix). Disabled skills are returned with ``enabled=False``.
    """
    if not valid_skill_name(name):
        raise SkillError(f"{name!r} is not a skill name", name=name, remedy=Remedy.LIST_SKILLS)
    root, config = _root_and_config(skills_root, config)
    spellings = [root / dir_name for dir_name in paths.skill_dir_spellings(name)]
    skill_dir = next((d for d in spellings if d.is_symlink() or d.exists()), None)
    if skill_dir is None:
        raise SkillError(f"no skill named {name!r} in {root}", name=name, remedy=Remedy.LIST_SKILLS)
    loaded = load_dir(skill_dir, config)
    if isinstance(loaded, SkillProblem):
        raise SkillError(
            f"skill {name!r} is broken: {loaded.message} ({loaded.path / SKILL_FILE})", name=name
        )
    return loaded
