"""The engine's counting: each batch counted on the executors (spark_apps.revenue.counting,
tiny DataFrames on the test session) and added to the driver's revenue state (spark_apps.revenue.state),
against a plain row-by-row model of Spark's watermark and windowed update semantics (repeats come
decided, from the dedupe state: spark_apps.revenue.dedupe); and the state's resume from what bronze
and gold record (the watermark, the window totals) against the state it replaces."""

from __future__ import annotations

import random
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from spark_apps.revenue.counting import count_batch
from spark_apps.revenue.state import BatchCount, RevenueState, WindowSpec

S = 1_000_000
TUMBLING = WindowSpec(15 * S, 15 * S)
HOPPING = WindowSpec(10 * S, 5 * S)
UNEVEN = WindowSpec(10 * S, 3 * S)  # a slide that does not divide the size: 3 or 4 windows per order


_ROWS_DDL = (
    "location_id string, order_type string, ordered_at_us long, cents long, timestamp_us long, repeat boolean"
)
_COLUMNS = ("location_id", "order_type", "ordered_at_us", "cents", "timestamp_us", "repeat")
# Each example runs a Spark job per batch: fewer examples than a pure-Python property test would.
EXAMPLES = settings(
    max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


def _valid_orders(spark: SparkSession, rows: list[dict[str, Any]]) -> DataFrame:
    """Rows as the validated batch's valid orders: event and Kafka times, DECIMAL(18,2) amounts, `repeat`."""
    frame = spark.createDataFrame([tuple(r.get(c, False) for c in _COLUMNS) for r in rows], _ROWS_DDL)
    return frame.select(
        "location_id",
        "order_type",
        F.timestamp_micros("ordered_at_us").alias("ordered_at"),
        (F.col("cents").cast("decimal(20,0)") / F.lit(100)).cast("decimal(18,2)").alias("final_amount"),
        F.timestamp_micros("timestamp_us").alias("timestamp"),
        "repeat",
    )


def _seconds(micros: int) -> str:
    return f"{micros // S} seconds"


def _count(spark: SparkSession, state: RevenueState, rows: list[dict[str, Any]]) -> BatchCount:
    """The batch as the executors count it from the state's watermark."""
    windows = state.windows
    slide = None if windows.slide_us == windows.size_us else _seconds(windows.slide_us)
    return count_batch(_valid_orders(spark, rows), state.watermark_us, _seconds(windows.size_us), slide)


def _window_starts(t: int, windows: WindowSpec) -> list[int]:
    """The starts of every window that holds event time `t`, by the definition."""
    start, starts = t - t % windows.slide_us, []
    while start + windows.size_us > t:
        starts.append(start)
        start -= windows.slide_us
    return starts


def _reference_count(state: RevenueState, rows: list[dict[str, Any]]) -> BatchCount:
    """What `count_batch` hands the state, computed row by row (the test above holds Spark's to it):
    for the state tests that need many batches and no Spark."""
    watermark = state.watermark_us
    repeats = [r for r in rows if r.get("repeat")]
    late = [
        r for r in rows if not r.get("repeat") and watermark is not None and r["ordered_at_us"] <= watermark
    ]
    totals: dict[tuple[str, str, int], list[int]] = {}
    for row in rows:
        if row.get("repeat") or (watermark is not None and row["ordered_at_us"] <= watermark):
            continue
        for start in _window_starts(row["ordered_at_us"], state.windows):
            total = totals.setdefault((row["location_id"], row["order_type"], start), [0, 0])
            total[0] += 1
            total[1] += row["cents"]
    latest = max((min(r["ordered_at_us"], r["timestamp_us"]) for r in rows), default=None)
    windows = [(loc, kind, start, n, cents) for (loc, kind, start), (n, cents) in totals.items()]
    return BatchCount(watermark, len(rows), len(repeats), len(late), latest, windows)


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
            for start in _window_starts(row["ordered_at_us"], self.windows):
                key = (row["location_id"], row["order_type"], start)
                total = self.totals.setdefault(key, [0, 0])
                total[0] += 1
                total[1] += row["cents"]
                changed.add(key)
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
    return [_rows(draw, b, draw(st.integers(0, 25))) for b in range(draw(st.integers(1, 5)))]


@EXAMPLES
@given(batches(), st.sampled_from([TUMBLING, HOPPING, UNEVEN]), st.sampled_from([5 * S, 30 * S]))
def test_the_state_counts_as_the_row_by_row_rules_say(
    spark: SparkSession, stream: list[list[dict[str, Any]]], windows: WindowSpec, delay_us: int
) -> None:
    state, model = RevenueState(windows, delay_us), Model(windows, delay_us)
    for rows in stream:
        outcome = state.apply(_count(spark, state, rows))
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
            outcome = original.apply(_reference_count(original, rows))
            gold.update({(loc, kind, start): (n, cents) for loc, kind, start, _, n, cents in outcome.windows})
        watermark = original.watermark_us
        if watermark is None:
            continue  # no valid order yet: a restart starts with an empty state
        redone = stream[cut]
        expected = original.apply(_reference_count(original, redone))
        if gold_holds_the_cut_batch:
            gold.update(
                {(loc, kind, start): (n, cents) for loc, kind, start, _, n, cents in expected.windows}
            )
        totals = [(loc, kind, start, n, cents) for (loc, kind, start), (n, cents) in gold.items()]
        shuffler.shuffle(totals)
        resumed = RevenueState.resumed(windows, delay_us, watermark, totals)
        assert resumed.watermark_us == watermark
        again = resumed.apply(_reference_count(resumed, redone), add_to_windows=not gold_holds_the_cut_batch)
        assert (again.late, again.duplicates) == (expected.late, expected.duplicates)
        assert again.watermark_us == expected.watermark_us
        if not gold_holds_the_cut_batch:
            assert again.windows == expected.windows
        for rows in stream[cut + 1 :]:
            a, b = (
                original.apply(_reference_count(original, rows)),
                resumed.apply(_reference_count(resumed, rows)),
            )
            assert (a.late, a.duplicates) == (b.late, b.duplicates)
            assert a.windows == b.windows
            assert a.watermark_us == b.watermark_us


def test_totals_stay_exact_beyond_a_float(spark: SparkSession) -> None:
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
    outcome = state.apply(_count(spark, state, rows))
    assert outcome.windows == [("L", "GENERAL", 60 * S, 75 * S, 3, 299_999_997)]
    # Far past 2**53 cents, in the executors' sum and in the state's: still exact integers.
    big = [{**rows[0], "cents": 2**52, "timestamp_us": 10 + step} for step in range(1, 40)]
    state.apply(_count(spark, state, big))
    state.apply(_count(spark, state, big[:1]))
    assert state.total("L", "GENERAL", 60 * S) == (43, 299_999_997 + 40 * 2**52)


def test_a_window_of_the_largest_orders_sums_beyond_int64(spark: SparkSession) -> None:
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
    assert state.apply(_count(spark, state, rows)).windows == [
        ("L", "GENERAL", 60 * S, 75 * S, 20, 20 * largest)
    ]


def test_a_late_order_and_a_repeat_are_not_counted(spark: SparkSession) -> None:
    state = RevenueState(TUMBLING, 10 * S)
    base = {"location_id": "L", "order_type": "GENERAL", "cents": 100}
    first = state.apply(
        _count(spark, state, [{**base, "ordered_at_us": 100 * S, "timestamp_us": 100 * S + 1}])
    )
    assert first.watermark_us == 90 * S
    assert (first.late, first.duplicates) == (0, 0)
    late = state.apply(_count(spark, state, [{**base, "ordered_at_us": 90 * S, "timestamp_us": 100 * S + 2}]))
    assert (late.late, late.windows) == (1, [])
    repeat = state.apply(
        _count(
            spark, state, [{**base, "ordered_at_us": 101 * S, "timestamp_us": 101 * S + 3, "repeat": True}]
        )
    )
    assert (repeat.duplicates, repeat.windows) == (1, [])
    # A repeat that would also be late counts as a repeat only: one verdict per copy.
    both = state.apply(
        _count(spark, state, [{**base, "ordered_at_us": 50 * S, "timestamp_us": 102 * S, "repeat": True}])
    )
    assert (both.late, both.duplicates) == (0, 1)
    counted = state.apply(
        _count(spark, state, [{**base, "ordered_at_us": 104 * S, "timestamp_us": 104 * S + 5}])
    )
    assert counted.windows[0][4:] == (2, 200)


def test_an_order_dated_in_the_year_40000_fails_neither_its_batch_nor_the_next(spark: SparkSession) -> None:
    # A valid order's event time is bounded only by its Kafka timestamp (which a producer sets on a
    # CreateTime topic): the watermark comparisons must hold every long, or with ANSI on the batch
    # fails on every retry and live revenue stalls.
    state = RevenueState(TUMBLING, 10 * S)
    base = {"location_id": "L", "order_type": "GENERAL", "cents": 100}
    far = 1_200_000_000_000 * S  # ~1.2e18 microseconds: the year 40000
    state.apply(_count(spark, state, [{**base, "ordered_at_us": 100 * S, "timestamp_us": 100 * S}]))
    ahead = state.apply(_count(spark, state, [{**base, "ordered_at_us": far, "timestamp_us": far}]))
    assert ahead.windows == [("L", "GENERAL", far, far + 15 * S, 1, 100)]
    assert state.watermark_us == far - 10 * S
    behind = state.apply(_count(spark, state, [{**base, "ordered_at_us": 200 * S, "timestamp_us": far}]))
    assert (behind.late, behind.windows) == (1, [])


def test_an_order_dated_ahead_of_the_broker_moves_the_watermark_only_to_its_kafka_timestamp(
    spark: SparkSession,
) -> None:
    # One order dated 299 s ahead of its append time (inside a 5-minute skew), then the honest
    # orders of the next seconds: none of them is late, and the early order counts in its own window.
    delay_us = 300 * S
    state = RevenueState(TUMBLING, delay_us)
    base = {"location_id": "L", "order_type": "GENERAL", "cents": 100}
    ahead = state.apply(_count(spark, state, [{**base, "ordered_at_us": 1299 * S, "timestamp_us": 1000 * S}]))
    assert ahead.watermark_us == 1000 * S - delay_us
    assert ahead.windows == [("L", "GENERAL", 1290 * S, 1305 * S, 1, 100)]
    honest = [
        {**base, "ordered_at_us": (1000 + i) * S, "timestamp_us": (1000 + i) * S + 5} for i in range(1, 60)
    ]
    outcome = state.apply(_count(spark, state, honest))
    assert (outcome.late, outcome.duplicates) == (0, 0)
    assert state.watermark_us == 1059 * S - delay_us


def test_an_order_stamped_ahead_by_its_producer_moves_the_watermark_only_to_the_batch_start() -> None:
    # A CreateTime topic: the producer set the Kafka timestamp an hour ahead, with the event time.
    # The batch that reads it started at 1000 s: the watermark moves no further than that allows, and
    # the honest orders of the next seconds are not late.
    delay_us = 300 * S
    state = RevenueState(TUMBLING, delay_us)
    forged = BatchCount(None, valid=1, repeats=0, late=0, watermark_event_us=4600 * S, windows=[])
    assert state.apply(forged, not_after_us=1000 * S).watermark_us == 1000 * S - delay_us
    honest = BatchCount(700 * S, valid=5, repeats=0, late=0, watermark_event_us=1010 * S, windows=[])
    assert state.apply(honest, not_after_us=1011 * S).watermark_us == 1010 * S - delay_us
    # Without the bound (as before), the forged order took the watermark an hour ahead.
    unbounded = RevenueState(TUMBLING, delay_us)
    assert unbounded.apply(forged).watermark_us == 4600 * S - delay_us


def test_a_batch_counted_from_another_watermark_is_refused() -> None:
    state = RevenueState(TUMBLING, 10 * S, watermark_us=90 * S)
    stale = BatchCount(80 * S, valid=1, repeats=0, late=0, watermark_event_us=100 * S, windows=[])
    with pytest.raises(ValueError, match="counted from watermark 80000000, the state is at 90000000"):
        state.apply(stale)
    assert state.watermark_us == 90 * S
