"""Helpers shared by the table modules: create an empty Delta table, tell a table on this machine's
filesystem from one in an object store (and how the driver's delta-rs reaches the latter), and hold a
few driver-side rows as a local relation.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import StructType

from spark_apps.contract.object_store import LakeObjectStore, is_object_store_root

LOG_RETENTION_PROPERTY = "delta.logRetentionDuration"
# How long gold's and bronze's Delta logs keep an entry: 1 hour, not Delta's 30 days. Each live batch
# commits to both (~35,000 commits a day each), and a reader finds a table's newest version by listing
# its log directory: on a local disk (Spark's HDFSLogStore, delta-rs's local store) the whole directory,
# so every kept entry adds to every commit of every batch. Measured (`make bench-log-length`, one
# commit): with a day of entries Spark's append took 915 ms instead of 420 and delta-rs's open +
# append 429 ms instead of 8; with a week, 4.8 s and 3.3 s; a live app slowed down by the day. An hour
# is ~1,440 entries (+ at most the 100 between checkpoints): tens of milliseconds. The platform reads
# only the newest version of either table (time travel reaches back this far; docs/operations.md).
# Delta requires the log to keep at least as long as a removed file's tombstone, so tombstones keep an
# hour too; `maintain_lake` then VACUUMs in full mode (an expired tombstone leaves the snapshot, and only
# a full VACUUM still finds its file: by its age against the maintenance's own retention).
LIVE_TABLE_LOG_RETENTION = "interval 1 hours"
DELETED_FILE_RETENTION_PROPERTY = "delta.deletedFileRetentionDuration"
LIVE_TABLE_PROPERTIES = {
    LOG_RETENTION_PROPERTY: LIVE_TABLE_LOG_RETENTION,
    DELETED_FILE_RETENTION_PROPERTY: LIVE_TABLE_LOG_RETENTION,
}


def ensure_delta_table(
    spark: SparkSession,
    table_path: str,
    schema: StructType,
    *partition_by: str,
    properties: Mapping[str, str] | None = None,
) -> None:
    """Create an empty Delta table with `schema` (and table `properties`) unless one exists (a stream
    can only read a table). An existing table keeps the properties it was created with."""
    from delta.tables import DeltaTable

    builder = DeltaTable.createIfNotExists(spark).location(table_path).addColumns(schema)
    if partition_by:
        builder = builder.partitionedBy(*partition_by)
    for key, value in (properties or {}).items():
        builder = builder.property(key, value)
    builder.execute()


def ensure_live_table_properties(
    table_path: str, storage_options: Mapping[str, str], properties: Mapping[str, str] = LIVE_TABLE_PROPERTIES
) -> dict[str, str]:
    """Give an existing live table (gold or bronze) `properties` (`LIVE_TABLE_PROPERTIES`, bronze's
    `storage.bronze.BRONZE_TABLE_PROPERTIES`) when it lacks them (a table created before they existed
    keeps its creation's properties otherwise). One metadata commit, by delta-rs, at the driver's start
    before any of its queries writes; returns what it set (empty: nothing to commit).
    The next checkpoint's log cleanup (the driver's every 100 bronze appends, delta-rs's every 100 gold
    ones, `maintain_lake` hourly) then drops the entries older than the retention."""
    from deltalake import DeltaTable

    table = DeltaTable(table_path, storage_options=dict(storage_options) or None)
    declared = table.metadata().configuration
    missing = {k: v for k, v in properties.items() if declared.get(k) != v}
    if missing:
        table.alter.set_table_properties(missing, raise_if_not_exists=False)
    return missing


def local_table_path(table_path: str) -> str | None:
    """The filesystem path of a table on this machine's filesystem, or None for any other store.

    A table path without a scheme, or with `file:`, is local; `s3a://`, `abfss://` and the like are
    not (their commits need the store's own coordination, which only Spark's Delta is set up for).
    """
    from urllib.parse import urlparse

    parsed = urlparse(table_path)
    if parsed.scheme == "":
        return table_path
    if parsed.scheme == "file":
        return parsed.path
    return None


def delta_rs_storage_options(table_path: str, spark: SparkSession | None = None) -> dict[str, str]:
    """delta-rs's `storage_options` for a table this driver's Spark reaches: none for a local table; for
    one on the object store, the store the driver was started for, read back from its S3A settings
    (`spark`'s, or before the session exists, those spark-submit gave the driver) and the credentials
    in its environment (secrets in clear: never log them)."""
    if not is_object_store_root(table_path):
        return {}
    conf = dict(spark.sparkContext.getConf().getAll()) if spark is not None else submitted_spark_conf()
    return LakeObjectStore.from_spark_hadoop_conf(conf, os.environ).delta_rs_storage_options()


def submitted_spark_conf() -> dict[str, str]:
    """The Spark settings spark-submit gave this driver, before its session exists.

    spark-submit starts the JVM first and hands them to it as system properties; the Python driver
    sees them only through that JVM. Until a SparkContext attaches to its gateway, `SparkConf()` is an
    empty Python-side dict, so attach first (what building the session does anyway, through the same
    gateway spark-submit named in PYSPARK_GATEWAY_PORT). Outside spark-submit no JVM is started here:
    one started without the builder's settings (jars, driver memory) would be the session's JVM too.
    """
    from pyspark import SparkConf, SparkContext

    if SparkContext._jvm is None and "PYSPARK_GATEWAY_PORT" in os.environ:
        SparkContext._ensure_initialized()
    return dict(SparkConf().getAll())


def local_table(spark: SparkSession, rows: list[tuple[Any, ...]], schema: StructType) -> DataFrame:
    """`rows` as a local relation: a join broadcasts it from the driver without running a Spark job.

    (`createDataFrame` of a list of rows makes an RDD instead, which every batch's broadcast join
    would read again with a job of its own; from pandas it makes a local relation.)
    """
    import pandas as pd

    return spark.createDataFrame(pd.DataFrame.from_records(rows, columns=schema.fieldNames()), schema)
