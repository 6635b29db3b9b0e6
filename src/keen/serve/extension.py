"""The ``tool_descriptions`` progressive-disclosure extension: its resource, replies and errors.

The extension ("MCP Extension: Progressive Disclosure for Tool Descriptions", v2.1; see
``docs/serve.md``) uses only standard MCP: ``tools/list`` gives minimal descriptions,
``resources/read`` of ``resource:///tool_descriptions?tools=a,b`` gives the full ones and
authorizes those tools for the caller, and a call to a tool whose description was not
fetched fails with ``TOOL_DESCRIPTION_REQUIRED``. This module is the pure part: URIs,
response bodies and error objects, shaped exactly as the extension's sections 4.4, 6.1,
6.2 and 6.3 give them.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs, urlsplit

from keen._redact import redactor
from keen._terminal import name_in_message
from keen.serve.catalog import ExposedTool, ToolCatalog

__all__ = [
    "MAX_TOOLS_PER_READ",
    "RESOURCE_DESCRIPTION",
    "RESOURCE_NAME",
    "RESOURCE_URI",
    "describe",
    "description_required",
    "full_description",
    "is_tool_descriptions_uri",
    "missing_tool_selection",
    "rate_limited",
    "selected_tools",
    "too_many_tools",
    "unknown_tool",
]

RESOURCE_URI = "resource:///tool_descriptions"
RESOURCE_NAME = "Tool Descriptions - Required for tool use"
RESOURCE_DESCRIPTION = (
    "WORKFLOW: Step 1: Pick a tool from tools/list by what it does; the short descriptions there "
    "are enough to choose, but carry no parameters. Step 2: Fetch its full description and input "
    "schema: resource:///tool_descriptions?tools=TOOL_NAME (several at once: "
    "resource:///tool_descriptions?tools=tool1,tool2), using names exactly as tools/list shows "
    "them. Fetching authorizes those tools for your session. Step 3: Call the tool with the "
    "parameters you learned. Always give the ?tools= parameter; fetching without it is an error "
    "(MISSING_TOOL_SELECTION). Calling a tool whose description you did not fetch fails with "
    "TOOL_DESCRIPTION_REQUIRED and the URI to fetch."
)
_EXAMPLES = [f"{RESOURCE_URI}?tools=tool_name", f"{RESOURCE_URI}?tools=tool1,tool2"]

MAX_TOOLS_PER_READ = 100
"""Names one ``tool_descriptions`` read may ask for. Every unknown name's entry lists every
served tool (section 6.3), so an unbounded read is an unbounded body; Keen's own client
asks for 50 per read."""


def is_tool_descriptions_uri(uri: str) -> bool:
    """True for ``resource:///tool_descriptions`` with or without a query."""
    parts = urlsplit(str(uri))
    return parts.scheme == "resource" and parts.path.strip("/") == "tool_descriptions"


def selected_tools(uri: str) -> list[str] | None:
    """The names in ``?tools=a,b`` (order kept, duplicates and blanks dropped); ``None`` without any.

    Linear in the URI's length (a read may name hundreds of thousands of names: the caller
    refuses more than :data:`MAX_TOOLS_PER_READ`).
    """
    query = parse_qs(urlsplit(str(uri)).query, keep_blank_values=True)
    names: dict[str, None] = {}
    for value in query.get("tools", []):
        for name in value.split(","):
            if name := name.strip():
                names[name] = None
    return list(names) or None


def too_many_tools(count: int) -> dict[str, Any]:
    """A read that names more than :data:`MAX_TOOLS_PER_READ` tools: what to do instead."""
    return {
        "error": {
            "code": "TOO_MANY_TOOLS",
            "message": f"This read names {count} tools; one read may name at most {MAX_TOOLS_PER_READ}. "
            f"Read the descriptions in several reads of up to {MAX_TOOLS_PER_READ} names each "
            "(?tools=a,b,...), only for the tools you mean to call.",
            "max_tools_per_read": MAX_TOOLS_PER_READ,
        }
    }


def missing_tool_selection() -> dict[str, Any]:
    """The error object of section 6.1 (a read without ``tools``)."""
    return {
        "error": {
            "code": "MISSING_TOOL_SELECTION",
            "message": "You must specify one or more tool names in the 'tools' parameter.",
            "examples": list(_EXAMPLES),
        }
    }


