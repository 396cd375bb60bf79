"""The quick validity check never says yes where fastavro says no: it may only send more records to it."""

from __future__ import annotations

import copy
import datetime as dt
import json
from decimal import Decimal
from typing import Any

import pytest
from fastavro.validation import validate

from suanli.contracts import default_registry, sample_records
from suanli.contracts.fastcheck import compile_check

REGISTRY = default_registry()
VERSIONS = [sv for name in REGISTRY.event_names() for sv in REGISTRY.versions(name)]
# Values of the wrong kind for some type, each of which fastavro's writer would coerce or choke on.
WRONG = [1.5, True, "7", b"x", None, 2**40, -(2**70), [1], {"a": 1}, dt.datetime(2026, 1, 1), Decimal("1.5")]


def mutations(record: dict[str, Any]) -> list[dict[str, Any]]:
    """Every top-level field replaced by every wrong value, nested lists and dicts emptied or poisoned, and
    every field removed once."""
    out = []
    for name, value in record.items():
        for wrong in WRONG:
            out.append({**record, name: wrong})
        if isinstance(value, list) and value:
            out.append({**record, name: [*value, 1.5]})
        if isinstance(value, dict) and value:
            poisoned = copy.deepcopy(value)
            poisoned[next(iter(poisoned))] = 1.5
            out.append({**record, name: poisoned})
        out.append({k: v for k, v in record.items() if k != name})
    return out


@pytest.mark.parametrize("sv", VERSIONS, ids=lambda sv: f"{sv.event_name}.v{sv.version}")
def test_quick_yes_implies_fastavro_yes(sv: Any) -> None:
    check = compile_check(sv.parsed)
    samples = sample_records(sv.raw)
    assert samples
    quick_yes = 0
    for record in samples:
        for candidate in [record, *mutations(record)]:
            if check(candidate):
                quick_yes += 1
                assert validate(candidate, sv.parsed, raise_errors=False), (sv.event_name, candidate)
    if '"decimal"' not in json.dumps(sv.raw):  # decimals are always left to fastavro
        assert quick_yes >= 1  # the samples themselves take the quick path


def test_quick_check_takes_the_common_record_shape() -> None:
    sv = REGISTRY.current("NodeStatusChanged")
    record = sample_records(sv.raw)[0]
    assert compile_check(sv.parsed)(record)
    assert not compile_check(sv.parsed)({**record, "occurred_at": dt.datetime(2026, 1, 1)})  # naive time
