"""The frozen records of the prompt's path (``keen._record``) behave as the frozen dataclasses
they were: each is compared with a twin declared as before, with ``@dataclass(frozen=True)``."""

from __future__ import annotations

import copy
import dataclasses
import inspect
import pickle
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import pytest

from keen._record import FrozenRecord
from keen.agent.settings import ChatSettings
from keen.capabilities import BudgetedSection, PermissionMode
from keen.skills import Discovery, Skill, SkillProblem
from keen.tokens import TokenCounter


@dataclass(frozen=True)
class Skill0:
    name: str
    description: str
    path: Path
    skill_md: Path
    enabled: bool = True
    managed: bool = False
    paths: tuple[str, ...] = ()
    tool_count: int | None = None


@dataclass(frozen=True)
class SkillProblem0:
    name: str
    path: Path
    message: str


@dataclass(frozen=True)
class Discovery0:
    skills: list[Skill] = field(default_factory=lambda: list[Skill]())
    problems: list[SkillProblem] = field(default_factory=lambda: list[SkillProblem]())


@dataclass(frozen=True)
class TokenCounter0:
    name: str
    count: Callable[[str], int]
    source: str = ""


@dataclass(frozen=True)
class BudgetedSection0:
    text: str
    tokens: int
    budget: int
    overhead_tokens: int
    step: Literal["full", "compact", "folded", "empty"]
    tokenizer: str
    listed: list[str] = field(default_factory=lambda: list[str]())
    folded: list[str] = field(default_factory=lambda: list[str]())
    description_cap: int | None = None


@dataclass(frozen=True)
class ChatSettings0:
    model: str | None = None
    base_url: str | None = None
    mode: PermissionMode = "ask"
    model_timeout: float | None = None


SKILL = ("notes", "Keeps notes.", Path("/s/notes"), Path("/s/notes/SKILL.md"))
CASES: list[tuple[type[Any], type[Any], tuple[Any, ...], dict[str, Any]]] = [
    (Skill, Skill0, SKILL, {}),
    (Skill, Skill0, SKILL, {"enabled": False, "managed": True, "paths": ("*.md",), "tool_count": 3}),
    (SkillProblem, SkillProblem0, ("bad", Path("/s/bad"), "not a directory"), {}),
    (Discovery, Discovery0, (), {}),
    (Discovery, Discovery0, ([Skill(*SKILL)],), {"problems": [SkillProblem("b", Path("/b"), "m")]}),
    (TokenCounter, TokenCounter0, ("estimate:bytes/4", len), {}),
    (TokenCounter, TokenCounter0, ("tiktoken:o200k_base", len, "a file"), {}),
    (BudgetedSection, BudgetedSection0, ("", 0, 10, 5, "empty", "estimate:bytes/4"), {}),
    (ChatSettings, ChatSettings0, (), {}),
    (
        ChatSettings,
        ChatSettings0,
        ("openai:m", "http://127.0.0.1:1/v1"),
        {"mode": "auto", "model_timeout": 9.5},
    ),
    (
        BudgetedSection,
        BudgetedSection0,
        ("## Skills\n", 9, 10, 5, "folded", "t"),
        {"listed": ["a"], "folded": ["b", "c"], "description_cap": 24},
    ),
]


def _renamed(text: str, record: type[Any], twin: type[Any]) -> str:
    return text.replace(twin.__qualname__, record.__qualname__)


@pytest.mark.parametrize(("record", "twin", "args", "kwargs"), CASES)
def test_a_record_behaves_as_its_dataclass_twin(
    record: type[Any], twin: type[Any], args: tuple[Any, ...], kwargs: dict[str, Any]
) -> None:
    ours, theirs = record(*args, **kwargs), twin(*args, **kwargs)
    assert repr(ours) == _renamed(repr(theirs), record, twin)
    values = tuple(getattr(theirs, f.name) for f in dataclasses.fields(theirs))
    assert tuple(getattr(ours, f.name) for f in dataclasses.fields(theirs)) == values
    assert ours == record(*args, **kwargs)
    assert ours != theirs  # another class, as two dataclasses never compare equal
    assert (ours == 1) is False
    try:
        expected: int | None = hash(values)
    except TypeError:
        expected = None
    if expected is None:
        with pytest.raises(TypeError, match="unhashable"):
            hash(ours)
    else:
        assert hash(ours) == hash(theirs) == expected
    assert record.__match_args__ == twin.__match_args__
    # Frozen: the same error and message for a field, and for a name that is not one.
    for name in (dataclasses.fields(theirs)[0].name, "other"):
        with pytest.raises(dataclasses.FrozenInstanceError, match=f"cannot assign to field '{name}'"):
            setattr(ours, name, 1)
        with pytest.raises(dataclasses.FrozenInstanceError, match=f"cannot delete field '{name}'"):
            delattr(ours, name)
    # What dataclasses' own functions see.
    assert dataclasses.is_dataclass(record) and dataclasses.is_dataclass(record(*args, **kwargs))
    got = [
        (f.name, f.type, f.default, f.default_factory is dataclasses.MISSING)
        for f in dataclasses.fields(ours)
    ]
    want = [
        (f.name, f.type, f.default, f.default_factory is dataclasses.MISSING)
        for f in dataclasses.fields(twin)
    ]
    assert got == want
    assert record.__dataclass_params__.frozen and record.__dataclass_params__.eq
    assert dataclasses.asdict(ours) == dataclasses.asdict(theirs)
    if record is BudgetedSection:  # its fields: strings, numbers and lists of strings
        assert ours._asdict() == dataclasses.asdict(theirs)
    first = dataclasses.fields(theirs)[0].name
    changed = dataclasses.replace(ours, **{first: getattr(theirs, first)})
    assert changed == ours and changed is not ours
    assert ours._replace() == ours
    # Made again the same way: the constructor's parameters and defaults are the dataclass's.
    ours_sig, theirs_sig = inspect.signature(record), inspect.signature(twin)
    assert [(p.name, p.kind) for p in ours_sig.parameters.values()] == [
        (p.name, p.kind) for p in theirs_sig.parameters.values()
    ]
    assert pickle.loads(pickle.dumps(ours)) == ours
    assert copy.deepcopy(ours) == ours and copy.copy(ours) == ours


