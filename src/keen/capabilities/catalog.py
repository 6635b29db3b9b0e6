"""The capability catalog: every tool, skill, resource and prompt Keen knows, as descriptors.

Built from the generated skills on disk (:meth:`Catalog.from_skills_dir`: no server
needs to run), from a running :class:`keen.mcp.Manager`'s live lists
(:meth:`Catalog.from_manager`), or from tool lists in memory (:meth:`Catalog.from_tools`).
It holds summaries; full schemas and skill bodies are read by :meth:`Catalog.load`.
:meth:`Catalog.search` ranks it with :class:`~keen.capabilities.search.ToolSearch`
after the caller's :class:`SearchFilter`: a search result is a candidate, never an
authorization to call.

Example::

    catalog = Catalog.from_skills_dir(annotations_trusted=keen.trust.configured_annotations_trusted())
    hits = catalog.search("open a pull request", k=5, filter=SearchFilter(mode="read-only"))
    for hit in hits:
        print(hit.server, hit.tool, hit.score)
    if hits:
        schema = catalog.load(hits[0].id).schema
"""

from __future__ import annotations

import bisect
import hashlib
import itertools
import json
import logging
import operator
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from keen import paths
from keen.capabilities.describe import (
    local_capabilities,
    server_capabilities,
    server_inputs,
    server_text,
    skill_capability,
    tool_capability,
)
from keen.capabilities.descriptor import Capability, Kind, LoadedCapability, PermissionMode
from keen.capabilities.modes import check_mode
from keen.capabilities.names import model_name, resolve_names
from keen.errors import CapabilityNotFound, SkillError
from keen.mcp.types import ServerState, Tool
from keen.skills import MARKER_FILE, Skill, discover, split_frontmatter

if TYPE_CHECKING:
    from keen.capabilities._refresh import Since
    from keen.capabilities.dense import DenseVectors
    from keen.capabilities.search import SearchWeights, ToolSearch
    from keen.mcp import Manager
    from keen.trust.pins import PinGuard

__all__ = [
    "Catalog",
    "PermissionMode",
    "SearchFilter",
    "SearchHit",
    "explain",
    "managed_marker",
    "server_text",
    "skill_tools",
    "tool_capability",
    "without_held",
]

logger = logging.getLogger(__name__)

_by_id = operator.attrgetter("id")


@dataclass(frozen=True)
class SearchFilter:
    """Which capabilities a caller may see in search results.

    ``mode``: the caller's permission mode. ``read-only`` admits only read-only
    capabilities (MCP tools annotated ``readOnlyHint: true``, skills, resources,
    prompts); ``ask`` and ``auto`` admit everything (approval happens at call time).
    ``servers`` / ``kinds``: when given, only these.

    Raises:
        ValueError: ``mode`` is none of the three.
    """

    mode: PermissionMode = "auto"
    servers: frozenset[str] | None = None
    kinds: frozenset[Kind] | None = None

    def __post_init__(self) -> None:
        check_mode(self.mode)  # a misspelt mode ("readonly") would otherwise admit everything

    def allows(self, cap: Capability) -> bool:
        if self.mode == "read-only" and not cap.risk.read_only:
            return False
        if self.servers is not None and cap.server not in self.servers:
            return False
        return self.kinds is None or cap.kind in self.kinds


@dataclass(frozen=True)
class SearchHit:
    """One search result. ``tool``: the tool (or skill, resource, prompt) name as its
    source spells it; ``model_name``: the name to give a model (``^[A-Za-z0-9_-]{1,64}$``);
    ``score``: fused relevance, higher is better, comparable within one search only;
    ``copies``: ids of identical capabilities (same name, description, parameters and
    risk) on other servers that the filter allows, shown once as this hit;
    ``signals``: each ranking signal's weighted share of ``score`` (``lexical``,
    ``static``, ``dense``, ``server``; see :mod:`keen.capabilities.search`); ``why``: one
    line a person can read on what matched (query words, the server, the meaning)."""

    id: str
    kind: Kind
    server: str | None
    tool: str
    model_name: str
    summary: str
    score: float
    risk: str
    location: str = ""
    copies: tuple[str, ...] = ()
    signals: Mapping[str, float] = field(default_factory=dict[str, float])
    why: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "kind": self.kind,
            "server": self.server,
            "tool": self.tool,
            "model_name": self.model_name,
            "summary": self.summary,
            "score": round(self.score, 4),
            "risk": self.risk,
            "location": self.location or None,
            "copies": list(self.copies),
            "signals": {k: round(v, 4) for k, v in self.signals.items()},
            "why": self.why,
        }


