"""Batch reprocessing: recompute the closed windows of a time range, reconcile, repair gold.

Reads the raw orders of [--from, --to) from Kafka (offsets found by append time, bounded by
the high watermarks at start) or, when retention already deleted part of the range (or on
request), from the deployment's bronze archive; recomputes windowed revenue with the same
transformations as the streaming app; compares it with gold window by window (missing,
extra, different); writes a JSON reconciliation report; and, unless --no-repair, makes gold
equal the recomputation for the windows inside the range and publishes the same change to the
compacted revenue topic (changed windows again, deleted ones as tombstones), so its latest value per
key stays equal to gold. Rerunning a range changes nothing. Under Airflow the config file is the
deployment's registered config (reprocess_revenue writes it next to the report on a local lake, under
the state dir for a lake on the object store, whose report is an object in the bucket).

Run: spark-submit spark_apps/reprocess_revenue_job.py --config include/config/streaming_app.yaml \
        --from 2026-11-22T09:00:00 --to 2026-11-22T10:00:00 --report /tmp/report.json
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from spark_apps.contract.config import AppConfigError, StreamingAppConfig, load_config, with_kafka_security
from spark_apps.contract.config_rules import interval_seconds
from spark_apps.contract.kafka_security import KafkaClientSecurity
from spark_apps.contract.naming import validate_location_id
from spark_apps.contract.records import GOLD_KEY_COLUMNS
from spark_apps.contract.side_files import write_json
from spark_apps.engine.session import DELTA_CONF, LOCAL_FILES_CONF, build_spark_session
from spark_apps.revenue.reconciliation import (
    EQUAL,
    EXTRA,
    closed_window_revenue,
    gold_in_range,
    reconcile_windows,
)
from spark_apps.revenue.stores import enrich_with_stores
from spark_apps.revenue.windows import revenue_window_key, to_revenue_kafka_records
from spark_apps.storage.bronze import newest_archived_time, read_bronze_raw, with_ingest_batch
from spark_apps.storage.gold import gold_frame, replace_gold_windows
from spark_apps.storage.kafka import kafka_admin_config, read_orders_batch, write_to_kafka
from spark_apps.storage.kafka_ranges import find_topic_range
from spark_apps.storage.stores import read_stores_table
from spark_apps.storage.tables import delta_rs_storage_options

LOG = logging.getLogger("reprocess_revenue_job")
Source = Literal["auto", "kafka", "bronze"]
# Producers' clocks may run behind the event time they stamp; read this much earlier.
CLOCK_SKEW = timedelta(minutes=5)


def read_since(config: StreamingAppConfig, start: datetime) -> datetime:
    """Where a range's read starts: the clock skew before it, and one dedupe horizon more, so the copy
    before each order's first copy in the range is read too (`spark_apps.revenue.dedupe.mark_repeats`)."""
    return start - CLOCK_SKEW - timedelta(seconds=config.dedupe.horizon_seconds)


REPORT_SAMPLE = 200


class RangeNotCoveredError(RuntimeError):
    """Neither Kafka nor bronze holds the whole range; the message names the gap."""


@dataclass
class ReconciliationReport:
    deployment_id: str
    range_start: str
    range_end: str
    source: str
    records_read: int
    windows_recomputed: int
    windows_in_gold_before: int
    missing: int = 0
    extra: int = 0
    different: int = 0
    repaired: bool = False
    fixed_windows: list[dict[str, Any]] = field(default_factory=list)

    @property
    def changes(self) -> int:
        return self.missing + self.extra + self.different


def parse_range(start: str, end: str, window_size: str) -> tuple[datetime, datetime]:
    """Naive UTC datetimes of [start, end); both must align to the window size, and start < end."""
    begin, finish = (datetime.fromisoformat(v.replace("Z", "+00:00")) for v in (start, end))
    begin, finish = (v.astimezone(UTC).replace(tzinfo=None) if v.tzinfo else v for v in (begin, finish))
    if begin >= finish:
        raise ValueError(f"--from {start} must be before --to {end}")
    size = interval_seconds(window_size)
    for name, value in (("--from", begin), ("--to", finish)):
        if int((value - datetime(1970, 1, 1)).total_seconds()) % size:
            raise ValueError(f"{name} {value.isoformat()} is not aligned to the {window_size} windows")
    return begin, finish


