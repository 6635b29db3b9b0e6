"""The last step of ``keen demo``: a ``keen chat`` session with a scripted model.

The model's answers come from ``keen/demo/chat_script.jsonl`` (``{skills}`` stands for the
skills directory); everything else is the real loop (:class:`keen.agent.Agent`): the
catalog prompt, schemas read on demand, ``search_tools``, approval, ``call_mcp_tool``
through the harness, and compaction of each turn's tool traffic.
"""

from __future__ import annotations

import json
import tempfile
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from keen._text import one_line
from keen.cli._common import out

if TYPE_CHECKING:
    from keen.agent.providers.scripted import ScriptedModel
    from keen.gateway import ApprovalRequest
    from keen.harness import Observation
    from keen.runtime import Runtime

__all__ = ["QUESTIONS", "scripted_session"]

QUESTIONS = ("How long is a marathon in kilometres?", "Save that as a note.")
_PREVIEW = 160


class _DemoView:
    """Prints each stretch of model text after a ``model:`` label, opened by its first
    delta: a step that only calls tools prints no label, so no empty ``model:`` line."""

    def __init__(self) -> None:
        self.line_open = False

    def _close_line(self) -> None:
        if self.line_open:
            out.print()
            self.line_open = False

    def text(self, delta: str) -> None:
        if not delta:
            return
        if not self.line_open:
            out.print("[bold]model:[/] ", end="")
        out.print(delta, end="", markup=False, highlight=False)
        self.line_open = True

    def tool_call(self, name: str, arguments: dict[str, Any]) -> None:
        from rich.text import Text

        from keen.cli._terminal import terminal_text

        self._close_line()
        shown = json.dumps(arguments, ensure_ascii=False)
        out.print(
            Text.assemble(("  tool ", "cyan"), (name, "bold cyan"), " ", terminal_text(shown[:_PREVIEW]))
        )

    def observation(self, obs: Observation) -> None:
        from rich.text import Text

        from keen.cli._terminal import terminal_text

        style = "red" if obs.is_error else "green"
        cut = one_line(obs.text, _PREVIEW + 1)
        out.print(Text.assemble("    ", ("-> ", style), terminal_text(cut)))

    def notice(self, line: str) -> None:
        self._close_line()
        out.print(line, markup=False, highlight=False)


def _scripted_model(skills_root: Path) -> ScriptedModel:
    """The demo's scripted model, its script pointed at ``skills_root``. The script is
    written to a temporary folder, removed once the model has read it: on a user's own
    config ``keen demo`` runs in their KEEN_HOME, which is no place for it."""
    from keen.agent.providers.scripted import ScriptedModel

    text = resources.files("keen.demo").joinpath("chat_script.jsonl").read_text(encoding="utf-8")
    with tempfile.TemporaryDirectory(prefix="keen-demo-chat-") as folder:
        path = Path(folder) / "demo-chat-script.jsonl"
        # JSON-escape the path so any character in it keeps each line valid JSON.
        path.write_text(text.replace("{skills}", json.dumps(str(skills_root))[1:-1]), encoding="utf-8")
        return ScriptedModel(path)  # reads the whole script now


async def scripted_session(rt: Runtime, home: Path) -> None:
    """Run the demo's two scripted turns on ``rt`` (whose config has the ``demo`` server)."""
    from keen.agent import Agent

    async def approve(request: ApprovalRequest) -> Any:
        out.print(
            f"  approval asked: {request.server}/{request.tool} {json.dumps(request.arguments)} -> yes (demo)",
            markup=False,
            highlight=False,
        )
        return "yes"

    model = _scripted_model(rt.skills_root)
    agent = Agent(rt, model, approval_prompt=approve, workspace=home)
    view = _DemoView()
    try:
        for question in QUESTIONS:
            out.print(f"[bold]you:[/] {question}")
            result = await agent.run_turn(question, view)
            view._close_line()
            tokens = ", ".join(str(u.get("prompt_tokens", 0)) for u in result.usage)
            out.print(f"[dim]  {result.steps} model calls; prompt tokens per call: {tokens}[/]")
        record = next((m.content for m in agent.history if m.kind == "compacted"), "")
        out.print("[bold]what the history keeps of turn 1's tool traffic (compacted):[/]")
        out.print(record, markup=False, highlight=False)
        out.print(
            f"session {agent.session_id} logged in {agent.harness.log.path} (keen demo --keep keeps it)",
            markup=False,
            highlight=False,
        )
    finally:
        agent.close()
