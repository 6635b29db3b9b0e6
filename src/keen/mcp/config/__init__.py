"""The servers a user configured: configs.json, its defaults, imports and edits.

* :mod:`~keen.mcp.config.servers`: configs.json (version 1): the models, ``load_config``,
  ``parse_config``, ``save_config``.
* :mod:`~keen.mcp.config.values`: the rules for one field's value (header, URL, command, env).
* :mod:`~keen.mcp.config.defaults`: the ``[mcp]`` table of ``config.toml`` and ``KEEN_MCP_TIMEOUT``.
* :mod:`~keen.mcp.config.importer`, :mod:`~keen.mcp.config.hosts`: other MCP hosts' files
  (``keen mcp import``).
* :mod:`~keen.mcp.config.edit`: ``keen mcp import|add|remove|enable|disable`` edits.
* :mod:`~keen.mcp.config.secrets`: every secret an entry holds goes to the redactor.
* :mod:`~keen.mcp.config.reload`: one server's entry read again (``Manager.reload_server``).
* :mod:`~keen.mcp.config.validated`: the servers' names and ``enabled`` flags without the
  validation models, for a text that validated before (``keen chat``'s first request).

Names load on first use: importing this package does not import the MCP SDK.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from keen._lazy import exports_from, lazy_module_attrs

if TYPE_CHECKING:
    from keen.mcp.config.defaults import default_max_starting, more_time_advice, split_advice
    from keen.mcp.config.edit import add_server, import_into_config, remove_server, server_entry, set_enabled
    from keen.mcp.config.hosts import HostFile, detect_host_files, host_file_candidates
    from keen.mcp.config.importer import ImportResult, import_mcp_file, import_mcp_servers, suggest_name
    from keen.mcp.config.load import load_config, parse_config
    from keen.mcp.config.reload import EntryChange, misconfigured_status, no_longer_configured, with_entry_of
    from keen.mcp.config.secrets import register_server_secrets, secret_name
    from keen.mcp.config.servers import (
        SERVER_NAME_PATTERN,
        SUPPORTED_VERSIONS,
        ApiKeyAuth,
        AuthFactory,
        HttpServerConfig,
        MCPConfig,
        NoAuth,
        OAuthAuth,
        ServerConfig,
        StdioServerConfig,
        Timeouts,
        declared_kinds,
        object_pairs,
        read_json,
        repeated_keys,
        save_config,
        validate_config,
    )
    from keen.mcp.config.validated import known_servers, remember_valid

__all__ = [
    "SERVER_NAME_PATTERN",
    "SUPPORTED_VERSIONS",
    "ApiKeyAuth",
    "AuthFactory",
    "EntryChange",
    "HostFile",
    "HttpServerConfig",
    "ImportResult",
    "MCPConfig",
    "NoAuth",
    "OAuthAuth",
    "ServerConfig",
    "StdioServerConfig",
    "Timeouts",
    "add_server",
    "declared_kinds",
    "default_max_starting",
    "detect_host_files",
    "host_file_candidates",
    "import_into_config",
    "import_mcp_file",
    "import_mcp_servers",
    "known_servers",
    "load_config",
    "misconfigured_status",
    "more_time_advice",
    "no_longer_configured",
    "object_pairs",
    "parse_config",
    "read_json",
    "register_server_secrets",
    "remember_valid",
    "remove_server",
    "repeated_keys",
    "save_config",
    "secret_name",
    "server_entry",
    "set_enabled",
    "split_advice",
    "suggest_name",
    "validate_config",
    "with_entry_of",
]

_EXPORTS = {
    **exports_from(
        "keen.mcp.config.servers",
        (
            "ApiKeyAuth",
            "AuthFactory",
            "HttpServerConfig",
            "MCPConfig",
            "NoAuth",
            "OAuthAuth",
            "SERVER_NAME_PATTERN",
            "SUPPORTED_VERSIONS",
            "ServerConfig",
            "StdioServerConfig",
            "Timeouts",
            "declared_kinds",
            "object_pairs",
            "read_json",
            "repeated_keys",
            "save_config",
            "validate_config",
        ),
    ),
    **exports_from("keen.mcp.config.load", ("load_config", "parse_config")),
    **exports_from("keen.mcp.config.defaults", ("default_max_starting", "more_time_advice", "split_advice")),
    **exports_from(
        "keen.mcp.config.edit",
        ("add_server", "import_into_config", "remove_server", "server_entry", "set_enabled"),
    ),
    **exports_from("keen.mcp.config.hosts", ("HostFile", "detect_host_files", "host_file_candidates")),
    **exports_from(
        "keen.mcp.config.importer", ("ImportResult", "import_mcp_file", "import_mcp_servers", "suggest_name")
    ),
    **exports_from(
        "keen.mcp.config.reload",
        ("EntryChange", "misconfigured_status", "no_longer_configured", "with_entry_of"),
    ),
    **exports_from("keen.mcp.config.secrets", ("register_server_secrets", "secret_name")),
    **exports_from("keen.mcp.config.validated", ("known_servers", "remember_valid")),
}

__getattr__, __dir__ = lazy_module_attrs(__name__, _EXPORTS)
