"""Prompt start benchmark: CPU from a cold interpreter to a usable budgeted prompt, at scale.

Each figure is the CPU time (user + system) of a fresh process, repeated ``--runs`` times
and printed as min / median / max, beside a bare interpreter (``python -c pass``) from the
same run and as a ratio to it; the target is a prompt within 100 ms of CPU beyond the
interpreter at 292 skills. Rows:

- ``keen prompt --budget TOKENS`` at each ``--sizes`` count of generated skills;
- the library's budgeted prompt (``keen.prompt.budgeted_prompt``, as the README's host
  program calls it: its default ``call_mcp_tool`` definition is
  ``keen.entry_tools.call_tool_definition``'s, the one ``keen.gateway.tool_definition``
  gives, without importing the gateway) at each size, and the CPU of that call alone,
  measured in the process after its imports (the part that grows with the skills);
- ``keen chat -p``'s first turn with a scripted model, twice: up to its system prompt first
  built (``prompt ready``: the catalog within its budget, what is to be ready
  within 100 ms) and up to the first model request (``first request``: the process reports
  its CPU when the model is first asked, then exits), at each size: the prompt path of a
  chat, with no MCP server configured; the row says whether the MCP SDK or the search
  stack was loaded by then; once more at the first size with each skill's server
  configured (the skills on disk cover the configuration, and the caches are those a whole
  chat over it left, as on a second run);
- the first ``keen prompt`` in a new ``KEEN_HOME`` (it writes the token-rank cache), once;
- the ``openai`` SDK's import and client (``openai.AsyncOpenAI``), beside the interpreter: the
  CPU ``keen chat -m openai:...`` spends before its first request on top of the scripted
  model's row, which is the provider's and not Keen's.

Each row's sizes are measured in turns (one run of each size per round), so a change of
load weighs on all of them alike. With three sizes or more, a ``growth`` line per figure
gives its CPU beyond the interpreter at each size (each size's fastest run) and the
marginal cost per 1,000 more skills from each size to the next: linear or better when that
cost does not rise (the target is growth linear in skills; :func:`_growth` says why the
fastest run).

Skills are generated without servers (``keen.mcpskills.generate_skill`` from the recorded
tool lists, as ``tests/capabilities/test_budget.py`` does): the LiveMCPBench and ToolGym
catalogs give 292 servers; larger counts replicate them under new names (``<name>-r2``,
...). The chat home holds the same ``SKILL.md`` files without the generated-skill marker:
with no server configured, the startup sync would remove generated skills, never a
person's own.

Children run with Python's bytecode cache on (``PYTHONDONTWRITEBYTECODE`` removed from their
environment), as an installed Keen runs: otherwise each process compiles Keen's modules
from source again, which is not Keen's cost.

Usage: ``python bench/prompt_start.py [CATALOG ...] [--sizes 292,1393,3406] [--runs 5]
[--budget 4000] [--json]``
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from _catalog import keen_names, load_catalog
from _common import PYTHON, print_block, verdict
from keen.mcp.types import ServerInfo, ServerState, ServerStatus, Tool
from keen.mcpskills import generate_skill

__all__ = ["generate", "main"]

HERE = Path(__file__).resolve().parent
SHARED = HERE.parents[1] / "shared" / "data"
DEFAULT_CATALOGS = [SHARED / "livemcpbench" / "tools.json", SHARED / "toolgym" / "tool_descriptions.ndjson"]
KEEN = shutil.which("keen", path=str(Path(PYTHON).parent)) or "keen"
TARGET_S = 0.100
NOW = datetime(2026, 1, 2, tzinfo=UTC)

# Prints the CPU of the budgeted_prompt call alone (after its imports): the part that grows
# with the skills, without the interpreter's and the imports' fixed cost and its noise.
LIBRARY = """
import sys, time
from pathlib import Path
from keen.prompt import budgeted_prompt
root = Path(sys.argv[1])
began = time.process_time()
section = budgeted_prompt(int(sys.argv[2]), root)  # call_mcp_tool's definition for root by default
print(time.process_time() - began)
assert section.text, section.step
"""

# Runs `keen chat -p` and reports this process's CPU when its system prompt is first built
# (the prompt ready) and when the model is first asked (the first request). It imports only
# what the first request needs anyway (the system prompt's module, the scripted model), so
# the figures are the chat's: the turn loop, the runtime and the rest load when it does. It
# imports them as the command does, after the modules `keen` loads before the turn and with
# the collector paused as the turn pauses it (keen._gcfreeze): imported before that, their
# objects cost the collector's walks (3.7 M instructions) that `keen chat -p` never makes.
CHAT = """
import json, os, resource, sys
import keen.cli, keen.cli._prompt, keen.cli._chat
from keen._gcfreeze import pause_collection
pause_collection()  # as the turn does at its start: a no-op when it does so again
from keen.agent import system_prompt
from keen.agent.providers import scripted

