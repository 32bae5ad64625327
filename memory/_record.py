"""`record`: the memory package's immutable value classes, as dataclasses that cost a hook
process a fifth of what `@dataclass(frozen=True, slots=True)` does.

Why not `dataclass(frozen=True)` itself: CPython 3.11 writes the source of each generated
method (`__init__`, `__repr__`, `__eq__`, `__hash__`, and for `frozen` `__setattr__` and
`__delattr__`) and compiles it with its own `exec`, ~0.4-1 ms a class. A direct prompt hook
builds ~54 of them on every prompt: ~35 ms of a 150 ms budget (docs/claude-code.md, "The direct
prompt hook"). Here `dataclass` generates only `__init__` (and the slots); equality, hashing
and `repr` are three shared functions over the fields, with the dataclass semantics: equal
when the class is the same and the compared fields are equal, the hash of those fields, the
`repr` of the fields shown.

Immutability is the type checker's: `dataclass_transform(frozen_default=True)` makes mypy
(run in CI) refuse any assignment to a field of a record, as it does for a frozen dataclass.
At run time an assignment is not stopped (that is the `__setattr__` the cost above buys), so
`dataclasses.replace` stays the way to change a value, as before.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from operator import attrgetter
from typing import TYPE_CHECKING, Any, TypeVar, cast, overload

if TYPE_CHECKING:  # `frozen_default` is typed from Python 3.12 on; 3.11 accepts it at run time
    from typing_extensions import dataclass_transform
else:
    from typing import dataclass_transform

__all__ = ["record"]

_T = TypeVar("_T")

_KEY = "__record_key__"
"""Class attribute: the function giving the tuple of compared fields of an instance."""


def _key(instance: object) -> tuple[object, ...]:
    getter: Callable[[object], tuple[object, ...]] = getattr(type(instance), _KEY)
    return getter(instance)


def _eq(self: object, other: object) -> bool:
    if other.__class__ is not self.__class__:
        return cast(bool, NotImplemented)  # what `==` expects of `__eq__`, typed as a bool
    same: bool = _key(self) == _key(other)
    return same


def _hash(self: object) -> int:
    return hash(_key(self))


def _repr(self: object) -> str:
    shown = ", ".join(
        f"{field.name}={getattr(self, field.name)!r}"
        for field in dataclasses.fields(self)  # type: ignore[arg-type]
        if field.repr
    )
    return f"{type(self).__qualname__}({shown})"


def _tuple_getter(names: list[str]) -> Callable[[object], tuple[object, ...]]:
    if not names:
        return lambda _instance: ()
    if len(names) == 1:
        one = attrgetter(names[0])
        return lambda instance: (one(instance),)
    getter: Callable[[object], tuple[object, ...]] = attrgetter(*names)
    return getter


def _finish(cls: type[_T], slots: bool) -> type[_T]:
    made: Any = dataclasses.dataclass(cls, eq=False, repr=False, slots=slots)
    names = [field.name for field in dataclasses.fields(made) if field.compare]
    setattr(made, _KEY, staticmethod(_tuple_getter(names)))
    own = cls.__dict__
    if "__eq__" not in own:
        made.__eq__ = _eq
    if own.get("__hash__") is None:  # as a frozen dataclass: the fields' hash unless written
        made.__hash__ = _hash
    if "__repr__" not in own:
        made.__repr__ = _repr
    result: type[_T] = made
    return result


@overload
def record(cls: type[_T], /) -> type[_T]: ...
@overload
def record(*, slots: bool = True) -> Callable[[type[_T]], type[_T]]: ...


@dataclass_transform(frozen_default=True, field_specifiers=(dataclasses.field, dataclasses.Field))
def record(cls: type[_T] | None = None, /, *, slots: bool = True) -> Any:
    """`@record` or `@record(slots=False)` on a class with annotated fields, as
    `@dataclass(frozen=True, slots=True)` (see the module docstring for what differs)."""
    if cls is None:
        return lambda inner: _finish(inner, slots)
    return _finish(cls, slots)
