"""keen-demo over real stdio (``python -m keen.demo.server``), driven by the MCP SDK client.

The server runs forked from the worker's warm process (``tests/helpers/forkserver.py``: the
same module on the same pipes and with its configs.json entry's environment, without an
interpreter start of about 1.2 s of CPU), since what these tests show is what its tools
answer and its notes file. Its start as a new interpreter from that entry, as a user's Keen
starts it, is shown by ``keen demo --keep`` (tests/cli/test_tools_cmd.py), which configures
:func:`keen.demo.demo_server_entry` and calls the server's tools through it."""

from __future__ import annotations

import json
import stat
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO

import pytest
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp_types import CallToolResult, TextContent

from helpers.forkserver import launch_args
from keen.demo import SERVER_NAME, demo_server_entry
from keen.demo.server import INSTRUCTIONS
from keen.demo.units import UnitError, convert, supported_units_text
from keen.mcp.config import parse_config
from mcp import ClientSession

READ_ONLY = {"current_time", "list_timezones", "convert_units", "word_count", "list_notes", "search_notes"}


def text_of(result: CallToolResult) -> str:
    return "".join(block.text for block in result.content if isinstance(block, TextContent))


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "keen-home"
    monkeypatch.setenv("KEEN_HOME", str(path))
    return path


@pytest.fixture
def errlog(tmp_path: Path) -> Iterator[TextIO]:
    with (tmp_path / "demo-stderr.log").open("w+", encoding="utf-8") as handle:
        yield handle


@pytest.fixture
def corrupt_notes(home: Path) -> Path:
    home.mkdir(parents=True)
    notes_file = home / "demo-notes.json"
    notes_file.write_text("{not json", encoding="utf-8")
    return notes_file


@asynccontextmanager
async def demo_session(home: Path, errlog: TextIO) -> AsyncIterator[ClientSession]:
    """A client session of keen-demo, forked (module docstring) with its configs.json entry's
    command and environment."""
    entry = demo_server_entry(home)
    assert entry["args"] == ["-m", "keen.demo.server"], entry  # what the fork runs
    params = StdioServerParameters(
        command=entry["command"], args=launch_args(*entry["args"]), env=entry["env"]
    )
    async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session


