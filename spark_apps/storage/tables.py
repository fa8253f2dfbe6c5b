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
