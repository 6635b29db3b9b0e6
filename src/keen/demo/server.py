"""keen-demo: a small, real MCP server shipped with Keen (stdio).

Run it with ``python -m keen.demo.server``; ``keen demo`` configures it for you. It exists
so a new user can see Keen's whole path (discovery, generated skill, ``call_mcp_tool``,
approvals) without installing anything else. Built on the official SDK's ``MCPServer``.

Tools (all with typed parameters, structured output and MCP annotations):

- ``current_time(timezone="UTC")`` and ``list_timezones(prefix="")`` (read-only)
- ``convert_units(value, from_unit, to_unit)``: length, mass, temperature, data size, time
- ``word_count(text)``
- ``add_note(title, body, tags=[])``, ``list_notes(tag=None)``, ``search_notes(query)``,
  ``delete_note(note_id)`` (destructive): a notes file in ``$KEEN_HOME/demo-notes.json``

Bad input (unknown timezone or unit, missing note) comes back as a tool error
(``isError: true``) whose text says what to do instead.
"""

from __future__ import annotations

import difflib
import math
import zoneinfo
from datetime import UTC, datetime
from typing import Annotated

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import ToolAnnotations
from pydantic import BaseModel, Field

from keen._version import __version__
from keen.demo import SERVER_NAME
from keen.demo.notes import Note, NotesError, NoteStore
from keen.demo.units import UnitError, convert

__all__ = ["INSTRUCTIONS", "build_server", "main"]

INSTRUCTIONS = (
    "Use keen-demo to get the current time in any timezone, convert units (length, mass, "
    "temperature, data size, time), count words, or keep short notes that persist between sessions."
)

_READ_ONLY = ToolAnnotations(read_only_hint=True, open_world_hint=False)
_WRITES = ToolAnnotations(
    read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=False
)
_DELETES = ToolAnnotations(
    read_only_hint=False, destructive_hint=True, idempotent_hint=True, open_world_hint=False
)
_WORDS_PER_MINUTE = 200  # a common adult silent-reading estimate


class CurrentTime(BaseModel):
    timezone: str = Field(description="IANA timezone name used")
    iso: str = Field(description="Local time, ISO 8601 with offset")
    date: str = Field(description="Local date, YYYY-MM-DD")
    time: str = Field(description="Local time, HH:MM:SS")
    weekday: str = Field(description="Local day of the week, in English")
    utc_offset: str = Field(description="Offset from UTC, +HH:MM")
    unix: int = Field(description="Seconds since 1970-01-01T00:00:00Z")


class Timezones(BaseModel):
    timezones: list[str] = Field(description="Matching IANA timezone names, sorted")
    count: int


class UnitConversion(BaseModel):
    quantity: str = Field(description="length, mass, temperature, data or time")
    value: float
    from_unit: str = Field(description="Canonical name of the source unit")
    to_unit: str = Field(description="Canonical name of the target unit")
    result: float = Field(description="value expressed in to_unit (12 significant digits)")
    text: str = Field(description="The conversion as one readable line")


class WordCount(BaseModel):
    words: int
    characters: int = Field(description="All characters, spaces included")
    characters_no_spaces: int
    lines: int
    reading_minutes: float = Field(description=f"Estimated reading time at {_WORDS_PER_MINUTE} words/min")


class NoteList(BaseModel):
    notes: list[Note]
    count: int


def _zone(name: str) -> zoneinfo.ZoneInfo:
    try:
        return zoneinfo.ZoneInfo(name.strip())
    except (zoneinfo.ZoneInfoNotFoundError, ValueError) as exc:
        close = difflib.get_close_matches(name.strip(), sorted(zoneinfo.available_timezones()), n=3)
        hint = f" Did you mean {', '.join(close)}?" if close else ""
        raise ToolError(
            f"Unknown timezone {name!r}.{hint} Use an IANA name such as 'Europe/Paris' or "
            "'America/New_York'; call list_timezones (optionally with a prefix like 'Europe/') to "
            "see every name."
        ) from exc


def _format_number(value: float) -> str:
    return f"{value:,.6g}" if abs(value) < 1e15 else f"{value:.6g}"


