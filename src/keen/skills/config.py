"""The skills config: ``$KEEN_HOME/skills/config.json`` (docs/architecture.md "Enabling and disabling").

Shape: ``{"is_enabled": {"mcp:github": false, "notes": true}}``. A skill absent from
``is_enabled`` is enabled. Writes are atomic (temp file + ``os.replace``) and keep the
file's mode; a symlink stays one (the file it points to is replaced; a link to nothing or a
loop is refused); unknown top-level keys are kept.

Several writers change it: the generated-skill sync and live refresh, ``/skills
enable|disable`` in ``keen chat``, ``keen skills enable|disable``, possibly in different
processes at once. Each change is a read-modify-write, so each must hold the skills
directory's lock (:mod:`keen.skills.lock`, and beside the file a symlink points to) from
the load to the save, or one writer's save drops another's change;
:meth:`SkillsConfig.edit` does exactly that.
"""

from __future__ import annotations

import contextlib
import json
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from keen._fs import BOM, BrokenLink, atomic_write_json, link_target
from keen._text import shorten, some_of
from keen.errors import SkillError
from keen.skills.lock import locked

__all__ = ["SkillsConfig"]


class SkillsConfig:
    """Read-modify-write view of the skills config file.

    ``SkillsConfig.load(path)`` reads it (missing file = everything enabled; broken
    JSON, or an ``is_enabled`` that is not an object of booleans, raises ``SkillError``
    saying how to fix it); ``is_enabled(name)``,
    ``set_enabled(name, value)``, ``forget(name)`` change the in-memory copy and
    ``save()`` writes it atomically. To change it, use :meth:`edit` (load, change and
    save under the skills directory's lock), not ``load`` + ``save``.
    """

    def __init__(self, path: Path, data: dict[str, Any] | None = None) -> None:
        self.path = path
        self._data: dict[str, Any] = data if data is not None else {}
        enabled = self._data.get("is_enabled")
        self._enabled: dict[str, bool] = dict(enabled) if isinstance(enabled, dict) else {}

    @classmethod
    def load(cls, path: Path) -> SkillsConfig:
        try:
            text = path.read_text(encoding="utf-8").removeprefix(BOM)  # an editor's byte order mark
        except FileNotFoundError:
            # A symlink to nothing is no missing file (every skill enabled): its save would
            # refuse it, and until then the settings it lost read as none.
            _file(path)
            return cls(path)
        except NotADirectoryError as exc:
            # A skills root given as a file (discover(Path("notes.md"))): a bare OSError
            # left the library's error tree and named config.json, not the root. Chained: the
            # CLI words a KEEN_HOME that is a file from the OSError.
            raise SkillError(
                f"{_not_a_folder(path.parent)}; the skills root is the folder that holds "
                "each skill's folder (default $KEEN_HOME/skills): pass that",
                folder=str(path.parent),
            ) from exc
        except (IsADirectoryError, UnicodeDecodeError) as exc:
            # A folder in its place, or not UTF-8: words, not a traceback.
            why = "Is a directory" if isinstance(exc, IsADirectoryError) else "it is not UTF-8 text"
            raise SkillError(
                f"cannot read {path}: {why}; it must be a UTF-8 file you can read: fix or delete it "
                '(it only holds {"is_enabled": {...}})'
            ) from exc
        except OSError as exc:
            if path.is_symlink():
                _file(path)  # a loop of links: no permission or deletion fixes that
            why = exc.strerror or type(exc).__name__
            raise SkillError(
                f"{path}: cannot be read ({why}); fix its permissions or delete the file "
                '(it only holds {"is_enabled": {...}})'
            ) from exc
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise SkillError(
                f"{path}: invalid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}; "
                'fix it or delete the file (it only holds {"is_enabled": {...}})'
            ) from exc
        except RecursionError:
            raise SkillError(
                f"{path}: the JSON is nested too deep to read; fix it or delete the file "
                '(it only holds {"is_enabled": {...}})'
            ) from None
        if not isinstance(data, dict):
            raise SkillError(
                f'{path}: expected an object like {{"is_enabled": {{}}}}; fix or delete the file'
            )
        enabled: Any = data.get("is_enabled", {})
        # Checked here, not silently coerced: bool("false") is True, and save() would
        # otherwise overwrite a mistyped map with {} and lose the user's settings.
        if not isinstance(enabled, dict):
            raise SkillError(
                f'{path}: "is_enabled" must be an object of name -> true/false; fix or delete it'
            )
        wrong = sorted(
            (json.dumps(str(k)), json.dumps(v)) for k, v in enabled.items() if not isinstance(v, bool)
        )
        if wrong:
            shown = some_of(wrong, 5, say=lambda pair: f"{pair[0]}: {shorten(pair[1], 40)}")
            raise SkillError(
                f'{path}: "is_enabled" values must be true or false (JSON booleans); fix {shown}'
            )
        return cls(path, data)

    @classmethod
    @contextlib.contextmanager
    def edit(cls, path: Path, *, timeout: float = 60.0) -> Iterator[SkillsConfig]:
        """Hold the lock of the skills directory ``path.parent`` (and, when ``path`` is a
        symlink, the one beside the file it points to: :func:`keen.skills.lock.locked`), load
        ``path``, yield it, and save it when the block ends without an exception (changed or
        not: atomic either way).

        Raises:
            SkillError: the config is broken (nothing is written), or another writer held
                the lock for longer than ``timeout`` seconds.
            OSError: the file could not be written.
        """
        with locked(path.parent, timeout):
            config = cls.load(path)
            yield config
            config.save()

    def reload(self) -> None:
        """Read the file again, dropping changes not saved. Raises like :meth:`load`."""
        fresh = self.load(self.path)
        self._data, self._enabled = fresh._data, fresh._enabled

    def is_enabled(self, name: str) -> bool:
        return bool(self._enabled.get(name, True))

    def explicit(self, name: str) -> bool | None:
        """The stored value for ``name``, or None when the config does not mention it."""
        value = self._enabled.get(name)
        return None if value is None else bool(value)

    def set_enabled(self, name: str, value: bool) -> None:
        self._enabled[name] = bool(value)

    def forget(self, name: str) -> None:
        self._enabled.pop(name, None)

    def names(self) -> list[str]:
        return sorted(self._enabled)

    def save(self) -> None:
        """Write the config atomically. A symlink (config.json kept with one's dotfiles)
        stays one: the file it points to is replaced, its mode kept.

        Raises:
            SkillError: the path is a symlink to nothing, or a loop of them (nothing written).
            OSError: the file could not be written.
        """
        data = dict(self._data)
        data["is_enabled"] = dict(sorted(self._enabled.items()))
        file = _file(self.path)
        try:
            mode = stat.S_IMODE(file.stat().st_mode)
        except FileNotFoundError:
            mode = 0o644
        atomic_write_json(file, data, mode=mode)


def _file(path: Path) -> Path:
    """The file the config at ``path`` is (:func:`keen._fs.link_target`), or a SkillError
    naming a symlink to nothing or a loop: as configs.json's edits refuse them."""
    try:
        return link_target(path)
    except BrokenLink as exc:
        raise SkillError(str(exc)) from None


def _not_a_folder(root: Path) -> str:
    """Why ``root`` cannot be a folder: it is a file, or a file stands on its way (a
    ``KEEN_HOME`` set to a file's path)."""
    for where in (root, *root.parents):
        if where.exists():
            return (
                f"{root} is not a directory"
                if where == root
                else f"{root} cannot be a folder: {where} is a file"
            )
    return f"{root} is not a directory"
