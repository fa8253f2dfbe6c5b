"""One table of copies, three engines of the one dedupe rule (spark_apps.contract.records.DEDUPE_RULE): the
stream's operator in Spark's state store (each ingest batch a micro-batch of its own, each run a
restart from the checkpoint), the batch window function the reprocess job uses, and the pandas
function of the quality suite. All three must flag exactly the copies the table says; the stream and
the batch also flag the same conflicting copies (repeats with another store, type or amount than the
copy before them: dead letters; the quality suite needs only the repeats, as neither is counted)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from revenue_platform.quality.frames import repeat_flags
from spark_apps.revenue.dedupe import (
    CONFLICT_COLUMN,
    REPEAT_COLUMN,
    initial_repeat_state,
    mark_repeats,
    with_repeats,
)

HORIZON_S = 600
DELAY_S = 120
T0 = datetime(2026, 11, 25, 9, 0, tzinfo=UTC)
SCHEMA = (
    "order_id long, timestamp timestamp, topic string, partition int, offset long, dlq_reason string, "
    "ingest_batch_id long, location_id string, order_type string, final_amount decimal(18,2)"
)
Copy = tuple[int, int, int, int, int, bool, bool]

# (order id, ingest batch, Kafka time in s after T0, partition, offset, valid, expected repeat)
CASES: list[Copy] = [
    (1, 0, 0, 0, 0, True, False),  # a first copy
    (2, 0, 10, 0, 1, True, False),
    (2, 0, 10, 1, 0, True, True),  # same batch and time, higher partition: after the one above
    (5, 0, 5, 0, 2, True, False),
    (6, 0, 6, 0, 3, False, False),  # invalid: never a repeat, never a previous copy
    (1, 1, 300, 0, 4, True, True),  # 300 s after its previous copy
    (3, 1, 400, 0, 5, True, False),
    (6, 1, 310, 0, 6, True, False),  # its only earlier copy was invalid
    (1, 2, 899, 0, 7, True, True),  # 599 s after the previous copy (899 s after the first)
    (4, 2, 760, 0, 8, True, False),
    (4, 3, 700, 1, 9, True, True),  # a later batch, an earlier Kafka time: still after it
    (1, 3, 1500, 0, 10, True, False),  # 601 s of silence: counts again
    (7, 3, 1000, 0, 11, True, False),
    (7, 3, 1600, 0, 12, True, True),  # exactly the horizon after: a repeat
    (5, 3, 1200, 0, 13, True, False),  # 1195 s after its first copy, long forgotten
    (5, 4, 1250, 0, 14, True, True),
    (1, 4, 2000, 0, 15, True, True),  # 500 s after the copy that counted again
    # Conflicting copies (their content in CONTENT), on partition 2:
    (9, 0, 20, 2, 0, True, False),  # store-1
    (9, 1, 320, 2, 1, True, True),  # store-2: a conflicting copy
    (9, 2, 330, 2, 2, True, True),  # store-2 again: the same as the copy before it, a plain repeat
    (9, 3, 340, 2, 3, True, True),  # store-1: conflicts with the copy before it
    (10, 0, 30, 2, 4, True, False),
    (10, 3, 1000, 2, 5, True, False),  # store-2, but 970 s later: counts, no conflict
    (11, 4, 2000, 2, 6, True, False),
    (11, 4, 2000, 2, 7, True, True),  # the same micro-batch, another amount: conflicting
    (12, 4, 2000, 2, 8, True, False),
    (12, 4, 2001, 2, 9, True, True),  # another order type: conflicting
]
# (partition, offset) -> (store, order type, amount) of a copy; every other copy: DEFAULT_CONTENT.
DEFAULT_CONTENT = ("store-1", "GENERAL", Decimal("10.00"))
CONTENT = {
    (2, 1): ("store-2", "GENERAL", Decimal("10.00")),
    (2, 2): ("store-2", "GENERAL", Decimal("10.00")),
    (2, 5): ("store-2", "GENERAL", Decimal("10.00")),
    (2, 7): ("store-1", "GENERAL", Decimal("0.01")),
    (2, 9): ("store-1", "RESTAURANT", Decimal("10.00")),
}
CONFLICTING = {(2, 1), (2, 3), (2, 7), (2, 9)}


def _at(seconds: int) -> datetime:
    return T0 + timedelta(seconds=seconds)


Content = dict[tuple[int, int], tuple[str, str, Decimal]]


def _rows(cases: list[Copy], content: Content = CONTENT) -> list[tuple[Any, ...]]:
    return [
        (
            oid,
            _at(secs),
            "orders",
            part,
            off,
            None if valid else "bad",
            batch,
            *content.get((part, off), DEFAULT_CONTENT),
        )
        for oid, batch, secs, part, off, valid, _ in cases
    ]


def _expected(cases: list[Copy]) -> dict[tuple[int, int], bool]:
    return {(part, off): repeat for _, _, _, part, off, _, repeat in cases}


def _stream_verdicts(
    spark: SparkSession,
    folder: Path,
    batches: list[list[Copy]],
    initial: DataFrame | None = None,
    conflicting: set[tuple[int, int]] | None = None,
    content: Content = CONTENT,
) -> dict[tuple[int, int], bool]:
    """Each batch written as a file, then read by a run of the stream to its end (a restart each). The
    repeat verdict of each copy; the conflicting copies' positions go into `conflicting`."""
    verdicts: dict[tuple[int, int], bool] = {}
    found = set() if conflicting is None else conflicting

    def collect(batch: DataFrame, _batch_id: int) -> None:
        for row in batch.select("partition", "offset", REPEAT_COLUMN, CONFLICT_COLUMN).collect():
            verdicts[row["partition"], row["offset"]] = row[REPEAT_COLUMN]
            if row[CONFLICT_COLUMN]:
                found.add((row["partition"], row["offset"]))

    for number, cases in enumerate(batches):
        spark.createDataFrame(_rows(cases, content), SCHEMA).coalesce(1).write.mode("append").parquet(
            str(folder / "input")
        )
        source = spark.readStream.schema(SCHEMA).parquet(str(folder / "input"))
        query = (
            with_repeats(source, HORIZON_S, DELAY_S, initial if number == 0 else None)
            .writeStream.foreachBatch(collect)
            .option("checkpointLocation", str(folder / "checkpoint"))
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination()
    return verdicts


def test_the_stream_the_batch_and_the_quality_suite_flag_the_same_repeats(
    spark: SparkSession, tmp_path: Path
) -> None:
    batches = [[case for case in CASES if case[1] == number] for number in range(5)]
    expected = _expected(CASES)

    streamed_conflicts: set[tuple[int, int]] = set()
    streamed = _stream_verdicts(spark, tmp_path, batches, conflicting=streamed_conflicts)
    assert streamed == expected
    assert streamed_conflicts == CONFLICTING
    # The state forgets an id once Kafka time (the watermark: newest record minus the delay, 1480 s in
    # the last batch) is past its last copy plus the horizon: what stays grows with the horizon, not
    # with history. Left: 1 (last copy at 2000 s), 5 (1250 s), 7 (1600 s), 10 (1000 s), 11 and 12
    # (2000 s); 9 (340 s) has gone.
    assert _state_ids(spark, tmp_path / "checkpoint") == [1, 5, 7, 10, 11, 12]

    valid = spark.createDataFrame(_rows(CASES), SCHEMA).filter(F.col("dlq_reason").isNull())
    marked = (
        mark_repeats(valid, HORIZON_S).select("partition", "offset", REPEAT_COLUMN, CONFLICT_COLUMN).collect()
    )
    batch = {(row["partition"], row["offset"]): row[REPEAT_COLUMN] for row in marked}
    assert batch == {key: repeat for key, repeat in expected.items() if key != (0, 3)}
    assert {(row["partition"], row["offset"]) for row in marked if row[CONFLICT_COLUMN]} == CONFLICTING

    in_arrival = sorted((c for c in CASES if c[5]), key=lambda c: (c[1], c[2], c[3], c[4]))
    frame = pd.DataFrame(
        {
            "order_id": pd.array([c[0] for c in in_arrival], dtype="Int64"),
            "timestamp": [_at(c[2]) for c in in_arrival],
        }
    )
    flags = repeat_flags(frame, HORIZON_S).tolist()
    assert flags == [c[6] for c in in_arrival]


def _operator(spark: SparkSession) -> Any:
    return spark._jvm.io.github.revenueplatform.state.OrderRepeats  # type: ignore[union-attr]


def _state_ids(spark: SparkSession, checkpoint: Path) -> list[int]:
    """The order ids the operator's state holds (its map of id -> last copy, in every bucket)."""
    state = (
        spark.read.format("statestore")
        .option("stateVarName", _operator(spark).LAST_ARRIVAL_STATE)
        .load(str(checkpoint))
    )
    return sorted(row["user_map_key"][0] for row in state.collect())


def test_ids_sharing_a_bucket_leave_it_each_at_its_own_time(spark: SparkSession, tmp_path: Path) -> None:
    """The state is a map per bucket of ids with one timer per bucket: an expired id leaves its bucket
    while an id in the same bucket that is still within the horizon stays and is still recognised."""
    first, second = _two_ids_in_one_bucket(spark)
    other = 100_001  # any other bucket: it only moves Kafka time on
    batches: list[list[Copy]] = [
        [(first, 0, 0, 0, 0, True, False), (second, 0, 500, 0, 1, True, False)],
        [(other, 1, 900, 0, 2, True, False)],
        # Watermark 780: the bucket's timer (601) fires; first (kept until 600) leaves, second stays.
        [(other, 2, 950, 0, 3, True, True)],
    ]
    assert _stream_verdicts(spark, tmp_path, batches) == _expected([c for b in batches for c in b])
    assert _state_ids(spark, tmp_path / "checkpoint") == sorted([second, other])

    # second is still recognised: its copy 550 s after the one at 500 s is a repeat.
    again: list[list[Copy]] = [[(second, 3, 1050, 0, 4, True, True), (first, 3, 1060, 0, 5, True, False)]]
    assert _stream_verdicts(spark, tmp_path, again) == _expected(again[0])
    assert _state_ids(spark, tmp_path / "checkpoint") == sorted([first, second, other])

    later: list[list[Copy]] = [
        [(other, 4, 2000, 0, 6, True, False)],
        # Watermark 1880: past every id's last copy plus the horizon but other's (2000 s).
        [(other, 5, 2001, 0, 7, True, True)],
    ]
    assert _stream_verdicts(spark, tmp_path, later) == _expected([c for b in later for c in b])
    assert _state_ids(spark, tmp_path / "checkpoint") == [other]


def _bucket_timers(spark: SparkSession, checkpoint: Path) -> dict[int, int]:
    """When each bucket's timer fires (ms of watermark), by bucket: the operator's value state beside it."""
    state = (
        spark.read.format("statestore")
        .option("stateVarName", _operator(spark).NEXT_CHECK_STATE)
        .load(str(checkpoint))
    )
    return {row["key"][0]: row["value"][0] for row in state.collect()}


def test_bucket_timers_fire_spread_over_a_quarter_horizon_not_together(
    spark: SparkSession, tmp_path: Path
) -> None:
    """Ids that all arrive at once (an app's first seconds) must not give every bucket's timer the same
    instant: in step, the timers fired together every quarter horizon ever after, one batch scanning all
    the state (a soak: a million ids removed in one 10-35 s batch every 15 minutes). Each bucket keeps
    its own phase within the recheck period (a quarter horizon) through every firing, and every id
    still leaves within 1.25 horizons."""
    ids_by_bucket = _ids_in_distinct_buckets(spark, 64)
    buckets = sorted(ids_by_bucket)
    period_ms = HORIZON_S * 1000 // 4
    start_ms = int(T0.timestamp() * 1000)
    other = next(oid for oid in range(100_001, 200_000) if _bucket_of(spark, oid) not in ids_by_bucket)
    first: list[Copy] = [(oid, 0, 0, 0, n, True, False) for n, oid in enumerate(ids_by_bucket.values())]
    assert _stream_verdicts(spark, tmp_path, [first]) == _expected(first)

    due = _bucket_timers(spark, tmp_path / "checkpoint")
    assert sorted(due) == buckets
    keep_until_ms = start_ms + HORIZON_S * 1000
    # Each timer fires after the ids may go and within a recheck period of that.
    assert all(keep_until_ms < ms <= keep_until_ms + period_ms for ms in due.values())
    # Spread, not in step: 64 buckets of 4,096 at 64 distinct instants over most of the period.
    assert len(set(due.values())) == len(buckets)
    assert max(due.values()) - min(due.values()) > period_ms // 2

    # Copies 500 s later, then Kafka time moves on (watermark 780 s in the last batch): every timer
    # fires, no id leaves (each is kept until 1,100 s), and each bucket's next timer keeps its phase.
    later: list[list[Copy]] = [
        [(oid, 1, 500, 1, n, True, True) for n, oid in enumerate(ids_by_bucket.values())],
        [(other, 2, 900, 2, 0, True, False)],
        [(other, 3, 950, 2, 1, True, True)],
    ]
    assert _stream_verdicts(spark, tmp_path, later) == _expected([c for b in later for c in b])
    moved = _bucket_timers(spark, tmp_path / "checkpoint")
    for bucket in buckets:
        assert keep_until_ms + 500_000 < moved[bucket] <= keep_until_ms + 500_000 + period_ms
        assert (moved[bucket] - due[bucket]) % period_ms == 0

    # Watermark 1,880 s: past every id's 1,100 s plus a recheck period; all have left.
    gone: list[list[Copy]] = [[(other, 4, 2000, 2, 2, True, False)], [(other, 5, 2001, 2, 3, True, True)]]
    assert _stream_verdicts(spark, tmp_path, gone) == _expected([c for b in gone for c in b])
    assert _state_ids(spark, tmp_path / "checkpoint") == [other]


def _ids_in_distinct_buckets(spark: SparkSession, count: int) -> dict[int, int]:
    """The first `count` order ids from 1 on that each have a bucket of their own (the operator's bucket
    function, a hash: their buckets lie anywhere in 0..4095): bucket -> id."""
    rows = (
        spark.range(1, 10_000)
        .groupBy(_bucket_of_id(spark).alias("bucket"))
        .agg(F.min("id").alias("id"))
        .orderBy("id")
        .limit(count)
        .collect()
    )
    return {row["bucket"]: row["id"] for row in rows}


def _bucket_of(spark: SparkSession, order_id: int) -> int:
    found: int = (
        spark.range(order_id, order_id + 1)
        .select(_bucket_of_id(spark).alias("bucket"))
        .collect()[0]["bucket"]
    )
    return found


def _bucket_of_id(spark: SparkSession) -> Column:
    """The operator's own bucket function of a column `id`."""
    return Column(_operator(spark).bucket(F.col("id")._jc))


def _two_ids_in_one_bucket(spark: SparkSession) -> list[int]:
    bucket = _bucket_of_id(spark)
    ids: list[int] = (
        spark.range(1, 100_000)
        .groupBy(bucket.alias("bucket"))
        .agg(F.sort_array(F.collect_list("id")).alias("ids"))
        .filter(F.size("ids") >= 2)
        .orderBy("bucket")
        .limit(1)
        .collect()[0]["ids"][:2]
    )
    return ids


@pytest.mark.parametrize("later_seed_first", [True, False], ids=["later-first", "earlier-first"])
def test_seeds_sharing_a_bucket_leave_it_each_at_its_own_time(
    spark: SparkSession, tmp_path: Path, later_seed_first: bool
) -> None:
    """A new query's initial state comes in no set order: whichever of two seeds of one bucket comes
    first, the one whose horizon ends first leaves at its own time, not when the other's ends."""
    early, late = _two_ids_in_one_bucket(spark)
    seeds = [(early, int(_at(0).timestamp() * 1000)), (late, int(_at(1000).timestamp() * 1000))]
    if later_seed_first:
        seeds.reverse()
    initial = spark.createDataFrame(seeds, "order_id long, last_arrival_ms long").coalesce(1)
    other = 100_001  # any other bucket: it only moves Kafka time on
    batches: list[list[Copy]] = [
        [(other, 0, 900, 0, 0, True, False)],
        # Watermark 780: past early's horizon (600 s), not late's (1600 s).
        [(other, 1, 950, 0, 1, True, True)],
    ]
    assert _stream_verdicts(spark, tmp_path, batches, initial) == _expected([c for b in batches for c in b])
    assert _state_ids(spark, tmp_path / "checkpoint") == sorted([late, other])


def test_a_new_query_starts_from_the_ids_bronze_saw_within_the_horizon(
    spark: SparkSession, tmp_path: Path
) -> None:
    """The Kafka query after a replay's history: a new checkpoint, the history's ids from bronze."""
    bronze = spark.createDataFrame(_rows(CASES), SCHEMA)
    initial = initial_repeat_state(bronze, HORIZON_S)
    # Bronze's newest record is at 2000 s: ids whose last copy is within 600 s of it.
    assert sorted((r["order_id"], r["last_arrival_ms"]) for r in initial.collect()) == [
        (1, int(_at(2000).timestamp() * 1000)),
        (7, int(_at(1600).timestamp() * 1000)),
        (11, int(_at(2000).timestamp() * 1000)),
        (12, int(_at(2001).timestamp() * 1000)),
    ]
    after_cut_over: list[Copy] = [
        (1, 0, 2100, 0, 100, True, True),  # 100 s after bronze's last copy
        (7, 0, 2300, 0, 101, True, False),  # 700 s after
        (8, 0, 2100, 0, 102, True, False),  # never seen
        (8, 0, 2200, 0, 103, True, True),
        (11, 0, 2100, 0, 104, True, True),  # the content of 11's last copy in bronze (0.01): a repeat
        (12, 0, 2100, 0, 105, True, True),  # not the content of 12's last copy (RESTAURANT): conflicting
    ]
    content = {**CONTENT, (0, 104): CONTENT[2, 7]}
    conflicting: set[tuple[int, int]] = set()
    verdicts = _stream_verdicts(spark, tmp_path, [after_cut_over], initial, conflicting, content)
    assert verdicts == _expected(after_cut_over)
    assert conflicting == {(0, 105)}


def test_a_copy_whose_kafka_time_cannot_carry_a_fingerprint_is_judged_by_time_alone(
    spark: SparkSession, tmp_path: Path
) -> None:
    """The state packs a fingerprint beside a Kafka time of 1970 to 2109 (OrderRepeats.pack); a time out
    of that range is kept whole, without one: its copies are repeats as always, never conflicts."""
    far = int((datetime(2200, 1, 1, tzinfo=UTC) - T0).total_seconds())
    copies: list[Copy] = [
        (20, 0, far, 0, 0, True, False),
        (20, 1, far + 10, 0, 1, True, True),  # store-2 (CONTENT below): by time a repeat, no conflict
        (20, 2, far + 20, 0, 2, True, True),
    ]
    content = {(0, 1): ("store-2", "GENERAL", Decimal("10.00"))}
    conflicting: set[tuple[int, int]] = set()
    verdicts = _stream_verdicts(
        spark, tmp_path, [[c] for c in copies], conflicting=conflicting, content=content
    )
    assert verdicts == _expected(copies)
    assert conflicting == set()
