"""LiveMCPBench tasks through ``keen chat``'s loop, or with every tool schema inline.

Usage: ``python bench/agent_eval.py --model PROVIDER:NAME [--base-url URL] --mode keen|inline
[--tasks N] [--json] [--annotations FILE] [--catalog FILE] [--max-steps N]``

The 70 LiveMCPBench servers are replayed over stdio from ``tools.json``
(``bench/catalog_server.py --impl lite``: each serves its recorded tools and answers every
call with a recorded stand-in), so the figures judge tool choice, not answers. Per task
(``all_annotations.json``, tools resolved to ``server/tool`` as ``livemcpbench_queries.py``
does):

- ``recall``: share of the annotated tools the model called (any alternative of a tool
  that several servers offer counts);
- ``precision``: share of the model's called tools that are annotated;
- ``first-call``: whether the model's first MCP tool call is an annotated tool;
- ``steps``: model calls; ``prompt tokens``: per model call (as the provider reports them;
  the scripted model counts the request locally with o200k_base or an estimate);
- ``wall``: seconds for the task;
- MCP calls that returned an error: in keen mode also arguments the gateway refused
  against the tool's inputSchema (the inline baseline sends them unchecked).

``--mode keen`` runs the real loop (:class:`keen.agent.Agent`: catalog in the prompt,
schemas read on demand, ``call_mcp_tool`` through the harness; calls approved).
``--mode inline`` is today's baseline: every tool of every server offered to the model as
its own definition, calls sent straight to the server.

``--model scripted:annotations`` (what ``make bench`` runs, 3 tasks) is a smoke test: a
script is written per task from its annotation, calling the annotated tools the way each
mode expects (keen: read each tool's schema, then call it through ``call_mcp_tool``;
inline: call the tools directly), so recall is 1 by construction and the figures that
matter are the prompt tokens per call. With a real model (``openai:gpt-4.1-mini``, or a
local one with ``--base-url``) it is the comparison this project exists to win.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import anyio

from _catalog import RecordedServer, keen_names, load_catalog
from _common import PYTHON, keen_home, print_block, write_config
from keen.agent import Agent, Message, Model, TextDelta, open_model
from keen.agent.models import ModelDone, ModelError, close_model
from keen.agent.providers.scripted import ScriptedModel
from keen.capabilities import capability_id
from keen.capabilities.names import model_names
from keen.gateway import result_text
from keen.mcp.types import ServerState
from keen.runtime import Runtime, open_runtime
from livemcpbench_queries import convert

HERE = Path(__file__).resolve().parent
SHARED = HERE.parents[1] / "shared" / "data" / "livemcpbench"
CATALOG_SERVER = str(HERE / "catalog_server.py")
SCRIPTED = "scripted:annotations"
CONNECT_TIMEOUT_S = 120.0


@dataclass
class Task:
    task_id: str
    question: str
    required: list[list[tuple[str, str]]]  # alternatives per needed tool: (keen server, tool)


@dataclass
class Outcome:
    task_id: str
    called: list[tuple[str, str]] = field(default_factory=lambda: list[tuple[str, str]]())
    recall: float = 0.0
    precision: float = 0.0
    first_call: bool = False
    steps: int = 0
    prompt_tokens: list[int] = field(default_factory=lambda: list[int]())
    wall_s: float = 0.0
    tool_errors: int = 0
    error: str | None = None


def load_tasks(annotations: Path, catalog: Path, names: dict[str, str], limit: int | None) -> list[Task]:
    tasks, _, _ = convert(annotations, catalog)
    out: list[Task] = []
    for t in tasks[:limit]:
        groups = [
            [(names[ref.rpartition("/")[0]], ref.rpartition("/")[2]) for ref in g] for g in t["required"]
        ]
        out.append(Task(t["task_id"], t["query"], groups))
    return out


def score(task: Task, outcome: Outcome) -> None:
    wanted = {ref for group in task.required for ref in group}
    called = list(dict.fromkeys(outcome.called))
    outcome.recall = sum(any(ref in called for ref in g) for g in task.required) / len(task.required)
    outcome.precision = sum(ref in wanted for ref in called) / len(called) if called else 0.0
    outcome.first_call = bool(called) and called[0] in wanted


def placeholder(schema: dict[str, Any]) -> Any:
    """A value that fits a property schema well enough for a replay (first enum, default, or by type)."""
    if "default" in schema:
        return schema["default"]
    if schema.get("enum"):
        return schema["enum"][0]
    kind = schema.get("type")
    kind = kind[0] if isinstance(kind, list) and kind else kind
    if kind == "array" and schema.get("minItems"):
        return [placeholder(schema.get("items") or {})] * int(schema["minItems"])
    if kind == "object" and schema.get("required"):
        return arguments_for(schema)
    return {"integer": 1, "number": 1, "boolean": True, "array": [], "object": {}}.get(str(kind), "example")


def arguments_for(schema: dict[str, Any]) -> dict[str, Any]:
    props = schema.get("properties") or {}
    return {name: placeholder(props.get(name) or {}) for name in schema.get("required") or []}


def write_script(path: Path, steps: list[dict[str, Any]]) -> ScriptedModel:
    path.write_text("".join(json.dumps(s, ensure_ascii=False) + "\n" for s in steps), encoding="utf-8")
    return ScriptedModel(path)


def keen_script(task: Task, rt: Runtime, home: Path) -> ScriptedModel:
    """Read each annotated tool's schema (first alternative), then call them all, then answer."""
    picks = [group[0] for group in task.required]
    schemas = [str(rt.skills_root / f"mcp:{s}" / "schemas" / f"{t}.json") for s, t in picks]
    reads = [{"name": "read_file", "arguments": {"path": p}} for p in schemas]
    calls = [
        {
            "name": "call_mcp_tool",
            "arguments": {"server": s, "tool": t, "arguments": arguments_for(schema_of(rt, s, t))},
        }
        for s, t in picks
    ]
    steps = [{"content": "", "tool_calls": reads}, {"content": "", "tool_calls": calls}, {"content": "Done."}]
    return write_script(home / f"keen-{task.task_id}.jsonl", steps)