def cpu():
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime

build = system_prompt.build_system_prompt
ready = []

def build_system_prompt(*args, **kwargs):
    text = build(*args, **kwargs)
    if not ready:
        ready.append(cpu())
    return text

system_prompt.build_system_prompt = build_system_prompt  # before keen.agent.loop imports it

async def first_request(self, messages, tools):
    now = cpu()
    system = messages[0].content if messages else ""
    search = sorted({"bm25s", "numpy", "wordllama"} & set(sys.modules))
    sdk = sorted({"mcp", "mcp_types"} & set(sys.modules))
    figures = {"cpu": now, "ready_cpu": ready[0] if ready else now, "system_chars": len(system),
               "search_loaded": search, "sdk_loaded": sdk, "encoder_built": "tiktoken" in sys.modules}
    print(json.dumps(figures), flush=True)
    os._exit(0)
    yield  # an async generator, like the real stream

scripted.ScriptedModel.stream = first_request
from keen.cli import main
sys.argv = ["keen", "chat", "-m", "scripted:" + sys.argv[1], "-p", "hello", "--timeout", "5"]
main()
"""


def generate(catalogs: list[Path], count: int, root: Path) -> None:
    """``count`` generated skills under ``root`` from the catalogs' servers, replicated
    under new names past the catalogs' own count."""
    servers = [s for path in catalogs for s in load_catalog(path)]
    raw = [
        servers[i % len(servers)].key
        if i < len(servers)
        else f"{servers[i % len(servers)].key}-r{i // len(servers) + 1}"
        for i in range(count)
    ]
    for i, name in enumerate(keen_names(raw)):
        recorded = servers[i % len(servers)]
        tools = [
            Tool(
                name,
                t["name"],
                t.get("description") or "",
                t.get("inputSchema") or {},
                annotations=t.get("annotations"),
            )
            for t in recorded.tools
        ]
        status = ServerStatus(name, "stdio", "none", ServerState.CONNECTED, last_refresh_at=NOW)
        info = ServerInfo(recorded.info_name, recorded.version, None, recorded.instructions)
        generate_skill(root, status, tools, info=info, now=NOW, fsync=False)


def _user_copies(source: Path, target: Path) -> None:
    """Each skill's SKILL.md under ``target``, without the generated-skill marker."""
    for entry in sorted(source.iterdir()):
        if entry.name.startswith(".") or not (entry / "SKILL.md").is_file():
            continue
        (target / entry.name).mkdir(parents=True)
        shutil.copyfile(entry / "SKILL.md", target / entry.name / "SKILL.md")


def _env(**extra: str) -> dict[str, str]:
    """The children's environment: this one with the bytecode cache on (module doc)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    return {**env, **extra}


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _cpu_run(argv: list[str], env: dict[str, str]) -> tuple[float, str]:
    """CPU seconds of one fresh process of ``argv``, and its stdout."""
    before = _children_cpu()
    done = subprocess.run(argv, capture_output=True, env=env, check=False)
    cpu = _children_cpu() - before
    if done.returncode != 0:
        raise SystemExit(
            f"prompt_start: {' '.join(argv[:4])} exited {done.returncode}: {done.stderr.decode()[-2000:]}"
        )
    return cpu, done.stdout.decode()


def _cpu_runs(argv: list[str], env: dict[str, str], runs: int) -> list[float]:
    """CPU seconds of ``runs`` fresh processes of ``argv``."""
    return [_cpu_run(argv, env)[0] for _ in range(runs)]


def _interleaved(jobs: dict[int, Callable[[], Any]], runs: int) -> dict[int, list[Any]]:
    """``runs`` results of each job (one per size), taken in turns (each size once per
    round, after one round that warms the file cache and the caches each writes), so a
    change of the machine's load in the meantime weighs on every size alike: measured one
    size after another, a busier minute made a later size look dearer than it is."""
    for job in jobs.values():
        job()
    out: dict[int, list[Any]] = {size: [] for size in jobs}
    for _ in range(runs):
        for size, job in jobs.items():
            out[size].append(job())
    return out


def _chat_runs(home: Path, script: Path, runs: int) -> tuple[list[float], list[float], dict[str, Any]]:
    """CPU seconds of ``keen chat -p`` up to its first model request and up to its system
    prompt first built, the system prompt's size and which modules were loaded by then."""
    env = _env(KEEN_HOME=str(home))
    out: list[float] = []
    ready: list[float] = []
    last: dict[str, Any] = {}
    for _ in range(runs):
        done = subprocess.run(
            [PYTHON, "-c", CHAT, str(script)], capture_output=True, text=True, env=env, check=False
        )
        lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
        if not lines:
            raise SystemExit(
                f"prompt_start: keen chat never asked the model (exit {done.returncode}): {done.stderr[-2000:]}"
            )
        figures = json.loads(lines[-1])
        out.append(figures.pop("cpu"))
        ready.append(figures.pop("ready_cpu"))
        last = figures
    return out, ready, last


