"""Which topics a deployment may write, given every deployment in the registry.

A deployment writes only topics that no deployment reads (the `orders` and `stores` defaults and
every registered deployment's `orders_topic` / `stores_topic`) and that no other deployment writes:
order JSON in a live `stores` topic blanks its addresses, dead letters in `orders` loop back into the
input, and two writers of one output double what its consumers count. The config model already keeps
one deployment's own topics apart (`StreamingAppConfig._topics_have_one_role`); this module checks
them against the others. The deploy and the release check it in the control plane
(revenue_platform.streaming.deploy); the driver checks it again at start (`verify_topic_ownership`),
so a config that reaches it by another way (`--set`, a hand-edited file) cannot write there either.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from spark_apps.contract.config import AppConfigError, StreamingAppConfig
from spark_apps.contract.delta_reads import Condition, open_delta, read_delta
from spark_apps.contract.kafka_config import INPUT_TOPIC_FIELDS, OUTPUT_TOPIC_FIELDS, KafkaConfig
from spark_apps.contract.naming import RegistryNames

_DEFAULTS = KafkaConfig()
# Read by the platform whatever the registry holds: the shipped input topics.
ALWAYS_READ = {getattr(_DEFAULTS, name): f"the platform's kafka.{name}" for name in INPUT_TOPIC_FIELDS}


class TopicOwnershipError(AppConfigError):
    """An output topic of the config is read by a deployment or written by another one."""


def topic_writers(others: Iterable[tuple[str, Mapping[str, Any]]], excluding: str) -> dict[str, str]:
    """Output topic -> the deployment that writes it, over `others` (deployment id, registered config)
    but `excluding` (the deployment being checked)."""
    writers: dict[str, str] = {}
    for deployment_id, other in others:
        if deployment_id == excluding:
            continue
        kafka = other.get("kafka") or {}
        for name in OUTPUT_TOPIC_FIELDS:
            if kafka.get(name):
                writers.setdefault(str(kafka[name]), deployment_id)
    return writers


def topic_conflicts(
    config: StreamingAppConfig, others: Iterable[tuple[str, Mapping[str, Any]]]
) -> dict[str, str]:
    """Output field (`kafka.dlq_topic`) -> why it may not be written, against the other deployments.

    `others`: (deployment id, registered config as a dict) of every deployment but this one.
    """
    others = list(others)
    readers = dict(ALWAYS_READ)
    for deployment_id, other in others:
        if deployment_id == config.deployment_id:
            continue
        kafka = other.get("kafka") or {}
        for name in INPUT_TOPIC_FIELDS:
            topic = str(kafka.get(name) or getattr(_DEFAULTS, name))
            readers.setdefault(topic, f"deployment {deployment_id!r} (its kafka.{name})")
    writers = topic_writers(others, excluding=config.deployment_id)
    conflicts = {}
    for name, topic in config.output_topics().items():
        if topic in readers:
            conflicts[f"kafka.{name}"] = f"topic {topic!r} is read by {readers[topic]}"
        elif topic in writers:
            conflicts[f"kafka.{name}"] = (
                f"topic {topic!r} is already written by deployment {writers[topic]!r}"
            )
    return conflicts


def input_conflicts(
    config: StreamingAppConfig, others: Iterable[tuple[str, Mapping[str, Any]]]
) -> dict[str, str]:
    """Input field (`kafka.orders_topic`) -> why it may not be read: another deployment writes it.

    The other half of the rule, checked before a deployment is registered: reading another's output
    would make that deployment a writer of a topic someone reads, and refuse its every restart.
    """
    writers = topic_writers(others, excluding=config.deployment_id)
    return {
        f"kafka.{name}": f"topic {topic!r} is written by deployment {writers[topic]!r}"
        for name in INPUT_TOPIC_FIELDS
        if (topic := str(getattr(config.kafka, name))) in writers
    }


def describe_conflicts(conflicts: Mapping[str, str]) -> str:
    return "; ".join(f"{field}: {why}" for field, why in conflicts.items()) + (
        ". A deployment writes only topics no deployment reads and no other deployment writes, and reads "
        "no topic another deployment writes: leave the output topics unset (a later deployment then "
        "writes its own `<topic>_<deployment id>`) or name new ones"
    )


def registered_configs(
    registry_root: str, running_only: bool = False, storage_options: Mapping[str, str] | None = None
) -> list[tuple[str, dict[str, Any]]]:
    """(deployment id, registered config) of every deployment in the registry under `registry_root`
    (`running_only`: of those desired running; `storage_options`: delta-rs's, for an object store)."""
    import json

    table = open_delta(RegistryNames(registry_root).deployments_table, storage_options)
    if table is None:
        return []
    where: list[Condition] = [("desired_state", "=", "running")] if running_only else []
    rows = read_delta(table, ["deployment_id", "config_json"], where).to_pylist()
    return [(row["deployment_id"], json.loads(row["config_json"] or "{}")) for row in rows]


def verify_topic_ownership(
    registry_root: str, config: StreamingAppConfig, storage_options: Mapping[str, str] | None = None
) -> None:
    """Raise TopicOwnershipError unless every output topic of `config` is free to write.

    The driver calls it at start, before any query runs (after its lease check), against the
    deployments desired running: a stopped or failed one's registration never keeps a live deployment
    from restarting (the deploy refused it a topic another writes in the first place).
    """
    try:
        others = registered_configs(registry_root, running_only=True, storage_options=storage_options)
    except OSError as error:  # an object store the driver cannot read without its settings
        raise TopicOwnershipError(
            f"cannot read the deployment registry under {registry_root} to check which topics deployment "
            f"{config.deployment_id!r} may write: {error}"
        ) from error
    conflicts = topic_conflicts(config, others)
    if conflicts:
        raise TopicOwnershipError(
            f"deployment {config.deployment_id!r} may not start: {describe_conflicts(conflicts)}"
        )
