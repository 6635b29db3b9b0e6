"""``keen chat -p`` as a script uses it: the real console script in a subprocess with a private
KEEN_HOME, real MCP servers (keen-demo, the elicitation test server), Keen's scripted model
and the real openai SDK against a fake endpoint on loopback. Exit codes 0/1/2, the JSON
record, approval flags, elicitation defaults, config.toml, and no secret anywhere."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from conftest import stdio_server
from helpers.cli import KEEN, REAL_KEEN, Home, Run, make_home, read_until
from helpers.fake_llm import FakeLLM, Reply
from helpers.forkserver import launch_args

pytestmark = pytest.mark.e2e

SECRET = "sk-proj-Zq8vX2mN4bL6kJ9hG3fD1sA7pO5iU0yT"
MODEL_KEY = "sk-test-model-key-5e4d3c2b1a0f9e8d7c6b"


@pytest.fixture
def home(tmp_path: Path) -> Home:
    """A KEEN_HOME with no servers (tests that need some call :func:`serve`)."""
    return make_home(tmp_path)


def serve(home: Home, *names: str) -> None:
    entries = {
        "demo": {
            "transport": "stdio",
            "command": sys.executable,
            "args": launch_args("-m", "keen.demo.server"),
            "env": {"KEEN_HOME": str(home.keen_home), "DEMO_TOKEN": SECRET},
            "trust_annotations": True,  # Keen's own demo server
        },
        "booking": stdio_server("elicit_stdio.py"),
        "chat": stdio_server("chat_tools.py"),
    }
    home.write({name: entries[name] for name in names})


def chat(home: Home, *args: str, env: dict[str, str] | None = None, stdin: str | None = None) -> Run:
    return home.keen_process("chat", *args, env=env, stdin=stdin, timeout=120)


def script(home: Home, *answers: dict[str, Any]) -> str:
    path = home.home / f"script-{len(list(home.home.glob('script-*')))}.jsonl"
    path.write_text("".join(json.dumps(a) + "\n" for a in answers))
    return f"scripted:{path}"


def schema(home: Home, server: str, tool: str) -> str:
    return str(home.keen_home / "skills" / f"mcp:{server}" / "schemas" / f"{tool}.json")


def mcp(server: str, tool: str, **arguments: Any) -> dict[str, Any]:
    return {"name": "call_mcp_tool", "arguments": {"server": server, "tool": tool, "arguments": arguments}}


def read(path: str) -> dict[str, Any]:
    return {"name": "read_file", "arguments": {"path": path}}


def everything_written(home: Home) -> str:
    """Every file Keen wrote under KEEN_HOME (session logs, server logs, skills); not the
    user's own configs.json, which holds the secret on purpose."""
    return "\n".join(
        p.read_text(errors="replace")
        for p in home.keen_home.rglob("*")
        if p.is_file() and not p.is_symlink() and p != home.config_path
    )


def test_one_shot_answers_records_the_session_and_leaks_nothing(home: Home) -> None:
    serve(home, "demo")
    model = script(
        home,
        {"content": "", "tool_calls": [read(schema(home, "demo", "convert_units"))]},
        {"content": "", "tool_calls": [mcp("demo", "convert_units", value=10, from_unit="km", to_unit="mi")]},
        {"content": "10 km is 6.21 mi."},
    )
    run = chat(home, "-p", f"convert 10 km to miles {SECRET}", "--model", model, "--json", "-v")
    assert run.code == 0, str(run)
    record = run.json()
    assert record["ok"] and record["answer"] == "10 km is 6.21 mi." and record["steps"] == 3
    assert record["tool_calls"][1]["outcome"] == "ok" and "6.2137" in record["tool_calls"][1]["text"]
    shown = chat(home, "--help")
    assert "--prompt" in shown.stdout
    log = home.keen_home / "sessions" / f"{record['session']}.jsonl"
    events = [json.loads(line) for line in log.read_text().splitlines()]
    assert any(e["type"] == "agent.user" for e in events) and any(e["type"] == "agent.turn" for e in events)
    # keen sessions show renders the one-shot session.
    show = home.keen_process("sessions", "show", record["session"])
    assert show.code == 0 and "call_mcp_tool" in show.stdout and "-> ok" in show.stdout, str(show)
    assert "user: convert 10 km to miles" in show.stdout and "answer: 10 km is 6.21 mi." in show.stdout
    for text in (run.stdout, run.stderr, show.stdout, everything_written(home)):
        assert SECRET not in text


