"""The one-query engine's driver-side revenue state (spark_apps.revenue.state) against a plain
row-by-row model of Spark's watermark and windowed update semantics (repeats come decided, from the
dedupe state: spark_apps.revenue.dedupe), and its resume from what bronze and gold record (the watermark,
the window totals) against the state it replaces."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from spark_apps.revenue.state import BATCH_COLUMNS, RevenueState, WindowSpec

S = 1_000_000
TUMBLING = WindowSpec(15 * S, 15 * S)
HOPPING = WindowSpec(10 * S, 5 * S)


def _batch(rows: list[dict[str, Any]]) -> dict[str, np.ndarray]:
    """Rows as the engine's column arrays (strings as objects, flags as bools, numbers as int64)."""
    types = {"location_id": object, "order_type": object, "repeat": bool}
    return {c: np.array([r.get(c, False) for r in rows], dtype=types.get(c, np.int64)) for c in BATCH_COLUMNS}


class Model:
    """Row by row, as the rules are written (revenue_state's docstring)."""

    def __init__(self, windows: WindowSpec, delay_us: int) -> None:
        self.windows, self.delay_us = windows, delay_us
        self.watermark: int | None = None
        self.totals: dict[tuple[str, str, int], list[int]] = {}

    def apply(self, rows: list[dict[str, Any]]) -> tuple[int, int, list[tuple[Any, ...]]]:
        """(late, repeats, changed windows' totals)."""
        late = repeats = 0
        changed: set[tuple[str, str, int]] = set()
        for row in rows:
            if row["repeat"]:
                repeats += 1
                continue
            if self.watermark is not None and row["ordered_at_us"] <= self.watermark:
                late += 1
                continue
            t = row["ordered_at_us"]
            start = t - t % self.windows.slide_us
            while start + self.windows.size_us > t:
                key = (row["location_id"], row["order_type"], start)
                total = self.totals.setdefault(key, [0, 0])
                total[0] += 1
                total[1] += row["cents"]
                changed.add(key)
                start -= self.windows.slide_us
        # Every window the batch changed is published, even one the new watermark closes at once.
        updated = [(k[0], k[1], k[2], k[2] + self.windows.size_us, *self.totals[k]) for k in sorted(changed)]
        if rows:
            # An order moves the watermark with its event time, but never past its Kafka timestamp.
            latest = max(min(r["ordered_at_us"], r["timestamp_us"]) for r in rows) - self.delay_us
            self.watermark = latest if self.watermark is None else max(self.watermark, latest)
            self.totals = {
                k: v for k, v in self.totals.items() if k[2] + self.windows.size_us > self.watermark
            }
        return late, repeats, updated


def _rows(draw: st.DrawFn, batch: int, size: int) -> list[dict[str, Any]]:
    return [
        {
            "repeat": draw(st.booleans()),
            "location_id": draw(st.sampled_from(["L1", "L2"])),
            "order_type": draw(st.sampled_from(["GENERAL", "RESTAURANT"])),
            "ordered_at_us": draw(st.integers(0, 120)) * S // 2 + draw(st.sampled_from([0, 1, S // 4])),
            "cents": draw(st.integers(0, 10**8)),
            # Arrival advances with the batch; event times fall on both sides of it (orders ahead of
            # the broker's clock and late ones).
            "timestamp_us": batch * 12 * S + draw(st.integers(0, 5)),
        }
        for _ in range(size)
    ]


@st.composite
def batches(draw: st.DrawFn) -> list[list[dict[str, Any]]]:
    return [_rows(draw, b, draw(st.integers(0, 25))) for b in range(draw(st.integers(1, 6)))]


@settings(max_examples=150, deadline=None)
@given(batches(), st.sampled_from([TUMBLING, HOPPING]), st.sampled_from([5 * S, 30 * S]))
def test_the_state_counts_as_the_row_by_row_rules_say(
    stream: list[list[dict[str, Any]]], windows: WindowSpec, delay_us: int
) -> None:
    state, model = RevenueState(windows, delay_us), Model(windows, delay_us)
    for rows in stream:
        outcome = state.apply(_batch(rows))
        expected_late, expected_repeats, expected_updates = model.apply(rows)
        assert (outcome.late, outcome.duplicates) == (expected_late, expected_repeats)
        assert outcome.windows == expected_updates
        assert outcome.watermark_us == model.watermark


