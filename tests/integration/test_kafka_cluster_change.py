"""A deployment's checkpoints stay with the Kafka cluster that wrote them (real broker, Spark, Delta).

Issue 33: `make demo` on the one-broker stack, `make down`, `make cluster-up`, `make demo` resumed the
`demo` deployment's checkpoint (offsets of the single broker's topics) on the cluster's three
brokers, and Spark failed deep in its Kafka source. The app now records the brokers' cluster id next
to the checkpoints at a deployment's first start; a restart on the same cluster goes on as before,
and a start against another cluster is refused before any query reads the checkpoint, naming the
deployment, both ids and the way out.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient
from deltalake import DeltaTable
from pyspark.sql import SparkSession

from revenue_platform.orders_generator import GeneratorSettings, generate_orders, generate_stores, produce
from spark_apps.contract.config import StreamingAppConfig, load_config
from spark_apps.contract.kafka_cluster import KafkaClusterChangedError
from spark_apps.orders_streaming_app import run
from tests.kafka_helpers import app_topic_overrides, create_app_topics, unique_suffix
from tests.streaming_helpers import gold_windows, oracle_windows

pytestmark = pytest.mark.integration

DEPLOYMENT = "moved"


def _checkpoint_files(config: StreamingAppConfig) -> dict[str, int]:
    """Every file of the deployment's query checkpoints, with its size: what a start must not touch."""
    root = Path(config.names.checkpoint("pipeline"))
    return {str(path.relative_to(root)): path.stat().st_size for path in root.rglob("*") if path.is_file()}


def test_a_deployment_resumes_on_its_kafka_cluster_and_is_refused_on_another(
    kafka_bootstrap: str, spark: SparkSession, tmp_path: Path
) -> None:
    suffix = unique_suffix()
    config = load_config(
        overrides={
            "deployment_id": DEPLOYMENT,
            "lake_root": str(tmp_path / "lake"),
            "kafka.bootstrap_servers": kafka_bootstrap,
            **app_topic_overrides(suffix),
            "window.watermark": "30 minutes",
            "trigger.mode": "available_now",
            "shuffle_partitions": 2,
        }
    )
    create_app_topics(kafka_bootstrap, suffix)
    produce(kafka_bootstrap, config.kafka.stores_topic, generate_stores(4))
    first = list(generate_orders(GeneratorSettings(orders=300, stores=4, span_seconds=120, seed=3)))
    produce(kafka_bootstrap, config.kafka.orders_topic, first, total=len(first))

    # First start: the brokers' cluster id is recorded next to the checkpoints.
    run(config, spark)
    brokers_cluster = AdminClient({"bootstrap.servers": kafka_bootstrap}).list_topics(timeout=30).cluster_id
    record_path = Path(config.names.kafka_cluster_record)
    record = json.loads(record_path.read_text())
    assert record["kafka_cluster_id"] == brokers_cluster
    assert record["bootstrap_servers"] == kafka_bootstrap

    # A restart on the same cluster resumes from the checkpoint: only the new orders are counted.
    second = list(
        generate_orders(
            GeneratorSettings(orders=200, stores=4, span_seconds=120, seed=4, first_order_id=10_001)
        )
    )
    produce(kafka_bootstrap, config.kafka.orders_topic, second, total=len(second))
    run(config, spark)
    assert gold_windows(config.names.gold_revenue_table) == oracle_windows(first + second)

    # The same deployment meets another cluster (its checkpoints say so): refused before any query
    # reads the checkpoint, so nothing of it moves, and gold stays as it was.
    record_path.write_text(json.dumps({**record, "kafka_cluster_id": "the-one-broker-stack"}))
    third = list(
        generate_orders(
            GeneratorSettings(orders=50, stores=4, span_seconds=60, seed=5, first_order_id=20_001)
        )
    )
    produce(kafka_bootstrap, config.kafka.orders_topic, third, total=len(third))
    checkpoint_before = _checkpoint_files(config)
    gold_version = DeltaTable(config.names.gold_revenue_table).version()
    with pytest.raises(KafkaClusterChangedError) as refused:
        run(config, spark)
    message = str(refused.value)
    assert f"deployment {DEPLOYMENT!r} may not start" in message
    assert "'the-one-broker-stack'" in message
    assert f"belong to cluster {brokers_cluster!r}" in message
    assert "new deployment id" in message
    assert "blue-green replay" in message
    assert not [q for q in spark.streams.active if q.name.startswith(DEPLOYMENT)]
    assert _checkpoint_files(config) == checkpoint_before
    assert DeltaTable(config.names.gold_revenue_table).version() == gold_version
    assert gold_windows(config.names.gold_revenue_table) == oracle_windows(first + second)
