"""`memory._record.record`: the value semantics of `dataclass(frozen=True)` that callers rely
on (equality, hashing, `repr`, `replace`), built without its per-class `exec`s."""

from __future__ import annotations

import dataclasses
import pickle

import pytest

from memory._record import record


@record
class Point:
    """A record with a default and a field left out of comparisons."""

    x: int
    y: int = 0
    label: str = dataclasses.field(default="", compare=False, repr=False)


@record(slots=False)
class Tags:
    """A record without slots, with a mutable default built per instance."""

    names: list[str] = dataclasses.field(default_factory=list)


@record
class Custom:
    """A record keeping the equality its class defines."""

    value: str

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Custom) and self.value.lower() == other.value.lower()

    def __hash__(self) -> int:
        return hash(self.value.lower())


@pytest.mark.parametrize(
    ("left", "right", "equal"),
    [
        (Point(1, 2), Point(1, 2), True),
        (Point(1, 2), Point(1, 3), False),
        (Point(1, 2, label="a"), Point(1, 2, label="b"), True),  # compare=False
        (Point(1), Point(1, 0), True),
        (Tags(["a"]), Tags(["a"]), True),
        (Tags(["a"]), Tags(["b"]), False),
        (Custom("A"), Custom("a"), True),
        (Point(1, 2), (1, 2), False),  # another class is never equal, as with dataclasses
    ],
)
def test_equality_follows_the_compared_fields(left: object, right: object, equal: bool) -> None:
    assert (left == right) is equal
    assert (left != right) is not equal


def test_equal_records_hash_alike_and_work_as_keys() -> None:
    seen = {Point(1, 2, label="first"): "kept"}
    assert seen[Point(1, 2, label="other")] == "kept"
    assert hash(Custom("X")) == hash(Custom("x"))
    assert len({Point(1), Point(1, 0), Point(2)}) == 2


def test_repr_shows_the_fields_a_dataclass_shows() -> None:
    assert repr(Point(1, 2, label="hidden")) == "Point(x=1, y=2)"
    assert repr(Tags(["a"])) == "Tags(names=['a'])"


def test_records_are_dataclasses_with_slots_replace_and_pickle() -> None:
    point = Point(1, 2, label="a")
    assert dataclasses.is_dataclass(point)
    assert not hasattr(point, "__dict__")  # slots, as `slots=True`
    assert dataclasses.replace(point, y=5) == Point(1, 5)
    assert dataclasses.asdict(point) == {"x": 1, "y": 2, "label": "a"}
    assert pickle.loads(pickle.dumps(point)) == point
    assert Tags().names is not Tags().names
    with pytest.raises(TypeError):
        Point()  # type: ignore[call-arg]


@record
class OwnEquality:
    """A record that writes `__eq__` but no `__hash__`: hashed by its fields, as a frozen
    dataclass would be."""

    value: int

    def __eq__(self, other: object) -> bool:
        return isinstance(other, OwnEquality) and self.value % 10 == other.value % 10


def test_a_record_writing_only_eq_is_hashed_by_its_fields() -> None:
    assert OwnEquality(3) == OwnEquality(13)
    assert hash(OwnEquality(3)) == hash(OwnEquality(3)) != hash(OwnEquality(4))
