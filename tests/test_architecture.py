"""The package map of docs/architecture.md, enforced.

The import-linter contracts in pyproject.toml (``[tool.importlinter]``) say who may
import whom, including the layers still to come (capabilities, harness, agent, serve);
a wrong import anywhere under ``src/keen`` fails this test. The run-time checks below
prove what the static graph cannot: the lazy ``keen`` facade really defers imports, so
a lower layer loads nothing above it.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import grimp
import importlinter.api  # noqa: F401  (configures import-linter's adapters, as its CLI does)
import pytest
from importlinter.application.use_cases import lint_imports

import keen

ROOT = Path(__file__).resolve().parent.parent


def _fresh(code: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT, timeout=60
    )
    return done.stdout.strip()


def _lint(capsys: pytest.CaptureFixture[str]) -> tuple[bool, str]:
    kept = lint_imports(str(ROOT / "pyproject.toml"), cache_dir=None, no_logo=True, is_debug_mode=True)
    return kept, capsys.readouterr().out


def test_import_contracts_hold(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(ROOT)
    kept, report = _lint(capsys)
    assert kept, report
    assert "Contracts: 9 kept, 0 broken." in report, report


# Each wrong import beside the contract it breaks and the edge the report names: keen.mcp
# importing the gateway or the trust package above it; inside keen.mcp, the config importing
# a connection, the listings importing the calls; in the search index, the keyword index
# importing the word-vector sums beside it; another package importing a private module of
# keen.mcpskills.
WRONG_IMPORTS = [
    (
        "mcp/_upward.py",
        "from keen.gateway import Gateway",
        "Imports only go down the package map",
        "keen.mcp._upward -> keen.gateway",
    ),
    (
        "mcp/_upward.py",
        "from keen.trust.pins import PinGuard",
        "Imports only go down the package map",
        "keen.mcp._upward -> keen.trust.pins",
    ),
    (
        "mcp/config/_upward.py",
        "from keen.mcp.connection.server import ServerConnection",
        "Inside keen.mcp",
        "keen.mcp.config._upward -> keen.mcp.connection.server",
    ),
    (
        "mcp/listing/_upward.py",
        "from keen.mcp.calls.send import send_request",
        "Inside keen.mcp",
        "keen.mcp.listing._upward -> keen.mcp.calls.send",
    ),
    (
        "capabilities/_bm25.py",
        "from keen.capabilities._pooling import Pooled",
        "ToolSearch's index",
        "keen.capabilities._bm25 -> keen.capabilities._pooling",
    ),
    (
        "capabilities/_private.py",
        "from keen.mcpskills._names import plan_paths",
        "Other packages use what keen.mcpskills exports, never its private modules",
        "keen.capabilities._private -> keen.mcpskills._names",
    ),
]


def test_wrong_imports_break_their_layers_contracts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The contracts can fail: a copy of the package with every import of
    :data:`WRONG_IMPORTS` in it. Each breaks its contract, the report names each edge, and
    no other contract breaks. (One copy and one lint for all of them: import-linter reports
    every illegal import it finds, each under its contract; a copy and a lint each cost
    about 0.2 s of CPU.)"""
    src = tmp_path / "src"
    shutil.copytree(ROOT / "src" / "keen", src / "keen", ignore=shutil.ignore_patterns("__pycache__"))
    modules: dict[str, list[str]] = {}
    for module, imports, _, _ in WRONG_IMPORTS:
        modules.setdefault(module, []).append(imports)
    for module, lines in modules.items():
        (src / "keen" / module).write_text("\n".join(lines) + "\n")
    monkeypatch.syspath_prepend(str(src))
    monkeypatch.chdir(tmp_path)
    for name in [m for m in sys.modules if m == "keen" or m.startswith("keen.")]:
        monkeypatch.delitem(sys.modules, name)
    kept, report = _lint(capsys)
    assert not kept
    broken = {contract for _, _, contract, _ in WRONG_IMPORTS}
    assert f"Contracts: {9 - len(broken)} kept, {len(broken)} broken." in report, report
    # The report's "Broken contracts" part: each contract's heading, then its illegal imports.
    details = report.split("Broken contracts", 1)[1]
    starts = sorted((details.index(contract), contract) for contract in broken)
    sections = {
        contract: details[start : starts[i + 1][0] if i + 1 < len(starts) else None]
        for i, (start, contract) in enumerate(starts)
    }
    for _, _, contract, edge in WRONG_IMPORTS:
        assert re.search(re.escape(contract) + r"[^\n]*(\n[^\n]*)?BROKEN", report), (contract, report)
        assert edge in sections[contract], (contract, edge, report)


