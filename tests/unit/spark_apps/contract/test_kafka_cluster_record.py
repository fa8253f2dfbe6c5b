"""The record of a deployment's Kafka cluster and the verdict at a later start (pure, no broker)."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from spark_apps.contract.kafka_cluster import (
    KafkaClusterChangedError,
    KafkaClusterCheckError,
    cluster_change_refusal,
    cluster_record,
    recorded_cluster,
)
from spark_apps.contract.naming import DeploymentNames

RECORD_PATH = "/lake/checkpoints/demo/_kafka_cluster.json"


def _written(cluster_id: str, servers: str = "localhost:9092") -> dict[str, object]:
    """A record as the first start writes it, read back as a later start reads it."""
    text = json.dumps(cluster_record(cluster_id, servers, datetime(2026, 11, 26, 9, 0, tzinfo=UTC)))
    return recorded_cluster(text, RECORD_PATH)


def test_the_record_lives_next_to_the_deployments_checkpoints() -> None:
    names = DeploymentNames("s3a://bucket/lake", "demo")
    assert names.kafka_cluster_record == f"{names.checkpoint_root}/_kafka_cluster.json"
    # Not inside a query's checkpoint folder: Spark owns those.
    assert names.kafka_cluster_record not in {names.checkpoint("pipeline"), names.checkpoint("history")}


def test_a_restart_on_the_recorded_cluster_passes() -> None:
    record = _written("single-broker-id")
    assert record["bootstrap_servers"] == "localhost:9092"
    assert cluster_change_refusal("demo", record, "single-broker-id", "localhost:9092", RECORD_PATH) is None
    # Other brokers of the same cluster (a broker added, another listener) are the same offsets.
    assert cluster_change_refusal("demo", record, "single-broker-id", "kafka-2:9092", RECORD_PATH) is None


def test_another_cluster_is_refused_naming_the_deployment_both_ids_and_the_way_out() -> None:
    record = _written("single-broker-id")
    servers = "localhost:9192,localhost:9193,localhost:9194"
    refusal = cluster_change_refusal("demo", record, "three-broker-id", servers, RECORD_PATH)
    assert isinstance(refusal, KafkaClusterChangedError)
    message = str(refusal)
    for part in (
        "deployment 'demo' may not start",
        "'single-broker-id' (brokers localhost:9092",
        f"brokers {servers} belong to cluster 'three-broker-id'",
        RECORD_PATH,
        "deploy under a new deployment id",
        "blue-green replay into a new deployment with replay_source kafka_earliest",
        "docs/blue-green.md",
    ):
        assert part in message


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ('{"kafka_cluster_id": "abc"', "is not the JSON record"),
        ('{"bootstrap_servers": "localhost:9092"}', "names no kafka_cluster_id"),
        ('["abc"]', "names no kafka_cluster_id"),
        ('{"kafka_cluster_id": 7}', "names no kafka_cluster_id"),
    ],
)
def test_a_damaged_record_is_refused_rather_than_trusted(text: str, why: str) -> None:
    with pytest.raises(KafkaClusterCheckError, match=why) as refused:
        recorded_cluster(text, RECORD_PATH)
    assert RECORD_PATH in str(refused.value)
