"""ToolSearch quality and speed over recorded MCP catalogs (prints, never asserts).

Usage: ``python bench/search.py --catalog FILE [--catalog FILE ...] --queries FILE.jsonl
[--queries FILE.jsonl ...] [-k 5] [--level tool|server] [--half all|even|odd] [--json]``

Catalogs: LiveMCPBench ``tools.json`` and ToolGym ``tool_descriptions.ndjson`` (both
formats, see ``_catalog.py``); every tool of every catalog is indexed, so later catalogs
act as distractors. Queries: JSON lines ``{"query": str, "tools": ["server/tool", ...]}``
where ``server`` is the catalog's own server name (LiveMCPBench ``name``, ToolGym
``qualifiedName``, which may hold ``/``: the tool is what follows the last ``/``). Other
keys are ignored, except ``required`` (written by ``livemcpbench_queries.py``: a list of
groups, each the alternatives of one needed tool), which adds two figures: ``all@K``
(every group has a member in the top K) and ``tool_recall@K`` (mean share of groups
with a member in the top K); and ``task_id``: when several queries share one (the step
queries of a task), ``task_union_all@K`` counts a task found when every group has a
member in the union of the top K of its queries.

Several ``--queries`` files are measured one after the other over the same index, each
with its own figures; queries of different files that share a ``task_id`` (a task's
question in ``tasks.jsonl``, its steps in ``steps.jsonl``) then also give
``task_recall@K``: the share of tasks with every needed tool in the union of the top K
of all the task's queries, question and steps. This is the issue's "task recall@10 = all
of the task's tools in the union of top 10"; ``all@K`` of the question alone is the
stricter reading, printed with it.

The published LiveMCPBench recall@5 of 0.85 (Tool-to-Agent retrieval: tools embedded
with their server, by a hosted embedding model) counts agents, that is servers: a query is
a hit when a needed tool's server is among the top 5 of LiveMCPBench's 70 servers. Its
counterpart here is ``--level server`` over ``tools.json`` alone (a ``make bench`` line);
the tool-level figures over all 4,311 tools ask more.

A query is a hit at K when any listed tool is in the top K (``--level server``: when the
server of any listed tool is among the top K servers, servers ranked by their best tool).
Identical tools on several servers are one search result that names its copies
(``SearchHit.copies``: ToolGym holds forks of LiveMCPBench servers that changed nothing):
a result covers the tool and its copies; ``recall@K_own`` counts only the result's own
id, as a search that returned every copy separately would.
Prints recall@1, @3, @K, MRR (reciprocal rank of the first hit within the top 100, else
0), p50/p99 latency of ``Catalog.search`` in ms per query (query embedding, scoring of
every tool, ranking, the hits with their why lines; wall time, and the median CPU time of
the process, which a busy machine inflates less), tools and queries, plus the index build
time (no cache; it includes loading the wordllama model). Each request is searched twice,
in turns of which goes first, each time as a new request (the encoder's kept query vectors
forgotten; each query word's nearest catalog words stay kept, as they do across a session's
searches, so the second of a request's two searches finds its words' already: which one
goes second alternates): with ``k`` = ``SEARCH_LIMIT`` (10), what Keen's search tool asks for, whose
latency carries the target, and with ``k`` = 100, whose hits give the figures (MRR needs
the top 100) and whose latency is printed beside it. ``--json`` prints one object with keys
``recall@1``, ``recall@3``, ``recall@<K>``, ``mrr``, ``p50_ms``, ``p99_ms``,
``cpu_p50_ms`` (at ``SEARCH_LIMIT``), ``p50_ms@100``, ``p99_ms@100``, ``cpu_p50_ms@100``,
``tools``, ``queries`` (and the extras). ``p50_ms`` is the search tool's ``k`` since
2026-11-27; before, it was ``k`` = 100 (now ``p50_ms@100``). ``thread_cpu_p50_ms`` (printed
as ``calling thread``) is the CPU of the searching thread alone at ``SEARCH_LIMIT``: a search
hands part of its work to helper threads (``keen.capabilities._helper``), so on a machine
with a CPU free for them its wall time is about this, while on one whose CPUs are all busy it
is about ``cpu_p50_ms`` or more.
"""

