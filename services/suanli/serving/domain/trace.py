"""The Azure LLM inference trace (traces/azure_llm/README.md) as arrays: offsets, context, generated tokens.

`parse_trace` is pure (CSV text in); the offset of a request is its timestamp minus the first request's, in
seconds. Timestamps carry 100 ns digits (`2023-11-16 18:15:46.6805900`), one more than Python parses, so
the fraction is read separately.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from datetime import UTC, datetime

import numpy as np
import numpy.typing as npt

COLUMNS = ("TIMESTAMP", "ContextTokens", "GeneratedTokens")


class TraceError(ValueError):
    """A trace that cannot be read; the message names the line."""


@dataclass(frozen=True, slots=True)
class Trace:
    offset_s: npt.NDArray[np.float64]
    context_tokens: npt.NDArray[np.int64]
    generated_tokens: npt.NDArray[np.int64]

    def __len__(self) -> int:
        return len(self.offset_s)

    def window(self, start_s: float, end_s: float) -> Trace:
        """The requests arriving in [start_s, end_s), offsets kept."""
        keep = (self.offset_s >= start_s) & (self.offset_s < end_s)
        return Trace(self.offset_s[keep], self.context_tokens[keep], self.generated_tokens[keep])

    def rebased(self, start_s: float) -> Trace:
        """The same requests with offsets counted from `start_s` (a window replayed from 0)."""
        return Trace(self.offset_s - start_s, self.context_tokens, self.generated_tokens)

    def compressed(self, speed: float) -> Trace:
        """The same requests with the time between them divided by `speed` (`--speed 10`)."""
        if not speed > 0:
            raise ValueError(f"speed must be above 0 (got {speed})")
        return Trace(self.offset_s / speed, self.context_tokens, self.generated_tokens)

    def per_minute(self) -> npt.NDArray[np.int64]:
        """Requests in each whole minute of the offsets (the last minute may be partial)."""
        return np.bincount((self.offset_s // 60).astype(np.int64)) if len(self) else np.zeros(0, np.int64)


def _seconds(text: str, line: int) -> float:
    whole, _, fraction = text.strip().partition(".")
    try:
        at = datetime.fromisoformat(whole).replace(tzinfo=UTC)
        return at.timestamp() + (float(f"0.{fraction}") if fraction else 0.0)
    except ValueError:
        raise TraceError(f"line {line}: TIMESTAMP {text!r} is not a date-time") from None


def parse_trace(text: str) -> Trace:
    """The trace from its CSV text; `TraceError` names the first bad line."""
    reader = csv.DictReader(io.StringIO(text))
    missing = [c for c in COLUMNS if c not in (reader.fieldnames or ())]
    if missing:
        raise TraceError(f"trace lacks columns {missing}")
    times: list[float] = []
    context: list[int] = []
    generated: list[int] = []
    for line, row in enumerate(reader, start=2):
        times.append(_seconds(row["TIMESTAMP"], line))
        try:
            c, g = int(row["ContextTokens"]), int(row["GeneratedTokens"])
        except (TypeError, ValueError):
            raise TraceError(f"line {line}: token counts must be integers") from None
        if c < 1 or g < 1:
            raise TraceError(f"line {line}: token counts must be at least 1 (got {c}, {g})")
        context.append(c)
        generated.append(g)
    if not times:
        raise TraceError("trace has no requests")
    at = np.asarray(times)
    order = np.argsort(at, kind="stable")
    return Trace(at[order] - at[order][0], np.asarray(context)[order], np.asarray(generated)[order])
