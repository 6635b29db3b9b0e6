"""ToolSearch's fusion: z-scored signals, the server context, the text of each field."""

from __future__ import annotations

import numpy as np

from keen.capabilities import Catalog, tool_capability
from keen.capabilities.search import _standardise as standardise  # pyright: ignore[reportPrivateUsage]
from keen.capabilities.search import lexical_text, semantic_text
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
    catalog = Catalog.from_tools(tools, servers, cache=False)
    assert catalog.search("search scientific papers", k=1)[0].id == "mcp__arxiv__search"
    assert catalog.search("search products in the store", k=1)[0].id == "mcp__shop__search"
