"""``keen serve``'s search mode: its three tools, and its tool finder behind a seam.

:class:`SearchMode` answers the three tools a host sees in search mode: ``search_tools``
and ``call_mcp_tool`` (the search and call tools every front end offers,
:mod:`keen.entry_tools`; ``call_tool``, their old name here, is still accepted) and
``describe_tools``, which stands in for the skill files a host cannot read.

``search_tools`` asks a :data:`SearchFn` for the tools that fit a query.
The default, :class:`CapabilitySearch`, is the capability catalog's ToolSearch (BM25 over
stemmed words fused with static embeddings, offline, index cached per tool-list hash),
restricted to MCP tools; identical tools on several servers are one result naming the
others (:attr:`ExposedTool.also_on`). :class:`KeywordSearch` (plain BM25, no embeddings) is a lighter
alternative; any callable of the same shape can be passed as ``search=`` to
:class:`keen.serve.KeenServer`. A searcher proposes candidates; it never authorizes.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import re
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import anyio
import mcp_types as mt

from keen._terminal import name_in_message
from keen.entry_tools import (
    CALL_TOOL,
    CALL_TOOL_ALIASES,
    SEARCH_TOOL,
    arguments_problem,
    call_tool_definition,
    parse_search,
    search_tool_definition,
)
from keen.errors import KeenError
from keen.harness import GATE_CODES
from keen.mcp.types import ServerState
from keen.serve import extension as ext
from keen.serve.calls import Withheld, call_result, error_result
from keen.serve.catalog import ExposedTool, ToolCatalog

if TYPE_CHECKING:
    from mcp.shared.dispatcher import ProgressFnT

    from keen.capabilities import Catalog
    from keen.serve.calls import CallRouter
    from keen.serve.relay import HostPeer
    from keen.serve.served import ServedTools

__all__ = [
    "SEARCH_INSTRUCTIONS",
    "SEARCH_TOOLS",
    "CapabilitySearch",
    "KeywordSearch",
    "SearchFn",
    "SearchMode",
]

SearchFn = Callable[[ToolCatalog, str, int], list[ExposedTool]]
"""``(catalog, query, limit) -> tools``, best first, at most ``limit``."""

_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")


_NO_TRANSFORMER = (
    "semantic ranking by wordllama: the transformer model is unavailable (keen serve's log says why)"
)


class CapabilitySearch:
    """ToolSearch over the served tools: the served catalog's capability catalog (the one the
    harness checks calls against), whose index is built once per tool list.

    Args:
        withheld: keen serve's log, which gets why the transformer model is unavailable (a
            reason may name the model file's local path); the host's :attr:`status` says only
            that it is (a log of its own when None).
    """

    def __init__(self, withheld: Withheld | None = None) -> None:
        # Searches run in worker threads; one builds or queries the index at a time.
        self._lock = threading.Lock()
        self._withheld = withheld if withheld is not None else Withheld()
        self.status = ""
        """How the last search ranked when not with every signal (vectors still encoding),
        in words for a host."""

    def __call__(self, catalog: ToolCatalog, query: str, limit: int) -> list[ExposedTool]:
        from keen.capabilities import SearchFilter

        if not len(catalog) or not query.strip():
            return catalog.tools()[: max(0, limit)]
        capabilities = catalog.capabilities
        with self._lock:
            hits = capabilities.search(query, k=max(1, limit), filter=SearchFilter(kinds=frozenset({"tool"})))
        self.status = self._status(capabilities)
        found: list[ExposedTool] = []
        for hit in hits:
            tool = catalog.find(hit.server, hit.tool) if hit.server else None
            if tool is not None:
                servers = sorted({str(capabilities.get(i).server) for i in hit.copies})
                found.append(dataclasses.replace(tool, also_on=tuple(servers)))
        return found

    def _status(self, capabilities: Catalog) -> str:
        """The search status in words for a host: why the model failed to load (a local
        path, an OSError) goes to keen serve's log instead."""
        status = capabilities.search_status()
        if status and (dense := capabilities.index().dense) is not None and dense.failed:
            self._withheld(f"keen serve's tool search: {status}")
            return _NO_TRANSFORMER
        return status


def _document(tool: ExposedTool) -> str:
    props = tool.tool.input_schema.get("properties")
    params = " ".join(props) if isinstance(props, dict) else ""
    name = _CAMEL.sub(" ", tool.tool.name).replace("_", " ").replace("-", " ")
    return f"{name} {name} {tool.server} {tool.tool.description} {params}"


