"""Keen ships its type hints (PEP 561 ``py.typed``): a team's own program that imports Keen
type-checks in pyright's strict mode with Keen's types, and no complaint about stubs."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import keen

pytestmark = pytest.mark.slow_file

PROGRAM = """
from keen import GatewayResult, open_runtime
from keen.capabilities import Catalog, SearchHit
from keen.harness import Observation


async def main() -> None:
    async with open_runtime(wait=30) as rt:
        hits: list[SearchHit] = Catalog.from_manager(rt.manager).search("current time", k=3)
        result: GatewayResult = await rt.gateway.call_for_model("time", "get_current_time", {})
        harness = rt.harness(mode="read-only")
        observation: Observation = await harness.call("search_tools", {"query": "time"})
        print(hits, result.text, observation.text)
"""

# Keen's records are frozen dataclasses to a type checker too (keen._record's
# dataclass_transform): dataclasses.replace and a dataclass subclass check, assignment does not.
RECORDS = """
import dataclasses
from pathlib import Path

from keen.skills import Skill


@dataclasses.dataclass(frozen=True)
class Ranked(Skill):
    rank: int = 0


def main() -> None:
    skill = Skill("notes", "Notes.", Path("/s/notes"), Path("/s/notes/SKILL.md"))
    ranked = Ranked("notes", "Notes.", Path("/s/notes"), Path("/s/notes/SKILL.md"), rank=2)
    off: Skill = dataclasses.replace(skill, enabled=False)
    print(off.enabled, ranked.rank)
    skill.name = "other"
"""


def test_py_typed_ships_inside_the_package() -> None:
    assert (Path(keen.__file__).parent / "py.typed").is_file()


def test_a_program_using_keen_type_checks_strictly(tmp_path: Path) -> None:
    pyright = shutil.which("pyright", path=str(Path(sys.executable).parent))
    assert pyright, "pyright is a dev dependency: pip install -e '.[dev]'"
    (tmp_path / "agent.py").write_text(PROGRAM, encoding="utf-8")
    (tmp_path / "records.py").write_text(RECORDS, encoding="utf-8")
    (tmp_path / "pyrightconfig.json").write_text(
        json.dumps({"typeCheckingMode": "strict", "pythonVersion": "3.11"}), encoding="utf-8"
    )
    done = subprocess.run(
        [pyright, "--outputjson", "--pythonpath", sys.executable, "agent.py", "records.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    diagnostics = json.loads(done.stdout)["generalDiagnostics"]
    found = [(Path(d["file"]).name, d["range"]["start"]["line"] + 1, d.get("rule")) for d in diagnostics]
    # The one complaint: the assignment to a frozen record's field (the last line).
    assert found == [("records.py", RECORDS.count("\n"), "reportAttributeAccessIssue")], diagnostics