def build_server() -> MCPServer:
    """Return a fresh ``keen-demo`` server (its notes live in :func:`keen.demo.notes.notes_path`)."""
    server = MCPServer(SERVER_NAME, instructions=INSTRUCTIONS, version=__version__)
    store = NoteStore()

    @server.tool(
        title="Current time",
        description="Current date and time in a timezone (IANA name, e.g. 'Asia/Tokyo'; default UTC).",
        annotations=_READ_ONLY,
    )
    def current_time(
        timezone: Annotated[
            str, Field(description="IANA timezone name, e.g. 'Europe/Paris' or 'UTC'")
        ] = "UTC",
    ) -> CurrentTime:
        zone = _zone(timezone)
        now = datetime.now(UTC).astimezone(zone)
        offset = now.strftime("%z")
        return CurrentTime(
            timezone=str(zone.key),
            iso=now.isoformat(timespec="seconds"),
            date=now.date().isoformat(),
            time=now.strftime("%H:%M:%S"),
            weekday=now.strftime("%A"),
            utc_offset=f"{offset[:3]}:{offset[3:]}",
            unix=int(now.timestamp()),
        )

    @server.tool(
        title="List timezones",
        description="IANA timezone names accepted by current_time, optionally only those starting with a "
        "prefix (case-insensitive), e.g. 'America/'.",
        annotations=_READ_ONLY,
    )
    def list_timezones(
        prefix: Annotated[str, Field(description="Keep names starting with this; empty keeps all")] = "",
    ) -> Timezones:
        wanted = prefix.strip().lower()
        names = sorted(name for name in zoneinfo.available_timezones() if name.lower().startswith(wanted))
        return Timezones(timezones=names, count=len(names))

    @server.tool(
        title="Convert units",
        description="Convert a number between units of length (mm cm m km in ft yd mi nmi), mass (mg g kg "
        "t oz lb st), temperature (C F K), data size (bit kbit Mbit Gbit B KB MB GB TB KiB MiB GiB TiB) "
        "or time (ms s min h d wk). Long names and plurals work too ('miles', 'celsius').",
        annotations=_READ_ONLY,
    )
    def convert_units(
        value: Annotated[float, Field(description="The number to convert")],
        from_unit: Annotated[str, Field(description="Unit of value, e.g. 'km'")],
        to_unit: Annotated[str, Field(description="Unit wanted, e.g. 'mi'")],
    ) -> UnitConversion:
        if not math.isfinite(value):
            raise ToolError("value must be a finite number")
        try:
            done = convert(value, from_unit, to_unit)
        except UnitError as exc:
            raise ToolError(str(exc)) from exc
        text = f"{_format_number(done.value)} {done.from_unit} = {_format_number(done.result)} {done.to_unit}"
        return UnitConversion(
            quantity=done.quantity,
            value=done.value,
            from_unit=done.from_unit,
            to_unit=done.to_unit,
            result=done.result,
            text=text,
        )

    @server.tool(
        title="Word count",
        description="Count words, characters and lines of a text, and estimate its reading time.",
        annotations=_READ_ONLY,
    )
    def word_count(text: Annotated[str, Field(description="The text to measure")]) -> WordCount:
        words = len(text.split())
        return WordCount(
            words=words,
            characters=len(text),
            characters_no_spaces=sum(1 for char in text if not char.isspace()),
            lines=len(text.splitlines()),
            reading_minutes=round(words / _WORDS_PER_MINUTE, 2),
        )

    @server.tool(
        title="Add note",
        description="Save a note (title, body, optional tags) that persists between sessions; returns it "
        "with its id.",
        annotations=_WRITES,
    )
    def add_note(
        title: Annotated[str, Field(description="Short title")],
        body: Annotated[str, Field(description="The note's text")],
        tags: Annotated[list[str], Field(description="Tags for list_notes(tag=...), e.g. ['work']")] = [],  # noqa: B006 (pydantic copies defaults)
    ) -> Note:
        try:
            return store.add(title, body, tags)
        except NotesError as exc:
            raise ToolError(str(exc)) from exc

    @server.tool(
        title="List notes",
        description="List saved notes, oldest first; pass a tag to keep only notes carrying it.",
        annotations=_READ_ONLY,
    )
    def list_notes(
        tag: Annotated[str | None, Field(description="Only notes with this tag (case-insensitive)")] = None,
    ) -> NoteList:
        try:
            notes = store.list_notes(tag)
        except NotesError as exc:
            raise ToolError(str(exc)) from exc
        return NoteList(notes=notes, count=len(notes))

    @server.tool(
        title="Search notes",
        description="Find notes whose title, body or tags contain every word of the query "
        "(case-insensitive).",
        annotations=_READ_ONLY,
    )
    def search_notes(query: Annotated[str, Field(description="One or more words to look for")]) -> NoteList:
        try:
            notes = store.search(query)
        except NotesError as exc:
            raise ToolError(str(exc)) from exc
        return NoteList(notes=notes, count=len(notes))

    @server.tool(
        title="Delete note",
        description="Delete a note by id (see list_notes); returns the deleted note. Cannot be undone.",
        annotations=_DELETES,
    )
    def delete_note(note_id: Annotated[int, Field(description="Id of the note to delete")]) -> Note:
        try:
            return store.delete(note_id)
        except NotesError as exc:
            raise ToolError(str(exc)) from exc

    return server


def main() -> None:
    """Serve keen-demo on stdio until stdin closes."""
    build_server().run("stdio")


if __name__ == "__main__":
    main()
