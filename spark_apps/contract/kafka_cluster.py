"""Which Kafka cluster a deployment's checkpoints belong to, and the refusal to resume them on another.

A checkpoint holds the offsets of the partitions its query read, and offsets mean something only on
the cluster that assigned them. Resumed against other brokers (`make up`'s broker, then `make
cluster-up`'s three; a `kafka_default` pointed at another cluster), Spark fails deep in its Kafka
source ("Some data may have been lost ...") when the old offsets are past the new topics' ends, and
silently skips or re-reads orders when they happen to exist. So a deployment's first start records
the brokers' cluster id next to its checkpoints (`DeploymentNames.kafka_cluster_record`), and every
later start compares it before any query reads a checkpoint (`spark_apps.engine.checkpoints`). This
module is the pure part: the record's document and the verdict.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

KAFKA_CLUSTER_RECORD_FORMAT = 1


class KafkaClusterCheckError(RuntimeError):
    """The start-time check of the deployment's Kafka cluster could not pass."""


class KafkaClusterUnreachableError(KafkaClusterCheckError):
    """No broker told its cluster id in time: unlike the other refusals, a later start may pass."""


class KafkaClusterChangedError(KafkaClusterCheckError):
    """The deployment's checkpoints were written against another Kafka cluster than its brokers'."""


def cluster_record(cluster_id: str, bootstrap_servers: str, recorded_at: datetime) -> dict[str, Any]:
    """The record a deployment's first start writes: the cluster id, and for people the brokers and time."""
    return {
        "format": KAFKA_CLUSTER_RECORD_FORMAT,
        "kafka_cluster_id": cluster_id,
        "bootstrap_servers": bootstrap_servers,
        "recorded_at": recorded_at.isoformat(),
    }


def recorded_cluster(text: str, record_path: str) -> dict[str, Any]:
    """The record read back from `text`; KafkaClusterCheckError when it is not one (a hand-edited or
    truncated file must not let a deployment resume unchecked)."""
    try:
        document = json.loads(text)
    except ValueError as error:
        raise KafkaClusterCheckError(
            f"{record_path} is not the JSON record of a Kafka cluster id ({error}); restore it, or delete it "
            "only if you are sure the deployment's checkpoints were written against the brokers it uses now"
        ) from error
    if not isinstance(document, dict) or not isinstance(document.get("kafka_cluster_id"), str):
        raise KafkaClusterCheckError(
            f"{record_path} names no kafka_cluster_id; restore it, or delete it only if you are sure the "
            "deployment's checkpoints were written against the brokers it uses now"
        )
    return document


def cluster_change_refusal(
    deployment_id: str,
    record: dict[str, Any],
    current_cluster_id: str,
    bootstrap_servers: str,
    record_path: str,
) -> KafkaClusterChangedError | None:
    """Why `deployment_id` may not resume its checkpoints on the brokers `bootstrap_servers` (cluster
    `current_cluster_id`), given its `record`; None when they are the cluster it recorded."""
    recorded_id = record["kafka_cluster_id"]
    if recorded_id == current_cluster_id:
        return None
    first_brokers = record.get("bootstrap_servers") or "?"
    return KafkaClusterChangedError(
        f"deployment {deployment_id!r} may not start: its checkpoints hold offsets of Kafka cluster "
        f"{recorded_id!r} (brokers {first_brokers}, recorded in {record_path}), but its brokers "
        f"{bootstrap_servers} belong to cluster {current_cluster_id!r}. Offsets of one cluster mean nothing "
        "on another: resuming would skip or re-read orders. Point the deployment back at its cluster "
        "(kafka_default, or kafka.bootstrap_servers), or start over on this one: deploy under a new "
        "deployment id (it reads this cluster's topics from kafka.starting_offsets, earliest by default), "
        "or run a blue-green replay into a new deployment with replay_source kafka_earliest and retire "
        "this one (docs/blue-green.md). A replay from bronze does not help here: its cut-over offsets are "
        "the old cluster's."
    )
