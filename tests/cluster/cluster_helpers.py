"""Topics, progress and exactly-once checks shared by the cluster fault test.

Lake tables and the driver's side files are read through the platform's lake readers
(`lake_storage`), so the same checks work on a local lake and on one on the object store.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import datetime
from decimal import Decimal
from pathlib import Path

from confluent_kafka.admin import AdminClient, NewTopic

from revenue_platform.lake_storage import open_lake_table, read_side_file
from revenue_platform.orders_generator import GeneratedRecord, expected_windows
from spark_apps.contract.config import StreamingAppConfig
from spark_apps.contract.delta_reads import read_delta
from tests.kafka_helpers import APP_TOPIC_FIELDS, COMPACTED_APP_TOPICS, app_topic_overrides

Gold = dict[tuple[str, str, datetime], tuple[int, Decimal]]


def create_replicated_app_topics(bootstrap: str, suffix: str) -> dict[str, str]:
    """The app's topics for `suffix` as the spec's `cluster` environment makes them: 3 replicas,
    min ISR 2 (an acknowledged write survives one broker). Returns the app's topic overrides."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topics = []
    for base in APP_TOPIC_FIELDS.values():
        config = {"min.insync.replicas": "2"}
        if base in COMPACTED_APP_TOPICS:
            config["cleanup.policy"] = "compact"
        topics.append(NewTopic(f"{base}_{suffix}", 4 if base == "orders" else 2, 3, config=config))
    for future in admin.create_topics(topics).values():
        future.result(timeout=60)
    return app_topic_overrides(suffix)


def partition_leaders(bootstrap: str, topic: str) -> dict[int, int]:
    """Partition -> leader broker id."""
    metadata = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=15)
    return {p: meta.leader for p, meta in metadata.topics[topic].partitions.items()}


def revenue_batch(config: StreamingAppConfig, query: str = "revenue") -> int:
    """The query's last committed batch id, from the progress file the app writes (-1: none)."""
    progress = read_side_file(f"{config.names.progress_dir}/{config.names.query_name(query)}.json") or {}
    try:
        return int(progress["batch_id"])
    except (ValueError, KeyError, TypeError):
        return -1


def wait_for(condition: Callable[[], bool], what: str, timeout_s: float, log: Path | None = None) -> None:
    """Polls `condition` every second; at the timeout fails naming `what`, with the tail of `log`."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() >= deadline:
            tail = log.read_text(errors="replace")[-3000:] if log else ""
            raise AssertionError(f"timed out waiting for {what}; app log tail:\n{tail}")
        time.sleep(1)


def oracle(records: list[GeneratedRecord]) -> Gold:
    return {k: (w.order_count, w.revenue) for k, w in expected_windows(records, window_seconds=15).items()}


def gold(table_path: str) -> Gold:
    table = open_lake_table(table_path)
    if table is None:
        return {}
    rows = read_delta(table).to_pylist()
    found = {
        (r["location_id"], r["order_type"], r["window_start"].replace(tzinfo=None)): (
            r["order_count"],
            r["revenue"],
        )
        for r in rows
    }
    assert len(found) == len(rows), "a window key appears twice in gold"
    return found


def bronze_offsets(table_path: str) -> list[tuple[int, int]]:
    """(partition, offset) of every bronze row: each consumed record must be there exactly once."""
    table = open_lake_table(table_path)
    assert table is not None, f"no bronze table at {table_path}"
    rows = read_delta(table, columns=["partition", "offset"]).to_pylist()
    return [(r["partition"], r["offset"]) for r in rows]


def cents(gold_rows: Gold) -> int:
    return int(sum((revenue for _, revenue in gold_rows.values()), Decimal("0")) * 100)
