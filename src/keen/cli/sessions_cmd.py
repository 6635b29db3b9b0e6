"""``keen sessions list`` and ``keen sessions show ID``: the harness's session logs, replayed."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from keen import paths
from keen._text import one_line
from keen.cli._common import fail, out, print_json, typer_app

__all__ = ["app"]

app = typer_app("Show agent sessions: what the model could see each turn, and every call.")

_PREVIEW = 160


@app.command("list")
def list_sessions(
    as_json: Annotated[bool, typer.Option("--json", help="Print the sessions as JSON.")] = False,
) -> None:
    """List the session logs under $KEEN_HOME/sessions, newest first: turns (what you said),
    steps (model requests) and tool calls."""
    from keen._tables import Col, Listing
    from keen.harness import read_events, replay

    rows = []
    for path in sorted(paths.sessions_dir().glob("*.jsonl"), reverse=True):
        rebuilt = replay(path)
        # A turn is what the person said (agent.user) and everything until the answer; a step
        # is one model request. A session without a person (a library harness) has no turns.
        said = sum(1 for event in read_events(path) if event.get("type") == "agent.user")
        rows.append(
            {
                "id": path.stem,
                "started": rebuilt.start.get("ts"),
                "mode": rebuilt.start.get("mode"),
                "turns": said,
                "steps": len(rebuilt.steps),
                "calls": sum(len(t.calls) for t in rebuilt.steps),
                "replay_ok": rebuilt.ok,
            }
        )
    if as_json:
        print_json(rows)
        return
    if not rows:
        out.print(f"no sessions in {paths.sessions_dir()}")
        return
    # The id is what `keen sessions show` takes: a key, never cut on a narrow terminal.
    table = Listing(
        [
            Col("id", "key"),
            Col("started", drop=1),
            Col("mode"),
            Col("turns", justify="right", drop=2),
            Col("steps", justify="right", drop=3),
            Col("calls", justify="right", drop=2),
            Col("replay"),
        ],
        whole="keen sessions list --json",
    )
    for r in rows:
        ok = "ok" if r["replay_ok"] else "MISMATCH"
        # A log whose first line is torn or unreadable (a crash, a copy cut short) has no
        # start: "-", not Python's "None".
        table.add_row(
            r["id"],
            str(r["started"] or "-")[:19].replace("T", " "),
            str(r["mode"] or "-"),
            str(r["turns"]),
            str(r["steps"]),
            str(r["calls"]),
            ok,
        )
    out.print(table)


def _by_prefix(prefix: str) -> Path:
    """The one session whose id starts with ``prefix`` (as git takes a commit's prefix)."""
    found = sorted(
        path for path in paths.sessions_dir().glob("*.jsonl") if path.stem.startswith(prefix) and prefix
    )
    if len(found) == 1:
        return found[0]
    if found:
        fail(
            f"{prefix!r} starts {len(found)} session ids ({', '.join(p.stem for p in found[:5])}); give more of it"
        )
    fail(f"no session {prefix!r} in {paths.sessions_dir()}; run `keen sessions list`")


@app.command("show")
def show(
    session_id: Annotated[
        str, typer.Argument(help="A session id from `keen sessions list` (or the start of one).")
    ],
    as_json: Annotated[bool, typer.Option("--json", help="Print the replay as JSON.")] = False,
) -> None:
    """Replay one session: each step's visible set (checked against what was offered),
    the capability diffs with their reasons, and every call with its outcome."""
    from keen.cli._terminal import terminal_text
    from keen.harness import read_events, replay, session_path

    try:
        path = session_path(session_id)
    except ValueError as exc:
        fail(str(exc))
    if not path.is_file():
        path = _by_prefix(session_id)
    rebuilt = replay(path)
    if as_json:
        print_json(rebuilt.to_dict())
        return
    lines = [
        f"session {rebuilt.session_id}  mode {rebuilt.start.get('mode') or '-'}  "
        f"workspace {rebuilt.start.get('workspace') or '-'}  replay {'ok' if rebuilt.ok else 'MISMATCH'}"
    ]
    # A session resumed with keen chat --resume: its log names the one it went on from.
    lines += [
        f"resumes session {e.get('parent')} ({e.get('turns')} turn(s) restored; keen sessions show {e.get('parent')})"
        for e in read_events(path)
        if e.get("type") == "agent.resume"
    ]
    # keen chat's own events: the user's message before its first step, the outcome after its last.
    # Keyed by step ("turn" held the step in logs written before steps were named so).
    asked = {e.get("step", e.get("turn")): e for e in read_events(path) if e.get("type") == "agent.user"}
    ended = {e.get("step", e.get("turn")): e for e in read_events(path) if e.get("type") == "agent.turn"}

    def flat(text: object) -> str:
        return one_line(str(text or ""), _PREVIEW + 1)

    for step in rebuilt.steps:
        if step.step in asked:
            lines.append(f"user: {flat(asked[step.step].get('text'))}")
        check = "matches offered" if step.consistent else f"MISMATCH (offered {', '.join(step.offered)})"
        lines.append(f"step {step.step}{'' if step.ended else ' (not ended)'}: visible set {check}")
        for d in step.diffs:
            inputs = d.get("policy_inputs", {})
            lines.append(
                f"  capability.diff  mode={inputs.get('permission_mode')} "
                f"connected={','.join(inputs.get('connected_servers', [])) or '-'} "
                f"budget={inputs.get('context_budget_remaining')}"
            )
            lines += [f"    + {e['name']}  ({e['reason']})" for e in d.get("added", [])]
            lines += [f"    - {e['name']}  ({e['reason']})" for e in d.get("removed", [])]
            lines += [f"    ~ {e['name']}  ({e['reason']})" for e in d.get("changed", [])]
        lines.append(f"  tools: {', '.join(step.rebuilt)}")
        if step.skill_index:
            lines.append(f"  skills: {', '.join(step.skill_index)}")
        if step.handles:
            lines.append(f"  resources: {', '.join(step.handles)}")
        for call in step.calls:
            result = call.get("result") or {}
            approval = call.get("approval")
            outcome = result.get("outcome", "no result (interrupted)")
            if result.get("gate"):
                outcome += f" at {result['gate']}"
            lines.append(f"  call {call['id']} {call['name']} {call.get('arguments')} -> {outcome}")
            if approval:
                lines.append(
                    f"    approval: {approval.get('decision')} by {approval.get('by')} ({approval.get('reason')})"
                )
            if text := flat(result.get("text")):
                lines.append(f"    {text}")
        if step.step in ended:
            end = ended[step.step]
            outcome = "answer" if end.get("ok") else f"failed ({flat(end.get('error'))})"
            lines.append(f"{outcome}: {flat(end.get('answer'))}")
    for line in lines:
        out.print(terminal_text(line), highlight=False, markup=False, soft_wrap=True)