async def call_ok(session: ClientSession, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    result = await session.call_tool(tool, arguments)
    assert not result.is_error, text_of(result)
    assert result.structured_content is not None
    return result.structured_content


async def call_error(session: ClientSession, tool: str, arguments: dict[str, Any]) -> str:
    result = await session.call_tool(tool, arguments)
    assert result.is_error
    return text_of(result)


def test_demo_entry_is_valid_config(home: Path) -> None:
    entry = demo_server_entry()
    assert entry["env"] == {"KEEN_HOME": str(home)}
    config = parse_config(json.dumps({"version": 1, "servers": {SERVER_NAME: entry}}))
    assert config.servers[SERVER_NAME].transport == "stdio"


@pytest.mark.anyio
async def test_tools_time_units_and_word_count(home: Path, errlog: TextIO) -> None:
    async with demo_session(home, errlog) as session:
        init = session.initialize_result
        assert init is not None and init.server_info.name == "keen-demo" and init.instructions == INSTRUCTIONS
        tools = {tool.name: tool for tool in (await session.list_tools()).tools}
        assert set(tools) == READ_ONLY | {"add_note", "delete_note"}
        for name, tool in tools.items():
            assert tool.description and len(tool.description) > 30, name
            assert tool.output_schema is not None, name
            assert tool.annotations is not None and tool.annotations.read_only_hint == (name in READ_ONLY), (
                name
            )
        delete_hints = tools["delete_note"].annotations
        assert delete_hints is not None and delete_hints.destructive_hint is True
        assert tools["convert_units"].input_schema["required"] == ["value", "from_unit", "to_unit"]
        assert tools["convert_units"].input_schema["properties"]["value"]["type"] == "number"

        now = await call_ok(session, "current_time", {})
        assert now["timezone"] == "UTC" and now["utc_offset"] == "+00:00"
        assert abs(now["unix"] - datetime.now(UTC).timestamp()) < 600
        tokyo = await call_ok(session, "current_time", {"timezone": "Asia/Tokyo"})
        assert tokyo["utc_offset"] == "+09:00" and tokyo["iso"].endswith("+09:00")
        assert datetime.fromisoformat(tokyo["iso"]).strftime("%A") == tokyo["weekday"]
        unknown = await call_error(session, "current_time", {"timezone": "Mars/Olympus_Mons"})
        assert "Mars/Olympus_Mons" in unknown and "list_timezones" in unknown
        assert "Europe/Paris" in await call_error(session, "current_time", {"timezone": "Europe/Pari"})
        europe = await call_ok(session, "list_timezones", {"prefix": "europe/"})
        assert "Europe/Paris" in europe["timezones"] and europe["count"] == len(europe["timezones"])
        assert all(name.startswith("Europe/") for name in europe["timezones"])

        miles = await call_ok(session, "convert_units", {"value": 1, "from_unit": "miles", "to_unit": "km"})
        assert miles["result"] == pytest.approx(1.609344) and miles["quantity"] == "length"
        assert miles["text"] == "1 mi = 1.60934 km"
        boiling = await call_ok(
            session, "convert_units", {"value": 100, "from_unit": "celsius", "to_unit": "F"}
        )
        assert boiling["result"] == pytest.approx(212.0)
        gib = await call_ok(session, "convert_units", {"value": 1, "from_unit": "GiB", "to_unit": "MiB"})
        assert gib["result"] == 1024
        bad_unit = await call_error(
            session, "convert_units", {"value": 1, "from_unit": "furlong", "to_unit": "m"}
        )
        assert (
            "furlong" in bad_unit
            and "length: mm, cm, m, km" in bad_unit
            and "temperature: C, F, K" in bad_unit
        )
        mixed = await call_error(session, "convert_units", {"value": 1, "from_unit": "km", "to_unit": "kg"})
        assert "cannot convert length" in mixed
        bad_type = await call_error(
            session, "convert_units", {"value": "ten", "from_unit": "m", "to_unit": "km"}
        )
        assert "value" in bad_type

        counted = await call_ok(session, "word_count", {"text": "One two three.\nFour five"})
        assert counted["words"] == 5 and counted["lines"] == 2 and counted["characters"] == 24
        assert counted["characters_no_spaces"] == 20 and counted["reading_minutes"] == pytest.approx(
            5 / 200, abs=0.01
        )


@pytest.mark.anyio
async def test_notes_persist_in_keen_home(home: Path, errlog: TextIO) -> None:
    async with demo_session(home, errlog) as session:
        first = await call_ok(
            session, "add_note", {"title": "Groceries", "body": "milk, eggs", "tags": ["Home"]}
        )
        second = await call_ok(session, "add_note", {"title": "Standup", "body": "ship the importer"})
        assert (first["id"], second["id"]) == (1, 2) and first["tags"] == ["home"]
        assert await call_error(session, "add_note", {"title": "  ", "body": "x"})
    notes_file = home / "demo-notes.json"
    assert stat.S_IMODE(notes_file.stat().st_mode) == 0o600
    assert [n["title"] for n in json.loads(notes_file.read_text())["notes"]] == ["Groceries", "Standup"]

    async with demo_session(home, errlog) as session:  # a new process reads the same file
        listed = await call_ok(session, "list_notes", {})
        assert [n["title"] for n in listed["notes"]] == ["Groceries", "Standup"] and listed["count"] == 2
        tagged = await call_ok(session, "list_notes", {"tag": "HOME"})
        assert [n["id"] for n in tagged["notes"]] == [1]
        found = await call_ok(session, "search_notes", {"query": "importer SHIP"})
        assert [n["id"] for n in found["notes"]] == [2]
        assert (await call_ok(session, "search_notes", {"query": "nothing-matches"}))["count"] == 0
        deleted = await call_ok(session, "delete_note", {"note_id": 1})
        assert deleted["title"] == "Groceries"
        missing = await call_error(session, "delete_note", {"note_id": 1})
        assert "no note with id 1" in missing and "list_notes" in missing
        third = await call_ok(session, "add_note", {"title": "Later", "body": ""})
        assert third["id"] == 3  # ids are never reused
    assert [n["id"] for n in json.loads(notes_file.read_text())["notes"]] == [2, 3]


@pytest.mark.anyio
async def test_corrupt_notes_file_is_reported_and_left_untouched(
    home: Path, corrupt_notes: Path, errlog: TextIO
) -> None:
    notes_file = corrupt_notes
    async with demo_session(home, errlog) as session:
        message = await call_error(session, "add_note", {"title": "t", "body": "b"})
        assert str(notes_file) in message and "move it aside" in message
        assert await call_error(session, "list_notes", {})
    assert notes_file.read_text(encoding="utf-8") == "{not json"


@pytest.mark.parametrize(
    ("value", "src", "dst", "expected"),
    [
        (1, "km", "m", 1000),
        (12, "inches", "ft", 1),
        (1, "lb", "g", 453.59237),
        (32, "F", "C", 0),
        (0, "K", "C", -273.15),
        (1, "MB", "KB", 1000),
        (8, "bits", "B", 1),
        (90, "min", "h", 1.5),
        (2, "weeks", "days", 14),
    ],
)
def test_convert_table(value: float, src: str, dst: str, expected: float) -> None:
    assert convert(value, src, dst).result == pytest.approx(expected)


def test_convert_errors() -> None:
    with pytest.raises(UnitError, match="below absolute zero"):
        convert(-300, "C", "K")
    with pytest.raises(UnitError, match="unknown unit 'parsec'") as info:
        convert(1, "parsec", "m")
    assert supported_units_text() in str(info.value)
