"""The two tools Keen puts in front of every MCP server: the search tool and the call tool.

One definition each (name, description, ``inputSchema``), used by every front end: the agent's
harness offers them to a model (``keen chat``), ``keen serve``'s search mode lists them to a
host, and the prompt budget counts them (docs/architecture.md "Names"):

- :data:`SEARCH_TOOL` (``search_tools``): ``{query, limit?, kinds?}``, ToolSearch over every
  connected server's tools (and, with ``kinds``, its resources and prompts);
- :data:`CALL_TOOL` (``call_mcp_tool``): ``{server, tool, arguments?}``, one call through the
  pipeline of :mod:`keen.calls`.

Their input is checked against the same schemas, once, by :func:`parse_search` and
:func:`parse_call` (JSON Schema Draft 2020-12 through ``jsonschema``): what a model is
offered is exactly what is accepted.
"""

# No ``from __future__ import annotations``: typing.NamedTuple compiles each field's
# annotation when it is a string, and the first such compile in a process costs about 11
# million instructions (0.25 a field after it); this module loads with every prompt.
import contextlib
import json
from typing import Any, Literal, NamedTuple

from keen.mcpskills import schema_path, skill_md_path

__all__ = [
    "CALL_TOOL",
    "CALL_TOOL_ALIASES",
    "SEARCH_KINDS",
    "SEARCH_LIMIT",
    "SEARCH_TOOL",
    "CallArgs",
    "SearchArgs",
    "Style",
    "arguments_problem",
    "call_label",
    "call_tool_definition",
    "parse_call",
    "parse_search",
    "search_tool_definition",
]

Style = Literal["openai", "anthropic", "mcp"]
"""A tool definition's shape: Chat Completions function, Messages tool, or MCP ``tools/list``."""

SEARCH_TOOL = "search_tools"
CALL_TOOL = "call_mcp_tool"
CALL_TOOL_ALIASES = frozenset({"call_tool"})
"""Names ``keen serve`` still accepts in ``tools/call`` for :data:`CALL_TOOL` (never listed):
its search mode called it ``call_tool`` before the names were one, and a host may have kept
that name from an earlier ``tools/list``."""

SEARCH_LIMIT = 10
"""Hits a search returns when ``limit`` is not given."""
SEARCH_KINDS = ("tool", "resource", "prompt")

_SEARCH_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "query": {
            "type": "string",
            "minLength": 1,
            "description": "What the tool should do, in a few words.",
        },
        "limit": {
            "type": "integer",
            "minimum": 1,
            "maximum": 50,
            "default": SEARCH_LIMIT,
            "description": f"How many results ({SEARCH_LIMIT}).",
        },
        "kinds": {
            "type": "array",
            "items": {"enum": list(SEARCH_KINDS)},
            "minItems": 1,
            "uniqueItems": True,
            "description": 'What to search: ["tool"] by default; "resource" and "prompt" find the '
            "servers' resources and prompts.",
        },
    },
    "required": ["query"],
    "additionalProperties": False,
}

_SEARCH_DESCRIPTION = (
    "Search the tools of every connected MCP server (those not listed to you too) by what they do. Returns the best matches, best first: name, server, tool and a one-line "
    "summary; a hit on several servers names the others (the call works on any of them)."
)
_KINDS_SENTENCE = (
    ' With kinds ["resource", "prompt"] it searches the servers\' resources and prompts instead; '
    "those hits join the resource index (read them with read_resource)."
)

_CALL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "server": {"type": "string", "description": "The MCP server's name, e.g. github, as search gives it"},
        "tool": {"type": "string", "description": "The tool's own name on that server"},
        "arguments": {
            "type": "object",
            "description": "Arguments matching the tool's inputSchema exactly",
            "additionalProperties": True,
        },
    },
    "required": ["server", "tool"],
    "additionalProperties": False,
}

_CALL_FROM_SKILLS = (
    "Call a tool on a connected MCP server. Before the first call to a server, read its skill file "
    "{skill_md} to find the tool, then read the tool's schema file {schema} and pass arguments "
    "that match its inputSchema exactly. The server and tool names are the ones listed in SKILL.md."
)
_CALL_FROM_TOOL = (
    "Call a tool on a connected MCP server with arguments that match its inputSchema exactly "
    "(read it with {reader} first)."
)