from __future__ import annotations

import argparse
import atexit
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _catalog import load_catalog
from keen.capabilities import Catalog, tool_capability
from keen.capabilities.catalog import server_text
from keen.capabilities.search import SearchWeights
from keen.entry_tools import SEARCH_LIMIT
from keen.mcp.types import ServerInfo, Tool

__all__ = ["build_catalog", "evaluate", "main", "read_queries", "select_half"]

TARGETS = {"step_recall@5": 0.85, "task_recall@10": 0.60, "p50_ms": 10.0, "build_s": 10.0}
DEPTH = 100


def build_catalog(paths: list[Path], cache_dir: Path | None = None, dense: bool = True) -> Catalog:
    """One catalog of every tool of ``paths``; its search index and vectors cached under
    ``cache_dir`` (``None``: in memory only)."""
    caps = []
    servers: dict[str, str] = {}
    for path in paths:
        for rec in load_catalog(path):
            tools = [
                Tool(
                    rec.name,
                    t["name"],
                    t.get("description") or "",
                    t.get("inputSchema") or {},
                    t.get("title"),
                )
                for t in rec.tools
            ]
            info = ServerInfo(rec.info_name, rec.version, None, rec.instructions)
            servers[rec.name] = server_text(rec.name, info, tools)
            caps += [tool_capability(rec.name, t) for t in rec.tools]
    if cache_dir is None:
        return Catalog(caps, servers, cache=False, dense=dense)
    return Catalog(caps, servers, cache_dir=cache_dir / "toolsearch", dense=dense)


def server_lines(paths: list[Path]) -> dict[str, dict[str, str]]:
    """Per server of ``paths``: its catalog ``line`` (what ``keen prompt`` shows: ``mcp:<server>:``
    and the SKILL.md description), its ``name`` alone and its ``full`` tool text (every tool's name and
    description), for the line-quality figure."""
    from keen.mcpskills import describe_server

    out: dict[str, dict[str, str]] = {}
    for path in paths:
        for rec in load_catalog(path):
            info = ServerInfo(rec.info_name, rec.version, None, rec.instructions)
            names = [str(t["name"]) for t in rec.tools]
            descriptions = [str(t.get("description") or "") for t in rec.tools]
            out[rec.name] = {
                # As the model reads it in `keen prompt`: "- mcp:<server>: <description> → read …".
                "line": f"mcp:{rec.name}: {describe_server(rec.name, info, names, descriptions)}",
                "name": rec.name,
                "full": f"{rec.name}: "
                + " ".join(f"{n}: {d}" for n, d in zip(names, descriptions, strict=True)),
            }
    return out


def read_queries(path: Path) -> list[dict[str, Any]]:
    """The query lines of ``path`` (blank lines skipped). Exits with a message on bad JSON."""
    out: list[dict[str, Any]] = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except json.JSONDecodeError as exc:
            raise SystemExit(f"search: {path}:{number}: not JSON ({exc.msg})") from exc
        if not isinstance(item.get("query"), str) or not isinstance(item.get("tools"), list):
            raise SystemExit(f'search: {path}:{number}: needs "query" (string) and "tools" (list)')
        out.append(item)
    return out


def select_half(queries: list[dict[str, Any]], half: str) -> list[dict[str, Any]]:
    """The queries of the even- or odd-numbered tasks (``half`` = ``even`` / ``odd``;
    tasks numbered 0, 1, ... in order of their first ``task_id``; a query without one is
    its own task), or all of them (``all``)."""
    if half == "all":
        return queries
    number: dict[str, int] = {}
    out: list[dict[str, Any]] = []
    for i, item in enumerate(queries):
        task = str(item.get("task_id") or f"#{i}")
        n = number.setdefault(task, len(number))
        if (n % 2 == 0) == (half == "even"):
            out.append(item)
    return out


def _split(ref: str) -> tuple[str, str]:
    server, _, tool = ref.rpartition("/")
    return server, tool


def _cap_id(ref: str) -> str:
    server, tool = _split(ref)
    return f"mcp__{server}__{tool}"