def test_each_list_a_record_makes_is_its_own() -> None:
    one, two = Discovery(), Discovery()
    one.skills.append(Skill(*SKILL))
    assert two.skills == [] and one.skills != two.skills
    section = BudgetedSection("", 0, 1, 0, "empty", "t")
    section.listed.append("x")
    assert BudgetedSection("", 0, 1, 0, "empty", "t").listed == []


def test_a_dataclass_may_subclass_a_record() -> None:
    @dataclass(frozen=True)
    class Ranked(Skill):
        rank: int = 0

    ranked = Ranked(*SKILL, rank=2)
    assert [f.name for f in dataclasses.fields(ranked)][-2:] == ["tool_count", "rank"]
    assert ranked.rank == 2 and ranked.name == "notes"
    with pytest.raises(dataclasses.FrozenInstanceError, match="cannot assign to field 'rank'"):
        ranked.rank = 3  # pyright: ignore[reportAttributeAccessIssue]


def test_a_plain_subclass_keeps_its_own_attributes_assignable() -> None:
    class Noted(SkillProblem):
        pass

    noted = Noted("a", Path("/a"), "m")
    noted.extra = 1  # pyright: ignore[reportAttributeAccessIssue]
    assert noted.extra == 1  # pyright: ignore[reportAttributeAccessIssue]
    with pytest.raises(dataclasses.FrozenInstanceError, match="cannot assign to field 'name'"):
        noted.name = "b"  # pyright: ignore[reportAttributeAccessIssue]
    assert dataclasses.is_dataclass(Noted)


def test_replace_as_python_3_13_asks_it() -> None:
    # copy.replace (3.13) calls __replace__, which a dataclass defines there.
    skill = Skill(*SKILL)
    changed = skill.__replace__(enabled=False)
    assert (changed.enabled, changed.name, skill.enabled) == (False, "notes", True)