def schema_of(rt: Runtime, server: str, tool: str) -> dict[str, Any]:
    found = next((t for t in rt.manager.list_tools(server) if t.name == tool), None)
    return dict(found.input_schema or {}) if found is not None else {}


async def run_keen(task: Task, model: Model, rt: Runtime, max_steps: int) -> Outcome:
    async def approve(request: Any) -> Any:
        return "yes"

    outcome = Outcome(task.task_id)
    agent = Agent(rt, model, approval_prompt=approve, max_steps=max_steps)
    try:
        result = await agent.run_turn(task.question)
    finally:
        agent.close()
    outcome.called = [
        (c["arguments"].get("server", ""), c["arguments"].get("tool", ""))
        for c in result.tool_calls
        if c["name"] == "call_mcp_tool"
    ]
    outcome.steps = result.steps
    # A tool that failed (a replay cannot satisfy an outputSchema) is counted apart; the task
    # failed only when the model gave no answer (a provider error, the step limit).
    outcome.error = result.error if not result.answer else None
    outcome.tool_errors = sum(c["outcome"] != "ok" for c in result.tool_calls if c["name"] == "call_mcp_tool")
    outcome.prompt_tokens = [u.get("prompt_tokens", 0) for u in result.usage]
    return outcome


def inline_tools(rt: Runtime) -> tuple[list[dict[str, Any]], dict[str, tuple[str, str]]]:
    """Every connected server's tools as definitions, under names valid for every LLM API."""
    refs = {
        capability_id("tool", t.name, s.name): (s.name, t)
        for s in rt.manager.servers()
        if s.state is ServerState.CONNECTED
        for t in rt.manager.list_tools(s.name)
    }
    names = model_names(refs)
    tools = [
        {
            "name": names[i],
            "description": t.description or "",
            "inputSchema": t.input_schema or {"type": "object"},
        }
        for i, (_, t) in refs.items()
    ]
    return tools, {names[i]: (s, t.name) for i, (s, t) in refs.items()}


