"""Pin files: ``$KEEN_HOME/mcp/pins/<server>.json``, one per server (format in :mod:`keen.trust.pins`).

Written atomically with mode 0600 (:mod:`keen._fs`); read strictly: a broken, foreign or
newer file is a ``ConfigError`` that says what to do, never silently an empty set of pins
(which would re-trust everything on the next approval). The models (:class:`ToolPin`,
:class:`PinFile`, :class:`Review`, pydantic) live in :mod:`keen.trust._pinmodels`, imported
when a pin file is first read or written, and build their validators at their first use
(``defer_build``): a session opens its pin store before its first model request, and reads
pins only when a server connects or a call is made.

Whether a pin file changed is one ``stat`` (:meth:`PinStore.stamp`). Inside one call
(:func:`one_look`, which :meth:`keen.calls.Pipeline.run` opens) every stage that asks gets
the answer of the first ``stat``: a call's listing lookup, argument check, pin check and
trust on first use look at the pin file once, not four times. A file another process
writes meanwhile is seen by the next call, as it would be had it been written just after
that one ``stat``; a pin file this process writes is looked at again at once.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from contextlib import AbstractContextManager
from contextvars import ContextVar, Token
from pathlib import Path
from typing import TYPE_CHECKING, Any

from keen import paths
from keen._fs import atomic_write_text
from keen.errors import ConfigError
from keen.mcp import SERVER_NAME_RE
from keen.trust._pinformat import PIN_FILE_VERSION

if TYPE_CHECKING:
    from keen.trust._pinmodels import InfoPin, PinFile, Review, ToolPin, ValidationError

__all__ = ["PIN_FILE_VERSION", "InfoPin", "PinFile", "PinStore", "Review", "ToolPin", "one_look"]

_MODELS = ("InfoPin", "PinFile", "Review", "ToolPin")


def __getattr__(name: str) -> Any:
    # PEP 562: the pin files' models (pydantic) load when first named or a pin file is read,
    # not with the store: `keen chat` opens its pin store before its first prompt.
    if name in _MODELS:
        from keen.trust import _pinmodels

        return getattr(_pinmodels, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


_Stamp = tuple[int, int, int] | None
_UNSEEN = object()
"""Not stamped yet in this look (a stamp may be ``None``: no pin file)."""


class _Look:
    """The pin files' stamps seen by one call, by store and server, while the call runs."""

    __slots__ = ("open", "stamps")

    def __init__(self) -> None:
        self.open = True
        self.stamps: dict[tuple[PinStore, str], _Stamp] = {}


_LOOK: ContextVar[_Look | None] = ContextVar("keen_pin_look", default=None)
"""The current call's look (:func:`one_look`); ``None`` outside a call. A context variable:
concurrent calls (``keen serve``) each have their own; a task started during a call and
outliving it inherits a closed look, which remembers nothing."""


class _OneLook:
    """:func:`one_look`'s block (a class, and :func:`one_look` is the class itself: every
    call enters one, and a generator-based context manager, or a function making the
    block, costs more)."""

    __slots__ = ("look", "token")

    look: _Look | None
    token: Token[_Look | None] | None
    # No __init__: both are set when the block is entered (a call's Python frame less).

    def __enter__(self) -> None:
        current = _LOOK.get()
        if current is not None and current.open:
            self.token = self.look = None  # the block around's look: nothing to end here
            return
        self.look = look = _Look()
        self.token = _LOOK.set(look)

    def __exit__(self, *exc: object) -> None:
        if self.token is not None and self.look is not None:
            self.look.open = False
            _LOOK.reset(self.token)
            self.token = self.look = None


one_look: Callable[[], AbstractContextManager[None]] = _OneLook
"""Within the block, :meth:`PinStore.stamp` stats each pin file at most once (one call's
look at the pins); a block inside another shares the outer one's look."""


