"""Upstream prompts and resources as ``keen serve`` shows them: namespaced per server.

A host sees every connected upstream server's prompts, resources and resource templates
beside Keen's own ``tool_descriptions`` resource (docs/serve.md "Prompts and resources"):

- a prompt ``p`` of server ``s`` is ``mcp__s__p`` (the shape of an exposed tool name);
- a resource ``u`` of server ``s`` is ``keen://s/u`` (the upstream URI whole after the
  server's name, which holds no ``/``); a template ``t`` is ``keen://s/t``, so a URI a host
  expands from it names its server too.

Everything an upstream server lists is untrusted: an entry that does not validate as its
MCP type is left out, and a read or a prompt is forwarded only for what the server listed
(a listed resource, a URI its own template matches, a listed prompt). What a read or a
prompt brings back is untrusted too: its blobs, images and audio reach the host only when
they are what their type claims (:func:`checked_contents`, :func:`checked_messages`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import mcp_types as mt
from pydantic import ValidationError

from keen.calls import blocks_fault, fault_note

__all__ = [
    "URI_PREFIX",
    "Listing",
    "checked_contents",
    "checked_messages",
    "exposed_prompt",
    "exposed_uri",
    "upstream_uri",
]

logger = logging.getLogger("keen.serve")

URI_PREFIX = "keen://"
_MAX_TEMPLATE_URI = 8192
_MATCH_BUDGET = 0.5
"""Seconds one read may spend parsing and matching its server's templates. Parsing costs
about 10 µs a variable (256 at most a template) and a server may list 10,000 templates:
unbounded, one read of a URI none of them matches held the event loop, every host's calls
with it, for half a minute."""


def exposed_uri(server: str, uri: str) -> str:
    """``keen://<server>/<uri>``: an upstream URI (or URI template) as keen serve shows it."""
    return f"{URI_PREFIX}{server}/{uri}"


def upstream_uri(exposed: str) -> tuple[str, str] | None:
    """``(server, upstream uri)`` of an exposed URI, or None when it is not one."""
    if not exposed.startswith(URI_PREFIX):
        return None
    server, sep, uri = exposed[len(URI_PREFIX) :].partition("/")
    return (server, uri) if sep and server and uri else None