def inline_script(task: Task, by_name: dict[str, tuple[str, str]], rt: Runtime, home: Path) -> ScriptedModel:
    name_of = {ref: name for name, ref in by_name.items()}
    calls = [
        {"name": name_of[g[0]], "arguments": arguments_for(schema_of(rt, *g[0]))}
        for g in task.required
        if g[0] in name_of
    ]
    return write_script(
        home / f"inline-{task.task_id}.jsonl", [{"content": "", "tool_calls": calls}, {"content": "Done."}]
    )


async def run_inline(task: Task, model: Model, rt: Runtime, max_steps: int, tools: Any) -> Outcome:
    """The baseline loop: all definitions every call, tool calls sent to the servers as is."""
    definitions, by_name = tools
    outcome = Outcome(task.task_id)
    history = [Message("system", "You are a helpful assistant with tools."), Message("user", task.question)]
    try:
        for _ in range(max_steps):
            outcome.steps += 1
            done: ModelDone | None = None
            async for event in model.stream(history, definitions):
                if not isinstance(event, TextDelta):
                    done = event
            assert done is not None
            outcome.prompt_tokens.append(done.usage.get("prompt_tokens", 0))
            history.append(Message("assistant", done.content, list(done.tool_calls)))
            if not done.tool_calls:
                return outcome
            for call in done.tool_calls:
                ref = by_name.get(call.name)
                if ref is None:
                    text = f"no tool {call.name}"
                else:
                    outcome.called.append(ref)
                    # Sent as is, as a host without Keen does (Keen's gateway validates first).
                    result = await rt.manager.call_tool(ref[0], ref[1], call.arguments, validate=False)
                    outcome.tool_errors += result.is_error
                    text = result_text(result)
                history.append(Message("tool", text, tool_call_id=call.id, name=call.name))
        outcome.error = f"step limit ({max_steps})"
    except ModelError as exc:
        outcome.error = exc.message
    return outcome


async def evaluate(args: argparse.Namespace) -> dict[str, Any]:
    records: list[RecordedServer] = load_catalog(args.catalog)
    names = dict(zip((r.name for r in records), keen_names([r.name for r in records]), strict=True))
    tasks = load_tasks(args.annotations, args.catalog, names, args.tasks)
    outcomes: list[Outcome] = []
    started = time.perf_counter()
    with keen_home() as home:
        servers = {
            names[r.name]: {
                "command": PYTHON,
                "args": [
                    CATALOG_SERVER,
                    "--catalog",
                    str(args.catalog),
                    "--server",
                    r.name,
                    "--impl",
                    "lite",
                ],
                "timeouts": {"connect": CONNECT_TIMEOUT_S, "list_tools": CONNECT_TIMEOUT_S},
            }
            for r in records
        }
        write_config(home, servers)
        async with open_runtime(wait=CONNECT_TIMEOUT_S * 2, sync=True) as rt:
            connect_s = time.perf_counter() - started
            connected = sum(s.state is ServerState.CONNECTED for s in rt.manager.servers())
            tools = inline_tools(rt) if args.mode == "inline" else None
            shared_model = None if args.model == SCRIPTED else open_model(args.model, base_url=args.base_url)
            for task in tasks:
                if shared_model is not None:
                    model: Model = shared_model
                elif args.mode == "keen":
                    model = keen_script(task, rt, home)
                else:
                    model = inline_script(task, tools[1], rt, home)  # type: ignore[index]
                began = time.perf_counter()
                if args.mode == "keen":
                    outcome = await run_keen(task, model, rt, args.max_steps)
                else:
                    outcome = await run_inline(task, model, rt, args.max_steps, tools)
                outcome.wall_s = time.perf_counter() - began
                score(task, outcome)
                outcomes.append(outcome)
            if shared_model is not None:
                await close_model(shared_model)
    return summary(args, outcomes, connected, len(servers), connect_s)


