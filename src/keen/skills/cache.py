"""Skip rescanning an unchanged skills directory (docs/architecture.md "Files on disk").

:func:`keen.skills.discover` opens every ``SKILL.md`` and parses its YAML frontmatter; an
agent that asks at every step would spend most of the step there. :class:`DiscoveryCache`
keeps the last :class:`~keen.skills.Discovery` and scans again only when
:func:`skills_dir_state` differs from the state it was built from.

What the state holds, and why each part is needed:

* ``config.json``: ``stat`` (device, inode, size, mtime and ctime in ns). Keen replaces it
  atomically (a new inode each save); an in-place edit changes size or mtime.
* Each entry of the skills directory that discovery looks at (names not starting with
  ``.``, but ``config.json``): its ``lstat`` (inode, mode, mtime, ctime), and for a symlink its target
  (``readlink``). A generated skill is a symlink swapped to a new versioned directory
  (``mcp:<server> -> .mcp:<server>.<hex>``); the root's own mtime would change too, but a
  user editing a ``SKILL.md`` inside a folder does not touch the root at all, so the root
  mtime alone is not enough.
* For each entry, the ``stat`` of ``<entry>/SKILL.md`` and of the generated-skill marker
  ``<entry>/.keen-generated-mcp.json``, following links: what discovery reads (the
  frontmatter, the ``managed`` flag). An edit in place changes size/mtime/ctime; an
  editor's save-by-rename or a swap changes the inode.

Costs ``3 + 1`` system calls per skill (about 1 ms for 80 skills here) instead of opening
and parsing every file; the scan that follows takes its listing from the state. When something changed, only the entries whose own stat data
changed are read again; the others keep their :class:`~keen.skills.Skill` (with
``enabled`` taken from the config as it is now).

What a scan read of each settled skill is also kept on disk, in
``$KEEN_HOME/cache/skills-<digest of the directory>.json`` (:func:`store_file`), under the same
stat data: a new process (``keen prompt``, a chat's first step) takes each skill whose stat data
is the stored one from there, and reads only the others. The stored name, description, paths
and marker's tool count are what reading the files gave, beside a digest (BLAKE2b) of the
frontmatter text they were parsed from: a skill whose stat data changed but whose frontmatter
did not (the sync rewrote its marker, the folder was copied, the file saved again unchanged)
has its files read but is not parsed again, so a start that finds its store keeps PyYAML
unloaded; when only the marker's stat data changed, only the marker is read. Those files are
read by name in the open skills directory, the frontmatter from one read of the file's head
(:func:`keen.skills.discover.frontmatter_at`), which costs about a third of the usual
path-by-path read (:func:`keen.skills.discover.load_dir`, still used when that head does
not give the stored frontmatter). A store that cannot be read, or was made for another directory, is ignored and
written again, so it can cost time but never change a result. A skill whose marker file is
there but not Keen's (unreadable, or another tool's) is not stored: every new process reads
it again, so the warning an unreadable marker gets is logged at every start, as a full scan
logs it.

Timestamps have a granularity (one kernel tick, a few ms): a file written twice within one
tick, keeping its size, would look unchanged. As git does for its index ("racy git"), a
state in which any timestamp is less than :data:`RACY_SECONDS` older than the moment the
state was taken is *unsettled*: it never counts as unchanged, so a file that was just
written is read again at the next call, until it is old enough to be trusted.
"""

# No ``from __future__ import annotations``: typing.NamedTuple compiles each field's
# annotation when it is a string, and the first such compile in a process costs about 11
# million instructions (0.25 a field after it); this module loads with every prompt.
import contextlib
import json
import os
import stat
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, NamedTuple

from keen import _digest, paths
from keen._log import LazyLogger
from keen.skills.config import SkillsConfig
from keen.skills.discover import (
    MARKER_FILE,
    SKILL_FILE,
    Discovery,
    Parsed,
    Skill,
    SkillProblem,
    frontmatter_at,
    load_dir,
    read_marker,
    scan,
)
from keen.skills.lock import CONFIG_FILE