class KeywordSearch:
    """BM25 over the catalog; the index is rebuilt only when the catalog object changes."""

    def __init__(self) -> None:
        self._catalog: ToolCatalog | None = None
        self._retriever: Any = None
        self._tools: list[ExposedTool] = []
        self._lock = threading.Lock()

    def __call__(self, catalog: ToolCatalog, query: str, limit: int) -> list[ExposedTool]:
        import bm25s

        if not len(catalog) or not query.strip():
            return catalog.tools()[: max(0, limit)]
        with self._lock:
            return self._search(bm25s, catalog, query, limit)

    def _search(self, bm25s: Any, catalog: ToolCatalog, query: str, limit: int) -> list[ExposedTool]:
        if catalog is not self._catalog:
            self._tools = catalog.tools()
            retriever = bm25s.BM25()
            retriever.index(
                bm25s.tokenize([_document(t) for t in self._tools], show_progress=False), show_progress=False
            )
            self._retriever, self._catalog = retriever, catalog
        tokens = bm25s.tokenize([query], show_progress=False)
        k = max(1, min(limit, len(self._tools)))
        docs, scores = self._retriever.retrieve(tokens, k=k, show_progress=False)
        return [self._tools[int(i)] for i, s in zip(docs[0], scores[0], strict=True) if float(s) > 0]


SEARCH_INSTRUCTIONS = (
    "Keen gives you the tools of many MCP servers without listing them all. Workflow: "
    "1) search_tools(query) to find candidate tools by what they do; "
    "2) describe_tools(names) to read the full description and inputSchema of the ones you pick; "
    "3) call_mcp_tool(server, tool, arguments) with arguments that match that inputSchema exactly."
)
"""Search mode's server instructions: the workflow of its three tools."""

_DESCRIBE_TOOLS = "describe_tools"
_DESCRIBE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "names": {
            "type": "array",
            "items": {"type": "string"},
            "minItems": 1,
            "maxItems": 20,
            "description": "Tool names as search_tools returned them",
        }
    },
    "required": ["names"],
    "additionalProperties": False,
}

SEARCH_TOOLS = [
    # The search and call tools are the ones every front end offers (keen.entry_tools); only
    # describe_tools, which stands in for the skill files a host cannot read, is serve's own.
    mt.Tool.model_validate(search_tool_definition("mcp", kinds=False)),
    mt.Tool(
        name=_DESCRIBE_TOOLS,
        description="Full descriptions and inputSchemas of tools found with search_tools (by name). "
        "Read them before call_mcp_tool.",
        input_schema=_DESCRIBE_SCHEMA,
        annotations=mt.ToolAnnotations(read_only_hint=True, open_world_hint=False),
    ),
    mt.Tool.model_validate(call_tool_definition("mcp", schema_reader=_DESCRIBE_TOOLS)),
]
"""Search mode's ``tools/list``: the same three tools for every caller, never changing."""