Unions = dict[str, tuple[list[list[str]], set[str]]]
Ranker = Callable[[str], list[list[str]]]
"""A query -> its ranked results, each the ids it covers (its own first, then its copies)."""


def keen_ranker(catalog: Catalog, k: int = DEPTH) -> Ranker:
    """Keen's ToolSearch through ``Catalog.search`` with ``k`` results (copies collapsed
    into one result)."""
    return lambda query: [[hit.id, *hit.copies] for hit in catalog.search(query, k=k)]


def _new_request() -> None:
    """Forget the query vectors the encoder keeps: each timed search encodes its request,
    as a new request does (the two searches of one request would otherwise share one)."""
    from keen.capabilities.encoder import sentence_encoder

    model = sentence_encoder()
    if model is not None:
        model.forget_queries()


def _percentiles(values: list[float]) -> list[float]:
    return statistics.quantiles(values, n=100, method="inclusive") if len(values) > 1 else values * 99


def anchor_rankers(catalog: Catalog) -> dict[str, Ranker]:
    """The plain methods every figure is a ratio to, over the same tools: ``bm25s`` alone
    (name and description, English stopwords, Snowball stems), ``wordllama`` alone (its own
    mean embedding of name and description), ``minilm`` alone (cosine of the same
    all-MiniLM-L6-v2 vectors Keen uses, of Keen's tool text)."""
    import bm25s
    import numpy as np
    import Stemmer

    from keen.capabilities._embed import embedder
    from keen.capabilities.encoder import sentence_encoder

    caps = list(catalog)
    ids = [c.id for c in caps]
    texts = [f"{c.name} {c.title} {c.search_text}" for c in caps]
    stemmer = Stemmer.Stemmer("english")
    bm25 = bm25s.BM25()
    bm25.index(
        bm25s.tokenize(texts, stopwords="en", stemmer=stemmer, show_progress=False), show_progress=False
    )

    def by_bm25(query: str) -> list[list[str]]:
        tokens = bm25s.tokenize([query], stopwords="en", stemmer=stemmer, show_progress=False)
        if not tokens.vocab:
            return []
        docs, _ = bm25.retrieve(tokens, k=min(DEPTH, len(ids)), show_progress=False)
        return [[ids[int(i)]] for i in docs[0]]

    wl = embedder()
    wl_vectors = wl.embed(texts, norm=True)

    def by_cosine(matrix: Any, vector: Any) -> list[list[str]]:
        scores = np.einsum("ij,j->i", matrix, vector)
        return [[ids[int(i)]] for i in np.argsort(-scores, kind="stable")[:DEPTH]]

    out: dict[str, Ranker] = {
        "bm25s": by_bm25,
        "wordllama": lambda q: by_cosine(wl_vectors, wl.embed([q], norm=True)[0]),
    }
    # The very vectors Keen's transformer signal uses (catalog order), ranked by cosine alone.
    dense = catalog.index().dense
    model = sentence_encoder()
    if dense is not None and dense.wait(None) and model is not None:
        # encode, not encode_one: the exact graph, and no query vector kept from Keen's run.
        out["minilm"] = lambda q: by_cosine(dense.docs, model.encode([q])[0])
    return out


