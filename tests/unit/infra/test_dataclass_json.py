"""The kernel's dataclass JSON: every kind of annotation it reads round-trips, defaults may be left out
and come back, and anything that is not what the type says is a StateDecodeError, never another error."""

from __future__ import annotations

import json
import threading
import types
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta, timezone
from enum import Enum, StrEnum
from typing import Any

import pytest

from suanli.infra.dataclass_json import StateDecodeError, TaggedCodec, dumps, loads


class Colour(StrEnum):
    RED = "RED"
    BLUE = "BLUE"


class Level(Enum):
    LOW = 1
    HIGH = 2


@dataclass(frozen=True, slots=True)
class Leaf:
    name: str
    weight: float = 0.0


@dataclass(frozen=True, slots=True)
class Other:
    count: int


@dataclass(frozen=True, slots=True)
class Everything:
    number: int
    text: str
    flag: bool
    ratio: float
    at: datetime
    colour: Colour
    level: Level
    leaf: Leaf
    leaves: tuple[Leaf, ...]
    pair: tuple[str, int]
    pairs: tuple[tuple[str, datetime], ...]
    maybe: int | None
    either: Leaf | Other
    counts: dict[str, int]
    frozen: types.MappingProxyType[str, Leaf]
    anything: Any
    when: datetime | None = None
    labels: tuple[str, ...] = ()
    limit: float | None = None
    made: tuple[str, ...] = field(default_factory=tuple)  # never left out: a factory need not repeat itself


@dataclass(frozen=True, slots=True)
class Tree:
    label: str
    children: tuple[Tree, ...] = ()


def _everything(**changes: Any) -> Everything:
    values: dict[str, Any] = {
        "number": 7,
        "text": "seven",
        "flag": True,
        "ratio": 0.5,
        "at": datetime(2026, 12, 2, 16, 0, 1, 250, tzinfo=timezone(timedelta(hours=8))),
        "colour": Colour.BLUE,
        "level": Level.HIGH,
        "leaf": Leaf("a", 1.5),
        "leaves": (Leaf("b"), Leaf("c", 2.0)),
        "pair": ("x", 1),
        "pairs": (("y", datetime(2026, 1, 1, tzinfo=UTC)),),
        "maybe": None,
        "either": Other(3),
        "counts": {"a": 1},
        "frozen": types.MappingProxyType({"k": Leaf("d")}),
        "anything": {"nested": [1, "two", None]},
        "when": datetime(2026, 1, 2, tzinfo=UTC),
        "labels": ("l",),
        "limit": 2.5,
        "made": ("m",),
    }
    return Everything(**(values | changes))


@pytest.mark.parametrize("omit_defaults", [False, True])
def test_every_kind_of_field_round_trips(omit_defaults: bool) -> None:
    for value in (_everything(), _everything(maybe=4, either=Leaf("e"), when=None, labels=(), limit=None)):
        assert loads(Everything, dumps(value, omit_defaults=omit_defaults)) == value
    tree = Tree("root", (Tree("a"), Tree("b", (Tree("c"),))))
    assert loads(Tree, dumps(tree, omit_defaults=omit_defaults)) == tree


def test_defaults_are_left_out_only_when_asked_and_only_plain_ones() -> None:
    value = _everything(when=None, labels=(), limit=None, made=())
    full, lean = json.loads(dumps(value)), json.loads(dumps(value, omit_defaults=True))
    assert set(full) - set(lean) == {"when", "labels", "limit"}
    assert lean["made"] == [] and lean["leaves"] == [{"name": "b"}, {"name": "c", "weight": 2.0}]
    # A value equal to the default but of another type is kept, so it reads back as it was written.
    assert json.loads(dumps(Leaf("z", 0), omit_defaults=True)) == {"name": "z", "weight": 0}


def test_an_int_reads_as_a_float_and_unknown_keys_are_ignored() -> None:
    assert loads(Leaf, b'{"name": "a", "weight": 2, "added_later": [1]}') == Leaf("a", 2.0)


def test_output_is_compact_with_sorted_keys() -> None:
    assert dumps(Leaf("a", 1.0)) == b'{"name":"a","weight":1.0}'
    assert dumps({"b": 1, "a": Colour.RED}) == b'{"a":"RED","b":1}'


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"not json",
        b'{"name": "a", "weight": 1',
        b"[]",
        b'"Leaf"',
        b'{"weight": 1.0}',
        b'{"name": 1}',
        b'{"name": "a", "weight": "heavy"}',
        b'{"name": "a", "weight": true}',
        b'{"name": null}',
    ],
)
def test_a_leaf_that_is_not_one_is_a_decode_error(data: bytes) -> None:
    with pytest.raises(StateDecodeError):
        loads(Leaf, data)


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("number", True),
        ("number", 1.5),
        ("flag", 1),
        ("at", "yesterday"),
        ("at", 0),
        ("colour", "GREEN"),
        ("colour", ["RED"]),
        ("level", "LOW"),
        ("leaves", "abc"),  # an array, not text that happens to iterate
        ("leaves", {"name": "b"}),
        ("pair", ["x"]),
        ("pair", ["x", 1, 2]),
        ("pairs", [["y", "not a time"]]),
        ("either", {"neither": 1}),
        ("counts", [["a", 1]]),
        ("counts", {"a": "one"}),
        ("frozen", [1]),
        ("maybe", "4"),
    ],
)
def test_a_field_that_is_not_its_type_is_a_decode_error(key: str, value: Any) -> None:
    document = json.loads(dumps(_everything()))
    document[key] = value
    with pytest.raises(StateDecodeError):
        loads(Everything, json.dumps(document))


def test_the_tagged_codec_reads_back_each_class_and_refuses_others() -> None:
    codec = TaggedCodec(Leaf, Other)
    assert codec.loads(codec.dumps(Other(2))) == Other(2)
    assert codec.loads(codec.dumps(Leaf("a"))) == Leaf("a")
    with pytest.raises(TypeError):
        codec.dumps(Tree("t"))
    for garbage in (b"{}", b'{"type": "Tree", "data": {}}', b'{"type": "Other", "data": {"count": "2"}}'):
        with pytest.raises(StateDecodeError):
            codec.loads(garbage)


def test_threads_decoding_a_new_type_at_once_all_get_it_whole() -> None:
    @dataclass(frozen=True, slots=True)
    class Fresh:
        inner: Tree
        leaves: tuple[Leaf, ...]

    value = Fresh(Tree("r", (Tree("c"),)), (Leaf("a"),))
    data, start = dumps(value), threading.Barrier(4)
    results: list[Any] = []

    def decode() -> None:
        start.wait(timeout=10)
        results.append(loads(Fresh, data))

    threads = [threading.Thread(target=decode) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=10)
    assert results == [value] * 4