def _epoch_ms(value: datetime) -> int:
    return int((value - datetime(1970, 1, 1)).total_seconds() * 1000)


def read_range(
    spark: SparkSession, config: StreamingAppConfig, start: datetime, end: datetime, source: Source
) -> tuple[DataFrame, str]:
    """Raw order records that can hold [start, end), from the source chosen by `source`."""
    kafka_range = None
    since = read_since(config, start)
    if source in ("auto", "kafka"):
        kafka_range = find_topic_range(
            kafka_admin_config(config), config.kafka.orders_topic, _epoch_ms(since)
        )
        if kafka_range.covered:
            starting, ending = kafka_range.spark_offsets()
            LOG.info(
                "reading %d records of %s from Kafka", kafka_range.record_count, config.kafka.orders_topic
            )
            raw = read_orders_batch(spark, config, starting, ending)
            return with_ingest_batch(raw, config.names.bronze_orders_table, since), "kafka"
        if source == "kafka":
            raise RangeNotCoveredError(
                "Kafka no longer holds the whole range: " + "; ".join(kafka_range.gaps)
            )
    bronze_path = config.names.bronze_orders_table
    from delta.tables import DeltaTable

    if not DeltaTable.isDeltaTable(spark, bronze_path):
        gaps = "; ".join(kafka_range.gaps) if kafka_range else "not checked"
        raise RangeNotCoveredError(f"no bronze archive at {bronze_path}, and Kafka gaps: {gaps}")
    # From the Delta log's statistics: a scan for it read all of bronze's history.
    newest = newest_archived_time(spark, bronze_path)
    if newest is None or newest < end.replace(tzinfo=UTC):
        raise RangeNotCoveredError(
            f"bronze at {bronze_path} holds records appended only until "
            f"{newest.replace(tzinfo=None).isoformat() if newest else None}, "
            f"before the range end {end.isoformat()}: the streaming app has not archived the whole range yet"
        )
    return read_bronze_raw(spark, bronze_path).filter(F.col("timestamp") >= F.lit(since)), "bronze"


def reprocess(
    spark: SparkSession,
    config: StreamingAppConfig,
    start: datetime,
    end: datetime,
    source: Source = "auto",
    repair: bool = True,
    location_ids: list[str] | None = None,
) -> ReconciliationReport:
    """Recompute, reconcile and (optionally) repair gold for [start, end); return the report.

    With `location_ids`, only those stores' windows are recomputed, compared and repaired.
    """
    raw, used = read_range(spark, config, start, end, source)
    raw = raw.persist()
    try:
        recomputed = closed_window_revenue(
            raw,
            config.window.size,
            config.window.slide,
            start,
            end,
            config.dedupe.horizon_seconds,
            config.order_rules(),
        )
        enriched = enrich_with_stores(recomputed, read_stores_table(spark, config)).withColumn(
            "batch_id",
            F.lit(-1).cast("long"),  # -1 marks windows written by batch reprocessing
        )
        if location_ids:
            enriched = enriched.filter(F.col("location_id").isin(location_ids))
        enriched = enriched.persist()
        gold_path = config.names.gold_revenue_table
        from delta.tables import DeltaTable

        gold = (
            gold_in_range(gold_frame(spark, gold_path), start, end)
            if DeltaTable.isDeltaTable(spark, gold_path)
            else enriched.limit(0)
        )
        if location_ids:
            gold = gold.filter(F.col("location_id").isin(location_ids))
        diff = reconcile_windows(enriched, gold).filter(F.col("status") != EQUAL).persist()
        counts = {row["status"]: row["count"] for row in diff.groupBy("status").count().collect()}
        report = ReconciliationReport(
            deployment_id=config.deployment_id,
            range_start=start.isoformat(),
            range_end=end.isoformat(),
            source=used,
            records_read=raw.count(),
            windows_recomputed=enriched.count(),
            windows_in_gold_before=gold.count(),
            missing=counts.get("missing", 0),
            extra=counts.get("extra", 0),
            different=counts.get("different", 0),
        )
        report.fixed_windows = [
            {k: (str(v) if v is not None else None) for k, v in row.asDict().items()}
            for row in diff.orderBy("window_start", "location_id", "order_type")
            .limit(REPORT_SAMPLE)
            .collect()
        ]
        if repair and report.changes:
            # Topic first, then gold: a crash in between leaves gold unrepaired, so the rerun finds
            # the same changes and publishes them again; the reverse order could lose the publish.
            publish_repairs(enriched, diff, config)
            replace_gold_windows(enriched, gold_path, start, end, location_ids)
            report.repaired = True
        return report
    finally:
        raw.unpersist()