def description_required(name: str) -> dict[str, Any]:
    """The error object of section 6.2 (a call before the description was fetched)."""
    return {
        "error": {
            "code": "TOOL_DESCRIPTION_REQUIRED",
            "message": f"Tool '{name}' requires fetching its description before use.",
            "resource_uri": f"{RESOURCE_URI}?tools={name}",
        }
    }


def unknown_tool(name: str, available: list[str]) -> dict[str, Any]:
    """The entry of section 6.3 for a name that is not in tools/list."""
    return {"error": f"Tool '{name_in_message(name)}' not found", "available_tools": list(available)}


def rate_limited(limit: int, window: float) -> dict[str, Any]:
    """Too many description fetches (section 10.3): what happened and when to retry."""
    return {
        "error": {
            "code": "RATE_LIMITED",
            "message": f"More than {limit} tool description fetches in {window:g} s; wait and retry, "
            "and fetch several tools in one read (?tools=a,b).",
            "retry_after_seconds": window,
        }
    }


def full_description(exposed: ExposedTool) -> dict[str, Any]:
    """Section 4.4's entry for one tool: name, description, inputSchema, examples, guidance.

    Text the server wrote (description, title, schemas, annotations) is redacted: a server
    may quote a secret Keen gave it, such as its API key from ``env`` (README "Secrets stay
    secret"); tool and property names are kept, they are what a call must send.
    """
    tool = exposed.tool
    schema = redactor.redact_json(tool.input_schema, patterns=True) or {"type": "object", "properties": {}}
    description = redactor.redact(tool.description)
    entry: dict[str, Any] = {
        "name": exposed.name,
        "description": description or f"{tool.name} on the {exposed.server} MCP server.",
        "inputSchema": schema,
        "examples": [{"description": "Required arguments only", "input": _example(schema)}],
        "usage_guidance": {
            "server": exposed.server,
            "upstream_tool": tool.name,
            "read_only": exposed.read_only,
        },
        "error_guidance": {
            "invalid_arguments": "The arguments did not match inputSchema; the error names the field. "
            "Fix it and call again.",
            "tool_error": "The upstream tool ran and reported an error (isError); read its text before "
            "retrying.",
            "TOOL_DESCRIPTION_REQUIRED": "Your authorization expired or was never granted; fetch this "
            "description again.",
        },
    }
    if tool.title:
        entry["title"] = redactor.redact(tool.title)
    if tool.annotations:
        entry["usage_guidance"]["annotations"] = redactor.redact_json(tool.annotations, patterns=True)
    if tool.output_schema:
        entry["outputSchema"] = redactor.redact_json(tool.output_schema, patterns=True)
    return entry


def describe(catalog: ToolCatalog, names: list[str]) -> tuple[dict[str, Any], list[str]]:
    """The section 4.4 body for ``names`` and the names found (the ones to authorize).

    Unknown names get the section 6.3 entry with ``available_tools``; the body holds only
    the names asked for.
    """
    body: dict[str, Any] = {}
    found: list[str] = []
    available = catalog.names()
    for name in names:
        exposed = catalog.get(name)
        if exposed is None:
            body[name] = unknown_tool(name, available)
        else:
            body[name] = full_description(exposed)
            found.append(name)
    return body, found


def _example(schema: dict[str, Any]) -> dict[str, Any]:
    # One example built from the schema's own hints: required properties only.
    props = schema.get("properties")
    required = schema.get("required")
    if not isinstance(props, dict) or not isinstance(required, list):
        return {}
    return {name: _value(props.get(name) or {}) for name in required if isinstance(name, str)}


def _value(prop: Any) -> Any:
    if not isinstance(prop, dict):
        return "..."
    for key in ("examples", "enum"):
        values = prop.get(key)
        if isinstance(values, list) and values:
            return values[0]
    if "default" in prop:
        return prop["default"]
    kind = prop.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "string")
    return {
        "string": "<string>",
        "integer": 0,
        "number": 0,
        "boolean": False,
        "array": [],
        "object": {},
    }.get(str(kind), "...")
