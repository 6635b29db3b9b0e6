"""MCP resources, resource templates and prompts: listed by the Manager (every page, only for servers that
advertise them), in the catalog with a deferred full layer, found by search_tools, listed
in the resource index and read through the one pipeline (``read_resource``). Against
server-everything (npm) and a paginating FastMCP server in memory."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest
from fastmcp import FastMCP

from conftest import peer
from keen import paths
from keen._terminal import NAME_CHARS, name_in_message
from keen.capabilities import Catalog
from keen.errors import InvalidArguments
from keen.gateway import Gateway, for_model
from keen.harness import Harness, read_events, replay
from keen.mcp import Manager, ServerState, in_memory_transport
from keen.trust import PinGuard

pytestmark = pytest.mark.anyio

IN_MEMORY = {"transport": "stdio", "command": "unused-in-memory"}
ARCH_ID = "mcp__everything__resource__demo://resource/static/document/architecture.md"
DYNAMIC = "demo://resource/dynamic/text/{resourceId}"


def _note(i: int) -> Callable[[], str]:
    def read() -> str:
        return f"the text of note {i}"

    return read


def _greeting(i: int) -> Callable[[str], str]:
    def greet(who: str) -> str:
        return f"hello {who} {i}"

    return greet


def _shelf(i: int) -> Callable[[str], str]:
    def read(topic: str) -> str:
        return f"shelf {i} memos on {topic}"

    return read


def paged_server() -> FastMCP:
    server = FastMCP("paged", list_page_size=3)
    for i in range(10):
        server.resource(f"memo://notes/{i}", name=f"note-{i}", description=f"Meeting note number {i}.")(
            _note(i)
        )
    for i in range(7):
        server.prompt(name=f"greet-{i}", description=f"Greeting number {i}.")(_greeting(i))
    for i in range(4):
        server.resource(
            f"memo://shelf/{i}/{{topic}}", name=f"shelf-{i}", description=f"Memos of shelf {i} on a topic."
        )(_shelf(i))

    @server.tool
    def ping() -> str:
        return "pong"

    return server


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    """Module scope, so that one :func:`manager` serves every test of the module."""
    return "asyncio"


@pytest.fixture(scope="module")
async def manager(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Manager]:
    """One Manager for the module: server-everything (node) and mcp-server-time (a new
    interpreter) start once, not once a test (about 2.5 s of CPU each time). The tests only
    list and read from it; each has its own KEEN_HOME (:func:`_own_home`) for its harness."""
    home = tmp_path_factory.mktemp("resources") / "keen-home"
    config = home / "mcp" / "configs.json"
    config.parent.mkdir(parents=True)
    # The 15 s default connect limit is a healthy start's, not what is tested: a loaded
    # machine (load 19 on 2 CPUs) took longer to start server-everything.
    slow_start = {"timeouts": {"connect": 60}}
    servers = {
        "everything": {"command": peer("node", "mcp-server-everything"), "args": ["stdio"], **slow_start},
        "paged": IN_MEMORY,
        "time": {"command": peer("py", "mcp-server-time"), **slow_start},
    }
    config.write_text(json.dumps({"version": 1, "servers": servers}))
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("KEEN_HOME", str(home))
        async with Manager(
            config, transports={"paged": in_memory_transport(paged_server()._mcp_server)}, trust=PinGuard()
        ) as m:
            assert await m.wait_ready(90)
            assert all(s.state is ServerState.CONNECTED for s in m.servers()), [
                s.last_error for s in m.servers()
            ]
            yield m


@pytest.fixture(autouse=True)
def _own_home(keen_home: Path) -> Path:
    return keen_home


async def test_the_manager_lists_every_page_of_resources_and_prompts(manager: Manager) -> None:
    assert sorted(r["name"] for r in manager.list_resources("paged")) == sorted(
        f"note-{i}" for i in range(10)
    )
    assert sorted(p["name"] for p in manager.list_prompts("paged")) == sorted(f"greet-{i}" for i in range(7))
    docs = {r["name"]: r for r in manager.list_resources("everything")}
    assert "architecture.md" in docs and docs["architecture.md"]["mimeType"] == "text/markdown"
    assert "simple-prompt" in {p["name"] for p in manager.list_prompts("everything")}
    # mcp-server-time advertises neither: nothing is asked, nothing listed.
    assert manager.list_resources("time") == [] and manager.list_prompts("time") == []
    assert manager.list_resource_templates("time") == []
    contents = await manager.read_resource("everything", docs["architecture.md"]["uri"])
    assert contents[0]["text"].strip() and contents[0]["mimeType"] == "text/markdown"
    got = await manager.get_prompt("paged", "greet-3", {"who": "ada"})
    assert got["messages"][0]["content"]["text"] == "hello ada 3"


async def test_a_prompt_argument_the_server_refuses_points_at_its_arguments(manager: Manager) -> None:
    # server-everything refuses args-prompt without "city" (-32602): the error carried the
    # tool-schema remedy, so a model was told to read an inputSchema a prompt does not have.
    with pytest.raises(InvalidArguments, match="prompts/list gives the prompt's arguments") as refused:
        await manager.get_prompt("everything", "args-prompt", {})
    assert refused.value.remedy is None
    assert "inputSchema" not in for_model(refused.value, "everything")


async def test_prompt_arguments_that_are_not_strings_are_refused_as_the_callers(manager: Manager) -> None:
    # prompts/get takes string values: a number was refused by the SDK's request model and
    # reported as 'MCP server "everything" sent an invalid answer', with pydantic's help URL.
    with pytest.raises(
        InvalidArguments,
        match=r'arguments for prompt "args-prompt" of MCP server "everything" must be strings: '
        r"'city' is an int; prompts/list gives the prompt's arguments\.$",
    ) as refused:
        await manager.get_prompt("everything", "args-prompt", {"city": 1})  # type: ignore[dict-item]
    assert refused.value.remedy is None
    with pytest.raises(
        InvalidArguments,
        match=r'"everything" must be strings: they are a list, not an object of names to strings; ',
    ):
        await manager.get_prompt("everything", "args-prompt", ["Lisbon"])  # type: ignore[arg-type]
    got = await manager.get_prompt("everything", "args-prompt", {"city": "Lisbon"})
    assert "Lisbon" in json.dumps(got)


async def test_a_resource_uri_the_server_refuses_points_at_its_lists(manager: Manager) -> None:
    # FastMCP refuses an unknown URI as invalid params (-32602): the error carried the
    # tool-schema remedy too, so a model was told to read an inputSchema a resource lacks.
    with pytest.raises(InvalidArguments, match="resources/list and resources/templates/list give") as refused:
        await manager.read_resource("paged", "note://nowhere/nothing")
    assert refused.value.remedy is None
    assert "inputSchema" not in for_model(refused.value, "paged")


async def test_catalog_holds_them_with_a_deferred_full_layer(manager: Manager) -> None:
    catalog = Catalog.from_manager(manager, cache=False)
    kinds = {c.kind for c in catalog if c.server == "paged"}
    assert kinds == {"tool", "resource", "prompt"}
    note = catalog.get("mcp__paged__resource__memo://notes/4")
    assert note.kind == "resource" and note.summary == "Meeting note number 4." and note.risk.read_only
    assert '"uri": "memo://notes/4"' in note.load().text and note.load().raw["name"] == "note-4"
    greet = catalog.get("mcp__paged__prompt__greet-2")
    assert greet.load().raw["arguments"][0]["name"] == "who"


async def test_search_lists_handles_and_read_resource_runs_the_pipeline(
    manager: Manager, tmp_path: Path
) -> None:
    def catalog() -> Catalog:
        return Catalog.from_manager(manager, skills_root=paths.skills_dir(), cache=False)

    h = Harness(catalog, Gateway(manager), mode="read-only", workspace=tmp_path)
    first = {t["name"] for t in h.begin_step()}
    assert h.catalog is not None
    arch = h.catalog.model_name(ARCH_ID)  # the id is no valid tool name: a hashed projection
    assert arch.startswith("mcp__everything__resource__demo__resource_static") and len(arch) <= 64
    assert "read_resource" not in first and h.resource_index() == ""
    early = await h.call("read_resource", {"name": arch})
    assert early.denied == "visibility"
    found = await h.call(
        "search_tools", {"query": "architecture document", "limit": 3, "kinds": ["resource"]}
    )
    assert arch in found.text and "in the resource index next step: read_resource" in found.text
    second = {t["name"] for t in h.begin_step()}
    assert "read_resource" in second and arch not in second, "a handle is listed, not offered as a tool"
    assert (
        f"- {arch} (resource demo://resource/static/document/architecture.md on everything)"
        in h.resource_index()
    )
    read = await h.call("read_resource", {"name": arch})
    assert not read.is_error and read.capability.startswith("mcp__everything__resource__"), read.text
    assert "architecture" in read.text.lower() and len(read.text) > 200
    result = [e for e in read_events(h.log.path) if e["type"] == "result"][-1]
    assert result["stages"][:4] == ["validate", "visibility", "permission", "pre_hooks"]
    unknown = await h.call("read_resource", {"name": "mcp__everything__resource__nope"})
    assert unknown.denied == "visibility" and "search_tools finds them" in unknown.text
    # Prompts too, with their arguments.
    await h.call(
        "search_tools", {"query": "greeting number five", "limit": 1, "kinds": ["prompt", "resource"]}
    )
    h.begin_step()
    assert "mcp__paged__prompt__greet-5" in h.resource_index()
    greeted = await h.call(
        "read_resource", {"name": "mcp__paged__prompt__greet-5", "arguments": {"who": "bo"}}
    )
    assert greeted.text == "Greeting number 5.\nuser: hello bo 5", greeted.text
    h.end_step()
    h.close()
    rebuilt = replay(h.log.path)
    assert rebuilt.ok and {arch, "mcp__paged__prompt__greet-5"} <= set(rebuilt.steps[-1].handles)


async def test_resource_templates_are_listed_searched_and_read_with_their_variables(
    manager: Manager, tmp_path: Path
) -> None:
    # Every page (FastMCP pages by 3), and server-everything's templates.
    shelves = {t["name"]: t for t in manager.list_resource_templates("paged")}
    assert sorted(shelves) == [f"shelf-{i}" for i in range(4)]
    assert shelves["shelf-2"]["uriTemplate"] == "memo://shelf/2/{topic}" and "uri" not in shelves["shelf-2"]
    dynamic = {t["uriTemplate"] for t in manager.list_resource_templates("everything")}
    assert DYNAMIC in dynamic, dynamic
    assert DYNAMIC not in {r["uri"] for r in manager.list_resources("everything")}
    # In the catalog as resources named by their uriTemplate.
    catalog = Catalog.from_manager(manager, cache=False)
    shelf = catalog.get("mcp__paged__resource__memo://shelf/2/{topic}")
    assert shelf.kind == "resource" and shelf.risk.read_only
    assert (
        shelf.summary == 'URI template; read it with arguments {"topic": "..."}. Memos of shelf 2 on a topic.'
    )
    # Found by search_tools with kinds ["resource"], listed, read with the variables.
    h = Harness(lambda: catalog, Gateway(manager), mode="read-only", workspace=tmp_path)
    h.begin_step()
    name = catalog.model_name(f"mcp__everything__resource__{DYNAMIC}")
    found = await h.call(
        "search_tools",
        {"query": "plaintext dynamic resource from a resource id", "limit": 3, "kinds": ["resource"]},
    )
    assert name in found.text and "in the resource index next step" in found.text, found.text
    h.begin_step()
    assert f"- {name} (resource {DYNAMIC} on everything): URI template; read it with arguments" in (
        h.resource_index()
    )
    bare = await h.call("read_resource", {"name": name})
    assert bare.is_error and bare.code == "invalid_arguments", bare.text
    assert 'give its variables as arguments, e.g. {"resourceId": "..."} (missing: resourceId)' in bare.text
    read = await h.call("read_resource", {"name": name, "arguments": {"resourceId": "7"}})
    assert not read.is_error and read.text.startswith("Resource 7: This is a plaintext resource"), read.text
    h.close()


def _long_templates_server(long: str, variable: str) -> FastMCP:
    """A server whose resource templates are long: a 3,000-character URI, a variable name
    of 3,000 characters, and a template the SDK cannot parse (two adjacent variables) that
    quotes that variable in its reason."""
    server = FastMCP("long")

    def memos(**variables: str) -> str:
        return "memo line\n" * 200

    server.resource(long, name="long-uri", description="Shelf memos by topic, a long URI.")(memos)
    server.resource(
        f"memo://named/{{{variable}}}", name="long-variable", description="Shelf memos by a long variable."
    )(memos)
    server.resource(
        f"memo://adjacent/{{topic}}{{{variable}}}",
        name="adjacent",
        description="Shelf memos, adjacent variables.",
    )(memos)
    return server


async def test_a_long_resource_template_is_cut_in_the_errors_and_hints_a_model_reads(
    keen_home: Path, tmp_path: Path
) -> None:
    """A resource template came back whole in the errors of ``read_resource`` (missing
    variables, an invalid template), in the truncation hint of its contents, in search_tools'
    hits and in the resource index: a server's 3,000-character template filled the model's
    context. Each is quoted through :func:`name_in_message` now: cut, the full template still
    the capability's name."""
    long = "memo://" + "n" * 3000 + "/{topic}"
    variable = "v" * 3000
    config = keen_home / "mcp" / "configs.json"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(json.dumps({"version": 1, "servers": {"long": IN_MEMORY}}))
    transport = in_memory_transport(_long_templates_server(long, variable)._mcp_server)
    async with Manager(config, transports={"long": transport}, trust=PinGuard()) as manager:
        assert await manager.wait_ready(30)
        catalog = Catalog.from_manager(manager, cache=False)
        h = Harness(
            lambda: catalog, Gateway(manager), mode="read-only", workspace=tmp_path, max_result_chars=1500
        )
        h.begin_step()
        found = await h.call("search_tools", {"query": "shelf memos", "limit": 5, "kinds": ["resource"]})
        assert not found.is_error, found.text
        h.begin_step()
        index = h.resource_index()
        names = {
            template: catalog.model_name(f"mcp__long__resource__{template}")
            for template in (long, f"memo://named/{{{variable}}}", f"memo://adjacent/{{topic}}{{{variable}}}")
        }
        long_name, named, adjacent = names.values()
        # Missing variables: the template (the capability's name) and the variable cut.
        bare = await h.call("read_resource", {"name": long_name})
        assert bare.is_error and bare.code == "invalid_arguments", bare.text
        assert f'"{name_in_message(long)}" is a resource template' in bare.text, bare.text
        assert 'e.g. {"topic": "..."} (missing: topic)' in bare.text, bare.text
        unnamed = await h.call("read_resource", {"name": named})
        assert unnamed.is_error and unnamed.code == "invalid_arguments", unnamed.text
        cut = name_in_message(variable)
        assert f'e.g. {{"{cut}": "..."}} (missing: {cut})' in unnamed.text, unnamed.text
        # An invalid template: it and the SDK's reason (which quotes the variable) cut.
        invalid = await h.call(
            "read_resource", {"name": adjacent, "arguments": {"topic": "a", variable: "b"}}
        )
        assert invalid.is_error and invalid.code == "remote_protocol_error", invalid.text
        assert 'lists an invalid resource template "memo://adjacent/{topic}{vvv' in invalid.text, invalid.text
        # The contents cut at max_result_chars: the hint names the template cut.
        read = await h.call("read_resource", {"name": long_name, "arguments": {"topic": "budget"}})
        assert not read.is_error and read.text.startswith("memo line"), read.text[:200]
        assert f'ask the user for a narrower part of "{name_in_message(long)}"]' in read.text, read.text[
            -400:
        ]
        # The search's hits and the resource index (in every step's context) name it cut too.
        assert f"(server long, resource {name_in_message(long)}; in the resource index" in found.text, (
            found.text
        )
        assert f"- {long_name} (resource {name_in_message(long)} on long): URI template" in index, index
        for text in (found.text, index, bare.text, unnamed.text, invalid.text, read.text):
            assert "n" * NAME_CHARS not in text and "v" * NAME_CHARS not in text, text
        h.close()
