"""ToolSearch's fusion: z-scored signals, the server context, the text of each field; query
paths read as files; identical tools on several servers are one hit."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np

from keen.capabilities import Catalog, SearchFilter, tool_capability
from keen.capabilities._query import search_query, value_kinds  # pyright: ignore[reportPrivateUsage]
from keen.capabilities.search import MAX_QUERY_CHARS, lexical_text, semantic_text
from keen.capabilities.search import _standardise as standardise  # pyright: ignore[reportPrivateUsage]
from keen.mcp.types import Tool


def test_standardise_gives_z_scores_and_zero_for_flat_signals() -> None:
    z = standardise(np.array([1.0, 2.0, 3.0, 10.0], dtype=np.float32))
    assert abs(float(z.mean())) < 1e-6 and abs(float(z.std()) - 1.0) < 1e-5
    assert int(np.argmax(z)) == 3
    assert not standardise(np.zeros(5, dtype=np.float32)).any()  # a query with no word in the index
    assert standardise(np.zeros(0, dtype=np.float32)).size == 0


def test_fields_name_server_and_description_not_parameter_names() -> None:
    cap = tool_capability(
        "Office-Word-MCP-Server",
        {
            "name": "addParagraph",
            "description": "Add a paragraph to a Word document.",
            "inputSchema": {"properties": {"filename": {"description": "Path of the .docx file"}}},
        },
    )
    lexical = " ".join(lexical_text(cap))
    assert lexical.count("add Paragraph") == 2 and "Path of the .docx file" in lexical
    assert "filename" not in lexical
    assert semantic_text(cap).startswith("Office Word MCP Server. add Paragraph. add Paragraph.")


def test_server_context_picks_the_same_named_tool_of_the_matching_server() -> None:
    same = "Search for items matching a query."
    tools = [
        Tool("arxiv", "search", same, {}),
        Tool("arxiv", "download_paper", "Download the PDF of a paper by its id.", {}),
        Tool("arxiv", "read_paper", "Read the text of a downloaded paper.", {}),
        Tool("shop", "search", same, {}),
        Tool("shop", "add_to_cart", "Put a product in the shopping cart.", {}),
        Tool("shop", "checkout", "Pay for the cart and place the order.", {}),
    ]
    servers = {"arxiv": "Scientific papers and preprints.", "shop": "An online store of products."}
    # With and without the transformer (the vectors were ready or not by the time a search
    # ran: "search scientific papers" may well rank download_paper first with them).
    for catalog in (
        Catalog.from_tools(tools, servers, cache=False, dense=False),
        Catalog.from_tools(tools, servers, cache=False),
    ):
        assert catalog.wait_ready(60) or catalog.index().dense is None
        for query, server in (
            ("search scientific papers", "arxiv"),
            ("search products in the store", "shop"),
        ):
            ids = [hit.id for hit in catalog.search(query, k=6)]
            searches = [i for i in ids if i.endswith("__search")]
            assert searches[0] == f"mcp__{server}__search", (query, ids)


def test_a_file_path_in_the_query_reads_as_a_file() -> None:
    assert search_query("save it to /root/markdown/cv.md") == "save it to file /root/markdown/cv.md"
    assert search_query(r"open C:\Users\me\notes.txt") == r"open file C:\Users\me\notes.txt"
    assert search_query("list ~/music and ./out/") == "list file ~/music and file ./out/"
    # URLs keep their host and path as they are; "and/or" and fractions are not paths.
    assert search_query("fetch https://github.com/a/b then save") == "fetch https://github.com/a/b then save"
    assert search_query("www.example.org/x/y") == "www.example.org/x/y"
    assert search_query("read and/or write 1/2 of it") == "read and/or write 1/2 of it"


def test_values_read_as_their_kind() -> None:
    def kinds(text: str) -> str:
        return value_kinds(search_query(text))

    assert kinds("rename draft_v2.md to final.md") == "rename md file to md file"
    assert kinds("open notes/todo.txt and ~/a/Report.PDF") == "open txt file and pdf file"
    assert kinds(r"open C:\Users\me\notes.txt") == "open txt file"
    assert kinds("commit with the message 'fix login redirect'") == "commit with the message text"
    assert kinds('replace \u201cAcme Inc\u201d with "Acme Ltd"') == "replace text with text"
    assert kinds("read https://blog.python.org/x and list pages of docs.stripe.com") == (
        "read web page and list pages of web site"
    )
    assert kinds("what's in python.org's sitemap?") == "what's in web site's sitemap?"
    # Not values: apostrophes, abbreviations, versions, dotted names, a sentence's full stop.
    kept = "it's Ana's plan, e.g. v1.2 of crm.deal.add at 3 p.m. in ~/src/"
    assert kinds(kept) == search_query(kept)
    assert kinds("edit config.yaml.") == "edit yaml file."


def test_the_vectors_read_the_values_kinds_and_keywords_the_values() -> None:
    tools = [
        Tool("filesystem", "move_file", "Move or rename files and directories.", {}),
        Tool("pdf", "pdf_to_markdown", "Convert a PDF document to Markdown text.", {}),
        Tool("excel", "rename_sheet", "Rename a worksheet in a workbook.", {}),
    ]
    catalog = Catalog.from_tools(tools, cache=False)
    assert catalog.wait_ready(60)
    from keen.capabilities.encoder import sentence_encoder

    model = sentence_encoder()
    # Both queries below by one graph: one asked before the int8 query graph is settled is
    # encoded by the exact graph (its vector not kept), and differs in the third decimal.
    assert model is not None and model.wait_query_graph(60)
    index = catalog.index()
    values = index.signals("rename draft_v2.md to final.md")
    kinds = index.signals("rename md file to md file")
    assert np.allclose(values["dense"], kinds["dense"]) and np.allclose(values["static"], kinds["static"])
    assert not np.allclose(values["lexical"], kinds["lexical"])  # "draft", "final" still count there


def test_the_search_reads_a_path_as_a_file() -> None:
    tools = [
        Tool("files", "write_file", "Create or overwrite a file with the given content.", {}),
        Tool("notes", "markdown_note", "Store a markdown note.", {}),
        Tool("notes", "list_notes", "List the stored notes.", {}),
        Tool("clock", "now", "The current time.", {}),
    ]
    catalog = Catalog.from_tools(tools, cache=False)
    assert catalog.wait_ready(60)  # every score below with the same signals
    index = catalog.index()
    assert search_query("keep the file /root/markdown/cv.md") == "keep the file /root/markdown/cv.md"
    with_word = index.scores("keep it in file /root/markdown/cv.md")
    assert np.allclose(index.scores("keep it in /root/markdown/cv.md"), with_word)
    without = index.scores("keep it in root markdown cv md")
    assert (
        with_word[index.ids.index("mcp__files__write_file")]
        > without[index.ids.index("mcp__files__write_file")]
    )


def _copies_catalog(tmp_path: Path | None = None) -> Catalog:
    same = "Write text to a file, replacing it."
    tools = [
        Tool("files", "write_file", same, {"properties": {"path": {"type": "string"}}}),
        Tool("files-fork", "write_file", same, {"properties": {"path": {"type": "string"}}}),
        Tool("desktop", "write_file", same, {"properties": {"path": {"type": "string"}}}),
        Tool("other", "write_file", "Write a file in the sandbox.", {}),
        Tool("files", "read_file", "Read a file.", {}, annotations={"readOnlyHint": True}),
    ]
    servers = {"files": "Local files.", "files-fork": "Local files.", "desktop": "Desktop commander."}
    if tmp_path is None:
        return Catalog.from_tools(tools, servers, cache=False)
    return Catalog.from_tools(tools, servers, cache_dir=tmp_path)


def test_identical_tools_on_several_servers_are_one_hit_naming_the_copies(tmp_path: Path) -> None:
    for catalog in (
        _copies_catalog(),
        _copies_catalog(tmp_path),
        _copies_catalog(tmp_path),
    ):  # built, saved, loaded
        hits = catalog.search("write a file", k=3)
        ids = [h.id for h in hits]
        copies = {"mcp__files__write_file", "mcp__files-fork__write_file", "mcp__desktop__write_file"}
        assert len(set(ids) & copies) == 1, ids  # one place for three identical tools
        assert "mcp__other__write_file" in ids  # a different description is a different tool
        first = next(h for h in hits if h.id in copies)
        assert set(first.copies) == copies - {first.id}
        assert first.to_dict()["copies"] == list(first.copies)
    # A server filter leaves the other servers' copies out of the hit.
    only = _copies_catalog().search("write a file", k=3, filter=SearchFilter(servers=frozenset({"files"})))
    assert [(h.id, h.copies) for h in only if h.tool == "write_file"] == [("mcp__files__write_file", ())]


def test_the_same_name_with_other_annotations_is_not_a_copy() -> None:
    tools = [
        Tool("a", "delete_row", "Delete a row.", {}, annotations={"destructiveHint": True}),
        Tool("b", "delete_row", "Delete a row.", {}, annotations={"readOnlyHint": True}),
    ]
    hits = Catalog.from_tools(tools, cache=False).search("delete a row", k=2)
    assert sorted(h.id for h in hits) == ["mcp__a__delete_row", "mcp__b__delete_row"]
    assert all(h.copies == () for h in hits)


def test_only_the_first_max_query_chars_of_a_query_count() -> None:
    tools = [
        Tool("shop", "checkout", "Pay for the cart and place the order.", {}),
        Tool("arxiv", "read_paper", "Read the text of a downloaded paper.", {}),
    ]
    catalog = Catalog.from_tools(tools, {"shop": "A store.", "arxiv": "Papers."}, cache=False)
    head = "read a downloaded paper " * (MAX_QUERY_CHARS // 24 + 1)
    flood = head + "pay for the cart and place the order " * 50_000  # 1.9 MB past the cap
    index = catalog.index()
    assert catalog.wait_ready(60)  # both scores with the transformer signal
    assert np.array_equal(index.scores(flood), index.scores(head[:MAX_QUERY_CHARS]))
    assert catalog.search(flood, k=1)[0].id == "mcp__arxiv__read_paper"


def test_data_in_a_query_is_dropped_words_and_urls_stay() -> None:
    image = "iVBORw0KGgoAAAANSUhEUgAAAgAAAAIACAYAAAD0eNT6AAAABHNCSVQICAgIfAhkiAAAAAlwSFlzAAAN1wAADdcB"
    assert search_query(f"What does this base64 image mean?\n{image}").split() == [
        "What",
        "does",
        "this",
        "base64",
        "image",
        "mean?",
    ]
    sha = "3f786850e387550fdab836ed7e6dc881de23001b"
    assert search_query(f"revert commit {sha} please").split() == ["revert", "commit", "please"]
    assert "uuid" in search_query("uuid 1e0edd2a-8d53-4355-805f-54b7e5555725") and "8d53" not in search_query(
        "uuid 1e0edd2a-8d53-4355-805f-54b7e5555725"
    )
    # Long tool names and dated paths are words, not data; a URL is kept whole.
    name = "get_repository_permissions_for_a_user getRepositoryPermissionsForAUser"
    assert search_query(name) == name
    assert search_query("list /data/2024-05-01/run_0001") == "list file /data/2024-05-01/run_0001"
    assert search_query(f"fetch https://x.org/a?sig={sha}") == f"fetch https://x.org/a?sig={sha}"


def test_a_pasted_image_does_not_drown_the_words_of_the_task() -> None:
    tools = [
        Tool("images", "extract_image_from_base64", "Decode a base64 image and describe it.", {}),
        Tool("ids", "1e0edd2a-8d53-4355-805f-54b7e5555725", "", {}),
        Tool("ids", "4569a607-338e-4d66-80f7-17f911778b1d", "", {}),
    ]
    catalog = Catalog.from_tools(tools, {"images": "Images.", "ids": "Tools named by ids."}, cache=False)
    blob = "iVBORw0KGgoAAAANSUhEUgAAAgAAAAIACAYAAAD0eNT6AAAABHNCSVQICAgIfAhkiAAAAAlwSFlzAAAN1wAADdcB" * 40
    assert (
        catalog.search(f"What does this base64 image mean? {blob}", k=1)[0].tool
        == "extract_image_from_base64"
    )


def test_a_query_that_is_only_data_still_ranks_by_it() -> None:
    # Dropping data words must not leave an empty query (every score equal, an arbitrary
    # order): a search for a tool's id finds that tool.
    uuid = "4569a607-338e-4d66-80f7-17f911778b1d"
    tools = [
        Tool("ids", "1e0edd2a-8d53-4355-805f-54b7e5555725", "", {}),
        Tool("ids", uuid, "", {}),
        Tool("ids", "b9c1f0e2-5a4d-4e1b-9f3a-2c7d8e6f0a11", "", {}),
    ]
    catalog = Catalog.from_tools(tools, {"ids": "Tools named by ids."}, cache=False)
    assert catalog.search(uuid, k=1)[0].tool == uuid


def test_the_first_search_leaves_the_host_programs_logging_alone(tmp_path: Path) -> None:
    # wordllama calls logging.basicConfig(level=INFO) when imported (at the first search):
    # that put a stderr handler on the embedding program's root logger, so every INFO line of
    # the program and its libraries started printing. A fresh interpreter imports it anew.
    code = """
import logging, sys
from keen.capabilities import Catalog
from keen.mcp.types import Tool
catalog = Catalog.from_tools([Tool("t", "get_time", "Current time in a time zone.", {})], {}, cache=False)
assert catalog.search("what time is it", k=1)[0].id == "mcp__t__get_time"
root = logging.getLogger()
print(len(root.handlers), logging.getLevelName(root.level))
logging.getLogger("host.app").info("host info line")
"""
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["0", "WARNING"]
    assert "host info line" not in done.stderr
