"""Capability descriptors: what a tool, skill, resource or prompt becomes in a catalog.

Shared by :class:`~keen.capabilities.catalog.Catalog`, which builds a catalog at once, and
:class:`~keen.capabilities.catalog_cache.CatalogCache`, which rebuilds only what changed:
both sit above this module, so neither imports the other to build a descriptor.
"""

from __future__ import annotations

import json
import logging
import math
import re
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, Literal

from keen import _text
from keen._terminal import name_in_message
from keen.capabilities.descriptor import Capability, LoadedCapability, Risk
from keen.capabilities.names import capability_id
from keen.errors import KeenError
from keen.mcp.types import ServerInfo, Tool
from keen.mcpskills import describe_server
from keen.skills import Skill

if TYPE_CHECKING:
    from keen.mcp import Manager

__all__ = [
    "SUMMARY_CHARS",
    "ServerInputs",
    "item_capability",
    "listed_items",
    "local_capabilities",
    "server_capabilities",
    "server_inputs",
    "server_text",
    "skill_capability",
    "token_estimate",
    "tool_capability",
]

logger = logging.getLogger(__name__)

SUMMARY_CHARS = 200
_PARAM_DESCRIPTION_CHARS = 200


def token_estimate(text: str) -> int:
    """Estimated o200k tokens (bytes / 4): a descriptor's size, cheap enough for 4,000 tools."""
    return math.ceil(len(text.encode("utf-8")) / 4)


def _param_text(schema: dict[str, Any]) -> tuple[tuple[str, ...], str]:
    props = schema.get("properties") if isinstance(schema, dict) else None
    if not isinstance(props, dict):
        return (), ""
    names = tuple(str(k) for k in props)
    descriptions = [
        str(v.get("description", ""))[:_PARAM_DESCRIPTION_CHARS]
        for v in props.values()
        if isinstance(v, dict)
    ]
    return names, " ".join(d for d in descriptions if d)


def tool_capability(
    server: str,
    tool: dict[str, Any],
    loader: Callable[[Capability], LoadedCapability] | None = None,
    location: str = "",
    *,
    annotations_trusted: bool = True,
) -> Capability:
    """The descriptor of one MCP tool given in wire shape (``name``, ``description``,
    ``inputSchema``, ``title``, ``annotations``). ``loader`` reads the full layer later;
    by default the full layer is built from ``tool`` itself. ``annotations_trusted=False``:
    its annotations are claims (``keen.mcp.types.Tool.annotations_trusted``), see
    :meth:`Risk.from_annotations`."""
    name = str(tool.get("name", ""))
    description = str(tool.get("description") or "")
    title = str(tool.get("title") or "")
    schema = tool.get("inputSchema") or {}
    params, param_text = _param_text(schema)
    summary = _text.summary(description or title, SUMMARY_CHARS)
    full = json.dumps({"name": name, "description": description, "inputSchema": schema}, ensure_ascii=False)
    cap_id = capability_id("tool", name, server)
    holder: list[Capability] = []

    def load() -> LoadedCapability:
        if loader is not None:
            return loader(holder[0])
        return LoadedCapability(holder[0], full, schema=schema, raw=dict(tool))

    cap = Capability(
        id=cap_id,
        kind="tool",
        name=name,
        title=title,
        summary=summary,
        server=server,
        risk=Risk.from_annotations(tool.get("annotations"), trusted=annotations_trusted),
        tokens_index=token_estimate(f"- {name}: {summary}"),
        tokens_full=token_estimate(full),
        params=params,
        location=location,
        search_text=f"{description} {param_text}".strip(),
        _loader=load,
    )
    holder.append(cap)
    return cap


def skill_capability(skill: Skill) -> Capability:
    """A local (non-MCP) Agent Skill as one ``skill`` capability: its description the
    summary and search text, its SKILL.md body read only when loaded."""

    def load() -> LoadedCapability:
        return LoadedCapability(cap, skill.read_body())

    summary = _text.summary(skill.description, SUMMARY_CHARS, sentence=False)
    try:
        size = skill.skill_md.stat().st_size
    except OSError:
        size = 0
    cap = Capability(
        id=capability_id("skill", skill.name),
        kind="skill",
        name=skill.name,
        title="",
        summary=summary,
        server=None,
        risk=Risk.reading(),
        tokens_index=token_estimate(f"- {skill.name}: {summary}"),
        tokens_full=math.ceil(size / 4),
        location=str(skill.skill_md),
        search_text=skill.description,
        paths=skill.paths,
        _loader=load,
    )
    return cap


def server_text(server: str, info: ServerInfo | None, tools: list[Tool]) -> str:
    """The text ToolSearch indexes for a server: its catalog description (what its tools do)
    and its instructions (first 1000 chars)."""
    description = describe_server(server, info, [t.name for t in tools], [t.description for t in tools])
    instructions = (info.instructions or "")[:1000] if info else ""
    return f"{description} {' '.join(instructions.split())}".strip()


def listed_items(manager: Any, server: str, method: str) -> list[dict[str, Any]]:
    """Resources, resource templates or prompts of ``server`` when the Manager can list them
    (duck-typed ``method``: ``list_resources(name)``, ``list_resource_templates(name)`` or
    ``list_prompts(name)``, returning dicts in wire shape)."""
    lister = getattr(manager, method, None)
    if lister is None:
        return []
    try:
        items = lister(server)
    except (KeenError, TypeError):
        return []
    return [item if isinstance(item, dict) else getattr(item, "__dict__", {}) for item in items or []]


