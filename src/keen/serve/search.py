"""Search mode's tool finder: ToolSearch from :mod:`keen.capabilities`, behind a seam.

``keen serve --mode search`` asks a :data:`SearchFn` for the tools that fit a query.
The default, :class:`CapabilitySearch`, is the capability catalog's ToolSearch (BM25 over
stemmed words fused with static embeddings, offline, index cached per tool-list hash),
restricted to MCP tools; identical tools on several servers are one result naming the
others (:attr:`ExposedTool.also_on`). :class:`KeywordSearch` (plain BM25, no embeddings) is a lighter
alternative; any callable of the same shape can be passed as ``search=`` to
:class:`keen.serve.KeenServer`. A searcher proposes candidates; it never authorizes.
"""

from __future__ import annotations

import dataclasses
import re
import threading
from collections.abc import Callable
from typing import Any

from keen.serve.catalog import ExposedTool, ToolCatalog

__all__ = ["CapabilitySearch", "KeywordSearch", "SearchFn"]

SearchFn = Callable[[ToolCatalog, str, int], list[ExposedTool]]
"""``(catalog, query, limit) -> tools``, best first, at most ``limit``."""

_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")


class CapabilitySearch:
    """ToolSearch over the served tools: the served catalog's capability catalog (the one the
    harness checks calls against), whose index is built once per tool list."""

    def __init__(self) -> None:
        # Searches run in worker threads; one builds or queries the index at a time.
        self._lock = threading.Lock()
        self.status = ""
        """How the last search ranked when not with every signal (vectors still encoding)."""

    def __call__(self, catalog: ToolCatalog, query: str, limit: int) -> list[ExposedTool]:
        from keen.capabilities import SearchFilter

        if not len(catalog) or not query.strip():
            return catalog.tools()[: max(0, limit)]
        capabilities = catalog.capabilities
        with self._lock:
            hits = capabilities.search(query, k=max(1, limit), filter=SearchFilter(kinds=frozenset({"tool"})))
        self.status = capabilities.search_status()
        found: list[ExposedTool] = []
        for hit in hits:
            tool = catalog.find(hit.server, hit.tool) if hit.server else None
            if tool is not None:
                servers = sorted({str(capabilities.get(i).server) for i in hit.copies})
                found.append(dataclasses.replace(tool, also_on=tuple(servers)))
        return found


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
