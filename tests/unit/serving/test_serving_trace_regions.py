"""The trace parser (pure) and the apportioning of replicas over regions by demand."""

from __future__ import annotations

import pytest

from suanli.data import data_path
from suanli.serving.domain.regions import apportion, nearest_shares
from suanli.serving.domain.trace import TraceError, parse_trace

HEADER = "TIMESTAMP,ContextTokens,GeneratedTokens\n"


def test_the_packaged_trace_is_the_azure_conversation_hour() -> None:
    trace = parse_trace(data_path("traces/azure_llm/AzureLLMInferenceTrace_conv.csv").read_text())
    assert len(trace) == 19_366
    assert trace.offset_s[0] == 0.0
    assert trace.offset_s[-1] == pytest.approx(3501.72, abs=0.01)
    minutes = trace.per_minute()
    assert int(minutes.max()) == 507 and int(minutes[:-1].min()) == 191
    assert int(trace.context_tokens.max()) == 14_050


def test_offsets_keep_the_100ns_digits_and_windows_rebase() -> None:
    text = HEADER + "2023-11-16 18:15:46.6805900,374,44\n2023-11-16 18:15:50.9951690,396,109\n"
    trace = parse_trace(text)
    assert trace.offset_s[1] == pytest.approx(4.314579)
    assert trace.compressed(10).offset_s[1] == pytest.approx(0.4314579)
    window = trace.window(1.0, 10.0)
    assert len(window) == 1 and window.rebased(1.0).offset_s[0] == pytest.approx(3.314579)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("a,b\n1,2\n", "trace lacks columns"),
        (HEADER, "trace has no requests"),
        (HEADER + "yesterday,1,1\n", "line 2: TIMESTAMP 'yesterday' is not a date-time"),
        (HEADER + "2023-11-16 18:15:46.1,ten,1\n", "line 2: token counts must be integers"),
        (HEADER + "2023-11-16 18:15:46.1,0,1\n", "line 2: token counts must be at least 1"),
    ],
)
def test_a_broken_trace_names_the_line(text: str, message: str) -> None:
    with pytest.raises(TraceError, match=message):
        parse_trace(text)


def test_compression_needs_a_positive_speed() -> None:
    trace = parse_trace(HEADER + "2023-11-16 18:15:46.1,1,1\n")
    with pytest.raises(ValueError, match="speed must be above 0"):
        trace.compressed(0)


def test_demand_goes_to_the_nearest_region() -> None:
    rtt = {
        ("osaka", "tokyo"): 10.0,
        ("osaka", "dallas"): 130.0,
        ("dallas", "tokyo"): 140.0,
        ("dallas", "dallas"): 1.0,
    }
    rtt.update({("tokyo", "tokyo"): 1.0, ("tokyo", "dallas"): 140.0})
    shares = nearest_shares(
        {"osaka": 1, "tokyo": 1, "dallas": 2}, ["dallas", "tokyo"], lambda a, b: rtt[(a, b)]
    )
    assert shares == {"dallas": 0.5, "tokyo": 0.5}


def test_apportion_by_largest_remainder_with_the_spread_kept() -> None:
    shares = {"washington-dc": 0.42, "frankfurt": 0.30, "tokyo": 0.28}
    assert apportion(10, shares, spread=3) == {"washington-dc": 4, "frankfurt": 3, "tokyo": 3}
    assert apportion(2, shares, spread=3) == {"washington-dc": 1, "frankfurt": 1, "tokyo": 0}
    assert apportion(1, shares, spread=1) == {"washington-dc": 1, "frankfurt": 0, "tokyo": 0}
    for total in range(0, 40):
        assert sum(apportion(total, shares, spread=3).values()) == total