__all__ = ["RACY_SECONDS", "DiscoveryCache", "SkillsDirState", "skills_dir_state", "store_file"]

# logging is imported only when something is logged (keen._log).
logger = LazyLogger(__name__)

RACY_SECONDS = 0.05
"""Timestamps this close to the time of the scan are not trusted (above one kernel tick: 4-10 ms)."""

_Stat = tuple[int, ...] | None
_Entry = tuple[str, _Stat, str, _Stat, _Stat]
_STORE_FORMAT = "keen-skills/3"
_Row = tuple[str, str, str, bool, tuple[str, ...], int, str, str]
"""A stored skill: its entry's stat data but the marker's (:func:`_stamps`), name,
description, managed, paths, tool count, the digest of its frontmatter text
(:func:`_frontmatter_digest`) and its marker's stat data."""


def _stat(path: str, *, follow: bool = True, dir_fd: int | None = None) -> _Stat:
    try:
        st = os.stat(path, follow_symlinks=follow, dir_fd=dir_fd)
    except OSError:
        return None
    return (st.st_dev, st.st_ino, st.st_mode, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


_AT_DIR = {os.open, os.stat, os.readlink} <= os.supports_dir_fd
"""Whether entries can be looked up relative to the open skills directory (POSIX; not on
Windows): the kernel then walks one or two path components per lookup instead of the whole
path, about a third less CPU for the three lookups per skill."""


@contextlib.contextmanager
def _open_dir(root: Path) -> Iterator[int | None]:
    """``root`` opened for lookups relative to it (``dir_fd``), or None where that is not
    supported or it cannot be opened (the lookups then take whole paths)."""
    fd: int | None = None
    if _AT_DIR:
        with contextlib.suppress(OSError):
            fd = os.open(root, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        yield fd
    finally:
        if fd is not None:
            os.close(fd)


class SkillsDirState(NamedTuple):
    """What :func:`keen.skills.discover` would read from a skills directory, as stat data.

    ``root``: the directory (absolute). ``config``: the stat of ``config.json`` (``None``:
    absent). ``entries``: per non-dot entry but ``config.json``, sorted by name: name, its ``lstat``, symlink
    target (``""`` when not a link), stat of its ``SKILL.md`` and of its marker file.
    ``racy``: names of the entries with a timestamp within :data:`RACY_SECONDS` of the
    scan (``config.json`` included under its own name). ``settled``: none is racy; an
    unsettled state never equals another one in :meth:`unchanged_since`.

    A named tuple, not a frozen dataclass: it is made at every start, before a chat's first
    request, and a frozen dataclass compiles six methods as it is made (about 0.8 ms).
    """

    root: Path
    config: _Stat
    entries: tuple[_Entry, ...]
    racy: frozenset[str]

    @property
    def settled(self) -> bool:
        return not self.racy

    def unchanged_since(self, other: "SkillsDirState | None") -> bool:
        """True when ``other`` was taken of the same directory, both are settled and equal."""
        return other is not None and self.settled and other.settled and self == other

    def existing(self, names: Iterable[str]) -> set[str]:
        """Those of ``names`` whose entry exists, a symlink's target followed as
        :meth:`pathlib.Path.exists` does: from the stat data, with a system call only for a
        link to a folder without ``SKILL.md`` or marker file, or a dangling one.

        Args:
            names: entry names (``mcp:<server>`` spellings, skill names).

        Returns:
            The subset of ``names`` that exist.
        """
        wanted = set(names)
        found: set[str] = set()
        for name, own, target, skill_md, marker in self.entries:
            if name not in wanted or own is None:  # None: gone since it was listed
                continue
            if not target or skill_md is not None or marker is not None:
                found.add(name)  # not a link (its lstat is its stat), or a file was found through it
            elif os.path.exists(self.root / name):
                found.add(name)
        return found

    def generated(self) -> list[str]:
        """The names of the entries that hold a marker file, a regular file (the keen-mcp
        marker of a generated skill), in name order."""
        return [
            name for name, _, _, _, marker in self.entries if marker is not None and stat.S_ISREG(marker[2])
        ]


def skills_dir_state(skills_root: Path | None = None) -> SkillsDirState:
    """The :class:`SkillsDirState` of ``skills_root`` (default ``paths.skills_dir()``), now.

    A missing or unlistable directory has no entries (discovery reports that itself).
    """
    root = (skills_root if skills_root is not None else paths.skills_dir()).absolute()
    # Taken before any stat: a timestamp written after it is by definition within the window.
    began_ns = time.time_ns()
    config = _stat(str(root / CONFIG_FILE))  # through a symlink: its file's stat
    try:
        listing = sorted(os.scandir(root), key=lambda e: e.name)
    except OSError:
        listing = []
    with _open_dir(root) as fd:
        # config.json is in ``config`` above, a symlink too: no entry discovery would load.
        entries = [
            _entry_key(entry, fd)
            for entry in listing
            if not entry.name.startswith(".") and entry.name != CONFIG_FILE
        ]
    cutoff = began_ns - int(RACY_SECONDS * 1e9)

    def fresh(*stats: _Stat) -> bool:
        return any(s is not None and (s[4] >= cutoff or s[5] >= cutoff) for s in stats)

    racy = {e[0] for e in entries if fresh(e[1], e[3], e[4])}
    if fresh(config):
        racy.add(CONFIG_FILE)
    return SkillsDirState(root, config, tuple(entries), frozenset(racy))


def _entry_key(entry: os.DirEntry[str], fd: int | None = None) -> _Entry:
    """One entry's part of :class:`SkillsDirState`; ``fd``: its directory, open
    (:func:`_open_dir`), to look it up by name, else by its whole path."""
    # Relative to fd a POSIX path ("name/SKILL.md"); else the platform's own.
    path, sep = (entry.name, "/") if fd is not None else (entry.path, os.sep)
    own = _stat(path, follow=False, dir_fd=fd)
    target = ""
    if entry.is_symlink():
        try:
            target = os.readlink(path, dir_fd=fd)
        except OSError:
            target = "?"
    elif not entry.is_dir():
        return (entry.name, own, target, None, None)  # a plain file, e.g. config.json
    skill_md = _stat(f"{path}{sep}{SKILL_FILE}", dir_fd=fd)
    marker = _stat(f"{path}{sep}{MARKER_FILE}", dir_fd=fd)
    return (entry.name, own, target, skill_md, marker)


def _frontmatter_digest(raw: str | bytes) -> str:
    """What a stored row keeps of the frontmatter text it was parsed from (``bytes``: that
    text encoded, as :func:`keen.skills.discover.frontmatter_at` reads it)."""
    data = raw if isinstance(raw, bytes) else raw.encode("utf-8", "surrogatepass")
    return _digest.blake2b(data, digest_size=16).hexdigest()


_HEX = "%x %x %x %x %x %x"


def _stamps(entry: _Entry) -> tuple[str, str]:
    """How the store spells an entry's stat data (:data:`_Entry`): its own ``lstat``, link
    target and ``SKILL.md`` stat in one string, the marker's in another (the sync rewrites the
    marker alone). The numbers in hex, each stat with one format: the ``repr`` of the tuples
    cost about 10 µs a skill at every start, and a JSON list of them more to parse back."""
    _, own, target, skill_md, marker = entry
    if target and not target.isascii():
        # A link's target is the file system's bytes: one that is not UTF-8 holds lone
        # surrogates, which the store's UTF-8 cannot hold; its repr can.
        target = repr(target)
    return (
        f"{'-' if own is None else _HEX % own}|{target}|{'-' if skill_md is None else _HEX % skill_md}",
        "-" if marker is None else _HEX % marker,
    )


def _is_listed(entry: _Entry) -> bool:
    """An entry :func:`keen.skills.discover.scan` loads: a folder or a symlink."""
    own = entry[1]
    return own is not None and (stat.S_ISDIR(own[2]) or stat.S_ISLNK(own[2]))


def store_file(skills_root: Path) -> Path:
    """``$KEEN_HOME/cache/skills-<digest>.json``: what scans of the absolute ``skills_root``
    read, by entry (module doc)."""
    digest = _digest.blake2b(os.fsencode(skills_root), digest_size=8).hexdigest()
    return paths.keen_home() / "cache" / f"skills-{digest}.json"


def _read_store(root: Path) -> dict[str, _Row]:
    """The stored skills of ``root`` by entry name: ``(stat key, name, description, managed,
    paths)``; empty when there is no store or it is not one of ``root``."""
    try:
        data: Any = json.loads(store_file(root).read_bytes())
    except (OSError, ValueError, RecursionError):  # a store nested past the parser: no store
        return {}
    if not isinstance(data, dict) or data.get("format") != _STORE_FORMAT or data.get("root") != str(root):
        return {}
    skills: Any = data.get("skills")
    if not isinstance(skills, dict):
        return {}
    found: dict[str, _Row] = {}
    for entry, row in skills.items():  # pyright: ignore[reportUnknownVariableType]
        # Checked field by field, without a generator per row: this runs once per skill at
        # every start.
        if not isinstance(row, list) or len(row) != 8:  # pyright: ignore[reportUnknownArgumentType]
            continue
        stamp, name, description, managed, patterns, tools, digest, marker = row  # pyright: ignore[reportUnknownVariableType]
        if (
            type(stamp) is str
            and type(name) is str
            and type(description) is str
            and type(managed) is bool
            and type(patterns) is list
            and (not patterns or all(type(p) is str for p in patterns))  # pyright: ignore[reportUnknownVariableType]
            and type(tools) is int
            and type(digest) is str
            and type(marker) is str
        ):
            found[str(entry)] = (stamp, name, description, managed, tuple(patterns), tools, digest, marker)  # pyright: ignore[reportUnknownArgumentType]
    return found


def _write_store(root: Path, rows: dict[str, _Row]) -> None:
    home = paths.keen_home()
    if not home.is_dir():  # a KEEN_HOME removed since (a temporary one): not created again
        return
    from keen._fs import atomic_write_bytes

    data = {
        "format": _STORE_FORMAT,
        "root": str(root),
        "skills": {k: [*v[:4], list(v[4]), *v[5:]] for k, v in rows.items()},
    }
    try:
        atomic_write_bytes(
            store_file(root), json.dumps(data, ensure_ascii=False).encode("utf-8"), fsync=False
        )
    except OSError as exc:  # a read-only KEEN_HOME: the next start reads the files again
        logger.debug("cannot write the skills store %s: %s", store_file(root), exc)


class DiscoveryCache:
    """:func:`keen.skills.discover` of one skills directory, scanned again only when its
    :class:`SkillsDirState` changed.

    ``skills_root``: default ``paths.skills_dir()`` at each call. ``hits`` / ``scans``: how
    many calls reused the last result / scanned the directory; ``reused``: skill entries a
    scan took from the previous one instead of reading them; ``stored``: skill entries a scan
    took from the on-disk store (module doc; ``store=False``: none is read or written;
    ``save=False``: it is read, never written, for a caller whose work is followed by another
    cache's scan of the same directory, which writes it: ``keen.agent.first``, whose session
    scans after the first request went out); ``unparsed``: skill entries read again whose
    frontmatter was the one kept (the previous scan's or the store's), so it was not parsed
    again; ``markers``: skill entries taken from the store but for their marker file, the
    only part whose stat data changed, read again.
    """

    def __init__(self, skills_root: Path | None = None, *, store: bool = True, save: bool = True) -> None:
        self.skills_root = skills_root
        self.store = store
        self.save = save
        self.hits = 0
        self.scans = 0
        self.reused = 0
        self.stored = 0
        self.unparsed = 0
        self.markers = 0
        self._state: SkillsDirState | None = None
        self._found: Discovery | None = None
        self._loaded: dict[str, tuple[_Entry, Skill | SkillProblem, str]] = {}
        self._stored: dict[str, _Row] | None = None

    def discover(self, state: SkillsDirState | None = None) -> Discovery:
        """The directory's skills: the same :class:`~keen.skills.Discovery` object as last
        time while nothing discovery reads changed, else a scan that reads again only the
        entries whose stat data changed. Raises ``SkillError`` like
        :func:`keen.skills.discover` (nothing is cached then).

        Args:
            state: the directory's :func:`skills_dir_state` when the caller has just taken
                it (``keen.agent.first`` reads it too); default: taken now.
        """
        if state is None:
            state = skills_dir_state(self.skills_root)
        if self._found is not None and state.unchanged_since(self._state):
            self.hits += 1
            return self._found
        settled = {e[0]: e for e in state.entries if e[0] not in state.racy}
        loaded: dict[str, tuple[_Entry, Skill | SkillProblem, str]] = {}
        if self._stored is None:
            self._stored = _read_store(state.root) if self.store else {}
        stored = self._stored
        rows: dict[str, _Row] = {}

        def load(entry: Path, config: SkillsConfig) -> Skill | SkillProblem:
            name = entry.name
            key, before, row = settled.get(name), self._loaded.get(name), stored.get(name)
            # How the store spells the stat data: the marker's apart (the sync rewrites it).
            stamp, marker_stamp = _stamps(key) if key is not None else ("", "")
            result: Skill | SkillProblem
            digest = ""
            if key is not None and before is not None and before[0] == key:
                _, result, digest = before
                self.reused += 1
            elif (
                key is not None
                and row is not None
                and (
                    (as_stored := row[0] == stamp)
                    # Its stat data changed (copied, the sync's swap) but not its frontmatter:
                    # what parsing that same text gave is the row's.
                    or (
                        fd is not None
                        and (raw := frontmatter_at(name, fd)) is not None
                        and _frontmatter_digest(raw) == row[6]
                    )
                )
            ):
                _, skill_name, description, managed, patterns, tools, digest, marker = row
                if marker != marker_stamp:  # the marker changed (the sync rewrites it): read it
                    managed, tools = read_marker(entry, dir_fd=fd)
                    self.markers += as_stored
                result = Skill(
                    skill_name,
                    description,
                    entry,
                    paths.child(entry, SKILL_FILE),
                    config.is_enabled(skill_name),
                    managed,
                    patterns,
                    tools,
                )
                if as_stored:
                    self.stored += 1
                else:
                    self.unparsed += 1
            else:
                # What parsing gave for this entry's frontmatter before, by its text's digest.
                kept: dict[str, Parsed] = {}
                if before is not None and isinstance(before[1], Skill):
                    kept[before[2]] = (before[1].name, before[1].description, before[1].paths)
                if row is not None:
                    kept[row[6]] = (row[1], row[2], row[4])

                def known(raw: str) -> Parsed | None:
                    nonlocal digest
                    digest = _frontmatter_digest(raw)
                    parsed = kept.get(digest)
                    if parsed is not None:
                        self.unparsed += 1
                    return parsed

                result = load_dir(entry, config, known=known)
            if key is not None:  # only a settled entry may be reused by the next scan
                loaded[name] = (key, result, digest)
                # A marker there but not Keen's (unreadable, or another tool's) is not stored:
                # every new process reads it again, so its warning is logged at every start.
                if isinstance(result, Skill) and (result.managed or marker_stamp == "-"):
                    rows[name] = (
                        stamp,
                        result.name,
                        result.description,
                        result.managed,
                        result.paths,
                        result.tool_count or 0,
                        digest,
                        marker_stamp,
                    )
            if isinstance(result, Skill) and result.enabled != config.is_enabled(result.name):
                result = result._replace(enabled=config.is_enabled(result.name))
            return result

        listing = [e[0] for e in state.entries if _is_listed(e)]
        config = SkillsConfig.load(state.root / CONFIG_FILE)
        # Entries read again are looked up by name in the open directory (as the state was).
        with _open_dir(state.root) as fd:
            found = scan(state.root, config, load, listing)
        self.scans += 1
        self._state, self._found, self._loaded = state, found, loaded
        if self.store and self.save and rows != stored:
            _write_store(state.root, rows)
            self._stored = rows
        return found

    def clear(self) -> None:
        """Forget the last scan: the next :meth:`discover` reads every entry (the on-disk
        store too, when it is used)."""
        self._state = self._found = None
        self._loaded = {}
        self._stored = None