def _schema_loader(path: Path) -> Callable[[Capability], LoadedCapability]:
    def load(cap: Capability) -> LoadedCapability:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise SkillError(
                f"cannot read the schema of {cap.id} at {path}: {exc}; run `keen mcp sync` to regenerate it",
                name=f"mcp:{cap.server}",
            ) from exc
        schema = data.get("inputSchema") or {}
        text = json.dumps(
            {"name": cap.name, "description": data.get("description", ""), "inputSchema": schema},
            ensure_ascii=False,
        )
        return LoadedCapability(cap, text, schema=schema, raw=data)

    return load


def _server_instructions(skill: Skill) -> str:
    """The quoted ``## Server instructions`` of a generated SKILL.md (first 1000 chars)."""
    try:
        _, body = split_frontmatter(skill.read_text())
    except SkillError:
        return ""
    quoted: list[str] = []
    inside = False
    for line in body.splitlines():
        if line.startswith("## "):
            inside = line.strip() == "## Server instructions"
            continue
        if inside and line.startswith(">"):
            quoted.append(line[1:].strip())
    return " ".join(quoted)[:1000]


class Catalog:
    """An immutable set of capabilities plus a text per MCP server, searchable.

    ``servers`` maps each MCP server to the text that describes it (catalog description,
    instructions). ``cache_dir``: where search indexes are cached (default
    ``$KEEN_HOME/cache/toolsearch``; the transformer's vectors go to
    ``$KEEN_HOME/cache/embeddings`` beside it); ``cache=False`` builds them in memory
    only. ``dense=False`` leaves the transformer signal out (keywords and wordllama only).
    """

    def __init__(
        self,
        capabilities: Iterable[Capability],
        servers: dict[str, str] | None = None,
        *,
        cache_dir: Path | None = None,
        cache: bool = True,
        dense: bool = True,
    ) -> None:
        # C-level passes (attrgetter, zip): a catalog of one changed server is made again
        # whole, and at 50,000 tools a Python call per capability cost tens of ms.
        caps = list(capabilities)
        ids = list(map(_by_id, caps))
        # CatalogCache gives its servers' parts in id order: checked (one C pass), not sorted.
        if not all(map(operator.lt, ids, ids[1:])):
            caps.sort(key=_by_id)
            ids = list(map(_by_id, caps))
        self._caps = dict(zip(ids, caps, strict=True))
        self._list = list(self._caps.values())
        if len(self._caps) != len(caps):
            dupes = sorted({a for a, b in itertools.pairwise(ids) if a == b})
            logger.warning("catalog: duplicate capability ids kept once: %s", ", ".join(dupes[:5]))
            ids = list(self._caps)
        self._ids = ids
        self.servers: dict[str, str] = dict(sorted((servers or {}).items()))
        self._names, self._plain_names = resolve_names(ids)
        self._by_name = dict(zip(self._names.values(), self._names.keys(), strict=True))
        self._cache_dir = (cache_dir or paths.keen_home() / "cache" / "toolsearch") if cache else None
        self._dense = dense
        self._index: ToolSearch | None = None
        self._hash: str | None = None
        self._masks: dict[SearchFilter, Any] = {}
        self._since: Since | None = None
        self._dense_texts: list[tuple[tuple[str, ...], tuple[bytes, ...]]] | None = None
        """Per capability, its transformer texts and their cache keys (:meth:`_dense_vectors`)."""
        self._dense_last: list[tuple[tuple[str, ...], tuple[bytes, ...]] | None] | None = None
        """The catalog's this one was made from (:meth:`with_servers`), by ``_since``'s positions."""

    # -- construction ---------------------------------------------------------

    @classmethod
    def from_tools(
        cls, tools: Iterable[Tool], servers: dict[str, str] | None = None, **options: Any
    ) -> Catalog:
        """A catalog of ``tools`` (``keen.mcp.Tool``); ``servers``: text per server."""
        caps = [
            tool_capability(t.server, t.to_dict(), annotations_trusted=t.annotations_trusted) for t in tools
        ]
        return cls(caps, servers, **options)

    @classmethod
    def from_skills_dir(
        cls,
        skills_root: Path | None = None,
        *,
        include_disabled: bool = False,
        include_held: bool = False,
        annotations_trusted: Callable[[str, dict[str, Any]], bool] | None = None,
        **options: Any,
    ) -> Catalog:
        """The catalog of the skills under ``skills_root`` (default ``$KEEN_HOME/skills``).

        Each generated ``mcp:<server>`` skill contributes one tool per schema file (read
        now for the summary and search text; :meth:`load` reads it again), but for the tools
        its marker records as held for review (:func:`managed_marker`: a call to one is refused
        until ``keen mcp trust``, so ``keen chat`` does not offer them either) unless
        ``include_held`` (their schema files hold the pinned definitions: a person may search
        them); every other skill is one ``skill`` capability. Disabled skills are left out
        unless ``include_disabled``. Broken skills and unreadable schema files are skipped with a
        log line.

        ``annotations_trusted(server, schema)``: whether a tool's annotations are taken as
        true (asked only of a tool claiming ``readOnlyHint``, never of a held one: its call
        is refused; nor of any tool of a skill whose description notes held tools its marker
        does not name, :func:`without_held`; nor of one missing from its marker's
        ``fingerprints``), e.g. :func:`keen.trust.skill_trust.skill_annotations_trusted`, which
        judges as ``keen chat`` does; ``schema`` is the schema file's JSON with
        ``fingerprint`` set from the skill's marker: the fingerprint of the whole definition
        the skill shows (``outputSchema`` included, which the file leaves out), ``""`` when
        the marker records none (no pin matches it). ``None``: none is, as a server's annotations are its own
        claims (README "Annotations only from servers you trust for them"). Raises
        ``SkillError`` for an unreadable skills dir or config.
        """
        found = discover(skills_root)
        caps: list[Capability] = []
        servers: dict[str, str] = {}
        for skill in found.skills:
            if not (skill.enabled or include_disabled):
                continue
            if not _generated(skill):
                caps.append(skill_capability(skill))
                continue
            marker = _marker(skill)  # read once: its server, held tools and fingerprints
            server, held = _server_of(skill, marker), _held_of(marker)
            if annotations_trusted is None or _held_unnamed(skill, server, held):
                trusted = False  # held tools not named: any of its tools may be one
            else:
                trusted = _judge(annotations_trusted, server, marker, held)
            servers[server], tools = skill_tools(skill, server, annotations_trusted=trusted)
            caps += tools if include_held else without_held(tools, skill, server, held)
        return cls(caps, servers, **options)

    @classmethod
    def from_manager(
        cls,
        manager: Manager,
        *,
        skills_root: Path | None = None,
        pins: PinGuard | None = None,
        **options: Any,
    ) -> Catalog:
        """The catalog of a running Manager's connected servers (live tool lists, and
        resource and prompt lists when the Manager offers them), plus the local
        (non-MCP) skills under ``skills_root`` when given. With ``pins``, tools that
        ``call_mcp_tool`` would refuse as quarantined (``keen.trust.pins``) are left out.

        Built from scratch; an agent that asks at every step keeps a
        :class:`~keen.capabilities.catalog_cache.CatalogCache` instead, which rebuilds only
        what changed (from the same :mod:`keen.capabilities.describe` pieces)."""
        caps: list[Capability] = []
        servers: dict[str, str] = {}
        for status in manager.servers():
            if status.state is not ServerState.CONNECTED or not status.enabled:
                continue
            inputs = server_inputs(manager, status.name, held_out=pins is not None)
            if inputs is not None:
                servers[status.name] = server_text(status.name, inputs[1], inputs[0])
                caps += server_capabilities(status.name, inputs)
        if skills_root is not None:
            caps += local_capabilities(discover(skills_root).enabled)
        return cls(caps, servers, **options)

    def with_servers(self, changed: Mapping[str, tuple[str, Sequence[Capability]] | None]) -> Catalog:
        """This catalog with each server of ``changed`` replaced: by its text and its
        capabilities (each id beginning ``mcp__<server>__``, in id order, each once), or
        removed (None). The same catalog as :class:`Catalog` makes of the resulting
        capabilities and texts, with this one's options, at a cost of the servers changed:
        the other servers' entries (ids, model names) are kept, not made again, and the
        search index is derived from this one's by position (a server is one run of ids),
        not by matching every capability. Made whole when that does not hold (a server
        whose ids hold another's, a clash of model names, a list out of order).

        Args:
            changed: server name -> ``(its catalog text, its capabilities)``, or None for a
                server gone.

        Returns:
            A new :class:`Catalog`; this one is not changed.
        """
        import numpy as np

        from keen.capabilities import _refresh

        ids = self._ids
        spans: list[tuple[int, int, list[Capability], list[str]]] | None = []
        prefixes = sorted((f"mcp__{name}__", name) for name in changed)
        # A server's ids are one run of this sorted list, unless another's lie in it (a
        # server named like "a__b" beside "a"): then every id is placed again.
        if any(b.startswith(a) for (a, _), (b, _) in itertools.pairwise(prefixes)):
            spans = None
        for prefix, name in prefixes if spans is not None else ():
            end = prefix[:-1] + chr(ord("_") + 1)  # the first string past the prefix's range
            lo, hi = bisect.bisect_left(ids, prefix), bisect.bisect_left(ids, end)
            entry = changed[name]
            new = list(entry[1]) if entry is not None else []
            new_ids = list(map(_by_id, new))
            if not (
                all(cap.server == name for cap in self._list[lo:hi])
                and all(map(operator.lt, new_ids, new_ids[1:]))
                and (not new_ids or (new_ids[0] >= prefix and new_ids[-1] < end))
            ):
                spans = None
                break
            spans.append((lo, hi, new, new_ids))  # pyright: ignore[reportOptionalMemberAccess]
        servers = dict(self.servers)
        for name, entry in changed.items():
            if entry is None:
                servers.pop(name, None)
            else:
                servers[name] = entry[0]
        options = {"cache_dir": self._cache_dir, "cache": self._cache_dir is not None, "dense": self._dense}
        if spans is None:
            kept = [
                c for c in self._list if c.server not in changed or not c.id.startswith(f"mcp__{c.server}__")
            ]
            added = [c for entry in changed.values() if entry is not None for c in entry[1]]
            return Catalog([*kept, *added], servers, **options)
        out = Catalog.__new__(Catalog)
        caps: list[Capability] = []
        out_ids: list[str] = []
        same: list[np.ndarray] = []
        start = 0
        # copy(), not dict(): a dict that lost keys is copied whole, not entry by entry.
        names, by_name = self._names.copy(), self._by_name.copy()
        plain = self._plain_names
        for lo, hi, new, new_ids in spans:
            caps += self._list[start:lo]
            caps += new
            out_ids += ids[start:lo]
            out_ids += new_ids
            same += [np.arange(start, lo, dtype=np.int64), np.full(len(new), -1, dtype=np.int64)]
            start = hi
            if plain:
                for cap_id in ids[lo:hi]:
                    del by_name[names.pop(cap_id)]
                for cap_id in new_ids:
                    name = model_name(cap_id)
                    if name in by_name:  # a clash: every name is resolved again
                        plain = False
                        break
                    names[cap_id] = name
                    by_name[name] = cap_id
        caps += self._list[start:]
        out_ids += ids[start:]
        same.append(np.arange(start, len(ids), dtype=np.int64))
        out._list, out._ids = caps, out_ids
        out._caps = self._caps.copy()
        for lo, hi, new, new_ids in spans:
            for cap_id in ids[lo:hi]:
                del out._caps[cap_id]
            out._caps.update(zip(new_ids, new, strict=True))
        if plain:
            out._names, out._plain_names, out._by_name = names, True, by_name
        else:
            out._names, out._plain_names = resolve_names(out_ids)
            out._by_name = dict(zip(out._names.values(), out._names.keys(), strict=True))
        out.servers = servers if servers.keys() == self.servers.keys() else dict(sorted(servers.items()))
        out._cache_dir, out._dense = self._cache_dir, self._dense
        out._index, out._hash, out._masks = None, None, {}
        out._since = _refresh.Since(self._list, np.concatenate(same), out_ids)
        last = self._dense_texts
        if last is None and self._dense_last is not None and self._since is not None:
            # Made from a catalog whose vectors were never asked for (refreshes back to
            # back): its parts are its parent's, through its own positions.
            parent = self._dense_last
            last = [parent[j] if j >= 0 else None for j in self._since.same.tolist()]
        out._dense_texts, out._dense_last = None, last
        return out

    # -- reading --------------------------------------------------------------

    def __len__(self) -> int:
        return len(self._caps)

    def __iter__(self) -> Iterator[Capability]:
        return iter(self._list)

    def __contains__(self, cap_id: object) -> bool:
        return cap_id in self._caps

    def get(self, cap_id: str) -> Capability:
        """The descriptor with this id or model name.

        Raises:
            CapabilityNotFound: none has it (a ``KeenError``, and a ``KeyError``); the message
                says to search for it first.
        """
        cap = self._caps.get(cap_id) or self._caps.get(self._by_name.get(cap_id, ""))
        if cap is None:
            raise CapabilityNotFound(
                f"no capability {cap_id!r} in the catalog; search for it first", capability=cap_id
            )
        return cap

    @property
    def names(self) -> Mapping[str, str]:
        """Capability id -> model tool name, for every capability (``model_names`` of the ids)."""
        return self._names

    def model_name(self, cap_id: str) -> str:
        """The model tool name of a capability (unique within this catalog)."""
        return self._names[self.get(cap_id).id]

    def load(self, cap_id: str) -> LoadedCapability:
        """The full layer (schema or body) of one capability, read now.

        Raises:
            CapabilityNotFound: no capability by that id or model name (see :meth:`get`).
            SkillError: its schema file or SKILL.md cannot be read.
        """
        return self.get(cap_id).load()

    @property
    def hash(self) -> str:
        """``sha256:<hex>`` of everything the search index is built from."""
        if self._hash is None:
            digest = hashlib.sha256()
            for cap in self._list:
                digest.update(json.dumps([cap.id, cap.title, cap.search_text, cap.params]).encode())
            digest.update(json.dumps(self.servers, sort_keys=True).encode())
            self._hash = "sha256:" + digest.hexdigest()
        return self._hash

    # -- search ---------------------------------------------------------------

    def index(self, weights: SearchWeights | None = None) -> ToolSearch:
        """The search index (built or loaded from the cache on first use). Its transformer
        vectors are looked up in the embedding cache and the missing ones encoded on a
        background thread: searches rank without them until they are ready
        (:meth:`search_status`, :meth:`wait_ready`)."""
        from keen.capabilities.search import ToolSearch

        if self._index is None or (weights is not None and weights != self._index.weights):
            # With the encoder still to load, the vectors' thread starts first: loading it
            # overlaps the index load. Once it is loaded (a refresh), the thread starts after:
            # its Python work (the cached vectors gathered into a matrix) held the GIL while
            # the keyword index was refreshed, and the new tool was findable later.
            dense, loaded = None, False
            if self._dense:
                from keen.capabilities import encoder

                loaded = encoder.tried()
                dense = self._dense_vectors(start=not loaded)
            index = ToolSearch.cached(self._list, self.servers, self._cache_dir, weights, since=self._since)
            index.dense = dense
            self._index = index
            if dense is not None and loaded:
                dense.start()
        return self._index

    def _dense_vectors(self, *, start: bool = True) -> DenseVectors:
        from keen.capabilities.dense import DenseVectors, shared_cache
        from keen.capabilities.encoder import MODEL_ID
        from keen.capabilities.search import DENSE_VIEWS

        folder = None if self._cache_dir is None else self._cache_dir.parent / "embeddings" / MODEL_ID
        # A refreshed catalog (with_servers) takes the texts and keys of the capabilities it
        # kept from the catalog it was made from, by position: making them again for every
        # tool cost a refresh at 293 servers about 100 ms before the new tool was findable.
        since, last = self._since, self._dense_last
        if self._dense_texts is not None:  # the index made again (other weights)
            parts = self._dense_texts
        elif last is not None and since is not None:
            same = since.same.tolist()
            parts = [
                kept if j >= 0 and (kept := last[j]) is not None else _dense_part(c)
                for j, c in zip(same, self._list, strict=True)
            ]
        else:
            parts = [_dense_part(c) for c in self._list]
        self._dense_texts, self._dense_last = parts, None
        # View-major: every tool's whole text first (DenseVectors.docs), then the heads, then
        # the descriptions.
        texts = [part[0][view] for view in range(DENSE_VIEWS) for part in parts]
        keys = [part[1][view] for view in range(DENSE_VIEWS) for part in parts]
        return DenseVectors(texts, shared_cache(folder), start=start, views=DENSE_VIEWS, keys=keys)

    def search_status(self) -> str:
        """One line on how searches rank now: ``""`` when every signal is in use, else what
        is left out and why (vectors still encoding, or the transformer unavailable)."""
        index = self.index()
        return "" if index.dense is None else index.dense.status()

    def wait_ready(self, timeout: float | None = None) -> bool:
        """Wait at most ``timeout`` seconds for the transformer vectors; whether they are ready."""
        index = self.index()
        return index.dense is not None and index.dense.wait(timeout)

    def _mask(self, filter: SearchFilter) -> Any:
        import numpy as np

        if filter not in self._masks:
            self._masks[filter] = np.fromiter(
                map(filter.allows, self._list), dtype=bool, count=len(self._list)
            )
        return self._masks[filter]

    def search(self, query: str, k: int = 5, filter: SearchFilter | None = None) -> list[SearchHit]:
        """The ``k`` best capabilities for ``query`` that ``filter`` allows, best first.

        Capabilities the filter refuses are removed before ranking, so they neither appear
        nor take a place. Identical copies of a capability on several servers are one hit
        (the best-ranked copy; the others in :attr:`SearchHit.copies`). Only the first
        :data:`~keen.capabilities.search.MAX_QUERY_CHARS` (2,000) characters of ``query``
        count. Raises ValueError for an empty query or ``k`` < 1.
        """
        if not query.strip():
            raise ValueError("the search query is empty; describe the task in a few words")
        if k < 1:
            raise ValueError("k must be at least 1")
        import numpy as np

        caps = self._list
        hits: list[SearchHit] = []
        index = self.index()
        mask = None if filter is None else self._mask(filter)
        # The query words for the why lines are found beside the encoder, with the signals.
        signals, matched = index.signals_and_words(query)
        top = index.top(query, k, mask, signals=signals)
        if not top:
            return hits
        # Each signal's and each query word's values at the hits' positions, taken once for
        # all of them: a search of 100 results indexed every array 100 times.
        at = np.fromiter((position for position, _ in top), dtype=np.int64, count=len(top))
        names = list(signals)
        shares_at = zip(*(signals[name][at].tolist() for name in names), strict=True)
        words = [word for word, _ in matched]
        found_at = zip(*(docs[at].tolist() for _, docs in matched), strict=True) if matched else None
        for (position, score), values in zip(top, shares_at, strict=True):
            cap = caps[position]
            shares = dict(zip(names, values, strict=True))
            present = next(found_at) if found_at is not None else ()
            hits.append(
                SearchHit(
                    cap.id,
                    cap.kind,
                    cap.server,
                    cap.name,
                    self._names[cap.id],
                    cap.summary,
                    score,
                    cap.risk.level,
                    cap.location,
                    tuple(caps[i].id for i in index.copies(position, mask)),
                    shares,
                    explain(cap, shares, [word for word, there in zip(words, present, strict=True) if there]),
                )
            )
        return hits