class SearchMode:
    """Search mode's three tools for one ``keen serve``.

    Args:
        served: the served tools (what ``search_tools`` searches and ``describe_tools`` reads).
        router: runs ``call_mcp_tool`` through the harness pipeline.
        search: the tool finder.
    """

    def __init__(self, served: ServedTools, router: CallRouter, search: SearchFn) -> None:
        self.served = served
        self.router = router
        self.search = search

    async def call(
        self,
        name: str,
        arguments: dict[str, Any],
        scope: str,
        progress: ProgressFnT | None = None,
        peer: HostPeer | None = None,
    ) -> mt.CallToolResult:
        """Answer a call of one of the three tools; their input is checked against the schemas
        listed, and any other name is refused with the three names."""
        if name == CALL_TOOL or name in CALL_TOOL_ALIASES:
            if isinstance(server := arguments.get("server"), str):
                await self.served.revive(servers=[server])
            # Parsed by the pipeline, so a shapeless call is refused and audited there.
            obs = await self.router.call_input(arguments, caller=scope, progress=progress, peer=peer)
            return call_result(obs)
        if name == SEARCH_TOOL:
            try:
                query = parse_search(arguments, kinds=False)
            except ValueError as exc:
                return error_result(_bad_args(str(exc)))
            # Servers that went away come back in the background for later searches.
            reconnector = self.served.reconnector
            reconnector.kick(reconnector.reconnectable_servers())
            return await self._search(query.query, query.limit)
        if name == _DESCRIBE_TOOLS:
            if why := arguments_problem(_DESCRIBE_TOOLS, arguments, _DESCRIBE_SCHEMA):
                return error_result(_bad_args(f'{why}; send {{"names": ["mcp__server__tool", ...]}}'))
            names = [str(n) for n in arguments["names"]]
            await self.served.revive(names)
            body, _ = ext.describe(self.served.catalog(), names)
            return _json_result(body)
        return error_result(
            _bad_args(
                f"unknown tool '{name_in_message(name)}'; use {SEARCH_TOOL}, {_DESCRIBE_TOOLS} or {CALL_TOOL}"
            )
        )

    async def _search(self, query: str, limit: int) -> mt.CallToolResult:
        catalog = self.served.catalog()
        # The searcher is CPU work: keep it off the event loop.
        hits = await anyio.to_thread.run_sync(self.search, catalog, query, limit)
        found = [
            {
                "name": t.name,
                "server": t.server,
                "tool": t.tool.name,
                "description": t.minimal(),
                "read_only": t.read_only,
                # Identical tools elsewhere: call_mcp_tool takes any of these servers too.
                **({"also_on_servers": list(t.also_on)} if t.also_on else {}),
            }
            for t in hits
        ]
        connecting = self._connecting()
        # No server at all (an empty configs.json, or a host that runs keen with another HOME
        # or KEEN_HOME): an empty list alone reads as "no tool fits".
        config = self.served.manager.config
        unconfigured = "" if config.servers or config.invalid else _NO_SERVERS
        # Both can hold: servers still connecting, and the transformer's vectors encoding.
        notes = [
            n for n in (unconfigured, connecting.pop("note", ""), getattr(self.search, "status", "")) if n
        ]
        held = self._held()
        return _json_result(
            {
                "tools": found,
                "total_tools": len(catalog),
                **connecting,
                **({"note": " ".join(notes)} if notes else {}),
                **({"held": held} if held else {}),
            }
        )

    def _connecting(self) -> dict[str, Any]:
        """``search_tools``'s word on servers still connecting, whose tools it cannot search
        yet (empty when none is): their names and what to do."""
        manager = self.served.manager
        names = [s.name for s in manager.servers() if s.state is ServerState.CONNECTING]
        if not names:
            return {}
        count = f"{len(names)} upstream server{'s are' if len(names) > 1 else ' is'}"
        return {
            "connecting_servers": names,
            "note": f"{count} still connecting ({', '.join(names)}): {'their' if len(names) > 1 else 'its'} "
            "tools are not in these results yet; search again in a few seconds.",
        }

    def _held(self) -> list[str]:
        """Per connected server with tools held for review (changed or new since pinned), the
        pins' one line about them: the only thing a host learns of those tools. A server
        whose pin file cannot be read is held whole; that error names the file's local path,
        so the host gets the words and keen serve's log the error."""
        manager = self.served.manager
        lines: list[str] = []
        for status in manager.servers():
            if status.state is ServerState.CONNECTED:
                with contextlib.suppress(KeenError):
                    view, error = self.served.view_of(status.name)
                    note = view.note if view is not None else ""
                    if error:
                        self.served.withheld(error)
                        lines.append(
                            f"The tools of {status.name} are held: keen serve cannot read their pins "
                            "(keen serve's log says why); the user has to fix them; tell them."
                        )
                    elif note:
                        lines.append(note)
        return lines


# Not the file's path: a local path is not the host's business (as for a server not configured).
_NO_SERVERS = (
    "keen serve has no MCP server configured, so no tool can be found. The user has to add servers "
    "to the configs.json keen serve was started with (keen mcp add writes the one in its KEEN_HOME; "
    "keen serve --config names another), then restart keen serve (or the MCP host running it); tell them."
)


def _bad_args(message: str) -> dict[str, Any]:
    return {"error": {"code": GATE_CODES["validate"], "message": message}}


def _json_result(body: dict[str, Any]) -> mt.CallToolResult:
    return mt.CallToolResult(
        content=[mt.TextContent(type="text", text=json.dumps(body, ensure_ascii=False))],
        structured_content=body,
    )