def item_capability(
    kind: Literal["resource", "prompt"], server: str, data: dict[str, Any]
) -> Capability | None:
    """One listed resource, resource template or prompt. Its full layer (deferred:
    :meth:`Capability.load`) is the whole listing entry (uri, uriTemplate or name,
    description, mimeType or arguments); reading the resource or getting the prompt is a
    call, not a load. A template is named by its ``uriTemplate`` (RFC 6570) and its summary
    says which variables to give as arguments when it is read."""
    template = str(data.get("uriTemplate") or "") if kind == "resource" else ""
    name = str(data.get("uri") or template or data.get("name") or "")
    if not name:
        return None
    description = str(data.get("description") or "")
    summary = description or str(data.get("name", ""))
    if template:
        summary = f"URI template; read it with arguments {_template_variables(template)}. {summary}"
    summary = _text.summary(summary, SUMMARY_CHARS, sentence=False)
    full = json.dumps(data, ensure_ascii=False, default=str)
    holder: list[Capability] = []

    def load() -> LoadedCapability:
        return LoadedCapability(holder[0], full, raw=dict(data))

    cap = Capability(
        id=capability_id(kind, name, server),
        kind=kind,
        name=name,
        title=str(data.get("title") or data.get("name") or ""),
        summary=summary,
        server=server,
        risk=Risk.reading(),
        tokens_index=token_estimate(f"- {name}: {summary}"),
        tokens_full=token_estimate(full),
        search_text=f"{data.get('name') or ''} {description}".strip(),
        _loader=load,
    )
    holder.append(cap)
    return cap


_EXPRESSION = re.compile(r"\{([^{}]*)\}")
"""An RFC 6570 expression (section 2.2): ``{`` an optional operator, varspecs split by commas ``}``."""


_PARSED_VARIABLES = 16
"""Up to this many variables a template's summary reads them with the SDK's parse (about
10 µs a variable), which refuses what the SDK cannot read; above, from the expressions."""


def _template_variables(template: str) -> str:
    """The variables of an RFC 6570 URI template as a JSON object of placeholders
    (``{"resourceId": "..."}``), as many as a summary shows; a template the SDK refuses
    (so no arguments can read it): the template itself. Each name (and the template) as
    :func:`name_in_message` quotes it: the server's, and a model reads it.

    A template of a few variables is read with the SDK's ``UriTemplate.parse``, so the model
    is told to give arguments only for one a read can expand (``x://{a}/{a}`` or
    ``x://{a}{b}`` is refused there). One of more is read from its expressions as written:
    the parse costs about 10 µs a variable, and a server may list 10,000 templates of 256
    variables, which held the event loop for half a minute at each catalog build; a read of
    one the SDK refuses is refused then (``keen.harness.executors``)."""
    from mcp.shared.uri_template import DEFAULT_MAX_TEMPLATE_LENGTH, InvalidUriTemplate, UriTemplate

    if len(template) > DEFAULT_MAX_TEMPLATE_LENGTH:
        return name_in_message(template)  # the SDK refuses it unread
    names: dict[str, None] = {}
    specs = 0
    for found in _EXPRESSION.finditer(template):
        for spec in found.group(1).lstrip("+#./;?&").split(","):
            specs += 1
            name = spec.partition(":")[0].removesuffix("*")
            if name:
                names.setdefault(name)
        if specs > _PARSED_VARIABLES and len(names) * 9 + sum(map(len, names)) > SUMMARY_CHARS:
            break  # the summary is cut there anyway
    if specs <= _PARSED_VARIABLES:
        try:
            names = dict.fromkeys(UriTemplate.parse(template).variable_names)
        except InvalidUriTemplate:
            return name_in_message(template)
    return json.dumps(dict.fromkeys(map(name_in_message, names), "..."), ensure_ascii=False)


ServerInputs = tuple[
    list[Tool], ServerInfo | None, list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]
]
"""What one connected server contributes to a catalog: its tools, ``serverInfo``, resources,
resource templates and prompts."""


def server_inputs(manager: Manager, name: str, *, held_out: bool) -> ServerInputs | None:
    """What ``manager`` lists now of server ``name`` (``None`` when it cannot list: not
    connected, not configured). ``held_out``: leave out the tools held for review (the
    Manager lists a changed tool as it was pinned; a call to it is refused all the same)."""
    try:
        tools = manager.list_tools(name)
    except KeenError as exc:
        logger.debug("catalog: %s skipped: %s", name, exc)
        return None
    if held_out:
        hidden = {c.name for c in manager.view(name).held}
        tools = [t for t in tools if t.name not in hidden]
    return (
        tools,
        manager.server_info(name),
        listed_items(manager, name, "list_resources"),
        listed_items(manager, name, "list_resource_templates"),
        listed_items(manager, name, "list_prompts"),
    )


def server_capabilities(name: str, inputs: ServerInputs) -> list[Capability]:
    """The descriptors of one server's tools, resources, resource templates and prompts."""
    tools, _, resources, templates, prompts = inputs
    caps = [tool_capability(name, t.to_dict(), annotations_trusted=t.annotations_trusted) for t in tools]
    caps += [c for data in resources + templates if (c := item_capability("resource", name, data))]
    caps += [c for data in prompts if (c := item_capability("prompt", name, data))]
    return caps


def local_capabilities(skills: Iterable[Skill]) -> list[Capability]:
    """A capability per local (non-MCP) skill of ``skills``; generated ``mcp:`` skills are
    left out (a running Manager's live lists describe those servers)."""
    return [skill_capability(s) for s in skills if not (s.managed and s.name.startswith("mcp:"))]
