"""``$KEEN_HOME/config.toml`` for keen chat, the elicitation defaults helper, and the
compaction record, on real files and values."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from keen.agent import ChatSettings, Message, SettingsError, ToolCall, compact_turn, defaults, load_settings
from keen.agent.compaction import CallRecord, record_text


def test_missing_file_gives_defaults(keen_home: Path) -> None:
    assert load_settings() == ChatSettings(model=None, base_url=None, mode="ask")


def test_values_and_overrides(keen_home: Path) -> None:
    (keen_home / "config.toml").write_text(
        'model = "openai:llama3.1"\nbase_url = "http://127.0.0.1:11434/v1"\nmode = "auto"\n'
    )
    settings = load_settings()
    assert settings == ChatSettings("openai:llama3.1", "http://127.0.0.1:11434/v1", "auto")
    (keen_home / "config.toml").write_text("model_timeout = 90\n")
    assert load_settings().model_timeout == 90.0
    assert settings.override(model="anthropic:claude", mode=None).model == "anthropic:claude"
    assert settings.override(model=None).model == "openai:llama3.1"


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("model = ", "is not valid TOML"),
        ('modle = "x"\n', "unknown key(s) modle"),
        ('mode = "yolo"\n', "mode must be one of read-only, ask, auto"),
        ("model = 3\n", "model must be a non-empty string"),
        ('openai_api_key = "sk-abcdef0123456789"\n', "never reads API keys from a file"),
        (
            'base_url = "localhost:11434/v1"\n',
            "base_url 'localhost:11434/v1' is not an http:// or https:// URL",
        ),
        ('base_url = "ftp://host/v1"\n', "e.g. http://127.0.0.1:11434/v1"),
        ('base_url = "sk-abcdef0123456789"\n', "base_url is not an http:// or https:// URL with a host"),
        ("model_timeout = 0\n", "model_timeout must be a number of seconds above 0, not 0"),
        ('model_timeout = "60"\n', "model_timeout must be a number of seconds above 0, not '60'"),
    ],
)
def test_bad_files_say_what_to_fix(keen_home: Path, text: str, words: str) -> None:
    (keen_home / "config.toml").write_text(text)
    with pytest.raises(SettingsError, match=re.escape(words)) as caught:
        load_settings()
    assert words in caught.value.message and str(keen_home / "config.toml") in caught.value.message
    assert "sk-abcdef0123456789" not in caught.value.message


def test_defaults_of_a_form_schema() -> None:
    schema = {
        "type": "object",
        "properties": {
            "name": {"type": "string", "default": "Ada"},
            "count": {"type": "integer", "default": 0},
            "colour": {"type": "string", "enum": ["red", "blue"], "default": "blue"},
            "note": {"type": "string"},
        },
    }
    assert defaults(schema) == {"name": "Ada", "count": 0, "colour": "blue"}
    assert defaults({"type": "object"}) == {} and defaults({"properties": []}) == {}


def test_compaction_keeps_order_and_cuts_results() -> None:
    long = "x" * 5000
    history = [
        Message("user", "old"),
        Message("assistant", "old answer"),
        Message("user", "new"),
        Message("assistant", "", [ToolCall("c1", "read_file", {"path": "a"})], kind="tool_traffic"),
        Message("tool", long, tool_call_id="c1", name="read_file", kind="tool_traffic"),
        Message("assistant", "", [ToolCall("c2", "grep", {"pattern": "y"})], kind="tool_traffic"),
        Message("tool", "y" * 400, tool_call_id="c2", name="grep", kind="tool_traffic"),
        Message("assistant", "final"),
    ]
    records = [
        CallRecord("read_file", {"path": "a"}, "ok", long),
        CallRecord("grep", {"pattern": "y"}, "ok", "y" * 400),
    ]
    compacted = compact_turn(history, 2, records)
    assert [m.content for m in compacted[:3]] == ["old", "old answer", "new"]
    assert compacted[3].kind == "compacted" and compacted[4].content == "final" and len(compacted) == 5
    assert "5,000 characters read (not kept)" in compacted[3].content
    assert "y" * 159 + "…" in compacted[3].content and "y" * 161 not in compacted[3].content
    assert compacted[3].content == record_text(records)
    assert compact_turn(history[:3], 2, []) == history[:3]


def test_an_api_key_given_as_the_base_url_is_not_echoed(monkeypatch: pytest.MonkeyPatch) -> None:
    # `--base-url "$OPENAI_API_KEY"` (the flags mixed up) printed the key back in the error.
    from keen.agent.settings import base_url_problem

    bare = base_url_problem("sk-abcdef0123456789")
    assert bare and "sk-abcdef0123456789" not in bare and "e.g. http://127.0.0.1:11434/v1" in bare, bare
    dotted = "key.abcdef0123456789"  # a key with a dot in it: the redactor knows the provider's
    monkeypatch.setenv("ANTHROPIC_API_KEY", dotted)
    problem = base_url_problem(dotted)
    assert problem and dotted not in problem and "[REDACTED]" in problem, problem
