"""Every server's defaults: ``KEEN_MCP_TIMEOUT`` and config.toml's ``[mcp]`` table
(keen.mcp.config.defaults), under a server's own ``timeouts.connect``."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from conftest import stdio_server
from keen.agent.settings import load_settings
from keen.errors import ConfigError
from keen.mcp.config import load_config
from keen.mcp.config.defaults import default_max_starting, load_defaults


def test_the_builtin_default_is_15_s(
    write_config: Callable[..., Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("KEEN_MCP_TIMEOUT", raising=False)
    config = load_config(write_config({"a": stdio_server("basic_stdio.py")}))
    assert config.servers["a"].timeouts.connect == 15


def test_config_toml_then_the_environment_then_the_entry(
    write_config: Callable[..., Path], keen_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("KEEN_MCP_TIMEOUT", raising=False)
    path = write_config(
        {"a": stdio_server("basic_stdio.py"), "b": stdio_server("basic_stdio.py", timeouts={"connect": 5})}
    )
    (keen_home / "config.toml").write_text('model = "openai:x"\n\n[mcp]\ntimeout = 40\nmax_starting = 3\n')
    config = load_config(path)
    assert (config.servers["a"].timeouts.connect, config.servers["b"].timeouts.connect) == (40, 5)
    assert default_max_starting() == 3
    assert load_settings().model == "openai:x"  # keen chat's reader takes the [mcp] table
    monkeypatch.setenv("KEEN_MCP_TIMEOUT", "90")
    config = load_config(path)
    assert (config.servers["a"].timeouts.connect, config.servers["b"].timeouts.connect) == (90, 5)


@pytest.mark.parametrize("value", ["abc", "0", "-3", "inf"])
def test_a_bad_environment_value_says_what_to_set(
    write_config: Callable[..., Path], monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setenv("KEEN_MCP_TIMEOUT", value)
    path = write_config({"a": stdio_server("basic_stdio.py")})
    with pytest.raises(
        ConfigError, match=r"KEEN_MCP_TIMEOUT=.* is not a positive number of seconds; set it like"
    ):
        load_config(path)
    # The Manager's loader keeps going: the entry is config_error with the same words.
    assert "KEEN_MCP_TIMEOUT" in load_config(path, strict=False).invalid["a"]


@pytest.mark.parametrize(
    ("toml", "words"),
    [
        ("[mcp]\ntimeout = 'long'\n", r"\[mcp\] timeout must be a positive number"),
        ("[mcp]\nmax_starting = -1\n", r"\[mcp\] max_starting must be a whole number"),
        ("[mcp]\nconnect = 3\n", r"unknown key\(s\) connect in \[mcp\]; the keys are timeout, max_starting"),
        ("mcp = 3\n", r"mcp must be a table"),
        ("[mcp\n", r"is not valid TOML"),
    ],
)
def test_a_bad_mcp_table_says_what_to_fix(
    keen_home: Path, monkeypatch: pytest.MonkeyPatch, toml: str, words: str
) -> None:
    monkeypatch.delenv("KEEN_MCP_TIMEOUT", raising=False)
    (keen_home / "config.toml").write_text(toml)
    with pytest.raises(ConfigError, match=words):
        load_defaults()