def _dense_part(cap: Capability) -> tuple[tuple[str, ...], tuple[bytes, ...]]:
    """``cap``'s transformer texts (:func:`keen.capabilities.search.dense_views`) and their
    keys in the embedding cache (:func:`keen.capabilities.dense.dense_key`)."""
    from keen.capabilities.dense import dense_key
    from keen.capabilities.search import dense_views

    views = dense_views(cap)
    return views, tuple(map(dense_key, views))


def explain(cap: Capability, signals: Mapping[str, float], words: Sequence[str]) -> str:
    """Why ``cap`` ranked, in one line: the query ``words`` found in its text (as
    :meth:`~keen.capabilities.search.ToolSearch.query_words` gives them), its server when
    the server signal lifted it, and whether it is close in meaning (``signals`` as in
    :attr:`SearchHit.signals`)."""
    parts: list[tuple[float, str]] = []
    if signals.get("lexical", 0.0) > 0.3 and words:
        parts.append((signals["lexical"], "words " + ", ".join(words[:6])))
    meaning = max(signals.get("dense", 0.0), signals.get("static", 0.0))
    if meaning > 0.5:
        how = "transformer" if signals.get("dense", 0.0) >= signals.get("static", 0.0) else "word vectors"
        parts.append((meaning, f"close in meaning ({how})"))
    if cap.server and signals.get("server", 0.0) > 0.3:
        parts.append((signals["server"], f"server {cap.server} fits the request"))
    parts.sort(key=lambda p: -p[0])
    return "; ".join(text for _, text in parts) or "best of a weak field"