def evaluate(
    catalog: Catalog,
    queries: list[dict[str, Any]],
    k: int,
    level: str,
    unions: Unions | None = None,
    rank: Ranker | None = None,
) -> dict[str, Any]:
    """Recall@1/@3/@k, MRR, latency percentiles (ms) for ``queries`` over ``catalog``,
    ranked by ``rank`` (default: Keen's search, timed at ``k`` = 100 and, as a new request
    again, at ``SEARCH_LIMIT``; an anchor ``rank`` is timed once, at 100).

    ``unions``, when given, gathers each ``task_id``'s needed groups and the union of its
    queries' top K across calls (for ``task_recall``)."""
    known = {c.id for c in catalog}
    cuts = sorted({1, 3, k})
    hits = {c: 0 for c in cuts}
    own = 0
    rr: list[float] = []
    latencies: list[float] = []
    cpu: list[float] = []
    product_latencies: list[float] = []
    product_cpu: list[float] = []
    product_thread: list[float] = []
    all_hits: list[bool] = []
    shares: list[float] = []
    tasks: dict[str, tuple[list[list[str]], set[str]]] = {}
    unknown = 0
    product = keen_ranker(catalog, SEARCH_LIMIT) if rank is None else None
    rank = rank or keen_ranker(catalog)
    rank("warm up the model and the index")
    for number, item in enumerate(queries):
        wanted = {_cap_id(ref) for ref in item["tools"]}
        unknown += len(wanted - known)
        covers: list[list[str]] = []
        calls = [(rank, latencies, cpu), *([(product, product_latencies, product_cpu)] if product else [])]
        for call, wall, used in calls[::-1] if number % 2 else calls:  # each goes first in turn
            if product is not None:
                _new_request()
            t, c, own_cpu = time.perf_counter(), time.process_time(), time.thread_time()
            result = call(item["query"])
            wall.append((time.perf_counter() - t) * 1000)
            used.append((time.process_time() - c) * 1000)
            if call is product:
                product_thread.append((time.thread_time() - own_cpu) * 1000)
            if call is rank:
                covers = result
        # Each result covers its own id and its copies (their servers at --level server).
        if level == "server":
            ranking: list[set[str]] = []
            seen: set[str] = set()
            for cover in covers:
                servers = {str(catalog.get(c).server) for c in cover} - seen
                if servers:
                    ranking.append(servers)
                    seen |= servers
            targets = {_split(ref)[0] for ref in item["tools"]}
        else:
            ranking = [set(cover) for cover in covers]
            targets = wanted
        first = next((i for i, x in enumerate(ranking) if x & targets), None)
        mine = (
            [cover[0] for cover in covers]
            if level == "tool"
            else list(dict.fromkeys(str(catalog.get(cover[0]).server) for cover in covers))
        )
        own += bool(set(mine[:k]) & targets)
        rr.append(0.0 if first is None else 1.0 / (first + 1))
        for c in cuts:
            hits[c] += first is not None and first < c
        groups = item.get("required")
        if isinstance(groups, list) and groups:
            top = set().union(*ranking[:k])
            if level == "server":
                found = [any(_split(r)[0] in top for r in g) for g in groups]
            else:
                found = [any(_cap_id(r) in top for r in g) for g in groups]
            all_hits.append(all(found))
            shares.append(sum(found) / len(found))
            if isinstance(item.get("task_id"), str):
                tasks.setdefault(item["task_id"], (groups, set()))[1].update(top)
                if unions is not None:
                    unions.setdefault(item["task_id"], (groups, set()))[1].update(top)
    n = max(len(queries), 1)
    cuts_ms = _percentiles(latencies)
    # An anchor has no search tool: its one call is its latency at both depths.
    product_ms = _percentiles(product_latencies) if product_latencies else cuts_ms
    out: dict[str, Any] = {f"recall@{c}": hits[c] / n for c in cuts}
    out[f"recall@{k}_own"] = own / n
    out |= {
        "mrr": sum(rr) / n,
        "p50_ms": product_ms[49],
        "p99_ms": product_ms[98],
        "cpu_p50_ms": statistics.median(product_cpu or cpu),
        "thread_cpu_p50_ms": statistics.median(product_thread) if product_thread else None,
        f"p50_ms@{DEPTH}": cuts_ms[49],
        f"p99_ms@{DEPTH}": cuts_ms[98],
        f"cpu_p50_ms@{DEPTH}": statistics.median(cpu),
        "load_average_1m": os.getloadavg()[0],
        "tools": len(catalog),
        "queries": len(queries),
        "servers": len(catalog.servers),
        "level": level,
        "k": k,
        "unknown_targets": unknown,
        "missed@100": sum(x == 0.0 for x in rr),
    }
    if all_hits:
        out[f"all@{k}"] = sum(all_hits) / len(all_hits)
        out[f"tool_recall@{k}"] = sum(shares) / len(shares)
    if tasks and len(tasks) < len(all_hits):
        out[f"task_union_all@{k}"] = task_share(tasks, level)
        out["tasks"] = len(tasks)
    return out