def test_threads_first_asking_for_the_fields_all_get_the_same_ones() -> None:
    # Each thread's first look-up may build a twin; all must get the one kept.
    from keen._record import FrozenRecord

    class Pair(FrozenRecord):
        left: int
        right: int
        _fields = ("left", "right")

        def __init__(self, left: int, right: int) -> None:
            self._set(left=left, right=right)

    start, seen = threading.Barrier(8), list[tuple[object, object]]()

    def ask() -> None:
        start.wait()
        seen.append((Pair.__dataclass_fields__, Pair.__dataclass_params__))

    threads = [threading.Thread(target=ask) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    kept = (Pair.__dataclass_fields__, Pair.__dataclass_params__)
    assert all(a is kept[0] and b is kept[1] for a, b in seen)


class _Slotted(FrozenRecord):
    __slots__ = ("left", "right")
    left: int
    right: list[int]
    _fields = ("left", "right")
    __match_args__ = _fields

    def __init__(self, left: int, right: list[int] | None = None) -> None:
        self._set(left=left, right=[] if right is None else right)


@dataclass(frozen=True, slots=True)
class _Slotted0:
    left: int
    right: list[int] = field(default_factory=lambda: list[int]())


def test_a_record_declaring_slots_behaves_as_a_slotted_dataclass() -> None:
    # Its fields are stored in its slots (it has no __dict__ to store them in).
    ours, theirs = _Slotted(1, [2]), _Slotted0(1, [2])
    assert repr(ours) == _renamed(repr(theirs), _Slotted, _Slotted0)
    assert (ours.left, ours.right) == (theirs.left, theirs.right) == (1, [2])
    assert not hasattr(ours, "__dict__") and not hasattr(theirs, "__dict__")
    assert ours == _Slotted(1, [2]) and ours != _Slotted(1)
    assert _Slotted(3).right == [] and _Slotted(3).right is not _Slotted(3).right
    with pytest.raises(dataclasses.FrozenInstanceError, match="cannot assign to field 'left'"):
        ours.left = 2  # pyright: ignore[reportAttributeAccessIssue]
    assert [f.name for f in dataclasses.fields(ours)] == [f.name for f in dataclasses.fields(theirs)]
    assert dataclasses.replace(ours, left=5) == _Slotted(5, [2])
    assert dataclasses.asdict(ours) == dataclasses.asdict(theirs)
    for same in (pickle.loads(pickle.dumps(ours)), copy.copy(ours), copy.deepcopy(ours)):
        assert same == ours and same.right == [2]
    assert pickle.loads(pickle.dumps(theirs)) == theirs  # as the dataclass does


class _Ranked(Skill):
    __slots__ = ("rank",)
    # A slot cannot have a default in the class body (Python refuses both): in __init__ only.
    rank: int  # pyright: ignore[reportGeneralTypeIssues]
    _fields = (*Skill._fields, "rank")
    __match_args__ = _fields

    def __init__(self, *args: Any, rank: int = 0, **fields: Any) -> None:
        super().__init__(*args, **fields)
        self._set(rank=rank)


def test_a_subclass_may_hold_a_new_field_in_a_slot() -> None:
    # Stored in the record's __dict__, the value would be hidden by the slot's descriptor.
    ranked = _Ranked(*SKILL, rank=2)
    assert (ranked.rank, ranked.name, ranked.enabled) == (2, "notes", True)
    assert repr(ranked).endswith("tool_count=None, rank=2)")
    assert pickle.loads(pickle.dumps(ranked)) == ranked == copy.deepcopy(ranked)
    with pytest.raises(dataclasses.FrozenInstanceError, match="cannot assign to field 'rank'"):
        ranked.rank = 3  # pyright: ignore[reportAttributeAccessIssue]
    # The fields it inherits are annotated in Skill, not in _Ranked's own __annotations__.
    assert [f.name for f in dataclasses.fields(ranked)] == list(_Ranked._fields)
    assert dataclasses.replace(ranked, rank=3) == _Ranked(*SKILL, rank=3)
    assert dataclasses.asdict(ranked)["rank"] == 2 and dataclasses.asdict(ranked)["name"] == "notes"


@dataclass(frozen=True)
class _Ranked0(Skill0):
    rank: int = 0


def test_a_subclass_keeps_the_defaults_of_the_fields_it_passes_on() -> None:
    # _Ranked's __init__ takes Skill's fields through *args/**fields and its own as a keyword.
    def defaults(cls: type) -> dict[str, Any]:
        return {
            f.name: f.default if f.default is not dataclasses.MISSING else f.default_factory
            for f in dataclasses.fields(cls)
        }

    assert defaults(_Ranked) == defaults(_Ranked0)

    @dataclass(frozen=True)
    class Extra(_Ranked):
        extra: int = 0

    made = Extra(*SKILL, rank=1, extra=3)
    assert (made.rank, made.extra, made.enabled) == (1, 3, True)


def test_a_plain_subclass_adding_a_field_is_a_dataclass_too() -> None:
    class Tagged(Skill):
        # Its default is given in __init__, as _Ranked's is.
        tag: str  # pyright: ignore[reportGeneralTypeIssues]
        _fields = (*Skill._fields, "tag")
        __match_args__ = _fields

        def __init__(self, *args: Any, tag: str = "", **fields: Any) -> None:
            super().__init__(*args, **fields)
            self._set(tag=tag)

    # Skill's fields asked first: set on Skill, they must not be what Tagged's look-up finds.
    assert "tag" not in {f.name for f in dataclasses.fields(Skill(*SKILL))}
    tagged = Tagged(*SKILL, tag="x")
    assert [f.name for f in dataclasses.fields(tagged)] == list(Tagged._fields)
    assert dataclasses.asdict(tagged)["tag"] == "x"


@pytest.mark.parametrize("protocol", range(pickle.HIGHEST_PROTOCOL + 1))
def test_a_slotted_record_pickles_at_every_protocol(protocol: int) -> None:
    # Protocols 0 and 1 refuse a class with __slots__ and object's own __getstate__.
    for record, twin in ((_Slotted(1, [2]), _Slotted0(1, [2])), (_Ranked(*SKILL, rank=2), None)):
        assert pickle.loads(pickle.dumps(record, protocol)) == record
        if twin is not None:
            assert pickle.loads(pickle.dumps(twin, protocol)) == twin  # as the dataclass does
    plain = Skill(*SKILL)
    assert pickle.loads(pickle.dumps(plain, protocol)) == plain


def test_a_record_whose_slots_leave_out_a_field_is_refused_where_it_is_declared() -> None:
    # With no __dict__ and no slot, the field could not be stored: said at once, by name.
    with pytest.raises(TypeError, match=r"record .*Half: .* no slot for the field\(s\) right"):

        class Half(FrozenRecord):  # pyright: ignore[reportUnusedClass]
            __slots__ = ("left",)
            left: int
            right: int = 0
            _fields = ("left", "right")
