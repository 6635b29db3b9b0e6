"""Frozen records: what ``@dataclass(frozen=True)`` gives a class, without importing
:mod:`dataclasses` on a prompt's path.

Importing :mod:`dataclasses` imports :mod:`inspect` (with ``ast``, ``dis``, ``tokenize``):
about 40 million instructions, and each frozen dataclass compiles six methods from source as
it is made (about 4 million each), together about 30% of what ``keen prompt`` and a host's
``keen.prompt.budgeted_prompt`` did beyond the interpreter (docs/architecture.md "Prompt
start"). The few public records made on that path (``Skill``, ``SkillProblem``,
``Discovery``, ``TokenCounter``, ``BudgetedSection``) subclass :class:`FrozenRecord`
instead: their ``__init__`` is written in the class (compiled once, into the bytecode cache)
and this base gives what the decorator would (``__repr__``, ``__eq__``, ``__hash__``,
assignment refused with :class:`dataclasses.FrozenInstanceError`). They stay dataclasses to
anyone who asks: ``__dataclass_fields__`` and ``__dataclass_params__`` are made at their
first look-up, by :func:`dataclasses.dataclass` over the same declaration, so
:func:`dataclasses.is_dataclass`, :func:`~dataclasses.fields`,
:func:`~dataclasses.replace`, :func:`~dataclasses.asdict` and a ``@dataclass`` subclass work
as before (``tests/test_record.py`` compares each record with its dataclass twin).
"""

from __future__ import annotations

import _thread
from types import MemberDescriptorType  # imported by typing already
from typing import Any, ClassVar, Self, dataclass_transform

__all__ = ["FrozenRecord"]

# A lock from ``_thread``: the ``threading`` module is not imported on a prompt's path.
_SETTING = _thread.allocate_lock()


class _DataclassView:
    """``__dataclass_fields__`` / ``__dataclass_params__`` of a record, made at the first
    look-up (module doc) and then kept on the record's class."""

    def __init__(self, attr: str) -> None:
        self.attr = attr

    def __get__(self, instance: object, owner: type[Any]) -> Any:
        # The record class that declares the fields: ``owner`` or the one it subclasses.
        owner = next(c for c in owner.__mro__ if "_fields" in c.__dict__)
        if owner is FrozenRecord:
            raise AttributeError(self.attr)
        import dataclasses
        import inspect  # imported by dataclasses already

        fields: tuple[str, ...] = owner._fields
        # A subclass's own ``__annotations__`` hold only the fields it adds: the ones it
        # inherits are annotated in the classes above it.
        annotations: dict[str, Any] = {}
        for cls in reversed(owner.__mro__):
            annotations.update(inspect.get_annotations(cls))
        namespace: dict[str, Any] = {
            "__annotations__": {name: annotations[name] for name in fields},
            "__module__": owner.__module__,
            "__qualname__": owner.__qualname__,
            "__doc__": owner.__doc__,
        }
        # Defaults by name, from ``__init__``'s parameters (keyword-only ones included); a
        # field it passes on through ``*args``/``**fields`` has the default the record above
        # gives it.
        params = inspect.signature(owner.__init__).parameters
        above = next((c for c in owner.__mro__[1:] if "_fields" in c.__dict__), FrozenRecord)
        inherited = {} if above is FrozenRecord else above.__dataclass_fields__
        for name in fields:
            param = params.get(name)
            if param is not None and param.kind not in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
                if param.default is not param.empty:
                    new_list = name in owner._new_lists
                    namespace[name] = dataclasses.field(default_factory=list) if new_list else param.default
            elif name in inherited:
                field = inherited[name]
                if (
                    field.default is not dataclasses.MISSING
                    or field.default_factory is not dataclasses.MISSING
                ):
                    namespace[name] = dataclasses.field(
                        default=field.default, default_factory=field.default_factory
                    )
        twin: Any = dataclasses.dataclass(frozen=True)(type(owner.__name__, (), namespace))
        # Threads looking up at once may each build a twin: the first pair set is the one
        # every caller gets, so fields and params come from one twin and keep their identity.
        with _SETTING:
            if isinstance(owner.__dict__["__dataclass_fields__"], _DataclassView):
                type.__setattr__(owner, "__dataclass_params__", twin.__dataclass_params__)
                type.__setattr__(owner, "__dataclass_fields__", twin.__dataclass_fields__)
        return owner.__dict__[self.attr]