def summary(
    args: argparse.Namespace, outcomes: list[Outcome], connected: int, total: int, connect_s: float
) -> dict[str, Any]:
    per_call = [t for o in outcomes for t in o.prompt_tokens]

    def mean(values: list[float]) -> float:
        return statistics.fmean(values) if values else 0.0

    return {
        "model": args.model,
        "mode": args.mode,
        "tasks": len(outcomes),
        "servers_connected": f"{connected}/{total}",
        "connect_and_sync_s": round(connect_s, 2),
        "recall": round(mean([o.recall for o in outcomes]), 3),
        "precision": round(mean([o.precision for o in outcomes]), 3),
        "first_call_accuracy": round(mean([float(o.first_call) for o in outcomes]), 3),
        "steps_mean": round(mean([float(o.steps) for o in outcomes]), 2),
        "prompt_tokens_per_call_mean": round(mean([float(t) for t in per_call])),
        "prompt_tokens_per_call_max": max(per_call, default=0),
        "prompt_tokens_per_task_mean": round(mean([float(sum(o.prompt_tokens)) for o in outcomes])),
        "wall_s_per_task_mean": round(mean([o.wall_s for o in outcomes]), 3),
        "failed_tasks": sum(o.error is not None for o in outcomes),
        "tool_errors": sum(o.tool_errors for o in outcomes),
        "per_task": [{**asdict(o), "called": [f"{s}/{t}" for s, t in o.called]} for o in outcomes],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", required=True, help=f"provider:name, or {SCRIPTED} (a script per task)")
    parser.add_argument("--base-url", default=None)
    parser.add_argument("--mode", choices=("keen", "inline"), required=True)
    parser.add_argument("--tasks", type=int, default=None, help="the first N tasks (default: all)")
    parser.add_argument("--max-steps", type=int, default=12)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--annotations", type=Path, default=SHARED / "all_annotations.json")
    parser.add_argument("--catalog", type=Path, default=SHARED / "tools.json")
    args = parser.parse_args()
    for path in (args.annotations, args.catalog):
        if not path.is_file():
            raise SystemExit(f"agent_eval: {path} does not exist; pass --annotations and --catalog")
    try:
        figures = anyio.run(evaluate, args)
    except ModelError as exc:
        raise SystemExit(f"agent_eval: {exc.message}") from None
    if args.json:
        json.dump(figures, sys.stdout, indent=2)
        print()
        return
    print_block(
        f"agent_eval: LiveMCPBench, mode {figures['mode']}, model {figures['model']}",
        [
            ("tasks", str(figures["tasks"])),
            (
                "servers connected",
                f"{figures['servers_connected']} in {figures['connect_and_sync_s']} s (with skill sync)",
            ),
            ("recall (annotated tools called)", f"{figures['recall']:.3f}"),
            ("precision (called tools annotated)", f"{figures['precision']:.3f}"),
            ("first-call accuracy", f"{figures['first_call_accuracy']:.3f}"),
            ("steps per task (mean)", f"{figures['steps_mean']}"),
            ("prompt tokens per model call (mean)", f"{figures['prompt_tokens_per_call_mean']:,}"),
            ("prompt tokens per model call (max)", f"{figures['prompt_tokens_per_call_max']:,}"),
            ("prompt tokens per task (mean)", f"{figures['prompt_tokens_per_task_mean']:,}"),
            ("wall time per task (mean)", f"{figures['wall_s_per_task_mean']} s"),
            ("tasks without an answer", str(figures["failed_tasks"])),
            ("MCP calls that returned an error", str(figures["tool_errors"])),
        ],
        notes=[
            "scripted model: recall is 1 by construction; compare the prompt tokens across --mode"
            if args.model == SCRIPTED
            else "replayed servers answer with recorded stand-ins: judge tool choice, not answers"
        ],
    )


if __name__ == "__main__":
    main()
