"""Human quantities in a job spec (cpu "4" or "4000m", memory "16Gi", duration "5m") and back.

Parsers raise `ValueError` with a message written for the person who typed the value; the model turns
it into a field-path error. Formatters pick the shortest exact spelling, so a spec read back from the
scheduler prints the way a person would have written it.
"""

from __future__ import annotations

import math
import re
from decimal import Decimal, InvalidOperation

MILLI_PER_CORE = 1000
BYTES_PER_MIB = 1024**2

_MEMORY_FACTORS: dict[str, int] = {
    "Ki": 1024,
    "Mi": 1024**2,
    "Gi": 1024**3,
    "Ti": 1024**4,
    "k": 1000,
    "K": 1000,
    "M": 1000**2,
    "G": 1000**3,
    "T": 1000**4,
}
_MEMORY = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([A-Za-z]+)\s*$")
_DURATION_FACTORS: dict[str, float] = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d)")


def _decimal(text: str) -> Decimal | None:
    try:
        value = Decimal(text)
    except InvalidOperation:
        return None
    return value if value.is_finite() else None


def _number(value: object) -> Decimal | None:
    """A YAML number (int or float, never bool) as an exact decimal."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return _decimal(repr(value))


def parse_cpu_milli(value: object) -> int:
    """Cores ("4", 4, 0.5) or milli-cores ("500m") to milli-cores."""
    if isinstance(value, str) and value.strip().endswith("m"):
        amount = _decimal(value.strip()[:-1])
        scale = 1
    else:
        amount = _number(value) if not isinstance(value, str) else _decimal(value.strip())
        scale = MILLI_PER_CORE
    if amount is None:
        raise ValueError(f'must be cores ("4", 0.5) or milli-cores ("500m") (got {value!r})')
    milli = amount * scale
    if milli != milli.to_integral_value():
        raise ValueError(f"must be a whole number of milli-cores (got {value!r})")
    if milli <= 0:
        raise ValueError(f"must be > 0 (got {value!r})")
    return int(milli)


def parse_memory_mib(value: object) -> int:
    """Memory like "16Gi", "512Mi", "8G" to MiB, rounded up so a request is never smaller than asked."""
    match = _MEMORY.match(value) if isinstance(value, str) else None
    unit = match.group(2) if match else ""
    if match is None or unit not in _MEMORY_FACTORS:
        raise ValueError(
            f'must be an amount with a unit, Ki/Mi/Gi/Ti or k/M/G/T, e.g. "16Gi" (got {value!r})'
        )
    size_bytes = Decimal(match.group(1)) * _MEMORY_FACTORS[unit]
    if size_bytes <= 0:
        raise ValueError(f"must be > 0 (got {value!r})")
    return math.ceil(size_bytes / BYTES_PER_MIB)


def parse_duration_s(value: object) -> float:
    """A duration like "90s", "5m", "1h30m", "250ms" or a number of seconds, in seconds."""
    if isinstance(value, str):
        text = value.strip()
        parts = _DURATION_PART.findall(text)
        if not parts or "".join(n + u for n, u in parts) != text:
            raise ValueError(f'must be like "90s", "5m", "1h30m" or a number of seconds (got {value!r})')
        seconds = sum(float(n) * _DURATION_FACTORS[u] for n, u in parts)
    else:
        amount = _number(value)
        if amount is None:
            raise ValueError(f'must be like "90s", "5m", "1h30m" or a number of seconds (got {value!r})')
        seconds = float(amount)
    if seconds < 0:
        raise ValueError(f"must be >= 0 (got {value!r})")
    return seconds


def format_cpu(cpu_milli: int) -> str:
    """Milli-cores as the spec writes them: whole cores ("4") or milli-cores ("2500m")."""
    return str(cpu_milli // MILLI_PER_CORE) if cpu_milli % MILLI_PER_CORE == 0 else f"{cpu_milli}m"


def format_memory(memory_mib: int) -> str:
    """MiB in the largest binary unit that divides it exactly ("24Gi", "512Mi")."""
    for unit, factor in (("Ti", 1024**2), ("Gi", 1024)):
        if memory_mib and memory_mib % factor == 0:
            return f"{memory_mib // factor}{unit}"
    return f"{memory_mib}Mi"


def format_duration(seconds: float) -> str:
    """Whole seconds as "1h30m" / "90s"; anything finer as plain seconds ("2.5s")."""
    if not seconds or seconds != int(seconds):
        return f"{seconds:g}s"
    remaining = int(seconds)
    parts = []
    for unit, factor in (("h", 3600), ("m", 60), ("s", 1)):
        amount, remaining = divmod(remaining, factor)
        if amount:
            parts.append(f"{amount}{unit}")
    return "".join(parts)