def _copied(value: Any) -> Any:
    """A copy of a JSON value (dicts and lists new, the rest shared: strings, numbers, bools).

    Not :func:`copy.deepcopy`: these schemas are JSON data, and importing :mod:`copy` (with
    :mod:`weakref`) for them cost a prompt's start 3.7 million instructions."""
    if isinstance(value, dict):
        return {key: _copied(item) for key, item in value.items()}  # pyright: ignore[reportUnknownVariableType]
    if isinstance(value, list):
        return [_copied(item) for item in value]  # pyright: ignore[reportUnknownVariableType]
    return value


def _shaped(
    name: str, description: str, schema: dict[str, Any], style: Style, read_only: bool
) -> dict[str, Any]:
    schema = _copied(schema)
    if style == "openai":
        return {
            "type": "function",
            "function": {"name": name, "description": description, "parameters": schema},
        }
    if style == "anthropic":
        return {"name": name, "description": description, "input_schema": schema}
    if style == "mcp":
        hints = {"readOnlyHint": True} if read_only else {"readOnlyHint": False, "destructiveHint": True}
        return {
            "name": name,
            "description": description,
            "inputSchema": schema,
            "annotations": {**hints, "openWorldHint": not read_only},
        }
    raise ValueError(f"unknown tool definition style {style!r}; use openai, anthropic or mcp")


def search_tool_definition(style: Style, *, kinds: bool = True) -> dict[str, Any]:
    """The ``search_tools`` definition.

    Args:
        style: ``"openai"`` (Chat Completions ``{"type": "function", "function": {...}}``),
            ``"anthropic"`` (``{"name", "description", "input_schema"}``) or ``"mcp"``
            (``{"name", "description", "inputSchema", "annotations"}``, MCP 2025-11-25 "Tools").
            No default: the two entry tools had different ones (``mcp`` here, ``openai``
            for :func:`call_tool_definition`), and a caller giving neither offered a model
            one tool of each shape.
        kinds: offer the ``kinds`` argument (resources and prompts too); ``keen serve``
            searches tools only and passes ``False``.

    Returns:
        A new dict each call (safe to modify).

    Raises:
        ValueError: another style.
    """
    schema = _copied(_SEARCH_SCHEMA)
    if not kinds:
        del schema["properties"]["kinds"]
    description = _SEARCH_DESCRIPTION + (_KINDS_SENTENCE if kinds else "")
    return _shaped(SEARCH_TOOL, description, schema, style, read_only=True)


def call_tool_definition(
    style: Style, *, skills_dir: str | None = None, schema_reader: str | None = None
) -> dict[str, Any]:
    """The ``call_mcp_tool`` definition.

    Args:
        style: as :func:`search_tool_definition` takes it.
        skills_dir: the skills directory the description tells the model to read
            (``<skills>/mcp:<server>/SKILL.md``); default ``$KEEN_HOME/skills``, where the
            sync writes them.
        schema_reader: the tool that gives a tool's inputSchema, named in the description
            instead of the skill files (``keen serve``: ``describe_tools``).

    Returns:
        A new dict each call (safe to modify).

    Raises:
        ValueError: another style.
    """
    if schema_reader is not None:
        description = _CALL_FROM_TOOL.format(reader=schema_reader)
    else:
        if skills_dir is None:
            from keen import paths

            skills_dir = str(paths.skills_dir())
        description = _CALL_FROM_SKILLS.format(
            skill_md=skill_md_path(skills_dir, "<server>"),
            schema=schema_path(skills_dir, "<server>", "<tool>"),
        )
    return _shaped(CALL_TOOL, description, _CALL_SCHEMA, style, read_only=False)


# Named tuples, not frozen dataclasses: this module loads with every prompt (the budget
# counts the definitions above), and a frozen dataclass compiles six methods as it is made.
class SearchArgs(NamedTuple):
    """``search_tools``'s input, checked."""

    query: str
    limit: int = SEARCH_LIMIT
    kinds: tuple[str, ...] = ("tool",)


class CallArgs(NamedTuple):
    """``call_mcp_tool``'s input, checked."""

    server: str
    tool: str
    arguments: dict[str, Any]


def call_label(name: str, arguments: dict[str, Any]) -> str:
    """How a front end names a call the model proposed: ``server/tool`` for a
    ``call_mcp_tool`` whose ``server`` and ``tool`` are both strings, else the name the model
    called (``call_mcp_tool`` itself when its arguments were not JSON or lack either: never
    ``None/None``).

    Args:
        name: the tool the model called.
        arguments: its arguments (``{}`` when they were not a JSON object).
    """
    server, tool = arguments.get("server"), arguments.get("tool")
    if name == CALL_TOOL and isinstance(server, str) and isinstance(tool, str):
        return f"{server}/{tool}"
    return name