def skill_tools(
    skill: Skill, server: str, *, annotations_trusted: bool | Callable[[dict[str, Any]], bool] = True
) -> tuple[str, list[Capability]]:
    """The server text and one tool capability per schema file of ``server``'s generated
    skill (``mcp:<server>``, written from what the pins let a model read: under
    ``quarantine`` a changed tool as it was pinned, under ``warn`` or ``off`` the live
    definitions; :func:`keen.trust.pins.pinned_view`), in file name order.
    Unreadable schema files are skipped with a log line. ``annotations_trusted``: False, or
    a callable answering False for a schema file (asked only when its tool claims
    ``readOnlyHint``, the one hint trust changes), makes its annotations claims
    (:meth:`Risk.from_annotations`)."""
    text = f"{skill.description} {_server_instructions(skill)}".strip()
    caps: list[Capability] = []
    for path in sorted((skill.path / "schemas").rglob("*.json")):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            logger.warning("catalog: skipping unreadable schema %s: %s", path, exc)
            continue
        if isinstance(data, dict) and isinstance(data.get("name"), str):
            trusted = annotations_trusted
            if callable(trusted):
                claims = data.get("annotations")
                trusted = not (isinstance(claims, dict) and claims.get("readOnlyHint") is True) or trusted(
                    data
                )
            caps.append(
                tool_capability(server, data, _schema_loader(path), str(path), annotations_trusted=trusted)
            )
    return text, caps


