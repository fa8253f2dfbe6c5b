"""The checkpoints a deployment's queries keep, and the two refusals to continue from them: checkpoints
written by a retired design (the two-query engine, the two-Kafka-reader design, a dedupe state keyed
by order id), which such a deployment leaves behind with a blue-green replay; and checkpoints whose
offsets belong to another Kafka cluster than the brokers the deployment now reads
(`spark_apps.contract.kafka_cluster`).
"""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime
from typing import Any

from pyspark.sql import SparkSession

from spark_apps.contract.config import StreamingAppConfig
from spark_apps.contract.json_files import write_json_atomically
from spark_apps.contract.kafka_cluster import cluster_change_refusal, cluster_record, recorded_cluster
from spark_apps.contract.naming import (
    HISTORY_CHECKPOINT,
    PIPELINE_CHECKPOINT,
    RETIRED_CHECKPOINTS,
    is_local_location,
    local_path,
)

LOG = logging.getLogger(__name__)


class CheckpointMigrationError(RuntimeError):
    """The deployment's checkpoints were written by a retired design (the two-query engine or the
    two-Kafka-reader design before it)."""


def _path_exists(spark: SparkSession, path: str) -> bool:
    """Whether `path` exists on its file system (local or object store), through Hadoop's FS API."""
    jvm_path = spark._jvm.org.apache.hadoop.fs.Path(path)  # type: ignore[union-attr]
    return bool(jvm_path.getFileSystem(spark._jsc.hadoopConfiguration()).exists(jvm_path))


def has_committed(spark: SparkSession, checkpoint: str) -> bool:
    """Whether the query of `checkpoint` committed a batch (its `commits` folder lists one)."""
    jvm_path = spark._jvm.org.apache.hadoop.fs.Path(f"{checkpoint}/commits")  # type: ignore[union-attr]
    fs = jvm_path.getFileSystem(spark._jsc.hadoopConfiguration())
    return bool(fs.exists(jvm_path)) and any(
        not status.getPath().getName().startswith(".") for status in fs.listStatus(jvm_path)
    )


# The dedupe operator's state variables before its ids were kept in buckets (one value per order id,
# a timer each). Spark starts the bucketed operator on such a checkpoint without complaint and with
# none of the old ids, so a copy re-sent across the upgrade would count twice: it is refused instead.
RETIRED_DEDUPE_STATE_VARIABLES = frozenset({"last_arrival_ms"})


def _dedupe_state_variables(spark: SparkSession, checkpoint: str) -> set[str]:
    """The state variables named by the oldest operator metadata the query of `checkpoint` kept (its
    stateful operator's `state/0/_metadata/v2/<batch>`); empty when it has none."""
    folder = spark._jvm.org.apache.hadoop.fs.Path(f"{checkpoint}/state/0/_metadata/v2")  # type: ignore[union-attr]
    fs = folder.getFileSystem(spark._jsc.hadoopConfiguration())
    if not fs.exists(folder):
        return set()
    batches = [s.getPath() for s in fs.listStatus(folder) if s.getPath().getName().isdigit()]
    if not batches:
        return set()
    oldest = min(batches, key=lambda path: int(path.getName()))
    stream = fs.open(oldest)
    try:
        text = spark._jvm.org.apache.commons.io.IOUtils.toString(stream, "UTF-8")  # type: ignore[union-attr]
    finally:
        stream.close()
    # Line 1 is the format's version ("v2"), line 2 the operator's metadata as JSON.
    metadata = json.loads(text.splitlines()[1])
    properties = json.loads(metadata.get("operatorPropertiesJson") or "{}")
    return {variable["stateName"] for variable in properties.get("stateVariables", [])}


