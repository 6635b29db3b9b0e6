"""The demo server's note store: one JSON file, ``$KEEN_HOME/demo-notes.json``.

Shape::

    {"version": 1, "next_id": 3,
     "notes": [{"id": 1, "title": "...", "body": "...", "tags": ["a"], "created_at": "2025-...Z"}]}

Every write replaces the whole file atomically (:mod:`keen._fs`), so a crash leaves the
old file or the new one. Two demo servers writing at the same moment can lose one
update (last writer wins); the demo runs one server per Keen home, so no lock is taken.
A file that is not valid JSON in this shape is never overwritten: :class:`NotesError`
says where it is and how to move it aside.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

from pydantic import BaseModel, Field, ValidationError

from keen import paths
from keen._fs import atomic_write_json

__all__ = ["Note", "NoteStore", "NotesError", "notes_path"]


class NotesError(ValueError):
    """The notes file is unreadable or malformed, or a note id does not exist."""


class Note(BaseModel):
    """One note; ``created_at`` is ISO 8601 UTC."""

    id: int = Field(description="Note id, unique in this Keen home")
    title: str
    body: str
    tags: list[str] = Field(default_factory=list)
    created_at: str = Field(description="Creation time, ISO 8601 UTC")


class _NotesFile(BaseModel):
    version: int = 1
    next_id: int = 1
    notes: list[Note] = Field(default_factory=list)


def notes_path() -> Path:
    """``$KEEN_HOME/demo-notes.json`` (read at call time)."""
    return paths.keen_home() / "demo-notes.json"


def _normalise_tags(tags: list[str]) -> list[str]:
    seen: dict[str, None] = {}
    for tag in tags:
        cleaned = tag.strip().lower()
        if cleaned:
            seen.setdefault(cleaned)
    return list(seen)


class NoteStore:
    """Add, list, search and delete notes in ``path`` (default :func:`notes_path`)."""

    def __init__(self, path: Path | None = None) -> None:
        self._path = path

    @property
    def path(self) -> Path:
        return self._path if self._path is not None else notes_path()

    def _read(self) -> _NotesFile:
        path = self.path
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return _NotesFile()
        except (OSError, UnicodeDecodeError) as exc:
            raise NotesError(f"cannot read the notes file {path}: {exc}; check its permissions") from exc
        try:
            return _NotesFile.model_validate(json.loads(text))
        except (json.JSONDecodeError, ValidationError) as exc:
            raise NotesError(
                f"the notes file {path} is not a valid notes file ({type(exc).__name__}); it was left "
                "untouched: fix it, or move it aside to start a new one"
            ) from exc

    def _write(self, data: _NotesFile) -> None:
        atomic_write_json(self.path, data.model_dump(mode="json"), mode=0o600)

    def add(self, title: str, body: str, tags: list[str] | None = None) -> Note:
        """Append a note and return it. Raises :class:`NotesError` for an empty title."""
        if not title.strip():
            raise NotesError("a note needs a non-empty title")
        data = self._read()
        note = Note(
            id=data.next_id,
            title=title.strip(),
            body=body,
            tags=_normalise_tags(tags or []),
            created_at=datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z"),
        )
        data.notes.append(note)
        data.next_id += 1
        self._write(data)
        return note

    def list_notes(self, tag: str | None = None) -> list[Note]:
        """All notes, oldest first; only those carrying ``tag`` (case-insensitive) when given."""
        notes = self._read().notes
        if tag is None or not tag.strip():
            return notes
        wanted = tag.strip().lower()
        return [note for note in notes if wanted in note.tags]

    def search(self, query: str) -> list[Note]:
        """Notes whose title, body or tags contain every word of ``query`` (case-insensitive)."""
        words = query.lower().split()
        if not words:
            raise NotesError("the search query is empty; pass one or more words")
        found: list[Note] = []
        for note in self._read().notes:
            haystack = " ".join([note.title, note.body, *note.tags]).lower()
            if all(word in haystack for word in words):
                found.append(note)
        return found

    def delete(self, note_id: int) -> Note:
        """Remove and return note ``note_id``. Raises :class:`NotesError` if there is none."""
        data = self._read()
        for index, note in enumerate(data.notes):
            if note.id == note_id:
                del data.notes[index]
                self._write(data)
                return note
        raise NotesError(f"there is no note with id {note_id}; call list_notes to see the ids")