def test_no_module_imports_itself_back() -> None:
    """No import circle anywhere in keen, function-level imports included (import-linter's
    layers cannot see one inside a layer): each shared piece lives below both its users."""
    graph = grimp.build_graph("keen", exclude_type_checking_imports=True)
    circles = sorted(
        {
            tuple(sorted((module, imported)))
            for module in graph.modules
            for imported in graph.find_modules_directly_imported_by(module)
            if imported != module and graph.chain_exists(importer=imported, imported=module)
        }
    )
    assert circles == [], circles


@pytest.mark.parametrize(
    "module", ["keen.paths", "keen.errors", "keen.skills", "keen.mcpskills", "keen.prompt"]
)
def test_lower_layers_do_not_load_the_mcp_sdk(module: str) -> None:
    loaded = _fresh(
        f"import sys, {module}; print(sorted(m for m in sys.modules if m.split('.')[0] == 'mcp'))"
    )
    assert loaded == "[]"


@pytest.mark.parametrize("module", ["keen.mcp.manager", "keen.runtime", "keen.agent.servers", "keen.agent"])
def test_a_session_loads_the_mcp_sdk_only_when_it_starts_a_server(module: str) -> None:
    # keen chat builds its first request with these loaded; the SDK (and its generated types,
    # a second of CPU on a small machine) comes with the first server (docs/chat.md "Startup").
    loaded = _fresh(
        f"import sys, {module}; print(sorted(m for m in sys.modules if m.split('.')[0] in ('mcp', 'mcp_types')))"
    )
    assert loaded == "[]"


def test_a_hosts_budgeted_prompt_imports_no_logging_when_nothing_goes_wrong(tmp_path: Path) -> None:
    # keen.prompt's path logs only when a file cannot be read or written (keen._log): a
    # host's second start (the token caches written by the first) builds its prompt without
    # importing logging, and a warning still reaches logging when one is due.
    skill = tmp_path / "skills" / "notes"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text(
        "---\nname: notes\ndescription: Keeps notes.\n---\nBody.\n", encoding="utf-8"
    )
    code = (
        "import sys\n"
        "from pathlib import Path\n"
        "from keen.prompt import budgeted_prompt\n"
        f"section = budgeted_prompt(4000, Path({str(tmp_path / 'skills')!r}))\n"
        "assert 'notes' in section.text, section.text\n"
        "print('logging' in sys.modules)"
    )
    env = {**os.environ, "KEEN_HOME": str(tmp_path / "home")}
    for start in ("first", "second"):
        done = subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            check=True,
            cwd=ROOT,
            env=env,
            timeout=60,
        )
        if start == "second":
            assert done.stdout.strip() == "False", done.stderr
    shown = subprocess.run(
        [
            sys.executable,
            "-c",
            "import logging, keen.tokens as t\n"
            "logging.basicConfig(level=logging.WARNING, format='%(name)s %(levelname)s %(message)s')\n"
            "t.logger.warning('seen %s', 1)",
        ],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
        timeout=60,
    )
    assert shown.stderr.strip() == "keen.tokens WARNING seen 1"


def test_import_keen_paths_stays_small() -> None:
    bare = int(_fresh("import sys; print(len(sys.modules))"))
    with_paths = int(_fresh("import sys, keen.paths; print(len(sys.modules))"))
    # pathlib and the lazy facade: tens of modules, not the 695 of an eager package root.
    assert with_paths - bare < 60, (bare, with_paths)


def test_keen_mcp_types_and_config_do_not_load_the_sdk() -> None:
    loaded = _fresh(
        "import sys, keen.mcp.types, keen.mcp.config; print('mcp.client' in sys.modules, 'httpx2' in sys.modules)"
    )
    assert loaded == "False False"