def test_one_shot_prints_each_steps_text_on_its_own_line(home: Home) -> None:
    """The text a model writes before its tool calls and the answer after them are two
    steps: on stdout they are two lines, not one run-on sentence ("Let me check.10 km...")."""
    serve(home, "demo")
    model = script(
        home,
        {"content": "Let me read its schema.", "tool_calls": [read(schema(home, "demo", "convert_units"))]},
        {"content": "", "tool_calls": [mcp("demo", "convert_units", value=10, from_unit="km", to_unit="mi")]},
        {"content": "10 km is 6.21 mi."},
    )
    run = chat(home, "-p", "convert 10 km to miles", "--model", model)
    assert run.code == 0, str(run)
    assert run.stdout.splitlines() == ["Let me read its schema.", "10 km is 6.21 mi."], run.stdout


def test_a_script_calling_before_it_reads_the_schema_is_refused_then_may_retry(home: Home) -> None:
    """README "scripted:FILE": a tool is callable from the step after its schema was read; a
    call before that is refused, and the refusal makes the tool callable from the next step."""
    serve(home, "demo")
    call = mcp("demo", "convert_units", value=10, from_unit="km", to_unit="mi")
    model = script(
        home,
        {"content": "", "tool_calls": [call]},
        {"content": "", "tool_calls": [call]},
        {"content": "10 km is 6.21 mi."},
    )
    run = chat(home, "-p", "convert 10 km to miles", "--model", model, "--json")
    assert run.code == 0, str(run)
    first, retry = run.json()["tool_calls"]
    assert (first["outcome"], first["gate"]) == ("denied", "visibility"), first
    assert "not among this step's tools" in first["text"] and "callable from your next step" in first["text"]
    assert "search_tools" not in first["text"], first["text"]
    assert retry["outcome"] == "ok" and "6.2137" in retry["text"], retry


def test_a_tool_its_server_does_not_list_is_refused_with_the_close_names(home: Home) -> None:
    """The model got a tool's name wrong (``nots`` for ``note``): it read "not among this
    step's tools; use search_tools to find a tool", and searched for a name the server's own
    list could correct."""
    serve(home, "chat")
    model = script(
        home,
        {"content": "", "tool_calls": [mcp("chat", "nots", text="x")]},
        {"content": "", "tool_calls": [mcp("chat", "note", text="x")]},
        {"content": "", "tool_calls": [mcp("chat", "note", text="x")]},
        {"content": "Noted."},
    )
    run = chat(home, "-p", "note x", "--model", model, "--json", "--yes")
    assert run.code == 0, str(run)
    wrong, first, right = run.json()["tool_calls"]
    assert (wrong["outcome"], wrong["gate"]) == ("denied", "visibility"), wrong
    assert (
        'MCP server "chat" has no tool "nots" in its latest tools/list. Did you mean: note' in wrong["text"]
    )
    assert "SKILL.md" in wrong["text"] and "search_tools" not in wrong["text"], wrong["text"]
    assert "it exists" in first["text"] and right["outcome"] == "ok", run.json()


