"""What the streaming app runs: one deployment's listener, tables and a starter per streaming query
(a replay's history query first when it replays from bronze, then the query reading Kafka),
each micro-batch handled by `micro_batch.MicroBatchPipeline` behind the lease fence.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming.query import StreamingQuery

from spark_apps.contract.config import StreamingAppConfig
from spark_apps.contract.fencing import LeaseFence
from spark_apps.contract.naming import HISTORY_CHECKPOINT, PIPELINE_CHECKPOINT
from spark_apps.contract.naming import HISTORY_QUERY_ROLE as HISTORY_QUERY
from spark_apps.contract.naming import REVENUE_QUERY_ROLE as REVENUE_QUERY
from spark_apps.engine.checkpoints import (
    has_committed,
    refuse_another_kafka_cluster,
    refuse_retired_checkpoints,
)
from spark_apps.engine.micro_batch import LIVE_AFTER_HISTORY_BATCH_BASE, MicroBatchPipeline
from spark_apps.engine.observability import INGEST_METRICS, BatchCounters, ProgressPublisher, ingest_totals
from spark_apps.revenue.dedupe import initial_repeat_state, with_repeats
from spark_apps.storage.bronze import BRONZE_TABLE_PROPERTIES, ensure_bronze_table, read_bronze
from spark_apps.storage.gold import ensure_gold_table
from spark_apps.storage.kafka import kafka_admin_config, kafka_cluster_id, read_orders_stream
from spark_apps.storage.replay_history import read_replay_history_stream
from spark_apps.storage.stores import StoresTable
from spark_apps.storage.tables import (
    LIVE_TABLE_PROPERTIES,
    delta_rs_storage_options,
    ensure_live_table_properties,
)
from spark_apps.validation.orders import parse_and_validate_orders

LOG = logging.getLogger("orders_streaming_app.queries")


def _trigger(config: StreamingAppConfig) -> dict[str, Any]:
    if config.trigger.mode == "available_now":
        return {"availableNow": True}
    return {"processingTime": config.trigger.interval}


@dataclass
class PreparedQueries:
    """What `prepare_queries` made ready: a starter per query, in the order they run (each once the one
    before has ended); the listener; what closes the clients they hold (the stores table, the revenue
    topic's producer); and how many queries must have got through their first trigger for the driver
    to report ready (a replay's history query may run for hours before the Kafka query starts)."""

    starters: list[Callable[[], StreamingQuery]]
    publisher: ProgressPublisher
    close_clients: Callable[[], None]
    ready_after: int = 0

    def __post_init__(self) -> None:
        self.ready_after = self.ready_after or len(self.starters)


def validated_orders(
    raw: DataFrame, config: StreamingAppConfig, initial_dedupe: DataFrame | None = None
) -> DataFrame:
    """A stream of raw Kafka records, validated and marked with the dedupe rule's repeats (the
    operator's state starting from `initial_dedupe`, when given)."""
    # Counted by a streaming observation (reported with the query's progress): no extra job.
    checked = parse_and_validate_orders(raw, config.order_rules()).observe(
        INGEST_METRICS, *ingest_totals(F.col("dlq_reason"))
    )
    return with_repeats(checked, config.dedupe.horizon_seconds, config.window.delay_seconds, initial_dedupe)


def prepare_queries(
    spark: SparkSession,
    config: StreamingAppConfig,
    fence: LeaseFence,
    stop_requested: threading.Event | None = None,
) -> PreparedQueries:
    """Make one deployment ready to run: its listener, its tables, and a starter per query, each
    batch writing behind `fence`: its query; for a replay from bronze, first a query that reads the
    history in bounded batches to its end, then the query that reads Kafka from the cut-over. Once
    `stop_requested` is set, no further batch starts (`engine.stopping`)."""
    names = config.names
    refuse_retired_checkpoints(spark, config)
    # Before anything reads a checkpoint: its offsets must be the brokers' cluster's.
    refuse_another_kafka_cluster(spark, config, kafka_cluster_id(config))
    counters = BatchCounters()
    stores = StoresTable(config)
    history_first = config.history is not None
    stop_requested = stop_requested or threading.Event()
    live = MicroBatchPipeline(
        config,
        fence,
        counters,
        stores,
        batch_base=LIVE_AFTER_HISTORY_BATCH_BASE if history_first else 0,
        stop_requested=stop_requested,
    )
    history = (
        MicroBatchPipeline(
            config, fence, counters, stores, revenue_topic=live.revenue_topic, stop_requested=stop_requested
        )
        if history_first
        else None
    )
    publisher = ProgressPublisher(
        names.progress_dir,
        counters,
        names.consumer_group,
        kafka_admin_config(config),
        query=names.query_name(REVENUE_QUERY),
        batch_facts=live.batch_facts,
        history_query=names.query_name(HISTORY_QUERY) if history else None,
        history_facts=history.batch_facts if history else None,
        storage_options=delta_rs_storage_options(names.progress_dir, spark),
    )
    spark.streams.addListener(publisher)
    # Both tables exist before the query starts: no batch has to ask whether they exist.
    if ensure_bronze_table(spark, names.bronze_orders_table):
        # Created just now: the first query's first append need not read what bronze holds. (The
        # Kafka query after a replay's history starts at batch 2^30 and resumes, which reads it.)
        (history or live).bronze.holds_no_batch()
    ensure_gold_table(spark, names.gold_revenue_table)
    # A table created before the live tables' log retention (`storage.tables.LIVE_TABLE_PROPERTIES`), or
    # a bronze table whose appends still checkpoint (`storage.bronze.BRONZE_TABLE_PROPERTIES`), gets
    # them now, before any batch of this driver commits.
    for table, properties in (
        (names.bronze_orders_table, BRONZE_TABLE_PROPERTIES),
        (names.gold_revenue_table, LIVE_TABLE_PROPERTIES),
    ):
        changed = ensure_live_table_properties(table, delta_rs_storage_options(table, spark), properties)
        if changed:
            LOG.info("%s: set %s", table, changed)

    def start_kafka_query() -> StreamingQuery:
        # After a replay's history, a new Kafka query starts from the order ids the history saw within
        # the horizon: a copy re-sent across the cut-over is a repeat like any other.
        initial_dedupe = None
        if history_first and not has_committed(spark, names.checkpoint(PIPELINE_CHECKPOINT)):
            initial_dedupe = initial_repeat_state(
                read_bronze(spark, names.bronze_orders_table), config.dedupe.horizon_seconds
            )
        writer = (
            validated_orders(read_orders_stream(spark, config), config, initial_dedupe)
            .writeStream.queryName(names.query_name(REVENUE_QUERY))
            .foreachBatch(live)
            .option("checkpointLocation", names.checkpoint(PIPELINE_CHECKPOINT))
            .trigger(**_trigger(config))
        )
        return writer.start()

    def close_clients() -> None:
        stores.close()
        live.revenue_topic.close()
        for pipeline in (history, live):
            if pipeline is not None:
                pipeline.bronze.close()  # a bronze log checkpoint being written ends first

    if history is None:
        return PreparedQueries([start_kafka_query], publisher, close_clients)

    def start_history() -> StreamingQuery:
        writer = (
            validated_orders(read_replay_history_stream(spark, config), config)
            .writeStream.queryName(names.query_name(HISTORY_QUERY))
            .foreachBatch(history)
            .option("checkpointLocation", names.checkpoint(HISTORY_CHECKPOINT))
            # To its end, then it stops and the Kafka query starts (a restart finds it ended).
            .trigger(availableNow=True)
        )
        return writer.start()

    return PreparedQueries([start_history, start_kafka_query], publisher, close_clients, ready_after=1)
