"""The one place that builds deployment-specific names: tables, checkpoints, consumer groups,
query names and the progress files the control plane reads.

Blue and green deployments of the same app must never share a checkpoint, an output
table or a consumer group. Every module asks this helper instead of pasting strings,
so a namespace can be changed (or audited) here alone.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Final

# Identifier patterns are applied with `fullmatch` here; DAG Params (JSON schema, which *searches*)
# take their `.pattern`. Python's `$` also matches before a trailing newline, so every pattern ends in
# `$(?!\n)`: "blue\n" is refused by the form, the API and this module alike (and JavaScript reads it too).
DEPLOYMENT_ID_PATTERN = re.compile(r"^[a-z][a-z0-9_-]{0,62}$(?!\n)")
# Store ids (the orders' locationId, e.g. store_1001) that a trigger form may name. No quotes,
# backslashes, spaces or commas: the reprocess job takes them as one comma-separated argument.
LOCATION_ID_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$(?!\n)")


# A deployment's streaming query is named `<deployment>__<role>` (`DeploymentNames.query_name`): the
# app's query reading Kafka has the revenue role (the name the control plane has always read its
# progress by).
REVENUE_QUERY_ROLE: Final = "revenue"
# The engine's query that reads a replay's history from bronze before its revenue query
# reads Kafka; it publishes its progress as the revenue query's (with `history_pending`).
HISTORY_QUERY_ROLE: Final = "history"
_QUERY_NAME_SEPARATOR: Final = "__"
# Checkpoints under `DeploymentNames.checkpoint_root` (persistent: renaming one strands every running
# deployment). The app's query (its name has the revenue role: the control plane reads its progress
# where it read the two-query engine's revenue query's) and, for a replay from bronze, the query that
# reads the history before it.
PIPELINE_CHECKPOINT: Final = "pipeline"
HISTORY_CHECKPOINT: Final = "history"
# Checkpoints of retired designs, which the app refuses to continue: the two-query engine's ingest
# query and the two-Kafka-reader design's archive query.
RETIRED_CHECKPOINTS: Final = ("ingest", "archive")
# What a deployment's Kafka consumer group, Spark application and revenue producer are named after.
_APP_NAME_PREFIX: Final = "orders-revenue"


def validate_deployment_id(deployment_id: str) -> str:
    """Return `deployment_id` if it is safe in paths, topic names and group ids; else raise ValueError."""
    if not isinstance(deployment_id, str) or not DEPLOYMENT_ID_PATTERN.fullmatch(deployment_id):
        raise ValueError(
            f"deployment_id {deployment_id!r} must start with a lowercase letter and contain only "
            "lowercase letters, digits, '_' or '-' (at most 63 characters)"
        )
    return deployment_id


def validate_location_id(location_id: str) -> str:
    """Return `location_id` if it looks like a store id; else raise ValueError naming the rule."""
    if not isinstance(location_id, str) or not LOCATION_ID_PATTERN.fullmatch(location_id):
        raise ValueError(
            f"store id {location_id!r} must start with a letter or digit and contain only letters, digits, "
            "'_', '.' or '-' (at most 128 characters), e.g. store_1001"
        )
    return location_id


def _join(root: str, *parts: str) -> str:
    """Join path parts onto a local path or URI root (s3a://, abfss://, file:/) without os.path."""
    return "/".join([root.rstrip("/"), *parts])


def local_path(location: str) -> Path:
    """A lake location (plain path, `file:/lake` or `file:///lake`) as a local Path, for the small
    JSON side files (progress, driver heartbeat) and reports that are written and read with plain file
    I/O, not through Spark."""
    from urllib.parse import urlparse

    parsed = urlparse(location)
    return Path(parsed.path) if parsed.scheme == "file" else Path(location)


def is_local_location(location: str) -> bool:
    """Whether a lake location is on this machine's filesystem (a plain path or a `file:` URI)."""
    from urllib.parse import urlparse

    return urlparse(location).scheme in ("", "file")


def query_role(query_name: str) -> str:
    """The role (`ingest`, `revenue`) of a query named by `DeploymentNames.query_name`."""
    return query_name.rpartition(_QUERY_NAME_SEPARATOR)[2]


def query_progress_file(progress_dir: str, query_name: str) -> str:
    """The JSON file in `progress_dir` holding a query's latest progress
    (spark_apps/engine/observability.py)."""
    return _join(progress_dir, f"{query_name}.json")


@dataclass(frozen=True)
class DeploymentNames:
    """Names of everything one deployment of the orders app owns."""

    lake_root: str
    deployment_id: str

    def __post_init__(self) -> None:
        validate_deployment_id(self.deployment_id)

    @property
    def gold_revenue_table(self) -> str:
        """Delta table of windowed revenue (the gold output)."""
        return _join(self.lake_root, "gold", "revenue_windows", self.deployment_id)

    @property
    def bronze_orders_table(self) -> str:
        """Delta archive of every consumed order record, valid or not."""
        return _join(self.lake_root, "bronze", "orders_raw", self.deployment_id)

    @property
    def replay_history_table(self) -> str:
        """Frozen copy of the bronze records a replay-from-bronze starts with (read as a stream)."""
        return _join(self.lake_root, "bronze", "replay_history", self.deployment_id)

    @property
    def checkpoint_root(self) -> str:
        """Folder holding the checkpoints of every query of this deployment."""
        return _join(self.lake_root, "checkpoints", self.deployment_id)

    @property
    def kafka_cluster_record(self) -> str:
        """JSON naming the Kafka cluster the checkpoints' offsets belong to (contract.kafka_cluster)."""
        return _join(self.checkpoint_root, "_kafka_cluster.json")

    def checkpoint(self, query_name: str) -> str:
        """Checkpoint folder of one streaming query of this deployment."""
        return _join(self.checkpoint_root, query_name)

    @property
    def progress_dir(self) -> str:
        """Folder where the app publishes its progress/heartbeat for the control plane."""
        return _join(self.lake_root, "progress", self.deployment_id)

    @property
    def consumer_group(self) -> str:
        """Kafka consumer group the app commits processed offsets to (lag tools read it)."""
        return f"{_APP_NAME_PREFIX}-{self.deployment_id}"

    @property
    def spark_app_name(self) -> str:
        """The Spark application name of the deployment's driver (Spark UI, cluster master)."""
        return f"{_APP_NAME_PREFIX}-{self.deployment_id}"

    @property
    def reprocess_app_name(self) -> str:
        """The Spark application name of the batch reprocessing job over this deployment."""
        return f"reprocess-revenue-{self.deployment_id}"

    @property
    def revenue_producer_id(self) -> str:
        """Kafka `transactional.id` of the revenue topic's producer: one per deployment, so each new
        driver's producer fences the one before (spark_apps.storage.revenue_topic)."""
        return f"{_APP_NAME_PREFIX}-{self.deployment_id}-revenue-topic"

    def own_topic(self, base_topic: str) -> str:
        """Per-deployment output topic `<base>_<deployment>`: a deployment that is not the first to
        write an output topic (a blue-green green, a second deployment) writes its own instead."""
        return f"{base_topic}_{self.deployment_id}"

    def query_name(self, role: str) -> str:
        """Spark streaming query name, unique per deployment (shown in logs and the Spark UI)."""
        return f"{self.deployment_id}{_QUERY_NAME_SEPARATOR}{role}"

    def progress_file(self, role: str) -> str:
        """The latest progress JSON of this deployment's query `role` (written by the app's listener)."""
        return query_progress_file(self.progress_dir, self.query_name(role))

    @property
    def driver_status_file(self) -> str:
        """JSON the running driver rewrites every few seconds: its pid, host, lease token, heartbeat."""
        return _join(self.progress_dir, "_driver.json")


@dataclass(frozen=True)
class RegistryNames:
    """Names of the deployment registry's Delta tables under one lake root (shared by all deployments)."""

    lake_root: str

    @property
    def root(self) -> str:
        return _join(self.lake_root, "_registry")

    @property
    def deployments_table(self) -> str:
        """One current row per deployment (desired/observed state, lease, driver handle, live flag)."""
        return _join(self.root, "deployments")

    @property
    def events_table(self) -> str:
        """Append-only audit log of every change (registrations, launches, restarts, stops, live switches)."""
        return _join(self.root, "events")


def local_driver_dir(state_root: str, deployment_id: str) -> str:
    """Folder (on the machine that launched it) for a local driver's pid file and logs."""
    return _join(state_root, "streaming_apps", validate_deployment_id(deployment_id))