def _configured_chat(source: Path, home: Path, script: Path, runs: int) -> dict[str, Any]:
    """:func:`_chat_runs` in a copy of ``source`` (generated skills) with each skill's server
    in configs.json; a fresh copy per run, as a run that starts servers syncs their skills.
    Each copy gets the caches a whole chat over the same configuration left (its token
    counts of the chat's own texts), as a real second run finds them: without them every
    run would build the token encoder for the texts ``keen prompt`` never counted."""
    servers = sorted(
        p.name.removeprefix("mcp:") for p in (source / "skills").iterdir() if p.name.startswith("mcp:")
    )
    config = {
        "version": 1,
        "servers": {name: {"command": PYTHON, "args": ["-c", "pass"]} for name in servers},
    }

    def fresh(cache: Path) -> None:
        if home.exists():
            shutil.rmtree(home)
        shutil.copytree(source / "skills", home / "skills", symlinks=True)
        if cache.is_dir():
            shutil.copytree(cache, home / "cache")
        (home / "mcp").mkdir()
        (home / "mcp" / "configs.json").write_text(json.dumps(config), encoding="utf-8")

    # A whole chat, ended as usual (each server exits at once and fails): it writes the caches.
    fresh(source / "cache")
    argv = [KEEN, "chat", "-m", f"scripted:{script}", "-p", "hello", "--timeout", "5"]
    subprocess.run(argv, capture_output=True, env=_env(KEEN_HOME=str(home)), check=False)
    warm = home.parent / f"{home.name}-cache"
    if warm.exists():
        shutil.rmtree(warm)
    shutil.copytree(home / "cache", warm)
    out: list[float] = []
    ready: list[float] = []
    last: dict[str, Any] = {}
    for run in range(runs + 1):
        fresh(warm)
        cpu, prompt, last = _chat_runs(home, script, 1)
        if run:  # the first one warms the file cache
            out += cpu
            ready += prompt
    return {"first request": {**_stats(out), **last}, "prompt ready": _stats(ready)}


def _stats(values: list[float]) -> dict[str, float]:
    return {"min": min(values), "median": statistics.median(values), "max": max(values)}


