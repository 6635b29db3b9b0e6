"""``keen demo``: the whole story on an embedded default, end to end, against real servers.

With no user config (``$KEEN_HOME/mcp/configs.json`` absent or empty) it runs in a
temporary KEEN_HOME with the demo MCP server shipped in the package (stdio) plus the
reference ``server-everything`` when Node can run it. Steps: connect and show status,
list tools, generate the skills, show the skill tree, the prompt catalog and its size
against every schema inline, make real calls through ``call_mcp_tool``, then run a
``keen chat`` session with a scripted model (``keen.cli.demo_chat``) through the real loop.
"""

from __future__ import annotations

import functools
import json
import os
import shlex
import shutil
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from keen import paths
from keen.cli._common import out, run
from keen.cli._wording import with_remedy
from keen.demo import demo_server_entry

if TYPE_CHECKING:
    from rich.tree import Tree

    from keen.gateway import ApprovalRequest

__all__ = ["register"]

_EVERYTHING = "@modelcontextprotocol/server-everything@2026.8.31"


def _everything_entry() -> dict[str, Any] | None:
    """server-everything from a local install (make test puts one in .peers/), else via npx."""
    for base in (Path.cwd(), Path(__file__).resolve().parents[3]):
        local = base / ".peers" / "node" / "node_modules" / ".bin" / "mcp-server-everything"
        if local.exists():
            return {"transport": "stdio", "command": str(local), "args": ["stdio"]}
    npx = shutil.which("npx")
    if npx and shutil.which("node"):
        # First use downloads the package from the npm registry, so allow time for it.
        return {
            "transport": "stdio",
            "command": npx,
            "args": ["-y", _EVERYTHING, "stdio"],
            "timeouts": {"connect": 120},
        }
    return None


def _default_config() -> dict[str, Any]:
    servers: dict[str, Any] = {
        "demo": demo_server_entry(),
    }
    everything = _everything_entry()
    if everything is not None:
        servers["everything"] = everything
    return {"version": 1, "servers": servers}


def _skill_tree(root: Path, max_files: int = 6) -> Tree:
    from rich.tree import Tree

    tree = Tree(f"[bold]{root}[/]")
    for skill in sorted(p for p in root.iterdir() if not p.name.startswith(".") and p.is_dir()):
        branch = tree.add(
            f"[cyan]{skill.name}/[/]" + (" -> " + os.readlink(skill) if skill.is_symlink() else "")
        )
        for entry in sorted(skill.iterdir()):
            if entry.is_dir():
                files = sorted(p.relative_to(entry) for p in entry.rglob("*.json"))
                sub = branch.add(f"{entry.name}/ ({len(files)} files)")
                for name in files[:max_files]:
                    sub.add(str(name))
                if len(files) > max_files:
                    sub.add(f"… {len(files) - max_files} more")
            else:
                branch.add(entry.name)
    return tree


