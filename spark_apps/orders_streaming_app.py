"""The orders revenue streaming app: Kafka orders in, exact windowed revenue out.

Two streaming queries per deployment, each with its own checkpoint:
  * archive — validate every record; append it to the bronze Delta archive (idempotent
    per batch), send invalid ones to the dead-letter topic with a reason, and route valid
    orders to general_orders / restaurant_orders. Stateless.
  * revenue — deduplicate valid orders by orderId within the watermark, aggregate count
    and DECIMAL revenue per (location, order type, event-time window), enrich with the
    latest store address, MERGE the full window totals into the gold table and publish
    them to the compacted revenue topic keyed location|type|window_start.
Bad data never stops the app: it is routed, counted and kept.

Run: spark-submit spark_apps/orders_streaming_app.py --config include/config/streaming_app.yaml \
        --set deployment_id=blue --set trigger.mode=available_now
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
from collections.abc import Callable
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery

from spark_apps import io
from spark_apps.config import AppConfigError, StreamingAppConfig, load_config
from spark_apps.observability import BatchCounters, ProgressPublisher
from spark_apps.session import DELTA_CONF, spark_conf
from spark_apps.transformations import (
    deduplicate_orders,
    enrich_with_stores,
    parse_and_validate_orders,
    split_by_order_type,
    to_dlq_kafka_records,
    to_dlq_records,
    to_kafka_records,
    to_revenue_kafka_records,
    valid_orders,
    windowed_revenue,
)

LOG = logging.getLogger("orders_streaming_app")
ARCHIVE_QUERY = "archive"
REVENUE_QUERY = "revenue"


def archive_batch(config: StreamingAppConfig, counters: BatchCounters) -> Callable[[DataFrame, int], None]:
    """foreachBatch of the archive query: bronze, dead letters, split topics."""
    names = config.names

    def handle(validated: DataFrame, batch_id: int) -> None:
        validated.persist()
        try:
            io.append_bronze_idempotent(
                io.bronze_rows(validated),
                names.bronze_orders_table,
                f"{config.deployment_id}-bronze",
                batch_id,
            )
            dead_letters = to_dlq_records(validated)
            io.write_to_kafka(to_dlq_kafka_records(dead_letters), config, config.kafka.dlq_topic)
            general, restaurant = split_by_order_type(valid_orders(validated))
            io.write_to_kafka(to_kafka_records(general), config, config.kafka.general_orders_topic)
            io.write_to_kafka(to_kafka_records(restaurant), config, config.kafka.restaurant_orders_topic)
            totals = validated.agg(
                F.count(F.lit(1)).alias("records"), F.count("dlq_reason").alias("dead_letters")
            ).first()
            if totals is not None:
                counters.add("records_archived", int(totals["records"]))
                counters.add("dead_letters", int(totals["dead_letters"]))
        finally:
            validated.unpersist()

    return handle


def revenue_batch(config: StreamingAppConfig, counters: BatchCounters) -> Callable[[DataFrame, int], None]:
    """foreachBatch of the revenue query: enrich, MERGE into gold, publish to the revenue topic."""
    names = config.names

    def handle(windows: DataFrame, batch_id: int) -> None:
        spark = windows.sparkSession
        updates = enrich_with_stores(windows, io.read_stores_table(spark, config)).withColumn(
            "batch_id", F.lit(batch_id).cast("long")
        )
        updates.persist()
        try:
            io.merge_gold(updates, names.gold_revenue_table)
            io.write_to_kafka(to_revenue_kafka_records(updates), config, config.kafka.revenue_topic)
            counters.add("windows_updated", updates.count())
        finally:
            updates.unpersist()

    return handle


def _trigger(config: StreamingAppConfig) -> dict[str, Any]:
    if config.trigger.mode == "available_now":
        return {"availableNow": True}
    return {"processingTime": config.trigger.interval}


def start_queries(
    spark: SparkSession, config: StreamingAppConfig
) -> tuple[list[StreamingQuery], ProgressPublisher]:
    """Start the archive and revenue queries of one deployment; return them running, and their listener."""
    names = config.names
    counters = BatchCounters()
    publisher = ProgressPublisher(
        names.progress_dir,
        counters,
        names.consumer_group,
        io.kafka_admin_config(config),
        commit_for_query=names.query_name(REVENUE_QUERY),
    )
    spark.streams.addListener(publisher)
    validated = parse_and_validate_orders(io.read_orders_stream(spark, config))

    archive = (
        validated.writeStream.queryName(names.query_name(ARCHIVE_QUERY))
        .foreachBatch(archive_batch(config, counters))
        .option("checkpointLocation", names.checkpoint(ARCHIVE_QUERY))
        .trigger(**_trigger(config))
        .start()
    )
    deduplicated = deduplicate_orders(valid_orders(validated), config.window.watermark)
    windows = windowed_revenue(deduplicated, config.window.size, config.window.slide)
    revenue = (
        windows.writeStream.queryName(names.query_name(REVENUE_QUERY))
        .outputMode("update")
        .foreachBatch(revenue_batch(config, counters))
        .option("checkpointLocation", names.checkpoint(REVENUE_QUERY))
        .trigger(**_trigger(config))
        .start()
    )
    return [archive, revenue], publisher


def build_session(config: StreamingAppConfig) -> SparkSession:
    """The app's SparkSession; master and jars come from spark-submit (or the caller's builder)."""
    builder = SparkSession.builder.appName(f"orders-revenue-{config.deployment_id}")
    conf = spark_conf(
        {
            **DELTA_CONF,
            "spark.sql.shuffle.partitions": str(config.shuffle_partitions),
            # Both queries share the driver; FAIR keeps one from starving the other.
            "spark.scheduler.mode": "FAIR",
        }
    )
    for key, value in conf.items():
        builder = builder.config(key, value)
    return builder.getOrCreate()


def run(config: StreamingAppConfig, spark: SparkSession | None = None) -> None:
    """Run the app until its queries end (available_now) or it is told to stop (SIGTERM/SIGINT)."""
    session = spark or build_session(config)
    session.conf.set("spark.sql.shuffle.partitions", str(config.shuffle_partitions))
    queries, publisher = start_queries(session, config)
    LOG.info("deployment %s running queries %s", config.deployment_id, [q.name for q in queries])

    def stop_gracefully(signum: int, _frame: Any) -> None:
        LOG.info("signal %s: stopping queries", signum)
        for query in queries:
            query.stop()

    if spark is None:  # only the spark-submit entry point owns the process's signals
        signal.signal(signal.SIGTERM, stop_gracefully)
    try:
        for query in queries:
            query.awaitTermination()
    finally:
        for query in queries:
            if query.lastProgress:
                publisher.wait_until_published(query.name, query.lastProgress["batchId"])
        session.streams.removeListener(publisher)
        publisher.close()
    failures = [q.exception() for q in queries if q.exception() is not None]
    if failures:
        raise RuntimeError(f"streaming query failed: {failures[0]}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Orders revenue streaming app")
    parser.add_argument("--config", help="YAML config file (see include/config/streaming_app.yaml)")
    parser.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="FIELD=VALUE",
        help="override a config field, e.g. --set window.size='1 minute' (repeatable)",
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        config = load_config(args.config, args.overrides)
    except AppConfigError as error:
        print(f"ERROR: {error}", file=sys.stderr)
        return 2
    run(config)
    return 0


if __name__ == "__main__":
    sys.exit(main())