def checked_contents(contents: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A ``resources/read`` result's ``contents`` as a host may get them: when a blob is not
    what its ``mimeType`` claims (or is a type a host would run, or they pass the size
    limit: :func:`keen.calls.blocks_fault`, as for a tool's result), every blob becomes a
    ``text/plain`` part saying why, and the text parts stay (MCP 2025-11-25 "Resources >
    Resource Contents")."""
    fault = blocks_fault([{"type": "resource", "resource": part} for part in contents])
    if fault is None:
        return contents
    logger.info("keen serve left a read's blobs out: %s", fault)
    note = fault_note(fault)
    return [
        {"uri": part.get("uri"), "mimeType": "text/plain", "text": note} if "blob" in part else part
        for part in contents
    ]


def _binary(block: Any) -> bool:
    return isinstance(block, dict) and (
        block.get("type") in ("image", "audio")
        or (
            block.get("type") == "resource"
            and isinstance(block.get("resource"), dict)
            and "blob" in block["resource"]
        )
    )


def checked_messages(result: dict[str, Any]) -> dict[str, Any]:
    """A ``prompts/get`` result as a host may get it: when an image, audio or embedded blob
    among its messages' content is not what its type claims (:func:`keen.calls.blocks_fault`),
    each such block becomes a text block saying why (MCP 2025-11-25 "Prompts > Prompt
    Messages")."""
    messages = [m for m in result.get("messages") or [] if isinstance(m, dict)]
    blocks = [block for m in messages for block in _blocks(m.get("content"))]
    fault = blocks_fault(blocks)
    if fault is None:
        return result
    logger.info("keen serve left a prompt's images, audio or blobs out: %s", fault)
    text = {"type": "text", "text": fault_note(fault)}

    def checked(content: Any) -> Any:
        if isinstance(content, list):
            return [text if _binary(block) else block for block in content]
        return text if _binary(content) else content

    shown = [{**m, "content": checked(m.get("content"))} for m in messages]
    return {**result, "messages": shown}


def _blocks(content: Any) -> list[Any]:
    # One block per message in 2025-11-25; a list in later revisions.
    return content if isinstance(content, list) else [content]


def exposed_prompt(server: str, prompt: str) -> str:
    """``mcp__<server>__<prompt>``: an upstream prompt's name as keen serve shows it."""
    return f"mcp__{server}__{prompt}"


def _valid(model: type[Any], raw: Mapping[str, Any], server: str) -> Any | None:
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        logger.info("left out a %s of %s that does not validate: %s", model.__name__, server, exc)
        return None


@dataclass
class Listing:
    """What the connected servers list, namespaced: built from the Manager's last lists.

    Args:
        lists: ``{server: (resources, templates, prompts)}`` in wire shape (the Manager's
            ``list_resources`` / ``list_resource_templates`` / ``list_prompts``).
    """

    resources: list[mt.Resource]
    templates: list[mt.ResourceTemplate]
    prompts: list[mt.Prompt]
    _prompt_of: dict[str, tuple[str, str]]
    _uris: dict[str, set[str]]
    _templates_of: dict[str, list[str]]

    @classmethod
    def build(cls, lists: Mapping[str, tuple[Iterable[Mapping[str, Any]], ...]]) -> Listing:
        resources: list[mt.Resource] = []
        templates: list[mt.ResourceTemplate] = []
        prompts: list[mt.Prompt] = []
        prompt_of: dict[str, tuple[str, str]] = {}
        uris: dict[str, set[str]] = {}
        templates_of: dict[str, list[str]] = {}
        clashes: dict[str, list[str]] = {}
        for server, (raw_resources, raw_templates, raw_prompts) in lists.items():
            for raw in raw_resources:
                found = _valid(mt.Resource, raw, server)
                if found is not None:
                    uris.setdefault(server, set()).add(found.uri)
                    resources.append(found.model_copy(update={"uri": exposed_uri(server, found.uri)}))
            for raw in raw_templates:
                found = _valid(mt.ResourceTemplate, raw, server)
                if found is not None:
                    templates_of.setdefault(server, []).append(found.uri_template)
                    templates.append(
                        found.model_copy(update={"uri_template": exposed_uri(server, found.uri_template)})
                    )
            for raw in raw_prompts:
                found = _valid(mt.Prompt, raw, server)
                if found is not None:
                    name = exposed_prompt(server, found.name)
                    first = prompt_of.get(name)
                    if first is None:
                        prompt_of[name] = (server, found.name)
                        prompts.append(found.model_copy(update={"name": name}))
                    elif first != (server, found.name):
                        clashes.setdefault(name, [first[0]]).append(server)
        for name, servers in clashes.items():
            # Server a's prompt b__c and server a__b's prompt c are both mcp__a__b__c: a host's
            # prompts/get names one of them and cannot say which, so neither is served (the
            # later one was, in the earlier one's place).
            logger.info(  # as a prompt that does not validate is: at each build of the lists
                "prompt %s is the name of a prompt of each of servers %s; neither is served: rename one of them",
                name,
                ", ".join(servers),
            )
            del prompt_of[name]
        prompts = [p for p in prompts if p.name not in clashes]
        return cls(resources, templates, prompts, prompt_of, uris, templates_of)

    def prompt(self, name: str) -> tuple[str, str] | None:
        """``(server, upstream prompt)`` of an exposed prompt name, or None when not listed."""
        return self._prompt_of.get(name)

    def readable(self, server: str, uri: str, *, clock: Callable[[], float] = time.monotonic) -> bool:
        """Whether ``server`` listed ``uri``, or a template of its matches it. Templates are
        tried in the order listed until :data:`_MATCH_BUDGET` seconds (by ``clock``) are
        spent; a URI that only a template past that matches is refused, and logged."""
        if uri in self._uris.get(server, ()):
            return True
        from mcp.shared.uri_template import InvalidUriTemplate, UriTemplate

        deadline = clock() + _MATCH_BUDGET
        for template in self._templates_of.get(server, ()):
            # The text before a template's first expression is literal: a URI that does not
            # begin with it cannot match, so most templates cost no parse at all.
            if not uri.startswith(template.partition("{")[0]):
                continue
            if clock() > deadline:
                logger.warning(
                    "a read of %s was refused: its templates could not all be matched within %s s",
                    server,
                    _MATCH_BUDGET,
                )
                return False
            try:
                if UriTemplate.parse(template).match(uri, max_uri_length=_MAX_TEMPLATE_URI) is not None:
                    return True
            except (InvalidUriTemplate, ValueError):
                continue
        return False
