"""``keen.prompt.budgeted_prompt`` without ``call_tool``: the ``call_mcp_tool`` definition
``keen prompt`` and ``keen.gateway.tool_definition`` give for the same skills directory, and
a host that only builds its prompt imports no gateway."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from helpers.cli import KEEN
from helpers.forkserver import forked
from keen.capabilities import _section_store, budgeted_section
from keen.errors import BudgetTooSmall, KeenError
from keen.gateway import tool_definition
from keen.mcp.types import ServerInfo, ServerState, ServerStatus, Tool
from keen.mcpskills import generate_skill
from keen.prompt import budgeted_prompt, mcp_tool_definitions
from keen.skills.cache import DiscoveryCache

NOW = datetime(2026, 1, 2, tzinfo=UTC)


def skills(root: Path, count: int) -> Path:
    for n in range(count):
        server = f"server-{n}"
        tools = [
            Tool(
                server,
                f"tool_{t}",
                f"Does thing {t} of server {n} with care and at length.",
                {"type": "object"},
            )
            for t in range(3)
        ]
        status = ServerStatus(server, "stdio", "none", ServerState.CONNECTED, last_refresh_at=NOW)
        generate_skill(root, status, tools, info=ServerInfo(server, "1", None, None), now=NOW, fsync=False)
    return root


def test_the_default_call_tool_is_the_gateways_for_the_same_directory(tmp_path: Path) -> None:
    root = skills(tmp_path / "skills", 40)
    with pytest.raises(BudgetTooSmall, match="below the") as below:
        budgeted_prompt(0, root)
    fixed = below.value.minimum  # the two tool definitions
    steps = set()
    for budget in (fixed + 120, fixed + 400, 20_000):
        default = budgeted_prompt(budget, root)
        given = budgeted_prompt(budget, root, call_tool=tool_definition("openai", skills_dir=str(root)))
        assert default == given, budget
        steps.add(default.step)
    assert {"folded", "full"} <= steps, steps


def test_a_budget_below_the_two_definitions_says_the_least_that_can_be_met(tmp_path: Path) -> None:
    """``budgeted_prompt(50)`` returned the step ``empty`` whose tokens (the two tool
    definitions, sent with any prompt) were over the budget, and said nothing: a host sent a
    prompt past its budget, believing it within. Now it raises ``BudgetTooSmall`` with the
    least budget that can be met; at that budget the section is within it."""
    root = skills(tmp_path / "skills", 5)
    with pytest.raises(
        BudgetTooSmall, match=r"a budget of 50 tokens is below the \d+ tokens of the tool definitions"
    ) as small:
        budgeted_prompt(50, root)
    error = small.value
    assert isinstance(error, KeenError) and isinstance(error, ValueError)
    assert error.budget == 50 and f"give at least {error.minimum} tokens" in error.message
    least = budgeted_prompt(error.minimum, root)
    assert least.overhead_tokens == error.minimum and least.tokens <= least.budget == error.minimum
    assert (least.step, least.text, least.listed) == ("empty", "", [])  # no room for a line yet
    with pytest.raises(BudgetTooSmall, match=f"give at least {error.minimum} tokens"):
        budgeted_prompt(error.minimum - 1, root)


def test_a_budget_below_the_two_definitions_keeps_no_section_in_the_store(
    tmp_path: Path, keen_home: Path
) -> None:
    """``budgeted_prompt`` built (and kept in ``cache/prompt-sections``, the newest 16) the
    section of a budget below the two definitions before it raised ``BudgetTooSmall``: each
    too-small budget a host tried pushed a real stored section out. Now the budget is
    weighed against the definitions first, and ``budgeted_section`` (keen chat's path)
    keeps no section whose overhead is over its budget."""
    root = skills(tmp_path / "skills", 5)
    store = _section_store.store_dir()

    def stored() -> list[str]:
        _section_store.save_sections()
        return sorted(f.name for f in store.glob("*.json"))

    real = budgeted_prompt(4000, root)
    before = stored()
    assert len(before) == 1 and real.tokens <= 4000, before
    for budget in (0, 50, real.overhead_tokens - 1):
        with pytest.raises(BudgetTooSmall, match=f"give at least {real.overhead_tokens} tokens"):
            budgeted_prompt(budget, root)
    overhead = mcp_tool_definitions(tool_definition("openai", skills_dir=str(root)))
    over = budgeted_section(DiscoveryCache(root).discover().enabled, 50, skills_root=root, overhead=overhead)
    assert over.step == "empty" and over.overhead_tokens > over.budget == 50, over
    assert stored() == before
    # A budget that holds the definitions is kept, as before.
    budgeted_prompt(real.overhead_tokens, root)
    assert len(stored()) == 2


def test_a_host_building_its_prompt_imports_no_gateway(tmp_path: Path) -> None:
    # Nor what only a call or a log record needs: hashlib (OpenSSL's, about 3.5 ms: the
    # caches hash with CPython's own BLAKE2b and SHA-256, keen._digest) and the redactor;
    # nor dataclasses with inspect (about 40 million instructions: the path's records are
    # keen._record's), nor copy (the search tool's schema is copied as JSON).
    root = skills(tmp_path / "skills", 3)
    unloaded = (
        "keen.gateway",
        "keen.calls",
        "anyio",
        "hashlib",
        "keen._redact",
        "dataclasses",
        "inspect",
        "copy",
    )
    code = (
        "import sys\nfrom pathlib import Path\nfrom keen.prompt import budgeted_prompt\n"
        f"section = budgeted_prompt(4000, Path({str(root)!r}))\n"
        f"print(section.step, sorted(m for m in {unloaded!r} if m in sys.modules))\n"
    )
    env = {**os.environ, "KEEN_HOME": str(tmp_path)}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["full", "[]"], done.stdout


def test_the_librarys_prompt_is_keen_prompts_byte_for_byte(tmp_path: Path) -> None:
    # keen prompt --budget prints the section the library gives a host, one newline added,
    # whether the section was computed (the first start) or read from its store (the next).
    root = skills(tmp_path / "skills", 40)
    env = {**os.environ, "KEEN_HOME": str(tmp_path)}
    code = (
        "import sys\nfrom pathlib import Path\nfrom keen.prompt import budgeted_prompt\n"
        "sys.stdout.write(budgeted_prompt(int(sys.argv[2]), Path(sys.argv[1])).text)\n"
    )
    fixed = budgeted_prompt(100_000, root).overhead_tokens  # the two tool definitions
    for budget in (fixed + 120, fixed + 400, 20_000):
        for when in ("computed", "stored"):
            # The host forked from the worker's warm process, as `keen` is: their output is
            # under test, not what a new interpreter imports (the test above) nor its start;
            # the first in a new interpreter, whose token counter is not the warm process's.
            argv = ("-c", code, str(root), str(budget))
            fresh = budget == fixed + 120 and when == "computed"
            library = subprocess.run(
                [sys.executable, *argv] if fresh else forked(*argv),
                capture_output=True,
                env=env,
                timeout=120,
                check=True,
            )
            command = subprocess.run(
                [*KEEN, "prompt", "--budget", str(budget)],
                capture_output=True,
                env=env,
                timeout=120,
                check=True,
            )
            assert library.stdout and command.stdout == library.stdout + b"\n", budget