def task_share(unions: Unions, level: str) -> float:
    """The share of tasks whose every needed group has a member in the task's union."""
    found = [
        all(any((_split(r)[0] if level == "server" else _cap_id(r)) in union for r in g) for g in groups)
        for groups, union in unions.values()
    ]
    return sum(found) / max(len(found), 1)


def _report(fig: dict[str, Any], args: argparse.Namespace, queries: Path) -> None:
    k = fig["k"]
    names = ", ".join(f"{p.parent.name}/{p.name}" for p in args.catalog)
    print(f"ToolSearch over {names}: {fig['tools']:,} tools, {fig['servers']} servers")
    half = "" if fig["half"] == "all" else f" ({fig['half']}-numbered tasks only)"
    print(f"queries {queries.name}: {fig['queries']}{half}, level {fig['level']}, k={k}")
    for c in sorted({1, 3, k}):
        print(f"  recall@{c:<9} : {fig[f'recall@{c}']:.3f}")
    if f"all@{k}" in fig:
        print(f"  all@{k:<12} : {fig[f'all@{k}']:.3f} (every needed tool in the top {k})")
        print(
            f"  tool_recall@{k:<4} : {fig[f'tool_recall@{k}']:.3f} (mean share of needed tools in the top {k})"
        )
    if f"task_union_all@{k}" in fig:
        print(
            f"  task_union_all@{k:<2}: {fig[f'task_union_all@{k}']:.3f} ({fig['tasks']} tasks: every needed "
            f"tool in the union of the top {k} of the task's queries)"
        )
    own = f"recall@{k}_own"
    print(f"  {own:<17}: {fig[own]:.3f} (a result's copies on other servers not counted)")
    print(f"  MRR              : {fig['mrr']:.3f}")
    print(f"  missed           : {fig['missed@100']} queries with no needed tool in the top {DEPTH}")
    print(
        f"  latency p50/p99  : {fig['p50_ms']:.2f} / {fig['p99_ms']:.2f} ms per query, k={SEARCH_LIMIT} "
        "(the search tool's default)   target p50 <= 10 ms"
    )
    print(
        f"  latency k={DEPTH}    : {fig[f'p50_ms@{DEPTH}']:.2f} / {fig[f'p99_ms@{DEPTH}']:.2f} ms per query "
        f"(p50/p99; {DEPTH} hits with their why lines, for MRR)"
    )
    print(
        f"  CPU p50          : {fig['cpu_p50_ms']:.2f} ms per query at k={SEARCH_LIMIT}, "
        f"{fig[f'cpu_p50_ms@{DEPTH}']:.2f} at k={DEPTH} (all threads; 1-min load average "
        f"{fig['load_average_1m']:.1f} on {os.cpu_count()} CPUs)"
    )
    if fig["thread_cpu_p50_ms"] is not None:
        print(
            f"  calling thread   : {fig['thread_cpu_p50_ms']:.2f} ms CPU p50 per query at k={SEARCH_LIMIT} (the "
            "search's own thread, without its helpers: about the wall time with a CPU free for them)"
        )
    if fig["unknown_targets"]:
        print(f"  note: {fig['unknown_targets']} listed tools are not in the catalogs (never found)")


def _timed_build(
    paths: list[Path], cache_dir: Path | None, weights: SearchWeights | None
) -> tuple[Catalog, float, float]:
    """A catalog whose index and transformer vectors are ready: (catalog, seconds to the
    keyword + wordllama index, seconds until the vectors are ready too)."""
    from keen.capabilities.dense import shared_cache
    from keen.capabilities.encoder import sentence_encoder
    from keen.capabilities.search import forget

    shared_cache.cache_clear()  # a new process's view: vectors come from disk or the encoder
    forget()  # and the index from its cache folder, not from the rows of the last build
    catalog = build_catalog(paths, cache_dir)
    t = time.perf_counter()
    catalog.index(weights)
    lexical_s = time.perf_counter() - t
    catalog.wait_ready(None)
    seconds = time.perf_counter() - t
    model = sentence_encoder()
    if model is not None:  # queries are timed on the int8 query graph, built after the model loads
        model.wait_query_graph(60)
    return catalog, lexical_s, seconds