class PinStore:
    """Pin files under ``root`` (default ``$KEEN_HOME/mcp/pins``, read at call time)."""

    def __init__(self, root: Path | None = None) -> None:
        self._root = root
        self._paths: dict[tuple[Path, str], Path] = {}
        self._files: dict[str, tuple[Path, str]] = {}
        """Server -> (the root it was under, its pin file's path as text): what
        :meth:`stamp` stats on every call, made once per root."""

    @property
    def root(self) -> Path:
        return self._root or paths.pins_dir()

    def path(self, server: str) -> Path:
        """``<root>/<server>.json``. Raises ``ValueError`` for a name that is not a server name."""
        root = self.root
        path = self._paths.get((root, server))
        if path is None:  # built once per root and server: every call's pin check asks
            if not SERVER_NAME_RE.fullmatch(server):
                raise ValueError(f"{server!r} is not a valid server name")
            path = self._paths[(root, server)] = root / f"{server}.json"
        return path

    def load(self, server: str) -> PinFile | None:
        """The server's pins, or ``None`` when it was never pinned.

        Raises:
            ConfigError: the file exists but cannot be read, is not JSON, or is not a pin file
                of a version this Keen reads. Nothing is guessed: a broken pin file would
                otherwise silently re-trust everything.
        """
        path = self.path(server)
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return None
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"cannot read pin file {path}: {exc}", path=str(path), server=server) from exc
        remedy = "fix it, or delete it to pin the server's current tools again on the next approval"
        try:
            raw = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ConfigError(
                f"pin file {path} is not valid JSON (line {exc.lineno}: {exc.msg}); {remedy}",
                path=str(path),
                server=server,
                line=exc.lineno,
                column=exc.colno,
            ) from exc
        if isinstance(raw, dict) and raw.get("version") != PIN_FILE_VERSION:
            raise ConfigError(
                f"pin file {path} has version {raw.get('version')!r}; this Keen reads version "
                f"{PIN_FILE_VERSION} (was it written by a newer Keen?); {remedy}",
                path=str(path),
                server=server,
                field="version",
            )
        from keen.trust._pinmodels import PinFile, ValidationError

        try:
            pins = PinFile.model_validate(raw)
        except ValidationError as exc:
            raise _invalid(path, server, exc, remedy) from exc
        if pins.server != server:
            raise ConfigError(
                f'pin file {path} is for server "{pins.server}", not "{server}"; {remedy}',
                path=str(path),
                server=server,
                field="server",
            )
        return pins.model_copy(update={"info": self._load_info(server)})

    def info_path(self, server: str) -> Path:
        """``<root>/info/<server>.json``: the server's pinned info (:class:`InfoPin`), a file of
        its own so that a Keen that pins only tools still reads the pin file."""
        return self.path(server).parent / "info" / f"{server}.json"

    def _load_info(self, server: str) -> InfoPin | None:
        """The server's :class:`InfoPin`, or ``None`` when none is pinned (recorded at the next
        look). Read as strictly as the pin file: a broken one is a ``ConfigError``."""
        path = self.info_path(server)
        remedy = "fix it, or delete it to pin what the server says of itself again at the next look"
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise ConfigError(f"cannot read pin file {path}: {exc}", path=str(path), server=server) from exc
        from keen.trust._pinmodels import InfoPin, ValidationError

        try:
            info = InfoPin.model_validate_json(data)
        except ValidationError as exc:
            raise _invalid(path, server, exc, remedy) from exc
        if info.version != PIN_FILE_VERSION or info.server != server:
            raise ConfigError(
                f'pin file {path} is not a version {PIN_FILE_VERSION} pin of server "{server}"; {remedy}',
                path=str(path),
                server=server,
            )
        return info

    def save(self, pins: PinFile) -> Path:
        """Write ``pins`` atomically with mode 0600; returns the path."""
        path = self.path(pins.server)
        # The info first: a reader that sees the pin file change (:meth:`stamp`) reads both.
        info_path = self.info_path(pins.server)
        if pins.info is not None:
            info_path.parent.mkdir(parents=True, exist_ok=True)
            info_text = json.dumps(pins.info.model_dump(mode="json"), indent=2, ensure_ascii=False) + "\n"
            atomic_write_text(info_path, info_text, mode=0o600)
        else:  # pins without info: none stays from a pin file deleted and written again
            info_path.unlink(missing_ok=True)
        text = json.dumps(pins.model_dump(mode="json"), indent=2, ensure_ascii=False) + "\n"
        atomic_write_text(path, text, mode=0o600)
        if (look := _LOOK.get()) is not None:  # written by this call: its next look stats it again
            for key in [key for key in look.stamps if key[1] == pins.server]:
                del look.stamps[key]
        return path

    def review_path(self, server: str) -> Path:
        """``<root>/reviews/<server>.json`` (see :class:`Review`)."""
        return self.path(server).parent / "reviews" / f"{server}.json"

    def save_review(self, review: Review) -> Path:
        """Write what ``keen mcp diff`` showed (atomically, mode 0600); returns the path."""
        path = self.review_path(review.server)
        text = json.dumps(review.model_dump(mode="json"), indent=2, ensure_ascii=False) + "\n"
        atomic_write_text(path, text, mode=0o600)
        return path

    def load_review(self, server: str) -> Review | None:
        """What ``keen mcp diff`` last showed of ``server``; ``None`` when it never ran, or its
        file is unreadable (then nothing counts as reviewed: run the diff again)."""
        path = self.review_path(server)
        from keen.trust._pinmodels import Review, ValidationError

        try:
            review = Review.model_validate_json(path.read_bytes())
        except FileNotFoundError:
            return None
        except (OSError, ValidationError):
            return None
        return review if review.server == server and review.version == PIN_FILE_VERSION else None

    def stamp(self, server: str) -> _Stamp:
        """``(inode, size, mtime_ns)`` of the pin file, ``None`` if absent: a cheap change key
        (within :func:`one_look`, the first answer for this file).

        Raises:
            ConfigError: the file cannot be looked at (a pins folder without permission, a
                file where a folder should be).
        """
        look = _LOOK.get()
        if look is not None and look.open:
            seen = look.stamps.get((self, server), _UNSEEN)
            if seen is not _UNSEEN:
                return seen  # pyright: ignore[reportReturnType]
        root = self.root  # read at every call: KEEN_HOME may move between them
        known = self._files.get(server)
        if known is not None and known[0] is root:
            file = known[1]
        else:
            file = os.fspath(self.path(server))
            self._files[server] = (root, file)
        try:
            st = os.stat(file)
        except FileNotFoundError:
            stamp = None
        except OSError as exc:  # as load() says it: a pins folder that cannot be read
            folder = os.path.dirname(file)
            raise ConfigError(
                f"cannot look at pin file {file} ({exc.strerror}); Keen keeps its pins in {folder}: "
                "make it a folder Keen can read and write",
                path=file,
                server=server,
            ) from exc
        else:
            stamp = (st.st_ino, st.st_size, st.st_mtime_ns)
        if look is not None and look.open:
            look.stamps[self, server] = stamp
        return stamp


def _invalid(path: Path, server: str, exc: ValidationError, remedy: str) -> ConfigError:
    """The ``ConfigError`` for a pin file (or a server's info pin) that does not validate:
    where its first error is, what is wrong there, and ``remedy``."""
    first = exc.errors()[0]
    where = ".".join(str(p) for p in first["loc"]) or "(file)"
    return ConfigError(
        f"pin file {path} is invalid at {where}: {first['msg']}; {remedy}",
        path=str(path),
        server=server,
        field=where,
    )
