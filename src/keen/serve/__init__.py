"""Keen as an MCP server for other hosts (``keen serve``), and the ``tool_descriptions`` extension.

See :mod:`keen.serve.server` for the two tool surfaces and whose authorization a request
uses, :mod:`keen.serve.http` for the HTTP front (security, sessions in the store),
:mod:`keen.serve.store` for the state, and ``docs/serve.md`` for hosts' configs.
"""

from __future__ import annotations

from keen.serve.catalog import ExposedTool, ToolCatalog, exposed_name
from keen.serve.http import HttpSecurity, build_app, is_loopback, tokens_from_env
from keen.serve.relay import LogBound
from keen.serve.run import serve_http, serve_stdio
from keen.serve.search import CapabilitySearch, KeywordSearch, SearchFn
from keen.serve.server import KeenServer, Mode
from keen.serve.store import MemoryStore, RedisStore, Store, open_store

__all__ = [
    "CapabilitySearch",
    "ExposedTool",
    "HttpSecurity",
    "KeenServer",
    "KeywordSearch",
    "LogBound",
    "MemoryStore",
    "Mode",
    "RedisStore",
    "SearchFn",
    "Store",
    "ToolCatalog",
    "build_app",
    "exposed_name",
    "is_loopback",
    "open_store",
    "serve_http",
    "serve_stdio",
    "tokens_from_env",
]