def _judge(
    annotations_trusted: Callable[[str, dict[str, Any]], bool],
    server: str,
    marker: Mapping[str, Any],
    held: frozenset[str] | None,
) -> Callable[[dict[str, Any]], bool]:
    """``annotations_trusted`` for one generated skill's schema files: a held tool's
    annotations count for nothing (``keen chat`` offers no held tool), and each other is
    judged with the fingerprint its marker records of the definition shown (``fingerprint``
    always from the marker, ``""`` when it records none: a schema file never supplies it). A marker with a ``fingerprints`` map names every tool claiming ``readOnlyHint`` that
    keen chat trusted when it was written (:func:`keen.mcpskills.generate_skill`): one it
    leaves out is trusted only by its server's ``trust_annotations`` (an empty fingerprint,
    which no pin has). So is every tool of a marker without the map (written before Keen
    recorded them, as one without ``held_tools``): which definition it shows is not known
    until the next sync writes the map, and its fields alone (the schema file's) could be
    edited by hand or miss an ``outputSchema`` that changed."""
    recorded = marker.get("fingerprints")
    fingerprints: Mapping[str, Any] = recorded if isinstance(recorded, dict) else {}  # pyright: ignore[reportUnknownVariableType]

    def judge(data: dict[str, Any]) -> bool:
        name = data.get("name")
        if held is not None and name in held:
            return False
        shown = fingerprints.get(name) if isinstance(name, str) else None
        if not isinstance(shown, str):
            shown = ""  # matches no pin: only a server trusted for its annotations counts
        return annotations_trusted(server, {**data, "fingerprint": shown})

    return judge


