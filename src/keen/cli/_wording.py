"""How the CLI words a remedy: the lower layers say what to do as data
(:class:`keen.errors.Remedy`); the command that does it is a front end's business.
"""

from __future__ import annotations

from keen.errors import KeenError, Remedy, with_hint, worded

__all__ = ["describe", "remedy_text", "with_remedy"]


def remedy_text(remedy: Remedy | None, *, server: str | None = None, skill: str | None = None) -> str:
    """The CLI command for ``remedy`` ("" for none, or when it needs a name that is missing)."""
    if remedy is None:
        return ""
    if remedy is Remedy.LIST_SKILLS:
        return "run `keen skills list` to see the skills"
    if remedy is Remedy.ENABLE_SKILL:
        name = skill or (f"mcp:{server}" if server else None)
        return f"run `keen skills enable {name}` to list it again" if name else ""
    if not server:
        return ""
    return {
        Remedy.SIGN_IN: f"run: keen mcp connect {server}",
        Remedy.RECONNECT: f"then run: keen mcp connect {server}",
        Remedy.ENABLE_SERVER: f"run: keen mcp enable {server}",
        Remedy.FIX_CONFIG: f"then run: keen mcp connect {server}",
        Remedy.READ_SKILL: f"run `keen mcp tools {server}` to see its tools",
        Remedy.READ_SCHEMA: f"run `keen mcp tools {server} --json` to see each tool's inputSchema",
    }.get(remedy, "")


def with_remedy(
    text: str, remedy: Remedy | None, *, server: str | None = None, skill: str | None = None
) -> str:
    """``text`` followed by the remedy's command, when there is one."""
    return with_hint(text, remedy_text(remedy, server=server, skill=skill))


def describe(exc: KeenError) -> str:
    """An error's message and, when it carries a remedy, the command that applies it."""
    return worded(exc, remedy_text)
