"""Parsing and formatting of the human quantities in a job spec."""

from __future__ import annotations

import pytest

from suanli.jobspec.units import (
    format_cpu,
    format_duration,
    format_memory,
    parse_cpu_milli,
    parse_duration_s,
    parse_memory_mib,
)


@pytest.mark.parametrize(
    ("given", "milli"),
    [("4", 4000), (4, 4000), (0.5, 500), ("0.25", 250), ("4000m", 4000), ("250m", 250), (" 2 ", 2000)],
)
def test_cpu_accepts_cores_and_milli_cores(given: object, milli: int) -> None:
    assert parse_cpu_milli(given) == milli


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ("4x", "must be cores"),
        (True, "must be cores"),
        ("0.0005", "whole number of milli-cores"),
        ("1.5m", "whole number of milli-cores"),
        (0, "must be > 0"),
        ("-1", "must be > 0"),
    ],
)
def test_cpu_rejects(given: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_cpu_milli(given)


@pytest.mark.parametrize(
    ("given", "mib"),
    [
        ("16Gi", 16384),
        ("512Mi", 512),
        ("1Ti", 1024**2),
        ("1.5Gi", 1536),
        ("2048Ki", 2),
        ("1G", 954),
        ("1Ki", 1),
    ],
)
def test_memory_in_mib_rounded_up(given: str, mib: int) -> None:
    assert parse_memory_mib(given) == mib


@pytest.mark.parametrize("given", [16, "16", "16GB", "Gi", "0Gi", "-1Gi"])
def test_memory_needs_a_positive_amount_and_a_unit(given: object) -> None:
    with pytest.raises(ValueError, match=r"must be (an amount with a unit|> 0)"):
        parse_memory_mib(given)


@pytest.mark.parametrize(
    ("given", "seconds"),
    [
        ("90s", 90.0),
        ("5m", 300.0),
        ("1h30m", 5400.0),
        ("250ms", 0.25),
        ("2d", 172800.0),
        (45, 45.0),
        (2.5, 2.5),
        ("0s", 0.0),
    ],
)
def test_duration(given: object, seconds: float) -> None:
    assert parse_duration_s(given) == seconds


@pytest.mark.parametrize("given", ["5q", "m5", "5 m", "", "1h 30m", True, -3])
def test_duration_rejects(given: object) -> None:
    with pytest.raises(ValueError, match="must be"):
        parse_duration_s(given)


@pytest.mark.parametrize(("milli", "text"), [(4000, "4"), (500, "500m"), (2500, "2500m")])
def test_format_cpu(milli: int, text: str) -> None:
    assert format_cpu(milli) == text
    assert parse_cpu_milli(text) == milli


@pytest.mark.parametrize(
    ("mib", "text"), [(16384, "16Gi"), (512, "512Mi"), (1024**2, "1Ti"), (1536, "1536Mi")]
)
def test_format_memory(mib: int, text: str) -> None:
    assert format_memory(mib) == text
    assert parse_memory_mib(text) == mib


@pytest.mark.parametrize(("seconds", "text"), [(5400, "1h30m"), (90, "1m30s"), (3601, "1h1s"), (2.5, "2.5s")])
def test_format_duration(seconds: float, text: str) -> None:
    assert format_duration(seconds) == text
    assert parse_duration_s(text) == seconds
