"""The real streaming app on a lake in a real S3-compatible store, launched the way the platform launches it.

The launcher's spark-submit (`streaming.launcher.launch`, local[2]) is given nothing but an `s3a://`
lake root: S3A's jars and settings and the store's credentials come from the Airflow connection
(`launcher.lake_object_store_access`), and the driver finds its store again from its Spark settings and
environment. It runs bounded (available_now) twice on the same checkpoint. Expected revenue comes from
the generator's Decimal oracle; the lake is read back with delta-rs and the store's own folder.
"""

from __future__ import annotations

import base64
import json
import time
import uuid
from collections.abc import Iterator
from datetime import datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from revenue_platform import processes
from revenue_platform.gold_table import read_gold
from revenue_platform.lake_storage import open_lake_table
from revenue_platform.local_object_store import ObjectStoreSettings
from revenue_platform.orders_generator import (
    GeneratedRecord,
    GeneratorSettings,
    generate_orders,
    generate_stores,
    produce,
)
from revenue_platform.paths import APP_CONFIG_PATH, REPO_ROOT, state_dir
from revenue_platform.registry import DeploymentRecord, DeploymentRegistry
from revenue_platform.streaming.deploy import registration_fields
from revenue_platform.streaming.launcher import SparkTarget, launch
from spark_apps.contract.config import StreamingAppConfig, load_config
from spark_apps.contract.delta_reads import read_delta
from spark_apps.contract.naming import REVENUE_QUERY_ROLE, DeploymentNames
from tests.kafka_helpers import (
    app_topic_overrides,
    create_app_topics,
    latest_revenue,
    read_topic,
    unique_suffix,
)
from tests.object_store_helpers import in_the_bucket, local_paths_naming
from tests.streaming_helpers import oracle_windows, spark_drivers

pytestmark = pytest.mark.integration

DEPLOYMENT = "s3app"
DRIVER_TIMEOUT_S = 240
MALFORMED = GeneratedRecord(key=b"store_1001", value=b'{"orderId": 1, "locationId": ', bad_kind="not_json")


@pytest.fixture
def lake(lake_connection: str) -> Iterator[str]:
    """A lake root of this test's own in the store's bucket; a driver left running is ended afterwards."""
    root = f"{lake_connection}/s3app-{uuid.uuid4().hex[:12]}"
    yield root
    for pid in spark_drivers(root):
        processes.terminate(pid, 5.0)


def _register(lake: str, kafka_bootstrap: str, suffix: str) -> StreamingAppConfig:
    """The deployment as deploy_streaming_app registers it: lake and registry on the store, bounded runs."""
    config = load_config(
        APP_CONFIG_PATH,
        {
            "deployment_id": DEPLOYMENT,
            "lake_root": lake,
            "registry_root": lake,
            "kafka.bootstrap_servers": kafka_bootstrap,
            "trigger.mode": "available_now",
            "shuffle_partitions": 2,
            **app_topic_overrides(suffix),
        },
    )
    record = DeploymentRecord(deployment_id=DEPLOYMENT, **registration_fields(config, None))
    DeploymentRegistry(lake).register(record, actor="test")
    return config


def _run_bounded(registry: DeploymentRegistry) -> str:
    """Lease, launch the driver through the launcher's spark-submit, wait for it to end; its log."""
    record = registry.get(DEPLOYMENT)
    leased = registry.acquire_lease(
        DEPLOYMENT, record.row_version, "test", {"observed_state": "starting"}, "bounded run"
    )
    assert leased.lease_token is not None
    handle = launch(
        SparkTarget("local[2]"), DEPLOYMENT, leased.config, leased.lease_token, registry.lake_root
    )
    assert handle.pid is not None
    assert handle.log_path is not None
    deadline = time.monotonic() + DRIVER_TIMEOUT_S
    while processes.exit_code(handle.pid) is None and time.monotonic() < deadline:
        time.sleep(1)
    log = Path(handle.log_path).read_text(errors="replace")
    assert processes.exit_code(handle.pid) == 0, f"driver did not end cleanly; its log:\n{log[-6000:]}"
    return log


def _gold(config: StreamingAppConfig) -> dict[tuple[str, str, datetime], tuple[int, Decimal]]:
    rows = read_gold(config.names.gold_revenue_table).to_pylist()
    return {
        (r["location_id"], r["order_type"], r["window_start"].replace(tzinfo=None)): (
            r["order_count"],
            r["revenue"],
        )
        for r in rows
    }


def _bronze_rows(config: StreamingAppConfig) -> int:
    table = open_lake_table(config.names.bronze_orders_table)
    assert table is not None
    return int(read_delta(table).num_rows)


def _committed_batches(object_store: ObjectStoreSettings, names: DeploymentNames) -> set[int]:
    """Batch ids committed in the deployment's checkpoints, as objects in the bucket (every query's)."""
    checkpoints = in_the_bucket(object_store, names.checkpoint_root)
    return {int(path.name) for path in checkpoints.glob("*/commits/*") if path.name.isdigit()}


