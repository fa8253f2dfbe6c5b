"""The revenue topic takes a batch with more windows than the producer's local queue holds.

A batch changes up to one window per order read with tumbling windows (window.size / window.slide
with sliding ones): sparse traffic or thousands of stores, with `kafka.max_offsets_per_trigger` at
500,000, can change far more than librdkafka's local queue of 100,000 messages holds. While the
broker keeps up, deliveries empty the queue as fast as the driver fills it; when it does not (a
leader moving, a busy or paused broker), a send into the full queue raises BufferError. Before the
writer waited for deliveries there, such a batch failed, and failed again on every retry for as
long as the broker lagged. Here the test's broker is paused (SIGSTOP) under a 150,000-window
transaction until the producer's queue is full and a second longer, and a read_committed reader
then sees each window once.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path

import pytest

from spark_apps.contract.config import load_config
from spark_apps.contract.records import GOLD_COLUMNS
from spark_apps.storage.revenue_topic import (
    QUEUE_FULL_MESSAGES,
    RevenueTopicDeliveryError,
    RevenueTopicWriter,
)
from tests.kafka_helpers import app_topic_overrides, create_app_topics, read_topic, unique_suffix

pytestmark = pytest.mark.integration

# Over librdkafka's default queue.buffering.max.messages (100,000).
WINDOWS = 150_000
# The broker stays paused until the producer's queue is full, then this much longer (far inside the
# transaction's 60 s), so the driver meets a full queue on a machine of any speed.
PAUSED_AFTER_FULL_S = 1.0
QUEUE_FILL_LIMIT_S = 30.0


def _gold_rows(count: int) -> list[tuple[object, ...]]:
    start = datetime(2026, 11, 1, tzinfo=UTC)
    rows = []
    for i in range(count):
        window_start = start + timedelta(seconds=15 * (i // 1_000))
        row = {
            "location_id": f"store-{i % 1_000}",
            "order_type": "GENERAL",
            "window_start": window_start,
            "window_end": window_start + timedelta(seconds=15),
            "order_count": 1,
            "revenue": Decimal("12.34"),
            "batch_id": 7,
        }
        rows.append(tuple(row.get(column) for column in GOLD_COLUMNS))
    return rows


def test_a_batch_with_more_windows_than_the_producer_queue_is_written_once(
    kafka_bootstrap: str, kafka_broker_pid: int, tmp_path: Path
) -> None:
    suffix = unique_suffix()
    create_app_topics(kafka_bootstrap, suffix)
    topics = app_topic_overrides(suffix)
    config = load_config(
        overrides={
            "deployment_id": f"many-windows-{suffix}",
            "lake_root": str(tmp_path),
            "kafka.bootstrap_servers": kafka_bootstrap,
            **topics,
        }
    )
    writer = RevenueTopicWriter(config)
    rows = _gold_rows(WINDOWS)
    queue_was_full = threading.Event()

    def resume_once_the_queue_is_full() -> None:
        give_up = time.monotonic() + QUEUE_FILL_LIMIT_S
        while len(writer._producer) < QUEUE_FULL_MESSAGES and time.monotonic() < give_up:
            time.sleep(0.02)
        if len(writer._producer) >= QUEUE_FULL_MESSAGES:
            queue_was_full.set()
            time.sleep(PAUSED_AFTER_FULL_S)
        os.kill(kafka_broker_pid, signal.SIGCONT)

    watcher = threading.Thread(target=resume_once_the_queue_is_full, daemon=True)
    try:
        os.kill(kafka_broker_pid, signal.SIGSTOP)
        watcher.start()
        writer.write(rows)
    finally:
        os.kill(kafka_broker_pid, signal.SIGCONT)  # whatever happened, the session's broker runs on
        watcher.join(QUEUE_FILL_LIMIT_S + PAUSED_AFTER_FULL_S)
        writer.close()
    assert queue_was_full.is_set(), "the producer's queue filled while the broker was paused"
    records = read_topic(kafka_bootstrap, topics["kafka.revenue_topic"], timeout_s=60)
    keys = [record.key for record in records]
    assert len(keys) == WINDOWS
    assert len(set(keys)) == WINDOWS


def test_a_batch_for_a_missing_revenue_topic_fails_naming_the_topic_and_the_reason(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    """librdkafka's commit error said only "1 message(s) failed delivery (see individual delivery
    reports)": neither the topic nor why. The batch's error now names both."""
    suffix = unique_suffix()
    missing = f"revenue_windows_missing_{suffix}"
    config = load_config(
        overrides={
            "deployment_id": f"no-topic-{suffix}",
            "lake_root": str(tmp_path),
            "kafka.bootstrap_servers": kafka_bootstrap,
            **app_topic_overrides(suffix),
            "kafka.revenue_topic": missing,
        }
    )
    writer = RevenueTopicWriter(config)
    try:
        with pytest.raises(RevenueTopicDeliveryError) as refused:
            writer.write(_gold_rows(2))
    finally:
        writer.close()
    assert missing in str(refused.value)
    assert "Unknown topic or partition" in str(refused.value)