def test_every_public_name_resolves() -> None:
    for name in keen.__all__:
        assert getattr(keen, name) is not None, name
    assert set(keen.__all__) <= set(dir(keen))
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        _ = keen.nope  # type: ignore[attr-defined]


def test_every_error_a_call_raises_is_public_and_in_the_docs_tree() -> None:
    # Gateway.call raises ToolQuarantined and ToolChanged: `except keen.ToolQuarantined`
    # must work, and docs/architecture.md "Errors" must draw every class a program may catch.
    import keen.errors

    classes = {
        name
        for name in keen.errors.__all__
        if isinstance(cls := getattr(keen.errors, name), type) and issubclass(cls, keen.errors.KeenError)
    }
    assert classes - set(keen.__all__) == set()
    assert all(getattr(keen, name) is getattr(keen.errors, name) for name in classes)
    tree = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8").split("## Errors", 1)[1]
    assert [name for name in sorted(classes) if not re.search(rf"(?m)(^|[─ ]){name}\b", tree)] == []


def test_public_names_come_from_their_layer() -> None:
    from keen.errors import KeenError
    from keen.gateway import Gateway
    from keen.mcp.manager import Manager
    from keen.runtime import open_runtime

    assert keen.KeenError is KeenError and keen.Gateway is Gateway
    assert keen.Manager is Manager and keen.open_runtime is open_runtime
    assert keen.__version__ == _fresh("from keen._version import __version__; print(__version__)")


def test_the_version_is_the_distribution_version() -> None:
    from importlib.metadata import version

    assert version("keen-code") == keen.__version__


def test_a_session_builds_no_pydantic_validator_until_it_validates() -> None:
    # keen chat imports these before its first model request, which validates none of their
    # models when no server is configured: pydantic's defer_build keeps their validators
    # (and pydantic's plugin scan of every installed distribution) for the first use.
    built = _fresh(
        "import pydantic, keen.runtime, keen.agent.servers, keen.trust.pinstore, keen.mcpskills.sync\n"
        "def every(cls):\n"
        "    for sub in cls.__subclasses__():\n"
        "        yield sub\n"
        "        yield from every(sub)\n"
        "print(sorted({c.__qualname__ for c in every(pydantic.BaseModel) if c.__module__.startswith('keen.')"
        " and c.__pydantic_complete__}))"
    )
    assert built == "[]"


def test_a_session_imports_no_yaml_parser_regex_engine_or_rich_before_it_needs_one() -> None:
    # PyYAML parses a SKILL.md that changed (keen.skills.cache keeps the others) or writes a
    # generated one; the regex module runs the grep tool; rich prints what a front end shows:
    # none is needed to ask the model (keen chat -p with no server configured loads none).
    loaded = _fresh(
        "import sys, keen.runtime, keen.agent, keen.agent.servers, keen.capabilities.describe\n"
        "import keen.cli.chat_cmd\n"
        "print(sorted({'yaml', 'regex', 'rich'} & set(sys.modules)))"
    )
    assert loaded == "[]"


def test_no_two_public_classes_share_a_name() -> None:
    # One name per idea: two of keen's public modules exporting different classes (or
    # protocols) under one name (keen.agent.Approver and keen.calls.Approver were two) read
    # as one.
    clashes = _fresh(
        "import collections, importlib, pkgutil, keen\n"
        "classes = collections.defaultdict(dict)\n"
        "for found in pkgutil.walk_packages(keen.__path__, 'keen.'):\n"
        "    if any(part.startswith('_') for part in found.name.split('.')):\n"
        "        continue  # a private module's names are not the API's\n"
        "    module = importlib.import_module(found.name)\n"
        "    for name in getattr(module, '__all__', ()):\n"
        "        value = getattr(module, name)\n"
        "        if isinstance(value, type):\n"
        "            classes[name][f'{value.__module__}.{value.__qualname__}'] = found.name\n"
        "print(sorted((name, sorted(seen)) for name, seen in classes.items() if len(seen) > 1))"
    )
    assert clashes == "[]"
