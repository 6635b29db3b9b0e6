"""``keen tools search QUERY``: find MCP tools in the generated skills (no server needs to run)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape

from keen.cli._common import err, fail, out, print_json, typer_app

if TYPE_CHECKING:
    from keen.capabilities import Catalog

__all__ = ["app"]

app = typer_app("Find tools among every configured MCP server's tools.")


@app.command("search")
def search(
    query: Annotated[str, typer.Argument(help="What the tool should do, in a few words.")],
    k: Annotated[int, typer.Option("-k", "--limit", min=1, max=100, help="How many results.")] = 5,
    server: Annotated[
        list[str] | None, typer.Option("--server", "-s", help="Only this server's tools (repeatable).")
    ] = None,
    read_only: Annotated[
        bool,
        typer.Option(
            "--read-only",
            help="Only read-only tools (by annotations of a server trusted for them: trust_annotations, or keen mcp trust).",
        ),
    ] = False,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the results as JSON (with each ranking signal's score).")
    ] = False,
    wait: Annotated[
        float,
        typer.Option(
            "--wait",
            min=0,
            help="Seconds to wait for the transformer vectors of tools not indexed yet; past that the"
            " results come from keywords and word vectors, with a note.",
        ),
    ] = 5.0,
) -> None:
    """Rank the tools of the generated MCP skills for QUERY (offline: keywords, word vectors and a
    small transformer model, all on this machine)."""
    from keen._tables import Col, Listing
    from keen.capabilities import Catalog, SearchFilter
    from keen.cli._terminal import cell

    server = server or []
    from keen.trust.skill_trust import configured_annotations_trusted

    trusted = configured_annotations_trusted()
    # A KeenError reaches the CLI's one error boundary.
    # Held tools too: a person searches what the skills hold, the pinned definitions of held ones.
    catalog = Catalog.from_skills_dir(include_held=True, annotations_trusted=trusted)
    unknown = sorted(set(server) - set(catalog.servers))
    if unknown:
        # A server named on purpose is searched even when its skill is hidden from the catalog.
        everything = Catalog.from_skills_dir(
            include_disabled=True, include_held=True, annotations_trusted=trusted
        )
        hidden = [name for name in unknown if name in everything.servers]
        _check_servers([name for name in unknown if name not in hidden])
        for name in hidden:
            err.print(
                f"note: the skill mcp:{_listed([name])} is disabled (hidden from the model's catalog); "
                f"searching it because --server names it (keen skills enable mcp:{_listed([name])} shows it again)",
                highlight=False,
            )
        catalog = everything
    if not len(catalog):
        from keen.cli._prompt import configured_servers

        configured = configured_servers()
        if any(configured.values()):  # servers added, their skills not generated (or disabled)
            fail(
                "no tools to search: no generated MCP skills are enabled; generate the configured"
                " servers' skills with `keen mcp sync` (it says why a skill stays disabled)"
            )
        if configured:  # keen mcp sync writes no skill for a disabled server
            fail(
                "no tools to search: every server configs.json configures is disabled; turn one on"
                " with `keen mcp enable NAME`, then generate its skill with `keen mcp sync`"
            )
        fail(
            "no tools to search: no generated MCP skills are enabled; add a server and generate its"
            " skill (`keen mcp add NAME -- COMMAND`, then `keen mcp sync`), or try the demo's:"
            " `keen demo --keep` prints a KEEN_HOME to search in"
        )
    servers = frozenset(server) if server else None
    flt = SearchFilter(mode="read-only" if read_only else "auto", servers=servers)
    catalog.wait_ready(wait)
    try:
        hits = catalog.search(query, k=k, filter=flt)
    except ValueError as exc:
        fail(str(exc))
    status = catalog.search_status()
    if status:
        err.print(f"note: {escape(status)}", highlight=False)
    if read_only and not hits:
        _why_none_read_only(catalog, servers)
    if as_json:
        print_json([h.to_dict() for h in hits])
        return
    if not hits:
        out.print("no matching tools")
        return
    table = Listing(
        [
            Col("#", justify="right", drop=2),
            Col("server", "key"),
            Col("tool", "key"),
            Col("risk"),
            Col("summary", "text", min_width=36),
            Col("score", justify="right", drop=3),
        ],
        title=f"tools for {query!r}",
        whole="the same search with --json",
    )
    for rank, hit in enumerate(hits, 1):
        # Tool names and summaries come from servers: escaped and printed literally.
        where = cell(hit.server) + (f" (+{len(hit.copies)} identical)" if hit.copies else "")
        table.add_row(str(rank), where, cell(hit.tool), hit.risk, cell(hit.summary), f"{hit.score:.2f}")
    out.print(table)
    out.print(f"why #1: {cell(hits[0].why)}", highlight=False)
    # For a person: the command that shows a tool's inputSchema and the one that calls it.
    out.print("its inputSchema: keen mcp tools SERVER --json; call it: keen mcp call SERVER TOOL --args JSON")


def _why_none_read_only(catalog: Catalog, servers: frozenset[str] | None) -> None:
    """Say on stderr why ``--read-only`` found nothing: the searched servers' tools claim
    ``readOnlyHint`` on servers not trusted for their annotations (README "Annotations only
    from servers you trust for them"), or none is marked read-only. Search has no threshold,
    so nothing found means no tool of the searched servers passes: the note weighs every one
    of them, not the best matches (a write tool ranked first said "none", while trusting its
    server listed another tool). Without this, "no matching tools" read as if nothing fit."""
    from keen.cli._prompt import configured_entries

    tools = [cap for cap in catalog if cap.server and (servers is None or cap.server in servers)]
    if not tools:
        return
    claiming = sorted({cap.server for cap in tools if cap.server and _claims_read_only(cap.location)})
    if not claiming:
        err.print(
            "note: tools match without --read-only, but their servers mark none of them read-only (readOnlyHint)",
            highlight=False,
        )
        return
    entries = configured_entries()
    # Under "pinning": "off" no pin is compared, so a reviewed pin (keen mcp trust) grants nothing.
    unpinned = [name for name in claiming if entries.get(name, {}).get("pinning") == "off"]
    pinned = [name for name in claiming if name not in unpinned]
    if pinned:
        err.print(
            f"note: tools of {_listed(pinned)} claim readOnlyHint, but a server's annotations count only"
            " once you trust them: `keen mcp diff SERVER`, then `keen mcp trust SERVER` (or"
            ' "trust_annotations": true in its configs.json entry)',
            highlight=False,
        )
    if unpinned:
        err.print(
            f"note: tools of {_listed(unpinned)} claim readOnlyHint, but a server's annotations count only"
            ' once you trust them; with "pinning": "off" no reviewed pin counts, so set'
            ' "trust_annotations": true in its configs.json entry',
            highlight=False,
        )


def _listed(names: list[str]) -> str:
    """Server names for a note: escaped for the terminal and for rich's markup."""
    from keen.cli._terminal import terminal_text

    return ", ".join(escape(terminal_text(name, one_line=True)) for name in names)


def _claims_read_only(location: str) -> bool:
    """Whether the schema file at ``location`` (a generated skill's) has ``readOnlyHint: true``."""
    import json
    from pathlib import Path

    try:
        annotations = json.loads(Path(location).read_text(encoding="utf-8")).get("annotations")
    except (OSError, UnicodeDecodeError, ValueError, AttributeError):
        return False
    return isinstance(annotations, dict) and annotations.get("readOnlyHint") is True


@app.command("index")
def index(
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar.")] = False,
) -> None:
    """Index every generated MCP skill's tools for search now, with a progress bar.

    Searches never wait for this: until the transformer vectors of new or changed tools are
    encoded, they rank by keywords and word vectors. Vectors are cached by each tool's
    definition, so a re-index encodes only what changed.
    """
    import time

    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    from keen.capabilities import Catalog

    started = time.perf_counter()
    catalog = Catalog.from_skills_dir(include_held=True)  # what keen tools search searches
    if not len(catalog):
        fail("no tools to index: no generated MCP skills are enabled (`keen mcp sync` writes them)")
    dense = catalog.index().dense
    if dense is None:  # pragma: no cover - the CLI always builds the transformer signal
        fail("the transformer signal is off")
    before = dense.done
    if not dense.ready and not quiet and err.is_terminal:
        with Progress(
            TextColumn("encoding tools"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeRemainingColumn(),
            console=err,
        ) as bar:
            task = bar.add_task("encode", total=dense.total, completed=dense.done)
            while not dense.wait(0.1):
                bar.update(task, completed=dense.done)
            bar.update(task, completed=dense.done)
    else:
        dense.wait(None)
    status = catalog.search_status()
    if status:
        fail(status)
    encoded = dense.total - before
    out.print(
        f"indexed {dense.total} tools of {len(catalog.servers)} servers in {time.perf_counter() - started:.1f} s"
        f" ({encoded} encoded, {before} from the cache)",
        highlight=False,
    )


def _check_servers(names: list[str]) -> None:
    """Fail for ``--server`` names with no skill at all, with what to do for each."""
    if not names:
        return
    from keen import paths
    from keen._text import near_names, some_of
    from keen.errors import ConfigError
    from keen.mcp.config import load_config

    try:
        configured = set(load_config(paths.mcp_config_path(), strict=False).servers)
    except ConfigError:
        configured = set()
    problems: list[str] = []
    for name in names:
        if name in configured:
            problems.append(
                f"{name} has no generated skill yet (run `keen mcp sync` to connect it and write one)"
            )
        else:
            names = sorted(configured)
            listed = f"configured: {some_of(names, 12) or 'none'}"
            if len(names) > 12:  # seventy names made a message of 2,000 characters
                near = near_names(name, names)
                listed = (
                    f"perhaps {' or '.join(near)}; " if near else ""
                ) + f"{listed}, all in `keen mcp list`"
            problems.append(f"{name} is not a configured server ({listed}; `keen mcp add` adds one)")
    fail("; ".join(problems))