def _peak_rss_mb() -> float:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _anchor_table(rows: dict[str, dict[str, Any]], k: int) -> None:
    cuts = sorted({1, 3, k})
    head = "".join(f"{'recall@' + str(c):>10}" for c in cuts)
    # Every method's latency here is of its top 100 (the anchors have no other).
    print(f"  {'method':<10}{head}{'MRR':>8}{'p50 ms':>9}{'p99 ms':>9}  (latency at k={DEPTH})")
    for name, fig in rows.items():
        cells = "".join(f"{fig[f'recall@{c}']:>10.3f}" for c in cuts)
        p50, p99 = fig[f"p50_ms@{DEPTH}"], fig[f"p99_ms@{DEPTH}"]
        print(f"  {name:<10}{cells}{fig['mrr']:>8.3f}{p50:>9.2f}{p99:>9.2f}")
    keen = rows.get("keen")
    anchors = {n: f for n, f in rows.items() if n != "keen"}
    if keen and anchors:
        ratios = []
        for key in [*(f"recall@{c}" for c in cuts), "mrr"]:
            best = max(f[key] for f in anchors.values())
            ratios.append(f"{key} x{keen[key] / best:.2f}" if best else f"{key} -")
        print(f"  keen / best anchor: {', '.join(ratios)}")