def _marker(skill: Skill) -> dict[str, Any]:
    """The skill's marker file as JSON (``{}`` when unreadable or not an object)."""
    try:
        marker = json.loads((skill.path / MARKER_FILE).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return {}
    return marker if isinstance(marker, dict) else {}  # pyright: ignore[reportUnknownVariableType]


def _generated(skill: Skill) -> bool:
    return skill.managed and skill.name.startswith("mcp:")


def _server_of(skill: Skill, marker: Mapping[str, Any]) -> str:
    server = marker.get("server")
    return server if isinstance(server, str) and server else skill.name.removeprefix("mcp:")


def _held_of(marker: Mapping[str, Any]) -> frozenset[str] | None:
    held = marker.get("held_tools")
    return frozenset(n for n in held if isinstance(n, str)) if isinstance(held, list) else None


def _held_unnamed(skill: Skill, server: str, held: frozenset[str] | None) -> bool:
    """Whether ``skill`` holds tools for review its marker does not name (``held`` ``None``:
    written before Keen recorded them, and the description carries the pins' note)."""
    if held is not None:
        return False
    from keen.trust.pins import notes_held_tools

    return notes_held_tools(skill.description, server)


def managed_marker(skill: Skill) -> tuple[str, frozenset[str] | None] | None:
    """What a generated ``mcp:<server>`` skill's marker says, from one read of it: the MCP
    server it describes (the marker's, else the name's) and the tools it records as held for
    review when it was written (``pinning: quarantine``: a changed one's schema file is its
    pinned definition, and a call to it is refused until ``keen mcp trust``; ``None`` when
    the marker does not say: written before Keen recorded them, the next sync of its server
    adds them). None for any other skill."""
    if not _generated(skill):
        return None
    marker = _marker(skill)
    return _server_of(skill, marker), _held_of(marker)


def without_held(
    tools: Sequence[Capability], skill: Skill, server: str, held: frozenset[str] | None
) -> list[Capability]:
    """``tools`` of ``server``'s generated ``skill`` less those its marker records as held
    (:func:`managed_marker`), so none is offered as callable. A marker that does not say
    (``held`` ``None``) hides none when the skill's description carries no note of held
    tools (none were held when it was written), and all of them when it does: which ones is
    not known, and a call to a held one is refused (logged with the fix: a sync)."""
    if held is None:
        if not _held_unnamed(skill, server, held):
            return list(tools)
        logger.warning(
            "catalog: %s says tools are held for review, and its marker, written before Keen "
            "recorded which, does not name them: its %d tools are left out until its next sync "
            "(keen mcp sync, or a session that connects %s) records them",
            skill.name,
            len(tools),
            server,
        )
        return []
    return [tool for tool in tools if tool.name not in held]
