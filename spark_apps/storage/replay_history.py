"""A replay's history from bronze: the archived records before the cut-over, copied once into the
replaying deployment's own frozen table and read from it as a stream of bounded micro-batches; Kafka
is then read from the cut-over offsets on (`history_cut_over_offsets`).
"""

from __future__ import annotations

import json

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from spark_apps.contract.config import StreamingAppConfig
from spark_apps.contract.records import ARRIVAL_ORDER
from spark_apps.validation.schemas import KAFKA_RAW_COLUMNS

# A replay's history is read in micro-batches of at most `kafka.max_offsets_per_trigger` records (the
# same bound as a replay from Kafka's earliest offsets; this many when unset), in this many files
# each: the files of one batch are read in parallel.
DEFAULT_HISTORY_RECORDS_PER_BATCH = 500_000
HISTORY_FILES_PER_BATCH = 8


def history_records_per_file(config: StreamingAppConfig) -> int:
    per_batch = config.kafka.max_offsets_per_trigger or DEFAULT_HISTORY_RECORDS_PER_BATCH
    return max(1, -(-per_batch // HISTORY_FILES_PER_BATCH))


def read_replay_history_stream(spark: SparkSession, config: StreamingAppConfig) -> DataFrame:
    """The history of a replay from bronze (the archived records before the cut-over) as a stream of
    raw Kafka records in bounded micro-batches, in the order the archiving deployment received them:
    the copy's files hold consecutive stretches of that order (`materialize_replay_history`) and the
    Delta source admits them in the order of its log (read as changes from version 0, the copy's
    commit: a table's initial snapshot would be ordered by file time instead),
    `HISTORY_FILES_PER_BATCH` per batch. So a
    batch's memory does not grow with the history, and the watermark a batch moves never passes
    history still to come by more than the archiving stream's own batches did."""
    return (
        spark.readStream.format("delta")
        .option("startingVersion", "0")
        .option("maxFilesPerTrigger", str(HISTORY_FILES_PER_BATCH))
        .load(materialize_replay_history(spark, config))
        .select(*KAFKA_RAW_COLUMNS)
    )


def history_cut_over_offsets(config: StreamingAppConfig) -> str:
    """Spark startingOffsets JSON: Kafka is read from the first offset bronze does not hold."""
    assert config.history is not None
    offsets = {str(p): o for p, o in sorted(config.history.kafka_offsets.items())}
    return json.dumps({config.kafka.orders_topic: offsets})


def materialize_replay_history(spark: SparkSession, config: StreamingAppConfig) -> str:
    """Copy the history (bronze records before the cut-over) into this deployment's own frozen table.

    Read as a stream, the source bronze would keep growing while its deployment runs; a frozen copy
    lets the stream finish the history and report it done. The copy is one Delta commit made once:
    after a crash it either exists whole or is made again, and a restart reuses it. Its rows are
    range-partitioned and sorted by the archiving deployment's arrival order (`ARRIVAL_ORDER`) into
    files of at most `history_records_per_file` records, so the commit lists consecutive stretches of
    that order, in order (Delta records a write's files in the order of its tasks).
    """
    from delta.tables import DeltaTable

    assert config.history is not None
    target = config.names.replay_history_table
    if DeltaTable.isDeltaTable(spark, target):
        return target
    before_cut_over = F.lit(False)
    for partition, offset in config.history.kafka_offsets.items():
        if offset >= 0:
            before_cut_over = before_cut_over | (
                (F.col("partition") == partition) & (F.col("offset") < offset)
            )
    history = (
        spark.read.format("delta")
        .load(config.history.bronze_table)
        .where((F.col("topic") == config.kafka.orders_topic) & before_cut_over)
        .select(*KAFKA_RAW_COLUMNS, "ingest_batch_id")
    )
    per_file = history_records_per_file(config)
    files = max(1, -(-history.count() // per_file))
    order = [F.col(column).asc_nulls_last() for column in ARRIVAL_ORDER]
    (
        history.repartitionByRange(files, *order)
        .sortWithinPartitions(*order)
        .select(*KAFKA_RAW_COLUMNS)
        .write.format("delta")
        .mode("overwrite")
        .option("maxRecordsPerFile", str(per_file))
        .save(target)
    )
    return target
