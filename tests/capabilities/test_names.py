"""Capability ids and model tool names: long, non-ASCII and colliding names, stable across runs."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from hypothesis import given, settings
from hypothesis import strategies as st

from keen.capabilities import MODEL_NAME_RE, capability_id, model_name, model_names


def test_ids_follow_the_seed_shapes() -> None:
    assert capability_id("tool", "get_pull_request", "github") == "mcp__github__get_pull_request"
    assert capability_id("skill", "code-review") == "skill__code-review"
    assert capability_id("local", "read") == "local__read"
    assert capability_id("resource", "file:///a", "fs") == "mcp__fs__resource__file:///a"
    assert capability_id("prompt", "triage", "ci") == "mcp__ci__prompt__triage"


def test_valid_ids_are_their_own_names() -> None:
    assert model_name("mcp__github__get_pull_request") == "mcp__github__get_pull_request"


def test_long_name_is_cut_with_a_stable_hash_suffix() -> None:
    long_id = "mcp__server__" + "very_long_tool_name_" * 10
    name = model_name(long_id)
    assert MODEL_NAME_RE.fullmatch(name)
    assert len(name) == 64
    assert name.startswith("mcp__server__very_long_tool_name")
    assert name == model_name(long_id)
    # Another id with the same first 64 characters gets another name.
    assert model_name(long_id + "x") != name


def test_non_ascii_and_punctuation_become_readable_ascii() -> None:
    name = model_name("mcp__bing__搜索_café/search.v2")
    assert MODEL_NAME_RE.fullmatch(name)
    assert name.startswith("mcp__bing__")
    assert "cafe" in name


def test_collisions_are_resolved_the_same_way_whatever_the_order() -> None:
    # "a.b" and "a_b" both read as "a_b"; "mcp__s__a_b" is valid and keeps its own name.
    ids = ["mcp__s__a.b", "mcp__s__a_b", "mcp__s__a b", "mcp__s__" + "x" * 80, "mcp__s__" + "x" * 81]
    forward = model_names(ids)
    backward = model_names(list(reversed(ids)))
    assert forward == backward
    assert forward["mcp__s__a_b"] == "mcp__s__a_b"
    assert len(set(forward.values())) == len(ids)
    assert all(MODEL_NAME_RE.fullmatch(n) for n in forward.values())


def test_names_are_stable_across_processes() -> None:
    ids = ["mcp__s__a.b", "mcp__s__a_b", "mcp__über__tööl", "mcp__s__" + "y" * 100]
    code = f"import json; from keen.capabilities import model_names; print(json.dumps(model_names({ids!r})))"
    results = []
    for seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        done = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True
        )
        results.append(json.loads(done.stdout))
    assert results[0] == results[1] == model_names(ids)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.text(min_size=1, max_size=90), min_size=1, max_size=12))
def test_any_ids_get_unique_valid_names(raw: list[str]) -> None:
    ids = [f"mcp__srv__{r}" for r in raw]
    names = model_names(ids)
    assert set(names) == set(ids)
    assert len(set(names.values())) == len(names)
    assert all(MODEL_NAME_RE.fullmatch(n) for n in names.values())


def test_importing_capabilities_loads_no_search_engine() -> None:
    # numpy, bm25s, PyStemmer and wordllama load on the first search, not at import:
    # `keen --help` and a catalog that is only listed stay fast.
    code = (
        "import sys, keen.capabilities, keen.cli.tools_cmd; "
        "print(sorted(m for m in ('numpy', 'bm25s', 'Stemmer', 'wordllama') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