async def _story(timeout: float) -> None:
    from rich.rule import Rule
    from rich.text import Text

    from keen.cli._live import connecting_view, status_table
    from keen.cli._prompt import print_stats
    from keen.cli._terminal import cell, terminal_text
    from keen.mcp.types import ServerState
    from keen.prompt import skills_prompt
    from keen.runtime import open_runtime

    audit: list[dict[str, Any]] = []

    def approve(request: ApprovalRequest) -> bool:
        out.print(
            f"approval asked: {request.server}/{request.tool} {json.dumps(request.arguments)} "
            f"-> approved (demo)"
        )
        return True

    out.print(Rule("1. connect to the configured MCP servers"))
    out.print(f"config: {paths.mcp_config_path()}")
    live = functools.partial(connecting_view, enabled=True)
    async with open_runtime(wait=timeout, discovery_view=live, approval=approve, audit=audit.append) as rt:
        manager, gateway = rt.manager, rt.gateway
        out.print(status_table(manager.servers()))

        out.print(Rule("2. their tools (tools/list, every page)"))
        for status in manager.servers():
            if status.state is ServerState.CONNECTED:
                names = [t.name for t in manager.list_tools(status.name)]
                out.print(Text.assemble((status.name, "bold"), f" ({len(names)}): ", cell(", ".join(names))))

        out.print(Rule("3. generate one skill per server (SKILL.md + a schema per tool)"))
        report = await rt.sync()
        for entry in report.entries:
            out.print(
                f"mcp:{entry.server}: {entry.action}, {'enabled' if entry.enabled else 'disabled'}"
                + (
                    f" ({hint})"
                    if (hint := with_remedy(entry.hint, entry.remedy, server=entry.server))
                    else ""
                )
            )
        out.print(_skill_tree(report.skills_root))

        out.print(Rule("4. what the model sees: one catalog line per server"))
        out.print(skills_prompt(), markup=False, highlight=False)

        out.print(Rule("5. prompt size: every tool schema inline vs Keen"))
        print_stats()

        out.print(Rule("6. calls through call_mcp_tool (checked, approved, audited)"))
        calls = [
            {
                "server": "demo",
                "tool": "convert_units",
                "arguments": {"value": 26.2, "from_unit": "mi", "to_unit": "km"},
            },
            {"server": "demo", "tool": "current_time", "arguments": {"timezone": "Asia/Tokyo"}},
            {"server": "demo", "tool": "convert_units", "arguments": {"value": "ten"}},
        ]
        configured = {s.name for s in manager.servers()}
        if "everything" in configured:
            calls.append({"server": "everything", "tool": "get-sum", "arguments": {"a": 40, "b": 2}})
        for call in calls:
            if call["server"] not in configured:
                continue
            out.print(f"[bold]call_mcp_tool[/] {json.dumps(call)}", highlight=False)
            result = await gateway.handle_tool_call(call)
            style = "red" if result.is_error else "green"
            label = "error" if result.is_error else "result"
            out.print(Text.assemble("  ", (f"{label}:", style), " ", terminal_text(result.text)))
        out.print(
            f"audit log: {len(audit)} events, e.g. {json.dumps(audit[-1])}" if audit else "no audit events"
        )

        if "demo" in configured and manager.status("demo").state is ServerState.CONNECTED:
            from keen.cli.demo_chat import scripted_session

            out.print(Rule("7. keen chat: a scripted model through the real loop"))
            await scripted_session(rt, paths.keen_home())


def demo(
    keep: Annotated[
        bool, typer.Option("--keep", help="Keep the temporary KEEN_HOME and print its path.")
    ] = False,
    timeout: Annotated[
        float, typer.Option("--timeout", help="Seconds to wait for servers to connect.")
    ] = 120.0,
) -> None:
    """Run the whole Keen story on the embedded default (or on your config if you have one)."""
    from keen.mcp.config import load_config, save_config

    user_config = load_config(paths.mcp_config_path(), strict=False)
    has_user_config = bool(user_config.servers or user_config.invalid)
    if has_user_config:
        run(lambda: _story(timeout))
        _next_steps()
        return
    home = Path(tempfile.mkdtemp(prefix="keen-demo-"))
    old = os.environ.get("KEEN_HOME")
    os.environ["KEEN_HOME"] = str(home)
    try:
        save_config(_default_config(), paths.mcp_config_path())
        out.print(f"no MCP servers configured: running on the embedded default in {home}")
        run(lambda: _story(timeout))
    finally:
        if old is None:
            os.environ.pop("KEEN_HOME", None)
        else:
            os.environ["KEEN_HOME"] = old
        if keep:
            # The generated skills stay usable offline: say how to point Keen at them.
            out.print(
                f"kept {home}; to use its skills: KEEN_HOME={shlex.quote(str(home))} keen tools search 'convert miles'"
            )
        else:
            from keen.capabilities.search import flush

            # The tool search index left to be written later goes now, into the home still
            # there, rather than racing the removal below.
            flush()
            shutil.rmtree(home, ignore_errors=True)
    _next_steps()


def _next_steps() -> None:
    """What to run next, and how: ``make demo`` installs into .venv, which is not on PATH."""
    if shutil.which("keen") is not None:
        out.print("next: keen mcp import FILE (another host's servers), then keen mcp list")
        return
    activate = Path(sys.executable).parent / "activate"
    shown = os.path.relpath(activate) if activate.is_file() else None
    how = (
        f". {shown}"
        if shown and not shown.startswith("..")
        else (f". {activate}" if shown else "pipx install .")
    )
    out.print(f"next: keen is not on your PATH yet; run `{how}` (or `pipx install .`), then: keen mcp list")


def register(app: typer.Typer) -> None:
    app.command("demo")(demo)
