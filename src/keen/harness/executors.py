"""What the harness's entry tools do once a call has passed the gates: ToolSearch over the
catalog (search is not authorization: hits the mode allows only become *requested*),
reading an MCP resource or getting a prompt, and asking a call's approver."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, cast

from keen._terminal import name_in_message
from keen._text import some_of
from keen.calls import ApprovalRequest, Approver, allow_all
from keen.capabilities import Capability, Catalog, Kind, PermissionMode, SearchFilter, SearchHit
from keen.errors import (
    AuthFailed,
    AuthRequired,
    InvalidArguments,
    MCPServerError,
    RemoteProtocolError,
    ServerDisabled,
    ServerDisconnected,
    ServerMisconfigured,
    ServerNotConfigured,
)
from keen.harness.local import Output
from keen.harness.policy import visibility
from keen.mcp.types import named_type

if TYPE_CHECKING:
    from keen.mcp.manager import Manager

__all__ = [
    "ask",
    "contents_text",
    "hook_name",
    "known_answer",
    "prompt_text",
    "read_handle",
    "search_catalog",
    "server_trouble",
]

# The checks about the server itself, not the tool: their messages leak nothing of a hidden tool.
_SERVER_ERRORS = (
    ServerNotConfigured,
    ServerMisconfigured,
    ServerDisabled,
    ServerDisconnected,
    AuthRequired,
    AuthFailed,
)


def server_trouble(manager: Manager, name: str, server: str | None) -> MCPServerError | None:
    """Why the server of a call outside the visible set cannot serve it (not configured,
    disabled, disconnected, signed out), so the refusal says so instead of pointing at a
    search that cannot find a disconnected server's tools; ``None`` when the server is fine.

    ``name`` is the tool name the model used (``mcp__<server>__<tool>``) when it did not
    name ``server`` (``call_mcp_tool``); the longest configured server name it starts with wins.
    """
    if server is None and name.startswith("mcp__"):
        prefixes = [s for s in manager.config.servers if name.startswith(f"mcp__{s}__")]
        server = max(prefixes, key=len, default=None)
    if server is None:
        return None
    # Only the server's own state: the tool and its arguments are not this refusal's business.
    trouble = manager.unavailable(server)
    return trouble if isinstance(trouble, _SERVER_ERRORS) else None


def known_answer(approver: Approver) -> tuple[str, str] | None:
    """:func:`ask`'s answer when it is known without asking (an approver whose callback is
    :func:`keen.calls.allow_all`: keen serve's host approves every call it sends), so no
    request is built and nothing is awaited; ``None`` when the approver must be asked."""
    if approver.ask is allow_all:
        return "allow", f"approved by the {approver.by}"
    return None


async def ask(
    approver: Approver,
    cap: Capability,
    server: str | None,
    tool: str | None,
    args: dict[str, Any],
) -> tuple[str, str, bool]:
    """Ask the call's ``approver`` about it: ``("allow" | "deny", reason, declined)``. Nobody
    to ask, or a callback that raises, is a no; ``declined`` is true only for the approver's
    own no (a front end reports a failed approver, and keeps quiet about a person's answer)."""
    who = approver.by
    known = known_answer(approver)
    if known is not None:
        return (*known, False)
    # The capability's risk is Keen's own judgement (claims of untrusted servers already
    # discounted: Risk.from_annotations), so its hints are trusted as they stand.
    request = ApprovalRequest(
        server or "local", tool or cap.name, args, cap.summary, cap.risk.to_dict(), annotations_trusted=True
    )
    answer, failed = await approver.asks(request)
    if failed:
        return "deny", failed, False
    if answer:
        return "allow", f"approved by the {who}", False
    return "deny", f"the {who} did not approve this call", True


def search_catalog(
    catalog: Catalog,
    mode: PermissionMode,
    request: Callable[[Iterable[str]], object],
    query: str,
    limit: int,
    kinds: Iterable[str],
) -> Output:
    """ToolSearch for the model: one line per hit saying whether it becomes callable (or joins
    the resource index) next step, and on which other servers an identical copy is; hits the
    mode allows, and their copies, are asked for with one ``request`` (a harness's
    :meth:`~keen.harness.Harness.request`). Raises ValueError for an empty query."""
    # The input schema allows only tool, resource and prompt.
    hits = catalog.search(
        query, limit, SearchFilter(mode=mode, kinds=cast("frozenset[Kind]", frozenset(kinds)))
    )
    lines: list[str] = []
    unlocked: list[str] = []
    for hit in hits:
        hidden = visibility(catalog.get(hit.id), mode)
        if hidden is None:
            # Identical copies (same definition and risk) are requested too, so the model may
            # call any of them; the hit last, so it wins a place under a tight budget.
            unlocked += (*hit.copies, hit.id)
        # The name as its server spells it (a resource's URI may run to thousands of characters).
        source_name = name_in_message(hit.tool)
        if hit.kind == "tool":
            state = "callable next step" if hidden is None else f"not available: {hidden}"
            what = f"tool {source_name}, {hit.risk} risk"
        else:
            state = "in the resource index next step: read_resource"
            what = f"{hit.kind} {source_name}"
        lines.append(
            f"- {hit.model_name} (server {hit.server}, {what}; {state}{_also_on(catalog, hit)}): {hit.summary}"
        )
    request(unlocked)
    if not lines:
        # Said even when a note follows: the note alone read as the answer. In read-only mode
        # the search leaves out what may write: other words will not find those.
        lines.append(
            "(no tool that read-only mode allows matches; the user can switch the permission mode"
            " for tools that may write)"
            if mode == "read-only"
            else "(no tool matches; try other words)"
        )
    status = catalog.search_status()
    if status:  # the model should know a second search may rank better in a moment
        lines.append(f"(note: {status})")
    return Output("\n".join(lines), more="search with fewer results (limit)")


def _also_on(catalog: Catalog, hit: SearchHit) -> str:
    """``; also on servers a, b`` for a hit with identical copies on other servers (a search
    shows such a group once), else ``""``."""
    servers = sorted({str(catalog.get(i).server) for i in hit.copies})
    return f"; also on servers {', '.join(servers)}" if servers else ""


async def read_handle(manager: Manager, cap: Capability, arguments: dict[str, str]) -> str:
    """The text of a resource (``resources/read``; a resource template's URI expanded with
    ``arguments`` first) or a prompt (``prompts/get`` with ``arguments``). Raises the
    Manager's ``KeenError`` subclasses, and ``InvalidArguments`` for a template whose
    variables are not all given."""
    assert cap.server is not None
    if cap.kind == "resource":
        template = cap.load().raw.get("uriTemplate")
        uri = _expand(cap, str(template), arguments) if template else cap.name
        return contents_text(await manager.read_resource(cap.server, uri))
    return prompt_text(await manager.get_prompt(cap.server, cap.name, arguments))


def _expand(cap: Capability, template: str, arguments: dict[str, str]) -> str:
    """A resource template's URI (RFC 6570, the SDK's expansion) for ``arguments``.

    The template and its variable names are the server's (a template may be thousands of
    characters long): the errors a model reads quote them through :func:`name_in_message`."""
    from mcp.shared.uri_template import InvalidUriTemplate, UriTemplate

    server = str(cap.server)
    try:
        parsed = UriTemplate.parse(template)
    except InvalidUriTemplate as exc:
        # The SDK's reason quotes the variable it stumbled on, a name of the server's too.
        raise RemoteProtocolError(
            f'MCP server "{server}" lists an invalid resource template "{name_in_message(template)}": '
            f"{name_in_message(str(exc))}",
            server=server,
        ) from exc
    names = parsed.variable_names
    missing = [n for n in names if n not in arguments]
    if missing:
        wanted = some_of(names, _VARIABLES_SHOWN, say=lambda n: f'"{name_in_message(n)}": "..."')
        raise InvalidArguments(
            f'"{name_in_message(cap.name)}" is a resource template: give its variables as arguments, '
            f"e.g. {{{wanted}}} (missing: {some_of(missing, _VARIABLES_SHOWN, say=name_in_message)})",
            server=server,
            errors=[("$.arguments", f"missing {name}") for name in missing],  # whole, as attributes are
            remedy=None,
        )
    return parsed.expand(arguments)


_VARIABLES_SHOWN = 20
"""Variable names a resource template's error names at the most (the SDK allows 256)."""


def hook_name(hook: Any) -> str:
    """How the event log names a hook: its qualified name."""
    return str(getattr(hook, "__qualname__", None) or type(hook).__name__)


def contents_text(contents: list[dict[str, Any]]) -> str:
    """``resources/read`` contents as text: text parts as they are, binary parts summarized
    (``[image/png demo://x, 68 bytes]``; the server's type and URI named as a tool result's
    are, so neither runs long nor reads as a line of Keen's own)."""
    parts: list[str] = []
    for item in contents:
        if "text" in item:
            parts.append(str(item["text"]))
        else:
            size = len(str(item.get("blob", ""))) * 3 // 4
            mime = named_type(item["mimeType"]) if item.get("mimeType") else "binary"
            # The URI is the server's: quoted on one line, cut, and left out when it sent none.
            where = f" {name_in_message(str(item['uri']))}" if item.get("uri") else ""
            parts.append(f"[{mime}{where}, {size} bytes]")
    return "\n".join(parts)


def prompt_text(result: dict[str, Any]) -> str:
    """A ``prompts/get`` result as text: each message as ``role: text``."""
    lines = [str(result["description"])] if result.get("description") else []
    for message in result.get("messages") or []:
        content = message.get("content") or {}
        if content.get("type") == "text":
            body = str(content.get("text", ""))
        elif content.get("type") == "resource":
            body = contents_text([content.get("resource") or {}])
        else:
            body = f"[{content.get('type', 'content')}]"
        lines.append(f"{message.get('role', 'user')}: {body}")
    return "\n".join(lines)