def line_quality(paths: list[Path], queries: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Server recall@1/@3 of ``queries`` when all-MiniLM-L6-v2 alone ranks the servers by
    their catalog line, their name, or their full tool text (cosine of query and text)."""
    import numpy as np

    from keen.capabilities.encoder import sentence_encoder

    model = sentence_encoder()
    if model is None:
        return {}
    servers = server_lines(paths)
    names = list(servers)
    out: dict[str, dict[str, float]] = {}
    query_vectors = model.encode([q["query"] for q in queries])
    for field in ("line", "name", "full"):
        matrix = model.encode([servers[n][field] for n in names])
        hits = {1: 0, 3: 0}
        for item, qv in zip(queries, query_vectors, strict=True):
            wanted = {_split(ref)[0] for ref in item["tools"]}
            order = [names[i] for i in np.argsort(-(matrix @ qv), kind="stable")[:3]]
            for c in hits:
                hits[c] += bool(wanted & set(order[:c]))
        out[field] = {f"server_recall@{c}": hits[c] / max(len(queries), 1) for c in hits}
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="ToolSearch recall and latency over recorded catalogs.")
    parser.add_argument("--catalog", type=Path, action="append", required=True, help="tools.json or .ndjson")
    parser.add_argument(
        "--queries", type=Path, action="append", required=True, help="query JSON lines (repeatable)"
    )
    parser.add_argument("-k", type=int, default=5, help="cut-off K (5)")
    parser.add_argument("--level", choices=("tool", "server"), default="tool")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument(
        "--weights",
        default="",
        help="fusion weights lexical,semantic,server[,dense,dense_server,static_with_dense] (method study)",
    )
    parser.add_argument(
        "--half",
        choices=("all", "even", "odd"),
        default="all",
        help="only the queries of even- or odd-numbered tasks (by first task_id seen): tune on one, check on the other",
    )
    parser.add_argument(
        "--cache", type=Path, default=Path(".bench/cache"), help="index and vector cache (.bench/cache)"
    )
    parser.add_argument(
        "--cold",
        action="store_true",
        help="time a build from an empty cache first; the warm build then reads that cache",
    )
    parser.add_argument(
        "--anchors", action="store_true", help="also rank with plain bm25s, wordllama, MiniLM"
    )
    parser.add_argument(
        "--halves", action="store_true", help="also print Keen's figures on the even and odd halves"
    )
    parser.add_argument(
        "--lines",
        action="store_true",
        help="line quality: servers ranked by MiniLM over lines, names, full text",
    )
    args = parser.parse_args(argv)
    for path in [*args.catalog, *args.queries]:
        if not path.is_file():
            raise SystemExit(f"search: {path} does not exist")
    weights = SearchWeights(*map(float, args.weights.split(","))) if args.weights else None
    cache_dir = args.cache
    if args.cold:
        # The warm build reads the cache this cold build filled: a cache left in args.cache by
        # an older index format would make "warm" a second cold build.
        scratch = tempfile.TemporaryDirectory(prefix="keen-bench-")
        atexit.register(scratch.cleanup)
        cache_dir = Path(scratch.name)
        _, cold_lexical, cold_s = _timed_build(args.catalog, cache_dir, weights)
        first = (
            f"cold {cold_s:.2f} s (keywords + wordllama {cold_lexical:.2f} s, then the transformer vectors)"
        )
    else:
        _, _, first_s = _timed_build(args.catalog, cache_dir, weights)
        first = f"first {first_s:.2f} s (cache of earlier runs in {cache_dir}; --cold times an empty one)"
    catalog, warm_lexical, warm_s = _timed_build(args.catalog, cache_dir, weights)
    build = {"first": first, "warm_s": warm_s, "warm_lexical_s": warm_lexical}
    anchors = anchor_rankers(catalog) if args.anchors else {}
    unions: Unions = {}
    per_file: dict[str, dict[str, Any]] = {}
    names = [p.name for p in args.queries]
    for path in args.queries:
        queries = select_half(read_queries(path), args.half)
        figures = evaluate(catalog, queries, args.k, args.level, unions)
        rows = {"keen": figures} | {
            n: evaluate(catalog, queries, args.k, args.level, None, r) for n, r in anchors.items()
        }
        key = path.name if names.count(path.name) == 1 else str(path)  # two dirs, one file name
        per_file[key] = figures | {"build_s": warm_s, "half": args.half}
        if len(rows) > 1:
            per_file[key]["anchors"] = {n: f for n, f in rows.items() if n != "keen"}
        lines = line_quality(args.catalog, queries) if args.lines else {}
        if lines:
            per_file[key]["line_quality"] = lines
        halves = (
            {
                h: evaluate(catalog, select_half(read_queries(path), h), args.k, args.level)
                for h in ("even", "odd")
            }
            if args.halves and args.half == "all"
            else {}
        )
        if halves:
            per_file[key]["halves"] = halves
        if not args.json:
            _report(per_file[key], args, path)
            if len(rows) > 1:
                _anchor_table(rows, args.k)
            for h, fig in halves.items():
                cells = ", ".join(f"recall@{c} {fig[f'recall@{c}']:.3f}" for c in sorted({1, 3, args.k}))
                print(f"  keen, {h + ' half':<13}: {cells}, MRR {fig['mrr']:.3f} ({fig['queries']} queries)")
            if lines:
                print(
                    "  line quality (MiniLM ranks servers by ...): "
                    + "; ".join(
                        f"{field} r@1 {v['server_recall@1']:.3f} r@3 {v['server_recall@3']:.3f}"
                        for field, v in lines.items()
                    )
                )
    if not args.json:
        print(
            f"  index build      : {build['first']}; warm {warm_s:.2f} s (cache hit; keywords + wordllama "
            f"{warm_lexical:.2f} s)   target warm <= 1 s"
        )
        print(f"  memory           : peak RSS {_peak_rss_mb():.0f} MB")
    together = len(args.queries) > 1 and unions
    key = f"task_recall@{args.k}"
    if args.json:
        extra_build = {"build": build, "peak_rss_mb": _peak_rss_mb()}
        if len(args.queries) == 1:
            json.dump(next(iter(per_file.values())) | extra_build, sys.stdout)
        else:
            extra = {key: task_share(unions, args.level), "tasks": len(unions)} if together else {}
            json.dump({"files": per_file, **extra, **extra_build}, sys.stdout)
        print()
    elif together:
        print(
            f"{key:<17}: {task_share(unions, args.level):.3f} ({len(unions)} tasks: every needed tool in "
            f"the union of the top {args.k} of the task's queries in "
            f"{' + '.join(p.name for p in args.queries)})"
            + (
                f"   target >= {TARGETS['task_recall@10']:.2f}"
                if args.k == 10 and args.level == "tool"
                else ""
            )
        )


if __name__ == "__main__":
    main()