@dataclass_transform(frozen_default=True)
class FrozenRecord:
    """Base of a frozen record (module doc). A subclass declares its fields as annotations,
    lists them in ``_fields`` (and ``__match_args__``), writes ``__init__`` with the fields
    as parameters in that order (defaults as the dataclass would have them; a list field new
    per instance, ``default_factory=list``, defaults to ``None`` and is named in
    ``_new_lists``) and stores them with :meth:`_set`. A record may declare ``__slots__``, as
    ``@dataclass(frozen=True, slots=True)`` would: its fields are then stored in the slots;
    without a ``__dict__``, a field with no slot raises TypeError where the class is declared."""

    __slots__ = ()
    _fields: ClassVar[tuple[str, ...]] = ()
    _new_lists: ClassVar[tuple[str, ...]] = ()
    _slotted: ClassVar[bool] = False
    __dataclass_fields__: ClassVar[Any] = _DataclassView("__dataclass_fields__")
    __dataclass_params__: ClassVar[Any] = _DataclassView("__dataclass_params__")

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        # A field declared in ``__slots__`` is a descriptor on the class that shadows the
        # instance's ``__dict__``: stored there, its value would never be read back. Such a
        # record sets its fields one by one, through the slots, as a frozen dataclass does.
        slots = {name for name in cls._fields if isinstance(getattr(cls, name, None), MemberDescriptorType)}
        if not cls.__dictoffset__ and (stray := [n for n in cls._fields if n not in slots]):
            raise TypeError(
                f"record {cls.__qualname__}: its instances have no __dict__ and no slot for the"
                f" field(s) {', '.join(stray)}: name them in __slots__ too (without a default in"
                " the class body) or leave __slots__ out"
            )
        cls._slotted = bool(slots)
        if "_fields" in cls.__dict__:
            # Its own views: the fields a parent record's view already set on the parent's
            # class would otherwise be what a look-up on this one finds first.
            cls.__dataclass_fields__ = _DataclassView("__dataclass_fields__")
            cls.__dataclass_params__ = _DataclassView("__dataclass_params__")

    def _set(self, **values: Any) -> None:
        """Store the fields' values (``__init__`` only: assignment is refused afterwards)."""
        if self._slotted:
            for name, value in values.items():
                object.__setattr__(self, name, value)
        else:
            self.__dict__.update(values)

    def __getstate__(self) -> Any:
        """What :meth:`object.__getstate__` gives (``__dict__``, or ``(None, {slot: value})``
        for a record with slots), written out here: pickle's protocols 0 and 1 refuse a class
        with ``__slots__`` that inherits ``object``'s, where a slotted dataclass pickles."""
        return object.__getstate__(self)

    def __setstate__(self, state: Any) -> None:
        """Restore a pickled or copied record: its ``__dict__``, or its slots' values
        (``(None, {slot: value})``, as :meth:`object.__getstate__` gives them), set past
        the refused assignment, as ``@dataclass(frozen=True, slots=True)`` restores them."""
        own, slotted = state if isinstance(state, tuple) else (state, None)
        for values in (own, slotted):
            for name, value in (values or {}).items():
                object.__setattr__(self, name, value)

    def _values(self) -> tuple[Any, ...]:
        return tuple([getattr(self, name) for name in self._fields])

    def _replace(self, **changes: Any) -> Self:
        """A copy with ``changes`` (:func:`dataclasses.replace` without importing it)."""
        values = {name: getattr(self, name) for name in self._fields}
        values.update(changes)
        return type(self)(**values)

    def __replace__(self, /, **changes: Any) -> Self:
        """:func:`copy.replace` (Python 3.13), as a dataclass answers it."""
        return self._replace(**changes)

    def _asdict(self) -> dict[str, Any]:
        """The fields by name, lists copied (as :func:`dataclasses.asdict` gives them for
        fields of strings, numbers and lists of those)."""
        return {name: list(v) if isinstance(v := getattr(self, name), list) else v for name in self._fields}

    def __repr__(self) -> str:
        body = ", ".join(f"{name}={getattr(self, name)!r}" for name in self._fields)
        return f"{type(self).__qualname__}({body})"

    def __eq__(self, other: object) -> bool:
        if other.__class__ is self.__class__:
            return self._values() == other._values()  # pyright: ignore[reportAttributeAccessIssue]
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self._values())

    def __setattr__(self, name: str, value: object) -> None:
        if "_fields" in type(self).__dict__ or name in self._fields:
            import dataclasses

            raise dataclasses.FrozenInstanceError(f"cannot assign to field {name!r}")
        super().__setattr__(name, value)

    def __delattr__(self, name: str) -> None:
        if "_fields" in type(self).__dict__ or name in self._fields:
            import dataclasses

            raise dataclasses.FrozenInstanceError(f"cannot delete field {name!r}")
        super().__delattr__(name)