def bench(catalogs: list[Path], sizes: list[int], runs: int, budget: int) -> dict[str, Any]:
    load_before = os.getloadavg()
    rows: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="keen-prompt-start-") as tmp:
        homes: dict[int, Path] = {}
        generated: dict[int, float] = {}
        for size in sizes:
            home = Path(tmp) / f"home-{size}"
            started = time.perf_counter()
            generate(catalogs, size, home / "skills")
            generated[size] = time.perf_counter() - started
            homes[size] = home
        first = sizes[0]
        bare = _cpu_runs([PYTHON, "-c", "pass"], _env(), runs)
        rows["python -c pass"] = _stats(bare)
        sdk = [PYTHON, "-c", "import openai; openai.AsyncOpenAI(api_key='unused')"]
        if subprocess.run([*sdk[:2], "import openai"], capture_output=True, check=False).returncode == 0:
            _cpu_runs(sdk, _env(), 1)
            rows["import openai + AsyncOpenAI() (the provider's SDK, not Keen)"] = _stats(
                _cpu_runs(sdk, _env(), runs)
            )
        cold_home = Path(tmp) / "cold"
        shutil.copytree(homes[first] / "skills", cold_home / "skills", symlinks=True)
        env = _env(KEEN_HOME=str(cold_home))
        rows[f"first keen prompt --budget {budget}, {first} skills (new KEEN_HOME)"] = _stats(
            _cpu_runs([KEEN, "prompt", "--budget", str(budget)], env, 1)
        )
        argv = [KEEN, "prompt", "--budget", str(budget)]
        prompts = _interleaved(
            {size: lambda size=size: _cpu_run(argv, _env(KEEN_HOME=str(homes[size])))[0] for size in sizes},
            runs,
        )
        for size in sizes:
            rows[f"keen prompt --budget {budget}, {size} skills"] = _stats(prompts[size])

        def library(size: int) -> tuple[float, float]:
            argv = [PYTHON, "-c", LIBRARY, str(homes[size] / "skills"), str(budget)]
            cpu, out = _cpu_run(argv, _env(KEEN_HOME=str(homes[size])))
            return cpu, float(out.split()[-1])

        libraries = _interleaved({size: lambda size=size: library(size) for size in sizes}, runs)
        for size in sizes:
            rows[f"library budgeted_prompt({budget}), {size} skills"] = _stats(
                [c for c, _ in libraries[size]]
            )
        for size in sizes:
            rows[f"library budgeted_prompt({budget}), the call alone, {size} skills"] = {
                **_stats([call for _, call in libraries[size]]),
                "in_process": True,
            }
        script = Path(tmp) / "script.jsonl"
        script.write_text(json.dumps({"content": "hello"}) + "\n", encoding="utf-8")
        chat_homes: dict[int, Path] = {}
        for size in sizes:
            chat_homes[size] = Path(tmp) / f"chat-{size}"
            _user_copies(homes[size] / "skills", chat_homes[size] / "skills")
            # A whole chat first, ended as usual: it writes the caches a real second start finds.
            env = _env(KEEN_HOME=str(chat_homes[size]))
            _cpu_runs([KEEN, "chat", "-m", f"scripted:{script}", "-p", "hello", "--timeout", "5"], env, 1)
        chats = _interleaved(
            {size: lambda size=size: _chat_runs(chat_homes[size], script, 1) for size in sizes}, runs
        )
        for size in sizes:
            chat = [c for cpu, _, _ in chats[size] for c in cpu]
            ready = [r for _, prompt, _ in chats[size] for r in prompt]
            rows[f"keen chat -p: prompt ready, {size} skills"] = _stats(ready)
            rows[f"keen chat -p: first request, {size} skills"] = {**_stats(chat), **chats[size][-1][2]}
        # The same at the first size with every skill's server configured (the skills on disk
        # cover the configuration: a second run). Each server's command exits at once; the
        # process reports and exits at the first model request, before a launch would matter.
        configured = _configured_chat(homes[first], Path(tmp) / "configured", script, runs)
        for what in ("prompt ready", "first request"):
            rows[f"keen chat -p: {what}, {first} configured servers, skills on disk"] = configured[what]
    return {
        "runs": runs,
        "budget": budget,
        "generate_s": generated,
        "load_average_before": load_before,
        "load_average_after": os.getloadavg(),
        "cpus": os.cpu_count(),
        "rows": rows,
    }


