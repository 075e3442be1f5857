"""The arithmetic of the shared rate budget (GCRA, weighted for tpm): docs/methods.md,
"Shared rate budget"."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from council.methods import gcra


def starts_of(calls: list[tuple[float, float]], slot) -> list[float]:
    """Each call's start when reserved in arrival order (``calls``: arrival, size)."""
    tat, starts = None, []
    for now, size in calls:
        increment, tolerance = slot(size)
        tat = gcra.take(tat, now, increment)
        starts.append(now + gcra.wait_after(tat, now, increment, tolerance))
    return starts


def test_a_burst_of_calls_starts_at_once_then_one_every_interval():
    starts = starts_of([(0.0, 1)] * 6, lambda _: gcra.call_slot(rpm=60, burst=3))
    assert starts == [0.0, 0.0, 0.0, 1.0, 2.0, 3.0]


def test_a_full_minute_of_tokens_starts_at_once_and_the_next_waits_for_its_share():
    starts = starts_of([(0.0, 600), (0.0, 400), (0.0, 300)], lambda n: gcra.token_slot(n, tpm=1000))
    assert starts == pytest.approx([0.0, 0.0, 18.0])  # 300 more tokens: 0.3 of a minute past the bucket


def test_a_call_larger_than_the_budget_can_never_start():
    assert gcra.token_slot(1000, tpm=1000) == pytest.approx((60.0, 0.0))
    with pytest.raises(ValueError, match="1001 tokens are more than a budget of 1000"):
        gcra.token_slot(1001, tpm=1000)


def test_settling_refunds_unused_tokens_but_never_fills_the_bucket_past_its_capacity():
    tat = gcra.take(None, now=0.0, increment=60.0)  # 1000 of tpm=1000 reserved
    assert gcra.adjust(tat, now=1.0, delta=-30.0) == 30.0  # 500 used: half the bucket back
    assert gcra.adjust(tat, now=1.0, delta=+6.0) == 66.0  # 100 more than reserved: a debt
    assert gcra.adjust(tat, now=50.0, delta=-60.0) == 50.0  # a full bucket stays full
    assert gcra.adjust(None, now=5.0, delta=-1.0) == 5.0


def test_most_in_window_counts_sizes_in_any_half_open_window():
    assert gcra.most_in_window([0, 1, 2, 60, 61], [5, 5, 5, 5, 5], 60) == 15
    assert gcra.most_in_window([0, 59.9, 60], [1, 10, 10], 60) == 20
    assert gcra.most_in_window([], [], 60) == 0


@given(
    st.lists(st.tuples(st.floats(0, 300, allow_nan=False), st.integers(1, 1000)), min_size=1, max_size=80),
    st.sampled_from([1.0, 10.0, 60.0, 150.0]),
)
def test_any_window_holds_at_most_its_share_of_tokens_plus_one_bucket(calls, window):
    tpm = 1000
    calls = sorted(calls)
    starts = starts_of([(t, float(n)) for t, n in calls], lambda n: gcra.token_slot(int(n), tpm))
    assert starts == sorted(starts) and all(s >= t for s, (t, _) in zip(starts, calls, strict=True))
    most = gcra.most_in_window(starts, [n for _, n in calls], window)
    assert most <= window * tpm / 60 + tpm + 1e-6


@given(st.lists(st.floats(0, 100, allow_nan=False), min_size=1, max_size=80), st.integers(1, 8))
def test_any_window_holds_at_most_its_share_of_calls_plus_the_burst(arrivals, burst):
    rpm, window = 120, 10.0
    starts = starts_of([(t, 1) for t in sorted(arrivals)], lambda _: gcra.call_slot(rpm, burst))
    assert gcra.most_in_window(starts, [1] * len(starts), window) <= window * rpm / 60 + burst
