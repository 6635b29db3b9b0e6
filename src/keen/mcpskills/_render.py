"""The bytes of a generated skill: SKILL.md, one schema JSON per tool, the marker file.

Pure functions of their inputs, so generation is byte-reproducible: tools are ordered by
name, JSON is written with sorted keys, UTF-8 and a trailing newline (compact schemas,
indented marker),
and the only clock reading is the ``generated_at`` passed in. Layout and contents:
docs/architecture.md "Generated skills".
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from typing import Any

from keen import _text
from keen._terminal import visible_json
from keen._text import has_invisible, hidden_at, invisible, sentences, shorten, unsafe_char
from keen.mcp.types import ServerInfo, Tool
from keen.mcpskills._names import (
    MAX_NAME_CHARS,
    PlannedTool,
    RejectedTool,
    display_text,
)
from keen.mcpskills.server_line import distinctive_terms, summary_from_terms, tools_by_coverage
from keen.skills.discover import MANAGED_BY, MARKER_FILE, SKILL_FILE, safe_loader
from keen.trust.flags import escape_text

__all__ = [
    "FORMAT",
    "MANAGED_BY",
    "MARKER_FILE",
    "MAX_SKIPPED_LISTED",
    "MAX_TABLE_ROWS",
    "SKILL_FILE",
    "describe_server",
    "dump_json",
    "iso",
    "render_schema",
    "render_skill_md",
]

FORMAT = 1
"""Version of the generated layout; a skill written with another format is regenerated."""
MAX_TABLE_ROWS = 1000
"""The generated tool table is capped at 1000 rows (docs/architecture.md "Generated skills")."""
MAX_SKIPPED_LISTED = 50
"""SKILL.md, the marker and the sync report name at most this many skipped tools, then a count:
a server listing 20,000 unusable names must not make a 2 MB SKILL.md."""

COMPACT_SCHEMA_CHARS = 2000
"""A schema file longer than this on one line is written indented (93% of real ones fit)."""
DESCRIPTION_CHARS = 100
_ABOUT_CHARS = 60
_MIN_ABOUT_CHARS = 32
_INSTRUCTIONS_CHARS = 2000


def iso(value: datetime) -> str:
    """UTC ISO 8601 to the second with a ``Z`` suffix; a naive datetime is taken as UTC."""
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return value.astimezone(UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def dump_json(data: Any) -> bytes:
    """The one JSON style of generated files: sorted keys, indent 2, UTF-8, trailing newline."""
    return (json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n").encode("utf-8")


# "A Model Context Protocol (MCP) server that provides X" says nothing the catalog line does
# not; dropping it leaves room for what the server is for (bench/footprint.py measured it).
_BOILERPLATE = re.compile(
    r"^(?:an?|the|this)\s+(?:model context protocol|mcp)(?:\s*\(mcp\))?\s+server\s+(?:that|which|to|for)\s+",
    re.IGNORECASE,
)
_BASED_ON = re.compile(
    r"\s+(?:based on|built on|using|for|via) the model context protocol(?:\s*\(mcp\))?", re.I
)


def _plain(sentence: str) -> str:
    stripped = _BASED_ON.sub("", _BOILERPLATE.sub("", sentence))
    return stripped[:1].upper() + stripped[1:] if stripped else sentence


def _prose(markdown: str) -> str:
    """Instructions without markdown headings, rules, fences and table rows, which make a
    poor first sentence (many servers open with ``# <Name> Instructions``)."""
    kept = []
    for line in markdown.splitlines():
        bare = line.strip()
        if not bare or bare.startswith(("#", "```", "---", "===", "|")):
            continue
        kept.append(bare.lstrip("-*> ").strip())
    return " ".join(kept)


# Sentences about the instructions themselves or their reader ("Audience: These instructions
# are written for an LLM or autonomous agent…", "Follow them to use…") say nothing of what
# the server does; the catalog line would waste its few characters on them.
_META = re.compile(
    r"^(?:(?:audience|note|purpose|overview|summary|introduction|about|important)\s*:"
    r"|(?:these|the following|this)\s+(?:instructions|guidelines|document|section)\b"
    r"|follow (?:them|these)\b"
    r"|(?:you are|as) an? (?:llm|ai|assistant|agent)\b)"
    r"|\b(?:written|intended|meant) for (?:an? )?(?:llm|ai|language model|agent|assistant)",
    re.IGNORECASE,
)


def _lead(markdown: str) -> str:
    """The instructions' opening prose: lines up to the first heading that follows some
    text. Later sections (usage rules, constraints, tips) tell the model how to call the
    tools, not what the server is."""
    kept: list[str] = []
    for line in markdown.splitlines():
        if line.lstrip().startswith("#") and kept:
            break
        kept.append(line)
    return _prose("\n".join(kept))


def _about(instructions: str) -> str:
    """The first opening sentence of ``instructions`` that says what the server does, or ``""``."""
    for sentence in sentences(_lead(instructions)):
        sentence = sentence.strip()
        if len(sentence) >= 8 and not _META.search(sentence):
            return _text.summary(_plain(sentence), _ABOUT_CHARS)
    return ""


def _from_tools(descriptions: list[str]) -> str:
    """What the tools do: the first sentences of their descriptions (name order), as many
    as fit in ``_ABOUT_CHARS``, joined by ``; `` (``Echoes back the input; Adds two numbers``).
    A sentence too long for the room left is passed over, not the end: one tool's words
    alone read as if they were the whole server's ("Echoes back the input string.")."""
    parts: list[str] = []
    for text in descriptions:
        sentence = _text.summary(text, _ABOUT_CHARS).rstrip(".")
        if not sentence or sentence.lower() in (p.lower() for p in parts):
            continue
        if len("; ".join([*parts, sentence])) > _ABOUT_CHARS:
            continue
        parts.append(sentence)
    return "; ".join(parts)


def describe_server(
    server: str, info: ServerInfo | None, tool_names: list[str], tool_descriptions: list[str] | None = None
) -> str:
    """The frontmatter ``description``: what the server is for, on one line, <= 100 chars.

    ``<first sentence of its instructions that describes the server>.``; when its
    instructions say nothing of that (absent, or only about their audience), what its
    tools do as a whole (:mod:`keen.mcpskills.server_line`: their most telling words, cut
    short enough to leave room for one tool name; when they have none, the first
    sentences of ``tool_descriptions``, in name order); else
    ``<serverInfo title or name> MCP server.``, else ``The `github` MCP server.``. Then
    ``Tools: a, b, … (N).`` with as many names as fit, in the order that covers the
    server's words soonest. It becomes the prompt
    catalog line ``- mcp:github: <this> → read <path>/SKILL.md``, paid for on every
    turn, so it names no server twice and stays short: measured on LiveMCPBench's 70
    servers (bench/footprint.py), this shape takes the reduction from 93% to over 95%.
    Server-supplied text is cut to 60 chars and stripped of control characters, so a
    server cannot flood the catalog.
    """
    about = _about(info.instructions or "") if info else ""
    descriptions = list(tool_descriptions or [""] * len(tool_names))
    terms = distinctive_terms(tool_names, descriptions, server) if tool_names else []
    ordered = tools_by_coverage(tool_names, terms) if terms else sorted(tool_names)
    if not about and terms:
        # Room for the first tool's name too: a line of words and no tool reads as a riddle.
        first = _text.summary(ordered[0], 60, sentence=False)
        room = DESCRIPTION_CHARS - len(f". Tools: {first}, … ({len(tool_names)}).")
        about = summary_from_terms(terms, max(min(_ABOUT_CHARS, room), _MIN_ABOUT_CHARS))
    if not about and tool_descriptions:
        # Only generic words ("Tool number 3"): the descriptions say more than nothing.
        about = _from_tools([d for d in tool_descriptions if d])
    # One_line drops invisible characters; escape_text makes an HTML comment visible too.
    about = escape_text(about)
    if not about and info:
        label = _text.summary(info.title or "", _ABOUT_CHARS, sentence=False)
        if not label and info.name and info.name != server:
            label = _text.summary(info.name, _ABOUT_CHARS, sentence=False)
        if label:
            about = f"{label} MCP server"
    text = about or f"The `{server}` MCP server"
    if not text.endswith((".", "!", "?", "…", "。")):
        text += "."
    count = len(tool_names)
    if count == 0:
        return text + " It lists no tools."
    tail = f" ({count})." if count > 1 else "."
    shown: list[str] = []
    for name in ordered:
        candidate = ", ".join([*shown, _text.summary(name, 60, sentence=False)])
        more = ", …" if len(shown) + 1 < count else ""
        if len(text) + len(" Tools: ") + len(candidate) + len(more) + len(tail) > DESCRIPTION_CHARS:
            break
        shown.append(_text.summary(name, 60, sentence=False))
    if not shown:
        return text + f" {count} tool{'s' if count != 1 else ''}."
    more = ", …" if len(shown) < count else ""
    label = "Tools" if count > 1 else "Tool"
    return f"{text} {label}: {', '.join(shown)}{more}{tail}"


# A value of printable ASCII opening with a letter, with no ": " or " #" and not ending in
# a space or ":", reads back as itself when written plain: in block context nothing after
# its first character is an indicator then (flow indicators, "&", "*", "`", "|" and the
# rest only open a scalar), and an implicit type starting with a letter is only a bool or
# null word (YAML 1.1, as PyYAML's resolver reads it), which _YAML_WORDS holds in any case.
_PLAIN = re.compile(r"[A-Za-z][ -~]*")
_YAML_WORDS = frozenset({"yes", "no", "y", "n", "true", "false", "on", "off", "null"})


def _known_scalar(value: str) -> str | None:
    """What :func:`_checked_scalar` answers for ``value``, known without PyYAML for the
    values sync writes (``mcp:<server>``, a catalog line of printable ASCII), else ``None``.

    Plain when :data:`_PLAIN` says it reads back; double-quoted when it holds ``": "`` or
    ``" #"`` (plain, the first is a YAML error and the second starts a comment, so the plain
    form never reads back) and is printable ASCII, whose JSON form escapes only ``"`` and
    ``\\``, both YAML double-quoted escapes of the same characters."""
    if not (value.isascii() and value.isprintable()):
        return None
    if ": " in value or " #" in value:
        return json.dumps(value)
    if _PLAIN.fullmatch(value) and not value.endswith((" ", ":")) and value.lower() not in _YAML_WORDS:
        return value
    return None


def _yaml_scalar(value: str) -> str:
    """``value`` as a YAML scalar that skill discovery's safe loader reads back unchanged:
    plain when that round-trips, else double-quoted (JSON string syntax is valid YAML).

    The common values are decided by :func:`_known_scalar`, the rest by
    :func:`_checked_scalar`, with the same answer: importing PyYAML (15-20 ms) and loading
    two scalars per skill cost the skill writer more than rendering the skill."""
    known = _known_scalar(value)
    return known if known is not None else _checked_scalar(value)


def _checked_scalar(value: str) -> str:
    """:func:`_yaml_scalar` by trying: the plain form, then the double-quoted one, each read
    back with the loader discovery reads frontmatter with (libyaml's ``CSafeLoader`` when
    PyYAML has it: ten times the pure-Python one's speed). PyYAML is imported here."""
    import yaml

    loader = safe_loader()
    for candidate in (value, json.dumps(value, ensure_ascii=False)):
        if "\n" in candidate:
            continue
        try:
            if yaml.load(f"k: {candidate}", Loader=loader) == {"k": value}:
                return candidate
        except yaml.YAMLError:
            continue
    raise ValueError(f"cannot write {value!r} as a one-line YAML scalar")


def _visible(line: str) -> str:
    """A line of server text with control and invisible formatting characters escaped
    (``\u001b``, ``\U000e0041`` past U+FFFF: ``\ue0041`` would read as U+E004 and a ``1``):
    the model reads SKILL.md, and so may a person in a terminal. A lone emoji presentation
    selector after a visible character stays (``⚠️``, as :data:`keen._text.HIDDEN` has it)."""
    if line.isprintable() and not has_invisible(line):
        return line
    return "".join(_escaped(line, i) if ch != "\t" and unsafe_char(ch) else ch for i, ch in enumerate(line))


def _escaped(line: str, index: int) -> str:
    ch = line[index]
    if invisible(ch) and not hidden_at(line, index):
        return ch  # a lone emoji presentation selector
    code = ord(ch)
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


def _cell(text: str) -> str:
    return escape_text(text).replace("|", "\\|")


def render_schema(tool: Tool) -> bytes:
    """``schemas/<tool>.json``: the shape ``{server, name, description, inputSchema}``,
    plus ``title`` and ``annotations`` when the server gave them (the annotations carry
    readOnlyHint/destructiveHint, which help the model pick the safe tool). The full
    description is kept; ``outputSchema`` is left out: the file is the argument contract.
    Control, bidi and invisible characters in its strings are written as ``\\uXXXX``
    escapes (:func:`keen._terminal.visible_json`): the same JSON value, all of it visible.

    Sorted keys; one compact line when it fits in ``COMPACT_SCHEMA_CHARS`` (the model reads
    these: 170 vs 248 o200k tokens per LiveMCPBench schema against indent 2), else indent 1
    so that no file reader's line-length limit cuts a large schema."""
    data: dict[str, Any] = {
        "server": tool.server,
        "name": tool.name,
        "description": tool.description,
        "inputSchema": tool.input_schema or {},
    }
    if tool.title:
        data["title"] = tool.title
    if tool.annotations:
        data["annotations"] = tool.annotations
    text = json.dumps(data, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    if len(text) > COMPACT_SCHEMA_CHARS:
        text = json.dumps(data, sort_keys=True, ensure_ascii=False, indent=1)
    # The same value with C1 controls, bidi marks and invisible characters as \u escapes: a
    # person may cat the file, and the model should see text hidden in Unicode tags as such.
    return (visible_json(text) + "\n").encode("utf-8")


def render_skill_md(
    *,
    server: str,
    description: str,
    info: ServerInfo | None,
    tools: list[tuple[Tool, PlannedTool]],
    rejected: list[RejectedTool],
    generated_at: datetime,
    held: str = "",
    held_tools: bool = False,
    held_info: bool = False,
) -> bytes:
    """SKILL.md: frontmatter (``name: mcp:<server>``, ``description``), server and timestamp,
    how to call ``call_mcp_tool``, the tool table (first ``MAX_TABLE_ROWS`` by name, one-line
    descriptions of <= 120 chars), the pins' note on what is held for review (``held``; what
    that means follows from the facts ``held_tools``, some tools are held, and ``held_info``,
    the server's info is, never from the note's words) and a note on tools left out or
    skipped."""
    lines = [
        "---",
        f"name: {_yaml_scalar(f'mcp:{server}')}",
        f"description: {_yaml_scalar(description)}",
        "---",
        f"# mcp:{server}",
        "",
        f"Tools of the `{server}` MCP server, generated by Keen from `tools/list` at {iso(generated_at)}.",
        "Keen regenerates this directory when the server's tools change: do not edit it.",
    ]
    if info and (info.name or info.version):
        about = " ".join(x for x in (info.title or info.name, info.version) if x)
        lines.append(f"The server calls itself: {_text.summary(about, 120, sentence=False)}.")
    if info and info.instructions and info.instructions.strip():
        text = escape_text(info.instructions.strip())  # hidden text shown, not obeyed unseen
        text = shorten(text, _INSTRUCTIONS_CHARS)
        lines += ["", "## Server instructions", ""]
        lines += ["> " + _visible(line.rstrip()) if line.strip() else ">" for line in text.splitlines()]
    lines += [
        "",
        "## How to call a tool",
        "",
        "1. Pick a tool from the table below.",
        "2. Read its schema file. Paths are relative to this skill's directory (the folder of this",
        "   SKILL.md). The file's `inputSchema` is the argument contract.",
        "3. Call the `call_mcp_tool` tool with the server name, the tool name and the arguments:",
        "",
        "```json",
        f'{{"server": "{server}", "tool": "<tool name>", "arguments": {{...}}}}',
        "```",
        "",
        "The `arguments` must match the tool's `inputSchema` exactly: only the properties it defines,",
        "every required one, the declared types. Keen checks them before it sends the call.",
        "",
        f"## Available tools ({len(tools)})",
        "",
        "| Tool | Description | Schema |",
        "|------|-------------|--------|",
    ]
    for tool, planned in tools[:MAX_TABLE_ROWS]:
        summary = _cell(_text.summary(tool.description or tool.title or ""))
        lines.append(f"| {display_text(tool.name, MAX_NAME_CHARS)} | {summary} | {_cell(planned.relpath)} |")
    omitted = len(tools) - MAX_TABLE_ROWS
    if omitted > 0:
        lines += [
            "",
            f"{omitted} more tool{'s are' if omitted != 1 else ' is'} not listed: the table is capped at "
            f"{MAX_TABLE_ROWS} rows. Their schemas are still in `schemas/` (one file per tool, "
            "named after the tool); list that directory to find them.",
        ]
    if held:
        # Only the count: the held definitions are what the user has not accepted yet.
        lines += [
            "",
            "## Held for review",
            "",
            f"{held}. {_until_accepted(held_tools, held_info)}",
        ]
    if rejected:
        lines += [
            "",
            "## Skipped tools",
            "",
            "The server lists these tools too, but Keen wrote no schema for them (the reason is in",
            "brackets), so they are not documented here:",
            "",
        ]
        lines += [f"- {r.display} ({r.reason})" for r in rejected[:MAX_SKIPPED_LISTED]]
        if len(rejected) > MAX_SKIPPED_LISTED:
            lines.append(f"- and {len(rejected) - MAX_SKIPPED_LISTED} more ({len(rejected)} skipped in all)")
    return ("\n".join(lines) + "\n").encode("utf-8")


def _until_accepted(tools: bool, info: bool) -> str:
    """What holding means for what is held (``tools``: some of the server's tools; ``info``:
    what it says of itself, :attr:`keen.trust.pins.PinnedView.held_info`): held tools
    cannot be called; held server info is shown as it was pinned."""
    if info and not tools:
        return "Until the user accepts it, this file shows the server's info as it was pinned."
    if info:
        return (
            "Until the user accepts them, the held tools cannot be called, and this file shows the "
            "server's info as it was pinned."
        )
    return "Until the user accepts them, they cannot be called."