def arguments_problem(name: str, data: Any, schema: dict[str, Any]) -> str | None:
    """Why ``data`` is not valid input of tool ``name`` with ``schema`` (JSON Schema Draft
    2020-12; the error jsonschema ranks most relevant), else None: ``"<name> arguments at
    <path>: <message>"``."""
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import best_match

    error = best_match(Draft202012Validator(schema).iter_errors(data))
    if error is None:
        return None
    where = "/".join(str(p) for p in error.absolute_path)
    return f"{name} arguments{f' at {where}' if where else ''}: {error.message}"


def parse_search(data: Any, *, kinds: bool = True) -> SearchArgs:
    """``search_tools``'s input checked against its schema.

    Args:
        data: the arguments object, or JSON text of one (as the OpenAI SDK hands a tool
            call's ``function.arguments`` over), as :func:`parse_call` takes it.
        kinds: whether ``kinds`` is accepted (as :func:`search_tool_definition` offered it).

    Raises:
        ValueError: the input does not match; the message names what is wrong and the shape.
    """
    schema = search_tool_definition("mcp", kinds=kinds)["inputSchema"]
    shape = '{"query": "<words>", "limit": <1-50>' + (', "kinds": ["tool"]' if kinds else "") + "}"
    data = _decoded(SEARCH_TOOL, data, shape)
    if (why := arguments_problem(SEARCH_TOOL, data, schema)) is not None:
        raise ValueError(f"{why}; send {shape}")
    if not data["query"].strip():
        raise ValueError(f'{SEARCH_TOOL} needs a "query" of a few words; it was blank')
    return SearchArgs(
        data["query"], int(data.get("limit", SEARCH_LIMIT)), tuple(data.get("kinds") or ("tool",))
    )


def parse_call(data: Any) -> CallArgs:
    """``call_mcp_tool``'s input checked against its schema: an object, or JSON text of one,
    whose ``arguments`` may also be JSON text of an object (as some models send it).

    Raises:
        ValueError: the input does not match; the message names what is wrong and the shape.
    """
    shape = '{"server": "<name>", "tool": "<name>", "arguments": {...}}'
    data = _decoded(CALL_TOOL, data, shape)
    if isinstance(data, dict) and isinstance(inner := data.get("arguments"), str):  # pyright: ignore[reportUnknownMemberType]
        with contextlib.suppress(ValueError, RecursionError):  # refused below, as the text it is
            data = {**data, "arguments": json.loads(inner)}  # pyright: ignore[reportUnknownVariableType]
    if (
        not _plainly_valid_call(data)
        and (why := arguments_problem(CALL_TOOL, data, _CALL_SCHEMA)) is not None
    ):
        raise ValueError(f"{why}; send {shape}")
    return CallArgs(data["server"], data["tool"], dict(data.get("arguments") or {}))


def _decoded(name: str, data: Any, shape: str) -> Any:
    """``data`` parsed when it is JSON text (an entry tool's input as a model sent it), else
    as it is; text that is not JSON is a ``ValueError`` naming the tool and the ``shape``."""
    if not isinstance(data, str):
        return data
    try:
        return json.loads(data)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{name} input is not valid JSON ({exc.msg}); send {shape}") from None
    except RecursionError:
        # Nested past Python's recursion limit ("[[[[..."): the decoder's RecursionError
        # reached the caller, past every `except ValueError` an agent loop has.
        raise ValueError(f"{name} input is not valid JSON (nested too deep); send {shape}") from None


_CALL_KEYS = frozenset(_CALL_SCHEMA["properties"])


def _plainly_valid_call(data: Any) -> bool:
    """Whether ``data`` is valid against :data:`_CALL_SCHEMA` by the plain checks its few
    keywords come to (an object of the three keys, two strings, an object): every call
    passes here, and building a jsonschema validator per call cost more than the rest of
    its checks. ``False`` also when in doubt: jsonschema then decides and words the error."""
    return (
        type(data) is dict
        and data.keys() <= _CALL_KEYS
        and type(data.get("server")) is str
        and type(data.get("tool")) is str
        and ("arguments" not in data or type(data["arguments"]) is dict)
    )