def publish_repairs(recomputed: DataFrame, diff: DataFrame, config: StreamingAppConfig) -> None:
    """Make the compacted revenue topic agree with the repaired gold: windows the repair adds or
    changes are published again, windows it deletes get a tombstone (key, null value)."""
    key = list(GOLD_KEY_COLUMNS)
    changed = recomputed.join(diff.filter(F.col("status") != EXTRA).select(*key), key, "left_semi")
    deleted = diff.filter(F.col("status") == EXTRA)
    tombstones = deleted.select(
        revenue_window_key(deleted).alias("key"), F.lit(None).cast("string").alias("value")
    )
    write_to_kafka(
        to_revenue_kafka_records(changed).unionByName(tombstones), config, config.kafka.revenue_topic
    )


def build_session(config: StreamingAppConfig) -> SparkSession:
    return build_spark_session(
        config.names.reprocess_app_name,
        extra_conf={
            **DELTA_CONF,
            **LOCAL_FILES_CONF,
            "spark.sql.shuffle.partitions": str(config.shuffle_partitions),
        },
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Recompute, reconcile and repair windowed revenue for a range"
    )
    parser.add_argument("--config", help="YAML config file of the streaming app")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="FIELD=VALUE")
    parser.add_argument("--from", dest="range_start", required=True, help="range start (ISO, UTC)")
    parser.add_argument("--to", dest="range_end", required=True, help="range end, exclusive (ISO, UTC)")
    parser.add_argument("--source", choices=["auto", "kafka", "bronze"], default="auto")
    parser.add_argument("--report", help="write the JSON reconciliation report here")
    parser.add_argument("--no-repair", dest="repair", action="store_false", help="only report")
    parser.add_argument("--stores", help="comma-separated locationIds: recompute and repair only these")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        # Kafka credentials come from the submitter's environment (see spark_apps/contract/kafka_security.py).
        config = with_kafka_security(
            load_config(args.config, args.overrides), KafkaClientSecurity.from_environment()
        )
        start, end = parse_range(args.range_start, args.range_end, config.window.size)
        # Checked again here (the DAG checks first): the job may be submitted by hand.
        stores = (
            [validate_location_id(s.strip()) for s in args.stores.split(",") if s.strip()]
            if args.stores
            else None
        )
    except (AppConfigError, ValueError) as error:
        print(f"ERROR: {error}", file=sys.stderr)
        return 2
    spark = build_session(config)
    try:
        report = reprocess(spark, config, start, end, args.source, args.repair, stores)
    except RangeNotCoveredError as error:
        print(f"ERROR: {error}", file=sys.stderr)
        return 3
    document = {**asdict(report), "changes": report.changes}
    if args.report:
        # A local file, or for a lake on the object store an object in its bucket, written whole with
        # the store this driver was started for (its S3A settings and environment).
        write_json(args.report, document, delta_rs_storage_options(args.report, spark))
    print(json.dumps({k: v for k, v in document.items() if k != "fixed_windows"}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