def _published(object_store: ObjectStoreSettings, names: DeploymentNames) -> dict[str, Any]:
    """The revenue query's progress as the driver last published it, read from the bucket's folder."""
    document: dict[str, Any] = json.loads(
        in_the_bucket(object_store, names.progress_file(REVENUE_QUERY_ROLE)).read_text()
    )
    return document


def test_the_launched_app_streams_onto_the_store_exactly_and_resumes_from_its_checkpoint(
    kafka_bootstrap: str, lake: str, object_store: ObjectStoreSettings, tmp_path: Path
) -> None:
    suffix = unique_suffix()
    create_app_topics(kafka_bootstrap, suffix)
    config = _register(lake, kafka_bootstrap, suffix)
    names = config.names
    registry = DeploymentRegistry(lake)
    first = list(generate_orders(GeneratorSettings(orders=60, stores=3, span_seconds=60, duplicate_every=25)))
    assert sum(r.is_duplicate for r in first) == 2
    produce(kafka_bootstrap, config.kafka.stores_topic, generate_stores(3))
    produce(kafka_bootstrap, config.kafka.orders_topic, [*first[:30], MALFORMED, *first[30:]])

    _run_bounded(registry)

    assert _gold(config) == oracle_windows(first)
    assert all(isinstance(revenue, Decimal) for _, revenue in _gold(config).values())
    assert _bronze_rows(config) == len(first) + 1  # every record archived, the malformed one too
    dead_letters = read_topic(kafka_bootstrap, config.kafka.dlq_topic)
    assert [d.headers["dlq_reason"].decode() for d in dead_letters] == ["invalid_json"]
    assert (
        base64.b64decode(json.loads(dead_letters[0].value or b"")["original_value_base64"]) == MALFORMED.value
    )
    # Everything the app owns is objects in the bucket: checkpoints, tables' logs, its side files.
    assert (in_the_bucket(object_store, names.bronze_orders_table) / "_delta_log").is_dir()
    assert (in_the_bucket(object_store, names.gold_revenue_table) / "_delta_log").is_dir()
    assert in_the_bucket(object_store, names.kafka_cluster_record).is_file()
    assert in_the_bucket(object_store, names.driver_status_file).is_file()
    first_batches = _committed_batches(object_store, names)
    assert first_batches
    first_progress = _published(object_store, names)
    assert first_progress["counters"]["orders_duplicate"] == 2  # each copy seen, counted once in gold

    # More orders, one of them a copy of the first run's last order (inside the dedupe horizon, ahead
    # of the watermark): the restarted driver goes on from the checkpoint's offsets and dedupe state.
    last = next(r for r in reversed(first) if r.order is not None)
    second = list(
        generate_orders(
            GeneratorSettings(
                orders=20,
                stores=3,
                start=GeneratorSettings().start + timedelta(seconds=60),
                span_seconds=30,
                first_order_id=1_000,
                seed=7,
            )
        )
    )
    resent = GeneratedRecord(last.key, last.value, order=last.order, is_duplicate=True)
    produce(kafka_bootstrap, config.kafka.orders_topic, [resent, *second])

    _run_bounded(registry)

    expected = oracle_windows([*first, resent, *second])
    assert _gold(config) == expected
    assert latest_revenue(kafka_bootstrap, config.kafka.revenue_topic) == {
        f"{location}|{order_type}|{start:%Y-%m-%dT%H:%M:%SZ}": totals
        for (location, order_type, start), totals in expected.items()
    }
    assert _bronze_rows(config) == len(first) + 1 + 1 + len(second)  # nothing read twice
    assert len(read_topic(kafka_bootstrap, config.kafka.dlq_topic)) == 1
    second_batches = _committed_batches(object_store, names)
    resumed = second_batches - first_batches
    assert resumed, "the restarted driver committed no batch"
    assert min(resumed) > max(first_batches), "the restarted driver did not go on from the checkpoint"
    second_progress = _published(object_store, names)
    assert second_progress["run_id"] != first_progress["run_id"]
    # The copy was recognised by the dedupe state the first driver left in RocksDB's checkpoint on the
    # store (a version per batch, in every state partition), not counted again.
    assert second_progress["counters"]["orders_duplicate"] == 1
    state = in_the_bucket(object_store, names.checkpoint_root)
    versions = {path.name for path in state.glob("*/state/0/*/*.changelog")}
    assert {f"{batch + 1}.changelog" for batch in second_batches} <= versions, sorted(versions)

    # Nothing of the lake on a local disk: the repo (the driver's working directory), the state dir
    # (config file and driver log), this test's folder.
    marker = lake.rsplit("/", 1)[-1]
    assert local_paths_naming(marker, [REPO_ROOT, state_dir(), tmp_path], object_store.data_dir) == []
