"""Fencing: a driver whose lease was taken over commits nothing more (real Spark, Delta, Kafka).

The worst moment for a takeover is inside a micro-batch that already passed every earlier
check: here the successor takes the lease after the stale driver appended bronze and right
before it publishes the batch's windows (the revenue topic, then the gold MERGE). The stale driver
must refuse to (nothing reaches the revenue topic, gold's Delta version does not move) and stop as
superseded; the successor then continues
from the same checkpoints, redoes the refused batch, and gold equals the Decimal oracle. So
there is never a moment in which two drivers of one deployment both write gold.
"""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from revenue_platform.orders_generator import (
    GeneratorSettings,
    expected_windows,
    generate_orders,
    generate_stores,
    produce,
)
from revenue_platform.registry import DeploymentRecord, DeploymentRegistry
from spark_apps.contract.config import StreamingAppConfig, load_config
from spark_apps.contract.fencing import LeaseFence, LeaseRejectedError
from spark_apps.orders_streaming_app import run
from spark_apps.storage.gold import gold_frame
from tests.kafka_helpers import app_topic_overrides, create_app_topics, read_topic, unique_suffix

pytestmark = pytest.mark.integration

DEPLOYMENT = "fenced"


class TakeoverBeforePublishing(LeaseFence):
    """The real fence, except that a successor takes the lease just before the first revenue topic
    write (which comes before the gold MERGE)."""

    def __init__(self, registry: DeploymentRegistry, token: str) -> None:
        super().__init__(registry.lake_root, DEPLOYMENT, token)
        self.registry = registry
        self.successor_token: str | None = None
        self.checked: list[str] = []

    def check(self, before: str) -> None:
        self.checked.append(before)
        if before == "the revenue topic write" and self.successor_token is None:
            record = self.registry.get(DEPLOYMENT)
            successor = self.registry.acquire_lease(DEPLOYMENT, record.row_version, "test", {}, "takeover")
            self.successor_token = successor.lease_token
        super().check(before)


def _gold(
    spark: SparkSession, config: StreamingAppConfig
) -> dict[tuple[str, str, datetime], tuple[int, Decimal]]:
    return {
        (r.location_id, r.order_type, r.window_start): (r.order_count, r.revenue)
        for r in gold_frame(spark, config.names.gold_revenue_table).collect()
    }


def _delta_version(path: str) -> int:
    from deltalake import DeltaTable

    return DeltaTable(path).version()


def test_a_driver_whose_lease_was_taken_over_refuses_its_revenue_topic_and_gold_writes(
    kafka_bootstrap: str, spark: SparkSession, tmp_path: Path
) -> None:
    suffix = unique_suffix()
    lake = tmp_path / "lake"
    registry = DeploymentRegistry(str(lake))
    registry.register(DeploymentRecord(DEPLOYMENT, lake_root=str(lake)), "test")
    first = registry.acquire_lease(DEPLOYMENT, registry.get(DEPLOYMENT).row_version, "test", {}, "deploy")
    assert first.lease_token is not None
    overrides = {
        "deployment_id": DEPLOYMENT,
        "lake_root": str(lake),
        "kafka.bootstrap_servers": kafka_bootstrap,
        **app_topic_overrides(suffix),
        "window.watermark": "30 minutes",
        "trigger.mode": "available_now",
        "shuffle_partitions": 2,
    }
    stale_config = load_config(overrides={**overrides, "lease_token": first.lease_token})
    create_app_topics(kafka_bootstrap, suffix)
    records = list(generate_orders(GeneratorSettings(orders=3_000, stores=4, span_seconds=300, seed=17)))
    produce(kafka_bootstrap, stale_config.kafka.stores_topic, generate_stores(4))
    produce(kafka_bootstrap, stale_config.kafka.orders_topic, records, total=len(records))

    stale_fence = TakeoverBeforePublishing(registry, first.lease_token)
    with pytest.raises(LeaseRejectedError, match="checked before the revenue topic write"):
        run(stale_config, spark, fence=stale_fence)

    # It got as far as bronze and the side outputs (its lease was still current then), and not one step
    # further. (They are written side by side with gold, in no fixed order, so bronze's check may
    # come just after the takeover, or before.)
    assert sorted(stale_fence.checked) == [
        "the bronze append",
        "the dead-letter and split-topic write",
        "the revenue topic write",
    ]
    assert _delta_version(stale_config.names.gold_revenue_table) == 0, "the stale driver committed to gold"
    assert _gold(spark, stale_config) == {}
    assert read_topic(kafka_bootstrap, stale_config.kafka.revenue_topic, timeout_s=5) == []

    # The successor (the lease's new holder) continues from the same checkpoints: exact gold.
    assert stale_fence.successor_token == registry.get(DEPLOYMENT).lease_token
    successor_config = load_config(overrides={**overrides, "lease_token": stale_fence.successor_token})
    successor_fence = LeaseFence(str(lake), DEPLOYMENT, stale_fence.successor_token)
    run(successor_config, spark, fence=successor_fence)
    assert successor_fence.rejected is None
    assert successor_fence.checks > 0
    expected = {
        k: (w.order_count, w.revenue) for k, w in expected_windows(records, window_seconds=15).items()
    }
    assert _gold(spark, successor_config) == expected

    # New orders arrive; the stale driver, started again, may not write even bronze now.
    bronze_version = _delta_version(stale_config.names.bronze_orders_table)
    late = list(generate_orders(GeneratorSettings(orders=50, stores=4, span_seconds=300, seed=18)))
    produce(kafka_bootstrap, stale_config.kafka.orders_topic, late, total=len(late))
    # The first write the stale driver reaches refuses (side outputs and bronze start together).
    with pytest.raises(
        LeaseRejectedError, match=r"checked before the (bronze append|dead-letter|revenue topic write)"
    ):
        run(stale_config, spark)
    assert _delta_version(stale_config.names.bronze_orders_table) == bronze_version
