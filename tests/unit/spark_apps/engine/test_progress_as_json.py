"""A progress event reaches the app's listener as Spark's JSON, in one call into the JVM, without
PySpark's field-by-field conversion (bench/results/history.md, "The progress listener")."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import listener as pyspark_listener

from spark_apps.engine.observability import JsonProgressListener


class _Recorder(JsonProgressListener):
    def __init__(self) -> None:
        self.progress: list[dict[str, Any]] = []
        self.arrived = threading.Event()

    def on_progress(self, progress: dict[str, Any]) -> None:
        self.progress.append(progress)
        self.arrived.set()


def test_a_progress_crosses_as_json_with_its_observed_metrics(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def field_by_field(*_: Any) -> Any:
        raise AssertionError("PySpark's per-field conversion of a progress was made")

    monkeypatch.setattr(pyspark_listener.QueryProgressEvent, "fromJObject", field_by_field)
    source = tmp_path / "in"
    spark.createDataFrame([(1,), (2,), (3,)], "n long").write.parquet(str(source))
    recorder = _Recorder()
    spark.streams.addListener(recorder)
    try:
        query = (
            spark.readStream.schema("n long")
            .parquet(str(source))
            .observe("totals", F.count(F.lit(1)).alias("rows"), F.sum("n").alias("sum"))
            .writeStream.format("noop")
            .queryName("progress_as_json")
            .option("checkpointLocation", str(tmp_path / "checkpoint"))
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination(120)
        assert recorder.arrived.wait(30), "no progress event reached the listener"
    finally:
        spark.streams.removeListener(recorder)
    first = recorder.progress[0]
    assert first["name"] == "progress_as_json"
    assert first["batchId"] == 0
    assert first["numInputRows"] == 3
    assert first["observedMetrics"]["totals"] == {"rows": 3, "sum": 6}