def refuse_retired_checkpoints(spark: SparkSession, config: StreamingAppConfig) -> None:
    """A deployment started by an earlier design cannot continue from its checkpoints: the two-query
    engine's (`ingest`: its offsets, its revenue query's Spark state and bronze's `superseded` marks
    mean nothing to this engine), the two-Kafka-reader design's before it (`archive`), and this
    engine's before its dedupe moved into Spark's state store (a query that committed batches
    without a `state` folder: Spark cannot add a stateful operator to a running query, and the ids
    it remembered lived in a driver that is gone), and one whose dedupe state is keyed by order id
    (`RETIRED_DEDUPE_STATE_VARIABLES`). A config that still names `engine: two_queries` is refused
    the same way."""
    names = config.names
    retired = [
        f"{names.checkpoint(query)} exists"
        for query in RETIRED_CHECKPOINTS
        if _path_exists(spark, names.checkpoint(query))
    ]
    retired += [
        f"{names.checkpoint(query)} committed batches without a dedupe state"
        for query in (PIPELINE_CHECKPOINT, HISTORY_CHECKPOINT)
        if has_committed(spark, names.checkpoint(query))
        and not _path_exists(spark, f"{names.checkpoint(query)}/state")
    ]
    retired += [
        f"{names.checkpoint(query)} keeps its dedupe state by order id, before it was bucketed"
        for query in (PIPELINE_CHECKPOINT, HISTORY_CHECKPOINT)
        if _dedupe_state_variables(spark, names.checkpoint(query)) & RETIRED_DEDUPE_STATE_VARIABLES
    ]
    if config.engine == "two_queries" or retired:
        found = f" ({retired[0]})" if retired else " (its config says engine: two_queries)"
        raise CheckpointMigrationError(
            f"deployment {config.deployment_id} was started by a retired engine{found}; this version "
            "cannot continue it. Roll it out as a new deployment with the blue_green_replay DAG (a "
            "replay from earliest offsets or from its bronze archive) and retire the old one; see "
            "docs/streaming-app.md."
        )


def _read_text(spark: SparkSession, path: str) -> str | None:
    """The text of the file `path` (a local path, or on an object store through Hadoop's FS API); None
    if absent. Local files are read and written with plain file I/O: Hadoop's local filesystem keeps a
    checksum file beside them and refuses to read one a person edited."""
    if is_local_location(path):
        local = local_path(path)
        return local.read_text(encoding="utf-8") if local.exists() else None
    jvm_path = spark._jvm.org.apache.hadoop.fs.Path(path)  # type: ignore[union-attr]
    fs = jvm_path.getFileSystem(spark._jsc.hadoopConfiguration())
    if not fs.exists(jvm_path):
        return None
    stream = fs.open(jvm_path)
    try:
        return str(spark._jvm.org.apache.commons.io.IOUtils.toString(stream, "UTF-8"))  # type: ignore[union-attr]
    finally:
        stream.close()


def _write_json(spark: SparkSession, path: str, document: dict[str, Any]) -> None:
    """Write `path` whole: a temporary file beside it, renamed over it (readers never see half of it)."""
    if is_local_location(path):
        write_json_atomically(local_path(path), document)
        return
    text = json.dumps(document, indent=2)
    hadoop_fs = spark._jvm.org.apache.hadoop.fs  # type: ignore[union-attr]
    target = hadoop_fs.Path(path)
    temporary = hadoop_fs.Path(f"{path}.tmp")
    fs = target.getFileSystem(spark._jsc.hadoopConfiguration())
    stream = fs.create(temporary, True)
    try:
        stream.write(bytearray(text.encode("utf-8")))
    finally:
        stream.close()
    if not fs.rename(temporary, target):
        raise OSError(f"could not rename {temporary} to {target}")


def refuse_another_kafka_cluster(spark: SparkSession, config: StreamingAppConfig, cluster_id: str) -> None:
    """Record `cluster_id` (the brokers' Kafka cluster) at the deployment's first start; at every later
    start raise KafkaClusterChangedError when it differs from the recorded one, before a query reads
    the checkpoints. Checkpoints older than the record are adopted: there is nothing to compare with."""
    names = config.names
    record_path = names.kafka_cluster_record
    servers = config.kafka.bootstrap_servers
    text = _read_text(spark, record_path)
    if text is None:
        if has_committed(spark, names.checkpoint(PIPELINE_CHECKPOINT)):
            LOG.warning(
                "deployment %s: its checkpoints predate the Kafka cluster record; recording cluster %s",
                config.deployment_id,
                cluster_id,
            )
        _write_json(spark, record_path, cluster_record(cluster_id, servers, datetime.now(UTC)))
        return
    refusal = cluster_change_refusal(
        config.deployment_id, recorded_cluster(text, record_path), cluster_id, servers, record_path
    )
    if refusal is not None:
        raise refusal
    LOG.info("deployment %s: Kafka cluster %s, as recorded", config.deployment_id, cluster_id)
