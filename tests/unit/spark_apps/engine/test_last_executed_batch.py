"""Which batch a graceful stop waits to see published: the newest one that ran, never the one an idle
query's progress names (Spark records an idle query's progress under the id of the batch it would run
next, and reports it to listeners as an idle event, not as a progress)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from spark_apps.engine.observability import last_executed_batch
from tests.spark_helpers import session_conf

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

IDLE_INTERVAL = "spark.sql.streaming.noDataProgressEventInterval"

# The step names of `durationMs`, as Spark 4.2 records them (seen on a file source with a noop sink).
RAN = [
    "addBatch",
    "commitOffsets",
    "getBatch",
    "latestOffset",
    "queryPlanning",
    "triggerExecution",
    "walCommit",
]
IDLE = ["latestOffset", "triggerExecution"]


def progress(batch_id: int, steps: list[str], rows: int = 0) -> dict[str, Any]:
    return {"batchId": batch_id, "numInputRows": rows, "durationMs": dict.fromkeys(steps, 1)}


def test_an_idle_query_s_stop_waits_for_its_last_batch_not_the_next_one() -> None:
    recent = [progress(0, RAN, rows=1), progress(1, IDLE), progress(1, IDLE)]
    assert recent[-1]["batchId"] == 1  # what `lastProgress` names: a batch that never ran
    assert last_executed_batch(recent) == 0


def test_a_busy_query_s_stop_waits_for_its_newest_batch() -> None:
    assert last_executed_batch([progress(3, RAN, rows=5), progress(4, RAN, rows=7)]) == 4


def test_a_batch_that_ran_without_input_counts() -> None:
    """A no-data batch (run to move a watermark) ran and is published like any other."""
    assert last_executed_batch([progress(6, RAN, rows=2), progress(7, RAN, rows=0), progress(8, IDLE)]) == 7


def test_nothing_ran_nothing_to_wait_for() -> None:
    assert last_executed_batch([]) is None
    assert last_executed_batch([progress(0, IDLE), progress(0, IDLE)]) is None
    # A progress whose steps Spark left out (None) is not a batch that ran.
    assert last_executed_batch([{"batchId": 2, "durationMs": None}]) is None


def test_spark_records_an_idle_query_s_progress_under_its_next_batch(
    spark: SparkSession, tmp_path: Path
) -> None:
    """The shapes above, from the session's Spark: a query that ran one batch and then idled."""
    source = tmp_path / "in"
    source.mkdir()
    (source / "one.txt").write_text("one line\n")
    with session_conf(spark, {IDLE_INTERVAL: "500"}):
        query = (
            spark.readStream.format("text")
            .load(str(source))
            .writeStream.format("noop")
            .option("checkpointLocation", str(tmp_path / "checkpoint"))
            .trigger(processingTime="200 milliseconds")
            .start()
        )
        try:
            deadline = time.monotonic() + 60
            while not (query.lastProgress and query.lastProgress["batchId"] == 1):
                assert time.monotonic() < deadline, query.recentProgress
                time.sleep(0.2)
            assert "addBatch" not in query.lastProgress["durationMs"]
            assert last_executed_batch(query.recentProgress) == 0
        finally:
            query.stop()