def _growth(rows: dict[str, dict[str, Any]], sizes: list[int], bare: float) -> list[tuple[str, str]]:
    """For each row measured at every size: its CPU beyond the interpreter per size (the
    fastest run of each: ``bare`` is the interpreter's fastest), and the marginal cost per
    1,000 skills from each size to the next. Linear or better: the marginal cost does not
    rise from one step to the next (within 25% for noise); the fixed start-up cost alone
    would make any total look sublinear, so the totals are not compared. A row measured in
    the process (``in_process``: the call alone) has no interpreter to take away.

    The fastest run, not the median: a process's CPU time only grows with the machine's
    load (caches and cores shared with others), so the least of a size's runs is the one
    nearest its own cost; with the sizes measured in turns (:func:`_interleaved`), that
    keeps a busier minute from passing for a cost that grows faster than the skills. With
    medians of runs taken one size after another, the library's row flipped to WORSE THAN
    LINEAR and back between runs of the same code (+27 then +72 ms per 1,000 skills in one),
    while its function calls per skill are the same at every size (and callgrind counts
    166 then 177 million instructions per 1,000 more skills for the call alone). A rise
    beyond 25% is WORSE THAN LINEAR when what it adds at the next size exceeds how far
    that row's runs spread (median above fastest); within that spread the load can explain
    it, and the line says so instead of giving a verdict."""
    if len(sizes) < 3:
        return []
    out: list[tuple[str, str]] = []
    first = f", {sizes[0]} skills"
    for label in rows:
        if not label.endswith(first) or label.startswith("first"):
            continue
        stem = label.removesuffix(first)
        found = [rows.get(f"{stem}, {size} skills") for size in sizes]
        if any(f is None for f in found):
            continue
        beyond = [f["min"] - (0.0 if f.get("in_process") else bare) for f in found if f is not None]
        marginal = [
            (b - a) / (n - m) * 1000 for a, b, m, n in zip(beyond, beyond[1:], sizes, sizes[1:], strict=False)
        ]
        # What a rising marginal cost adds at the next size beyond 25% more than linear,
        # against how far the runs of one size spread (median above fastest).
        excess = max(
            (
                (later - max(earlier, 0.0) * 1.25) * (n - m) / 1000
                for (earlier, later), (m, n) in zip(
                    itertools.pairwise(marginal), itertools.pairwise(sizes[1:]), strict=False
                )
            ),
            default=0.0,
        )
        spread = max(f["median"] - f["min"] for f in found if f is not None)
        if excess <= 1e-3:
            said = "  (linear or better)"
        elif excess <= spread:
            said = (
                f"  RISES by {excess * 1000:.0f} ms at a larger size, within the runs' spread "
                f"({spread * 1000:.0f} ms): no verdict at this load"
            )
        else:
            said = "  WORSE THAN LINEAR"
        out.append(
            (
                f"growth: {stem}",
                " / ".join(f"+{b * 1000:.0f}" for b in beyond)
                + f" ms at {' / '.join(f'{n:,}' for n in sizes)} skills (fastest runs); per 1,000 more skills "
                + " then ".join(f"{m * 1000:+.0f} ms" for m in marginal)
                + said,
            )
        )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("catalogs", nargs="*", type=Path, help="LiveMCPBench tools.json / ToolGym .ndjson")
    parser.add_argument("--sizes", default="292,1393,3406", help="skill counts, comma-separated")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--budget", type=int, default=4000)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    catalogs = args.catalogs or DEFAULT_CATALOGS
    for path in catalogs:
        if not path.is_file():
            raise SystemExit(
                f"prompt_start: {path} does not exist; pass the LiveMCPBench tools.json and ToolGym .ndjson"
            )
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    figures = bench(catalogs, sizes, args.runs, args.budget)
    if args.json:
        print(json.dumps(figures, indent=2))
        return
    bare = figures["rows"]["python -c pass"]["median"]
    rows = []
    for label, f in figures["rows"].items():
        line = f"{f['min'] * 1000:7.1f} / {f['median'] * 1000:7.1f} / {f['max'] * 1000:7.1f} ms CPU"
        if "system_chars" in f:
            line += (
                f" (system prompt {f['system_chars']:,} chars; MCP SDK loaded: {f['sdk_loaded'] or 'no'}; "
                f"search modules loaded: {f['search_loaded'] or 'none'}; token encoder built: "
                f"{'yes' if f.get('encoder_built') else 'no'})"
            )
        if f.get("in_process"):
            line += " (in the process, after its imports)"
        elif label != "python -c pass":
            beyond = f["median"] - bare
            line += f", {f['median'] / bare:5.1f}x the interpreter, +{beyond * 1000:.0f} ms"
            if f"{sizes[0]} skills" in label and not label.startswith("first"):
                line += f"  {verdict(beyond <= TARGET_S)}"
        rows.append((label, line))
    rows += _growth(figures["rows"], sizes, figures["rows"]["python -c pass"]["min"])
    before, after = figures["load_average_before"], figures["load_average_after"]
    print_block(
        f"Prompt start (min / median / max of {figures['runs']} cold processes; target: +{TARGET_S * 1000:.0f} ms "
        f"beyond the interpreter at {sizes[0]} skills)",
        rows,
        [
            f"python {sys.version.split()[0]}, {figures['cpus']} CPUs, load average (1/5/15 min) "
            f"{before[0]:.2f} {before[1]:.2f} {before[2]:.2f} before, {after[0]:.2f} {after[1]:.2f} {after[2]:.2f} after",
            "skills generated in " + ", ".join(f"{s}: {t:.1f} s" for s, t in figures["generate_s"].items()),
            "the sizes of each row are measured in turns, and growth compares each size's fastest run beyond the "
            "interpreter's fastest: CPU time only grows with load, so the least is nearest the cost (see _growth)",
        ],
    )


if __name__ == "__main__":
    main()
