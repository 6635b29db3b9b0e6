"""A stdio MCP server that starts fine and lists no tools, saying why on stderr (as an
Atlassian server without credentials does)."""

from __future__ import annotations

import sys

from fastmcp import FastMCP

if __name__ == "__main__":
    print("JIRA_API_TOKEN is not set: no tools registered", file=sys.stderr, flush=True)
    FastMCP("empty").run(show_banner=False)