@settings(max_examples=150, deadline=None)
@given(
    batches(),
    st.sampled_from([TUMBLING, HOPPING, WindowSpec(60 * S, 60 * S)]),
    st.sampled_from([5 * S, 30 * S]),
    st.randoms(),
    st.booleans(),
)
def test_a_state_resumed_from_bronze_and_gold_continues_exactly_as_the_original(
    stream: list[list[dict[str, Any]]],
    windows: WindowSpec,
    delay_us: int,
    shuffler: random.Random,
    gold_holds_the_cut_batch: bool,
) -> None:
    """What a restart resumes from: the watermark the last batch recorded and gold (the latest totals
    of every window ever written, closed ones too, in no particular order). When the crash came
    after the next batch's gold commit, gold already holds that batch's totals and the batch is
    redone without adding to them."""
    for cut in range(1, len(stream)):
        original = RevenueState(windows, delay_us)
        gold: dict[tuple[str, str, int], tuple[int, int]] = {}
        for rows in stream[:cut]:
            outcome = original.apply(_batch(rows))
            gold.update({(loc, kind, start): (n, cents) for loc, kind, start, _, n, cents in outcome.windows})
        watermark = original.watermark_us
        if watermark is None:
            continue  # no valid order yet: a restart starts with an empty state
        redone = stream[cut]
        expected = original.apply(_batch(redone))
        if gold_holds_the_cut_batch:
            gold.update(
                {(loc, kind, start): (n, cents) for loc, kind, start, _, n, cents in expected.windows}
            )
        totals = [(loc, kind, start, n, cents) for (loc, kind, start), (n, cents) in gold.items()]
        shuffler.shuffle(totals)
        resumed = RevenueState.resumed(windows, delay_us, watermark, totals)
        assert resumed.watermark_us == watermark
        again = resumed.apply(_batch(redone), add_to_windows=not gold_holds_the_cut_batch)
        assert (again.late, again.duplicates) == (expected.late, expected.duplicates)
        assert again.watermark_us == expected.watermark_us
        if not gold_holds_the_cut_batch:
            assert again.windows == expected.windows
        for rows in stream[cut + 1 :]:
            a, b = original.apply(_batch(rows)), resumed.apply(_batch(rows))
            assert (a.late, a.duplicates) == (b.late, b.duplicates)
            assert a.windows == b.windows
            assert a.watermark_us == b.watermark_us


def test_totals_stay_exact_beyond_a_float() -> None:
    state = RevenueState(TUMBLING, 30 * S)
    rows = [
        {
            "location_id": "L",
            "order_type": "GENERAL",
            "ordered_at_us": 60 * S,
            "cents": 99_999_999,
            "timestamp_us": i,
        }
        for i in range(3)
    ]
    outcome = state.apply(_batch(rows))
    assert outcome.windows == [("L", "GENERAL", 60 * S, 75 * S, 3, 299_999_997)]
    for step in range(1, 40):  # far past 2**53 cents: still exact integers
        state.apply(_batch([{**rows[0], "cents": 2**52, "timestamp_us": 10 + step}]))
    assert state.total("L", "GENERAL", 60 * S) == (42, 299_999_997 + 39 * 2**52)


def test_a_window_of_the_largest_orders_sums_beyond_int64() -> None:
    largest = 999_999_999_999_999_999  # 9999999999999999.99, the largest DECIMAL(18,2), in cents
    state = RevenueState(TUMBLING, 30 * S)
    rows = [
        {
            "location_id": "L",
            "order_type": "GENERAL",
            "ordered_at_us": 60 * S,
            "cents": largest,
            "timestamp_us": i,
        }
        for i in range(20)
    ]
    assert state.apply(_batch(rows)).windows == [("L", "GENERAL", 60 * S, 75 * S, 20, 20 * largest)]


def test_a_late_order_and_a_repeat_are_not_counted() -> None:
    state = RevenueState(TUMBLING, 10 * S)
    base = {"location_id": "L", "order_type": "GENERAL", "cents": 100}
    first = state.apply(_batch([{**base, "ordered_at_us": 100 * S, "timestamp_us": 100 * S + 1}]))
    assert first.watermark_us == 90 * S
    assert (first.late, first.duplicates) == (0, 0)
    late = state.apply(_batch([{**base, "ordered_at_us": 90 * S, "timestamp_us": 100 * S + 2}]))
    assert (late.late, late.windows) == (1, [])
    repeat = state.apply(
        _batch([{**base, "ordered_at_us": 101 * S, "timestamp_us": 101 * S + 3, "repeat": True}])
    )
    assert (repeat.duplicates, repeat.windows) == (1, [])
    # A repeat that would also be late counts as a repeat only: one verdict per copy.
    both = state.apply(_batch([{**base, "ordered_at_us": 50 * S, "timestamp_us": 102 * S, "repeat": True}]))
    assert (both.late, both.duplicates) == (0, 1)
    counted = state.apply(_batch([{**base, "ordered_at_us": 104 * S, "timestamp_us": 104 * S + 5}]))
    assert counted.windows[0][4:] == (2, 200)


def test_an_order_dated_ahead_of_the_broker_moves_the_watermark_only_to_its_kafka_timestamp() -> None:
    # One order dated 299 s ahead of its append time (inside a 5-minute skew), then the honest
    # orders of the next seconds: none of them is late, and the early order counts in its own window.
    delay_us = 300 * S
    state = RevenueState(TUMBLING, delay_us)
    base = {"location_id": "L", "order_type": "GENERAL", "cents": 100}
    ahead = state.apply(_batch([{**base, "ordered_at_us": 1299 * S, "timestamp_us": 1000 * S}]))
    assert ahead.watermark_us == 1000 * S - delay_us
    assert ahead.windows == [("L", "GENERAL", 1290 * S, 1305 * S, 1, 100)]
    honest = [
        {**base, "ordered_at_us": (1000 + i) * S, "timestamp_us": (1000 + i) * S + 5} for i in range(1, 60)
    ]
    outcome = state.apply(_batch(honest))
    assert (outcome.late, outcome.duplicates) == (0, 0)
    assert state.watermark_us == 1059 * S - delay_us