def test_a_search_with_no_hit_in_read_only_mode_says_so_and_why(home: Home) -> None:
    """search_tools found nothing the read-only mode allows: the model read "try other words"
    (no other words find a tool that may write), or only the note that semantic ranking was
    not ready, which read as the answer."""
    serve(home, "chat")
    search = {"name": "search_tools", "arguments": {"query": "write a note"}}
    model = script(home, {"content": "", "tool_calls": [search]}, {"content": "Nothing to use."})
    run = chat(home, "-p", "note x", "--model", model, "--json", "--mode", "read-only")
    assert run.code == 0, str(run)
    [found] = run.json()["tool_calls"]
    # Not "try other words": search has no threshold, so other words find no other tools.
    assert found["text"].startswith(
        "(no tool that read-only mode allows matches; the user can switch the permission mode for tools"
        " that may write)"
    ), found
    assert "other words" not in found["text"], found


def test_ctrl_c_during_a_call_names_the_session_it_recorded(home: Home) -> None:
    """Ctrl-C in `keen chat -p` ended with "cancelled" (exit 130) and no session id: the
    cancelled turn is in its log, and the line a finished turn ends with now leads there."""
    serve(home, "chat")
    model = script(
        home,
        {"content": "", "tool_calls": [read(schema(home, "chat", "slow"))]},
        {"content": "", "tool_calls": [mcp("chat", "slow", seconds=600)]},
        {"content": "unused"},
    )
    proc = subprocess.Popen(
        [*KEEN, "chat", "-p", "wait", "--model", model, "--yes", "--json"],
        env=home.env(),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        assert proc.stderr is not None
        seen = read_until(proc.stderr.fileno(), b"> chat/slow\n", 60)
        assert b"> chat/slow\n" in seen, seen
        proc.send_signal(signal.SIGINT)
        out, rest = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    stderr = (seen + rest).decode()
    assert proc.returncode == 130, stderr
    [session] = [p.stem for p in (home.keen_home / "sessions").glob("*.jsonl")]
    assert f"session {session} (keen sessions show {session})" in stderr, stderr
    assert stderr.rstrip().endswith("cancelled"), stderr
    assert out == b"", out


def test_a_server_that_crashed_is_reconnected_by_the_next_call(home: Home) -> None:
    """docs/chat.md "When a server goes away": no /mcp connect in a one-shot run; the next
    call to the crashed server starts it again and runs, and stderr says so in one line."""
    serve(home, "chat")
    model = script(
        home,
        {
            "content": "",
            "tool_calls": [read(schema(home, "chat", "crash")), read(schema(home, "chat", "note"))],
        },
        {"content": "", "tool_calls": [mcp("chat", "crash")]},
        {"content": "", "tool_calls": [mcp("chat", "note", text="after the crash")]},
        {"content": "Noted after the crash."},
    )
    run = chat(home, "-p", "crash it, then note it", "--model", model, "--json", "--yes")
    assert run.code == 0, str(run)
    crashed, noted = run.json()["tool_calls"][2:]
    assert crashed["outcome"] == "error" and "went away during" in crashed["text"], crashed
    # What the model reads: Keen reconnects the server at the next call, so it may call
    # again; not also the gateway's "the user has to fix and reconnect this server", which
    # contradicted it (and had the model send the user off to fix a server that was fine).
    assert "Keen reconnects this server by itself at the next call to it" in crashed["text"], crashed
    assert "has to fix" not in crashed["text"], crashed
    assert noted["outcome"] == "ok" and noted["text"] == "noted: after the crash", noted
    assert run.stderr.count("chat: reconnected, 5 tools") == 1, run.stderr


def test_real_openai_client_against_a_fake_endpoint(home: Home) -> None:
    replies = [
        Reply(tool_calls=[{"name": "list_dir", "arguments": {"path": "."}}]),
        Reply(text="Your workspace is empty enough."),
    ]
    with FakeLLM(replies) as fake:
        run = chat(
            home,
            "-p",
            "what is here?",
            "--model",
            "openai:fake-llama",
            "--base-url",
            fake.url + "/v1",
            "-v",
            env={"OPENAI_API_KEY": MODEL_KEY},
        )
    assert run.code == 0, str(run)
    assert run.stdout.strip() == "Your workspace is empty enough."
    assert fake.requests[0].headers["authorization"] == f"Bearer {MODEL_KEY}"
    assert fake.requests[1].body["messages"][-1]["role"] == "tool"
    for text in (run.stdout, run.stderr, everything_written(home)):
        assert MODEL_KEY not in text


def test_a_call_whose_arguments_are_not_json_is_named_call_mcp_tool_not_none(home: Home) -> None:
    # The call's line on stderr read "> None/None": no server and no tool could be read from
    # text that is not JSON, and the printer put Python's None in their place.
    replies = [
        Reply(tool_calls=[{"name": "call_mcp_tool", "raw": '{"server": "demo", tool'}]),
        Reply(text="Sorry."),
    ]
    with FakeLLM(replies) as fake:
        run = chat(
            home, "-p", "hi", "--model", "openai:m", "--base-url", fake.url + "/v1",
            env={"OPENAI_API_KEY": MODEL_KEY},
        )  # fmt: skip
    assert run.stdout.strip() == "Sorry.", str(run)
    assert "> call_mcp_tool\n" in run.stderr and "None" not in run.stderr, run.stderr
    assert "arguments must be a JSON object" in run.stderr, run.stderr


def test_a_prompt_of_dash_checks_the_settings_before_reading_stdin_and_needs_one(home: Home) -> None:
    # `keen chat -p -` with no model read standard input first (a bad one said so, not that no
    # model was chosen; a terminal waited for Ctrl-D); with no standard input at all (its
    # descriptor closed) it failed with an AttributeError.
    bad = subprocess.run(
        [*KEEN, "chat", "-p", "-"],
        env=home.env(),
        input=b"\xff\xfe",
        capture_output=True,
        timeout=120,
        check=False,
    )
    said = bad.stderr.decode()
    assert bad.returncode == 2 and "no model chosen" in said and "standard input" not in said, said
    model = script(home, {"content": "never asked"})
    proc = subprocess.run(
        [*REAL_KEEN, "chat", "-p", "-", "--model", model],  # the fork server's launcher needs fd 0
        env=home.env(),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        preexec_fn=lambda: os.close(0),  # the child's fd 0 only: Python then has sys.stdin None
    )
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert "cannot read the prompt from standard input: there is none" in proc.stderr, proc.stderr


def test_a_prompt_of_dash_is_read_from_stdin_and_an_empty_one_is_refused(home: Home) -> None:
    # `-p -` sent the model the text "-", and `-p ""` an empty message (a request paid for).
    with FakeLLM([Reply(text="Two.")]) as fake:
        where = ("--model", "openai:m", "--base-url", fake.url + "/v1")
        key = {"OPENAI_API_KEY": MODEL_KEY}
        piped = chat(home, "-p", "-", *where, env=key, stdin="How many moons has Mars?\n")
        empty = chat(home, "-p", " ", *where, env=key)
        nothing = chat(home, "-p", "-", *where, env=key, stdin="\n")
        asked = [r.body["messages"][-1] for r in fake.requests]
    assert piped.code == 0 and piped.stdout.strip() == "Two.", str(piped)
    assert asked == [{"role": "user", "content": "How many moons has Mars?"}], asked
    for run in (empty, nothing):
        assert run.code == 2, str(run)
        assert (
            "error: the prompt is empty; pass -p TEXT, or -p - to read it from standard input" in run.stderr
        )


def test_a_base_url_without_its_scheme_is_refused_before_the_turn(home: Home) -> None:
    # "localhost:11434/v1" (no http://) was tried three times and said "cannot connect ...;
    # check that the server is running", of an Ollama that was running; exit 1, a turn lost.
    with FakeLLM([Reply(text="unused")]) as fake:
        bare = fake.url.removeprefix("http://") + "/v1"
        run = chat(
            home, "-p", "hi", "--model", "openai:m", "--base-url", bare, env={"OPENAI_API_KEY": MODEL_KEY}
        )
        (home.keen_home / "config.toml").write_text(
            f'model = "openai:m"\nbase_url = "me:{MODEL_KEY}@{bare}"\n'
        )
        from_file = chat(home, "-p", "hi", env={"OPENAI_API_KEY": MODEL_KEY})
        assert fake.requests == []
    assert run.code == 2, str(run)
    assert f"error: --base-url '{bare}' is not an http:// or https:// URL" in run.stderr, run.stderr
    assert f"e.g. http://{bare}" in run.stderr and "cannot connect" not in run.stderr, run.stderr
    assert from_file.code == 2, str(from_file)
    assert f"config.toml: base_url '[REDACTED]@{bare}' is not an http://" in from_file.stderr, (
        from_file.stderr
    )
    assert MODEL_KEY not in from_file.stderr + from_file.stdout


@pytest.mark.parametrize(("provider", "path"), [("openai", "/v1"), ("anthropic", "")])
def test_a_model_that_never_answers_fails_after_model_timeout(home: Home, provider: str, path: str) -> None:
    # A hung endpoint held the turn for the SDKs' 600 s, three times over (Keen retries a
    # timeout), and nothing could shorten that: config.toml's model_timeout now does.
    hung = threading.Event()
    with FakeLLM([Reply(hang=hung, times=3)]) as fake:
        (home.keen_home / "config.toml").write_text(f'model = "{provider}:m"\nmodel_timeout = 0.5\n')
        try:
            run = chat(
                home, "-p", "hi", "--base-url", fake.url + path,
                env={"OPENAI_API_KEY": MODEL_KEY, "ANTHROPIC_API_KEY": MODEL_KEY},
            )  # fmt: skip
        finally:
            hung.set()
        asked = len(fake.requests)
    assert run.code == 1, str(run)
    assert (
        f"model error: {provider} at {fake.url + path} did not answer in time; Keen tried 3 times"
        in run.stderr
    )
    assert "a longer model_timeout in config.toml" in run.stderr, run.stderr
    assert asked == 3, asked


def test_an_unknown_server_among_many_is_named_with_the_one_meant_not_every_one(home: Home) -> None:
    # With seventy servers, a call to "weather" (or `keen mcp tools weather`) got all seventy
    # names back, 2,000 characters for a model or a person to read, the one meant among them.
    many = {f"srv-{n:02d}": {"transport": "stdio", "command": "unused", "enabled": False} for n in range(19)}
    home.write({**many, "MCP-Weather-Free": {"transport": "stdio", "command": "unused", "enabled": False}})
    model = script(
        home, {"content": "", "tool_calls": [mcp("weather", "forecast")]}, {"content": "No such server."}
    )
    run = chat(home, "-p", "weather?", "--model", model, "--json")
    [refused] = run.json()["tool_calls"]
    tools = home.keen("mcp", "tools", "weather")
    search = home.keen("tools", "search", "rain", "--server", "Weather")
    for text in (refused["text"], tools.stderr, search.stderr):
        assert "(perhaps MCP-Weather-Free; configured: " in text, text
        assert ", and 8 more" in text and "srv-18" not in text, text  # twelve named of twenty
    assert tools.code == 2 and search.code == 2 and "all in `keen mcp list`" in search.stderr, search


def test_provider_errors_exit_1_with_a_clear_message(home: Home) -> None:
    with FakeLLM([Reply(status=401, message="invalid key")]) as fake:
        run = chat(
            home,
            "-p",
            "hi",
            "--model",
            "openai:m",
            "--base-url",
            fake.url + "/v1",
            env={"OPENAI_API_KEY": MODEL_KEY},
        )
    assert run.code == 1, str(run)
    assert "refused the API key" in run.stderr and "OPENAI_API_KEY" in run.stderr
    assert MODEL_KEY not in run.stderr + run.stdout
    # Said once: the notice line ("model error: ...") was followed by the same as "error: ...".
    assert run.stderr.count("refused the API key") == 1, run.stderr


def test_a_stream_that_is_not_json_ends_the_turn_with_a_model_error_and_the_json_record(home: Home) -> None:
    # It crashed: "internal error: ExceptionGroup ... please report it", exit 2, stdout empty.
    with FakeLLM([Reply(text="Partly", garbage="<html>Bad gateway</html>")]) as fake:
        run = chat(
            home, "-p", "hi", "--json", "--model", "openai:m", "--base-url", fake.url + "/v1",
            env={"OPENAI_API_KEY": MODEL_KEY},
        )  # fmt: skip
    assert run.code == 1, str(run)
    record = run.json()
    assert record["ok"] is False and "its stream sent an event that is not JSON" in record["error"]
    assert "internal error" not in run.stderr and "model error:" in run.stderr, str(run)


def test_an_answer_cut_at_the_token_limit_is_printed_then_said_incomplete(home: Home) -> None:
    # In this process (typer's CliRunner): what the command prints and its exit code are
    # under test, not its process, and a forked `keen` would import the anthropic SDK
    # (3.5 s of CPU) that this worker has already imported for tests/agent.
    with FakeLLM([Reply(text="The steps are: first,", finish="max_tokens")]) as fake:
        run = home.keen(
            "chat", "-p", "steps?", "--model", "anthropic:m", "--base-url", fake.url,
            env={"ANTHROPIC_API_KEY": MODEL_KEY},
        )  # fmt: skip
    assert run.code == 1, str(run)
    assert run.stdout.strip() == "The steps are: first,"
    assert run.stderr.count("cut off at the model's output token limit, so it is incomplete") == 1, run.stderr
    assert "max_tokens" in json.dumps(fake.requests[0].body)  # the limit Keen sent


def test_keen_errors_exit_2(home: Home) -> None:
    no_model = chat(home, "-p", "hi")
    assert no_model.code == 2 and "no model chosen" in no_model.stderr
    bad = chat(home, "-p", "hi", "--model", "gpt4")
    assert bad.code == 2 and "use provider:name" in bad.stderr
    keyless = chat(home, "-p", "hi", "--model", "openai:gpt-4.1-mini", env={"OPENAI_API_KEY": ""})
    assert keyless.code == 2 and "OPENAI_API_KEY is not set" in keyless.stderr
    both = chat(home, "-p", "hi", "--model", "scripted:x", "--yes", "--deny")
    assert both.code == 2 and "contradict" in both.stderr
    (home.keen_home / "config.toml").write_text(f'model = "openai:gpt-4.1-mini"\napi_key = "{SECRET}"\n')
    stored = chat(home, "-p", "hi")
    assert stored.code == 2 and "never reads API keys from a file" in stored.stderr
    assert SECRET not in stored.stderr


def test_config_toml_supplies_the_default_model_and_mode(home: Home) -> None:
    home.write({"broken": {"transport": "stdio", "command": str(home.home / "no-such-server")}})
    model = script(home, {"content": "from the config"})
    (home.keen_home / "config.toml").write_text(f'model = "{model}"\nmode = "read-only"\n')
    run = chat(home, "-p", "hi", "--json")
    assert run.code == 0 and run.json()["answer"] == "from the config", str(run)
    # A server that failed is named with its error and the fix; the turn runs without it.
    assert "server broken:" in run.stderr and "was not found" in run.stderr
    assert "keen mcp connect broken" in run.stderr
    events = (home.keen_home / "sessions" / f"{run.json()['session']}.jsonl").read_text()
    assert '"mode": "read-only"' in events


@pytest.mark.parametrize(
    ("flags", "code", "outcome", "words"),
    [
        ((), 1, "denied", "rerun with --yes"),
        (("--deny",), 1, "denied", "did not approve"),
        (("--yes",), 0, "ok", "booked Chez Nous for 2 at 19:30"),
    ],
)
def test_approval_and_elicitation_flags(
    home: Home, flags: tuple[str, ...], code: int, outcome: str, words: str
) -> None:
    serve(home, "booking")
    model = script(
        home,
        {"content": "", "tool_calls": [read(schema(home, "booking", "book_table"))]},
        {"content": "", "tool_calls": [mcp("booking", "book_table", restaurant="Chez Nous")]},
        {"content": "done"},
    )
    run = chat(home, "-p", "book a table", "--model", model, "--json", *flags)
    assert run.code == code, str(run)
    call = run.json()["tool_calls"][1]
    assert call["outcome"] == outcome and words in call["text"], call


def test_one_shot_declines_a_page_to_open_even_with_yes(home: Home) -> None:
    serve(home, "booking")
    page = "https://auth.example.com/connect?state=abc123"
    model = script(
        home,
        {"content": "", "tool_calls": [read(schema(home, "booking", "sign_in"))]},
        {"content": "", "tool_calls": [mcp("booking", "sign_in", url=page)]},
        {"content": "done"},
    )
    run = chat(home, "-p", "connect my account", "--model", model, "--json", "--yes")
    assert run.code == 0, str(run)
    assert run.json()["tool_calls"][1]["text"] == "decline"
    assert f"booking asked you to open a page ({page}); a one-shot run declines that" in run.stderr
    assert "Run `keen chat` to go through it." in run.stderr


@pytest.mark.parametrize(
    "args",
    [
        ["chat", "-p", "hi", "--help"],
        ["chat", "-p", "hi", "-v"],
        ["chat", "--prompt=hi"],
        ["chat", "-p", "hi", "-p", "again"],
        ["chat", "-p", "-x"],  # a value that looks like an option: typer decides
        ["chat", "-p"],
        ["chat", "-m", "scripted:x"],  # the interactive chat
        ["chat", "-p", "hi", "--max-steps", "0"],
        ["chat", "-p", "hi", "--timeout", "1.5"],
        ["chat", "-p", "hi", "--timeout", "٥"],
        ["chat", "-p", "hi", "--yes", "--deny"],
        ["chat", "-p", "hi", "--unknown"],
        ["prompt", "-p", "hi"],
    ],
)
def test_only_a_plain_one_shot_command_line_skips_typer(args: list[str]) -> None:
    from keen.cli._chat import plain_options

    assert plain_options(args) is None  # typer parses these: its help, errors and completion


def test_a_plain_one_shot_command_line_reads_as_typer_would() -> None:
    from keen.cli._chat import plain_options

    argv = ["chat", "-m", "scripted:s.jsonl", "--prompt", "", "-y", "--json", "--max-steps", "3"]
    assert plain_options([*argv, "--timeout", "7", "--mode", "auto", "--base-url", "http://x"]) == {
        "prompt": "",
        "model": "scripted:s.jsonl",
        "base_url": "http://x",
        "mode": "auto",
        "yes": True,
        "deny": False,
        "as_json": True,
        "max_steps": 3,
        "timeout": 7.0,
    }


def test_a_command_line_typer_parses_runs_the_same_turn(home: Home) -> None:
    # `--timeout=5` is not a plain command line: typer parses it, and the turn is the same.
    script = home.keen_home.parent / "script.jsonl"
    script.write_text(json.dumps({"content": "same"}) + "\n", encoding="utf-8")
    plain = home.keen_process("chat", "-m", f"scripted:{script}", "-p", "hi", "--timeout", "5")
    typed = home.keen_process("chat", "-m", f"scripted:{script}", "-p", "hi", "--timeout=5")
    assert (plain.code, plain.stdout) == (typed.code, typed.stdout) == (0, "same\n"), (str(plain), str(typed))
    assert plain.stderr.replace(plain.stderr.split()[1], "ID") == typed.stderr.replace(
        typed.stderr.split()[1], "ID"
    )
