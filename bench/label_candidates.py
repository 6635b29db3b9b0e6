"""Pool candidate tools for labelling natural requests (a helper for writing query sets).

Usage: ``python bench/label_candidates.py --catalog FILE [--catalog FILE ...] --queries
FILE.jsonl [-n 12] [--model DIR] [--only N ...] [--json]``

A request is labelled by a person reading tool descriptions; this script only decides
which descriptions to read, so that no single retrieval method decides what counts as
right. For each query line (``{"query": str, "tools": [...], "grep": [...]?}``) it pools:

- ``bm25``: the top ``n`` of plain bm25s (English stop words, Snowball stemmer when
  PyStemmer is installed) over each tool's name (``_``/``-``/camelCase split) and
  description;
- ``minilm``: the top ``n`` by cosine of all-MiniLM-L6-v2 (int8 ONNX, mean pooled) over
  "server: tool. description", when ``--model DIR`` holds ``model.onnx`` and
  ``tokenizer.json`` and onnxruntime and tokenizers are installed (tool vectors are cached
  in ``--cache``, keyed by the text's hash);
- ``grep``: every tool whose name or description opening (240 characters) matches all
  regular expressions of the line's optional ``grep`` list (case-insensitive), at most
  ``4 n``;
- ``copy``: every tool with the same name as a pooled or labelled tool on another server
  and a similar description (word Jaccard >= 0.5): ToolGym holds many forks of the same
  server under other names.

It prints each query, then the candidates, numbered, one row per group of identical tools
(same name and description on several servers: ``name @ first-server +N``), labelled
ones marked ``*`` (``~``: some copies labelled), with the methods that found them and the
start of their description; ``missing`` lists labels that name no tool of the catalogs;
``--new`` leaves out the groups already labelled. ``--json`` prints one object per query
(``groups`` with every server of each group) instead. The label decision stays with the
reader: add every candidate that would do the job to ``tools``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
from pathlib import Path
from typing import Any

import numpy as np

from _catalog import load_catalog

__all__ = ["Tool", "group", "load_tools", "main", "pool"]

Tool = tuple[str, str, str]  # server, name, description
GREP_CHARS = 240  # grep reads a description's opening only: long ones mention everything


def load_tools(paths: list[Path]) -> list[Tool]:
    """Every (server, tool name, description) of the catalogs, in file order."""
    return [
        (rec.name, t["name"], " ".join((t.get("description") or "").split()))
        for path in paths
        for rec in load_catalog(path)
        for t in rec.tools
    ]


def _words(name: str) -> str:
    return re.sub(r"([a-z])([A-Z])", r"\1 \2", name).replace("_", " ").replace("-", " ")


class _Bm25:
    def __init__(self, tools: list[Tool]) -> None:
        import bm25s

        try:
            import Stemmer

            self.stemmer: Any = Stemmer.Stemmer("english")
        except ImportError:
            self.stemmer = None
        corpus = [f"{_words(name)} {desc}" for _, name, desc in tools]
        self.bm25s = bm25s
        self.index = bm25s.BM25()
        self.index.index(bm25s.tokenize(corpus, stopwords="en", stemmer=self.stemmer, show_progress=False))
        self.size = len(tools)

    def top(self, query: str, n: int) -> list[int]:
        tokens = self.bm25s.tokenize([query], stopwords="en", stemmer=self.stemmer, show_progress=False)
        docs, scores = self.index.retrieve(tokens, k=min(n, self.size), show_progress=False)
        return [int(d) for d, s in zip(docs[0], scores[0], strict=True) if s > 0]


class _MiniLM:
    def __init__(self, model_dir: Path, tools: list[Tool], cache: Path) -> None:
        import onnxruntime
        from tokenizers import Tokenizer

        self.tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        self.tokenizer.enable_truncation(max_length=256)
        self.tokenizer.enable_padding()
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = 1
        self.session = onnxruntime.InferenceSession(str(model_dir / "model.onnx"), options)
        texts = [f"{server}: {_words(name)}. {desc}" for server, name, desc in tools]
        key = hashlib.sha256("\n".join(texts).encode()).hexdigest()[:16]
        path = cache / f"minilm-{key}.npy"
        if path.exists():
            self.vectors = np.load(path)
        else:
            print(f"encoding {len(texts)} tools once (cached in {path})", file=sys.stderr)
            self.vectors = np.vstack([self.encode(texts[i : i + 32]) for i in range(0, len(texts), 32)])
            cache.mkdir(parents=True, exist_ok=True)
            np.save(path, self.vectors)

    def encode(self, texts: list[str]) -> np.ndarray:
        batch = self.tokenizer.encode_batch(texts)
        ids = np.array([e.ids for e in batch], dtype=np.int64)
        mask = np.array([e.attention_mask for e in batch], dtype=np.int64)
        feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        names = {i.name for i in self.session.get_inputs()}
        hidden = np.asarray(self.session.run(None, {k: v for k, v in feeds.items() if k in names})[0])
        summed = (hidden * mask[..., None]).sum(axis=1) / np.maximum(mask.sum(axis=1, keepdims=True), 1)
        return summed / np.linalg.norm(summed, axis=1, keepdims=True)

    def top(self, query: str, n: int) -> list[int]:
        scores = self.vectors @ self.encode([query])[0]
        return [int(i) for i in np.argsort(-scores)[:n]]


def _bag(text: str) -> set[str]:
    return set(re.findall(r"\w+", text.lower()))


def _jaccard(a: set[str], b: set[str]) -> float:
    return len(a & b) / len(a | b) if a | b else 1.0


def pool(
    item: dict[str, Any], tools: list[Tool], methods: dict[str, Any], n: int
) -> tuple[dict[int, list[str]], list[str]]:
    """Candidate index -> the methods that found it; and the labels naming no tool."""
    ids = {f"{server}/{name}": i for i, (server, name, _) in enumerate(tools)}
    found: dict[int, list[str]] = {}
    for label, method in methods.items():
        for i in method.top(item["query"], n):
            found.setdefault(i, []).append(label)
    patterns = [re.compile(p, re.IGNORECASE) for p in item.get("grep") or []]
    if patterns:
        hits = [
            i
            for i, (_, name, desc) in enumerate(tools)
            if all(p.search(f"{_words(name)} {name} {desc[:GREP_CHARS]}") for p in patterns)
        ]
        for i in hits[: 4 * n]:
            found.setdefault(i, []).append("grep")
    labelled = {ids[t] for t in item["tools"] if t in ids}
    missing = [t for t in item["tools"] if t not in ids]
    words = {}
    for i in [*found, *labelled]:
        words.setdefault(tools[i][1], []).append(_bag(tools[i][2]))
    for i, (_, name, desc) in enumerate(tools):
        if i in found or i in labelled or name not in words:
            continue
        bag = _bag(desc)
        if any(_jaccard(bag, other) >= 0.5 for other in words[name]):
            found[i] = ["copy"]
    for i in labelled:
        found.setdefault(i, [])
    return found, missing


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Pool candidate tools for labelling query sets.")
    parser.add_argument("--catalog", type=Path, action="append", required=True)
    parser.add_argument("--queries", type=Path, required=True)
    parser.add_argument("-n", type=int, default=12, help="top n of each method (12)")
    parser.add_argument("--model", type=Path, help="folder with model.onnx and tokenizer.json (MiniLM)")
    parser.add_argument("--cache", type=Path, default=Path("/tmp/keen-label-cache"))
    parser.add_argument("--only", type=int, nargs="+", help="only these 1-based line numbers")
    parser.add_argument("--new", action="store_true", help="print only candidates not labelled yet")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    tools = load_tools(args.catalog)
    methods: dict[str, Any] = {"bm25": _Bm25(tools)}
    if args.model:
        methods["minilm"] = _MiniLM(args.model, tools, args.cache)
    lines = [line for line in args.queries.read_text(encoding="utf-8").splitlines() if line.strip()]
    for number, line in enumerate(lines, 1):
        if args.only and number not in args.only:
            continue
        item = json.loads(line)
        found, missing = pool(item, tools, methods, args.n)
        groups = group(found, tools, set(item["tools"]))
        if args.new:
            groups = [g for g in groups if not all(g["labelled"])]
        if args.json:
            print(json.dumps({"line": number, "query": item["query"], "missing": missing, "groups": groups}))
            continue
        print(f"\n#{number} {item['query']}")
        if missing:
            print(f"  missing: {missing}")
        for n, g in enumerate(groups, 1):
            mark = "*" if all(g["labelled"]) else ("~" if any(g["labelled"]) else " ")
            servers = (
                ", ".join(g["servers"])
                if len(g["servers"]) <= 3
                else f"{g['servers'][0]} +{len(g['servers']) - 1}"
            )
            print(
                f" {mark}{n:>3} {g['name']} @ {servers} [{','.join(g['by']) or 'label'}] {g['description'][:110]}"
            )


def group(found: dict[int, list[str]], tools: list[Tool], labels: set[str]) -> list[dict[str, Any]]:
    """The candidates with the same name and description (a server's forks) as one group,
    labelled groups first, then by how many methods found them."""
    groups: dict[tuple[str, str], dict[str, Any]] = {}
    for i, by in sorted(found.items()):
        server, name, desc = tools[i]
        g = groups.setdefault(
            (name, desc), {"name": name, "description": desc, "servers": [], "labelled": [], "by": []}
        )
        g["servers"].append(server)
        g["labelled"].append(f"{server}/{name}" in labels)
        g["by"] = sorted(set(g["by"]) | set(by))
    return sorted(groups.values(), key=lambda g: (not any(g["labelled"]), -len(set(g["by"]) - {"copy"})))


if __name__ == "__main__":
    main()
